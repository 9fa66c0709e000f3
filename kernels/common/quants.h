// Quantized block formats shared by the host and CUDA kernels: our own
// definitions of the on-disk layouts of ggml's Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q4_K, Q5_K and Q6_K blocks and of the formats decoded through an integer
// form (Note [integer form]: Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4, NVFP4, Q1_0,
// Q2_0, and the grid i-quants of quants_iq.h), all listed once in
// SI_QUANT_BLOCK_TYPES (a GGUF file's bytes are read through these
// structs, so every size and field offset is fixed by the file format), their
// dequantisation, the quantizers of KV-cache and CPY destination types
// (quants_encode.h; the super-block types' in quants_encode_k.h) and row
// conversions between F32, F16 and BF16 and these types.
//
// Every value is computed with the same float operations in the same order as
// ggml (dequantize_row_*, and the quantizers noted below), so where the
// compiler does not fuse a multiply-add the results are bit-identical;
// test_quants.cpp checks that against what ggml exports.
//
// Scalar code only, marked SI_HD so CUDA kernels can call the same functions.
#pragma once

#include <cmath>
#include <cstdint>

#include "ggml.h"
#include "kernels/common/numerics.h"

namespace standin::quant {

constexpr int kQK   = 32;   // elements per block of the 32-element formats
constexpr int kQK_K = 256;  // elements per super-block of the K formats

// --- block layouts -----------------------------------------------------------
// Half-precision scales are kept as raw IEEE half bits (uint16_t).

struct BlockQ4_0 {
    static constexpr int kElems = kQK;
    uint16_t d;            // scale
    uint8_t  qs[kQK / 2];  // element j in the low nibble of qs[j], j+16 in the high one
};
struct BlockQ4_1 {
    static constexpr int kElems = kQK;
    uint16_t d;            // scale
    uint16_t m;            // minimum
    uint8_t  qs[kQK / 2];
};
struct BlockQ5_0 {
    static constexpr int kElems = kQK;
    uint16_t d;
    uint8_t  qh[4];        // fifth bit of element j is bit j of this little-endian word
    uint8_t  qs[kQK / 2];
};
struct BlockQ5_1 {
    static constexpr int kElems = kQK;
    uint16_t d;
    uint16_t m;
    uint8_t  qh[4];
    uint8_t  qs[kQK / 2];
};
struct BlockQ8_0 {
    static constexpr int kElems = kQK;
    uint16_t d;
    int8_t   qs[kQK];
};
// K formats: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes.
struct BlockQ4_K {
    static constexpr int kElems = kQK_K;
    uint16_t d;             // super-block scale of the sub-block scales
    uint16_t dmin;          // super-block scale of the sub-block mins
    uint8_t  scales[12];
    uint8_t  qs[kQK_K / 2]; // per 64 elements: 32 bytes, low nibbles first 32, high nibbles next 32
};
struct BlockQ5_K {
    static constexpr int kElems = kQK_K;
    uint16_t d;
    uint16_t dmin;
    uint8_t  scales[12];
    uint8_t  qh[kQK_K / 8]; // fifth bits: bit 2g (2g+1) of qh[l] belongs to sub-block 2g (2g+1)
    uint8_t  qs[kQK_K / 2];
};
// Q6_K: 16 sub-blocks of 16 with signed 8-bit scales.
struct BlockQ6_K {
    static constexpr int kElems = kQK_K;
    uint8_t  ql[kQK_K / 2]; // low 4 bits
    uint8_t  qh[kQK_K / 4]; // high 2 bits
    int8_t   scales[kQK_K / 16];
    uint16_t d;
};

// --- formats decoded through their integer form --------------------------------
//
// Note [integer form]
// Each of these formats is a grid of small integers times a float scale per
// run of 16 elements (and, for Q2_K, minus a float minimum per run):
//     value[k] = scale[k / 16] * q[k] - min[k / 16],  q[k] an int8.
// decode_run() produces that form for one run of 16 of a block (16 values, a
// scale and a min); dequant() is derived from it with the same float
// operations as ggml's dequantize_row_* (one product, then the minimum), and
// the host MUL_MAT kernel for these types (kernels/host/mul_mat_qd.cpp) takes
// integer dot products of q with ggml-cpu's int8 activation blocks.
// Where a format's value table is non-linear (IQ4_NL, IQ4_XS, MXFP4, NVFP4),
// q is the table entry; the doubled E2M1 values of MXFP4/NVFP4 are paired
// with scales that hold the matching factor 1/2.

// Q2_K: 16 runs of 16; per run a byte of 4-bit scale (low) and 4-bit min (high).
// Element e's 2 bits are field (e % 128) / 32 of qs[32 * (e / 128) + e % 32].
struct BlockQ2_K {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = true;
    uint8_t  scales[kQK_K / 16];
    uint8_t  qs[kQK_K / 4];
    uint16_t d;     // scale of the run scales
    uint16_t dmin;  // scale of the run mins
};
// Q3_K: as Q2_K for the low 2 bits; the third bit of element e is bit e / 32
// of hmask[e % 32] (clear: value - 4); 16 signed 6-bit run scales (offset 32),
// low 4 bits in bytes 0..7 (low nibbles for runs 0..7, high ones for 8..15),
// top 2 bits in bytes 8..11 (run i: byte 8 + i % 4, bits 2 * (i / 4)).
struct BlockQ3_K {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = false;
    uint8_t  hmask[kQK_K / 8];
    uint8_t  qs[kQK_K / 4];
    uint8_t  scales[12];
    uint16_t d;
};
// IQ4_NL: 32 elements, 4-bit indices into a fixed non-linear table, laid out
// like Q4_0 (element j low nibble of qs[j], j + 16 high nibble).
struct BlockIQ4_NL {
    static constexpr int  kElems = kQK;
    static constexpr bool kMin   = false;
    uint16_t d;
    uint8_t  qs[kQK / 2];
};
// IQ4_XS: 8 runs of 32 with 6-bit scales (offset 32): low 4 bits in
// scales_l (run r: nibble r % 2 of byte r / 2), top 2 bits in scales_h (bits
// 2r, 2r+1); each run's indices as in IQ4_NL.
struct BlockIQ4_XS {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = false;
    uint16_t d;
    uint16_t scales_h;
    uint8_t  scales_l[kQK_K / 64];
    uint8_t  qs[kQK_K / 2];
};
// MXFP4 (OCP microscaling): 32 E2M1 values, Q4_0's nibble layout, one E8M0
// (power of two) scale.
struct BlockMXFP4 {
    static constexpr int  kElems = kQK;
    static constexpr bool kMin   = false;
    uint8_t e;
    uint8_t qs[kQK / 2];
};
// NVFP4: 64 E2M1 values in 4 runs of 16, each with an unsigned E4M3 scale;
// run s holds its 16 values in qs[8s .. 8s+7], low nibbles first.
struct BlockNVFP4 {
    static constexpr int  kElems = 64;
    static constexpr bool kMin   = false;
    uint8_t d[4];
    uint8_t qs[32];
};
// Q1_0: 128 signs (bit j % 8 of qs[j / 8]: set +d, clear -d).
struct BlockQ1_0 {
    static constexpr int  kElems = 128;
    static constexpr bool kMin   = false;
    uint16_t d;
    uint8_t  qs[16];
};
// Q2_0: 64 2-bit values (field j % 4 of qs[j / 4]) meaning -1, 0, 1, 2 times d.
struct BlockQ2_0 {
    static constexpr int  kElems = 64;
    static constexpr bool kMin   = false;
    uint16_t d;
    uint8_t  qs[16];
};

// TQ2_0 (ternary): 256 2-bit values q meaning (q - 1) * d, in Q2_K's
// layout of fields (element e: field (e % 128) / 32 of qs[32 * (e / 128) + e % 32]).
struct BlockTQ2_0 {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = false;
    uint8_t  qs[kQK_K / 4];
    uint16_t d;
};
// TQ1_0 (ternary): 5 base-3 digits per byte of qs, 4 per byte of qh, each
// digit read back by ternary_digit.
struct BlockTQ1_0 {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = false;
    uint8_t  qs[48];
    uint8_t  qh[4];
    uint16_t d;
};

static_assert(sizeof(BlockQ2_K) == 84, "Q2_K block is 84 bytes on disk");
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K block is 110 bytes on disk");
static_assert(sizeof(BlockIQ4_NL) == 18, "IQ4_NL block is 18 bytes on disk");
static_assert(sizeof(BlockIQ4_XS) == 136, "IQ4_XS block is 136 bytes on disk");
static_assert(sizeof(BlockMXFP4) == 17, "MXFP4 block is 17 bytes on disk");
static_assert(sizeof(BlockNVFP4) == 36, "NVFP4 block is 36 bytes on disk");
static_assert(sizeof(BlockQ1_0) == 18, "Q1_0 block is 18 bytes on disk");
static_assert(sizeof(BlockQ2_0) == 18, "Q2_0 block is 18 bytes on disk");
static_assert(sizeof(BlockTQ2_0) == 66, "TQ2_0 block is 66 bytes on disk");
static_assert(sizeof(BlockTQ1_0) == 54, "TQ1_0 block is 54 bytes on disk");

static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block is 18 bytes on disk");
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block is 20 bytes on disk");
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block is 22 bytes on disk");
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block is 24 bytes on disk");
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block is 34 bytes on disk");
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block is 144 bytes on disk");
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block is 176 bytes on disk");
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block is 210 bytes on disk");
static_assert(alignof(BlockQ4_0) == 2 && alignof(BlockQ6_K) == 2, "blocks are packed at 2-byte alignment");

// --- helpers -----------------------------------------------------------------

SI_HD float half(uint16_t h) { return num::fp16_to_f32(h); }

SI_HD uint32_t load_u32_le(const uint8_t * p) {
    return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// Scale and min of sub-block j (0..7) from the 12 packed bytes of a Q4_K/Q5_K
// block: j < 4 stores 6 bits directly; j >= 4 splits them, low 4 bits in bytes
// 8..11 and the top 2 bits in the spare high bits of bytes 0..7.
SI_HD void k_scale_min(const uint8_t * s, int j, int & sc, int & m) {
    if (j < 4) {
        sc = s[j] & 63;
        m  = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        m  = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// --- dequantisation of one block (32 or 256 floats) --------------------------

SI_HD void dequant(const BlockQ4_0 & b, float * y) {
    const float d = half(b.d);
    for (int j = 0; j < kQK / 2; ++j) {
        y[j]           = float((b.qs[j] & 0x0f) - 8) * d;
        y[j + kQK / 2] = float((b.qs[j] >> 4) - 8) * d;
    }
}

SI_HD void dequant(const BlockQ4_1 & b, float * y) {
    const float d = half(b.d);
    const float m = half(b.m);
    for (int j = 0; j < kQK / 2; ++j) {
        y[j]           = float(b.qs[j] & 0x0f) * d + m;
        y[j + kQK / 2] = float(b.qs[j] >> 4) * d + m;
    }
}

SI_HD void dequant(const BlockQ5_0 & b, float * y) {
    const float    d  = half(b.d);
    const uint32_t qh = load_u32_le(b.qh);
    for (int j = 0; j < kQK / 2; ++j) {
        const int lo = (b.qs[j] & 0x0f) | int(((qh >> j) & 1u) << 4);
        const int hi = (b.qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
        y[j]           = float(lo - 16) * d;
        y[j + kQK / 2] = float(hi - 16) * d;
    }
}

SI_HD void dequant(const BlockQ5_1 & b, float * y) {
    const float    d  = half(b.d);
    const float    m  = half(b.m);
    const uint32_t qh = load_u32_le(b.qh);
    for (int j = 0; j < kQK / 2; ++j) {
        const int lo = (b.qs[j] & 0x0f) | int(((qh >> j) & 1u) << 4);
        const int hi = (b.qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
        y[j]           = float(lo) * d + m;
        y[j + kQK / 2] = float(hi) * d + m;
    }
}

SI_HD void dequant(const BlockQ8_0 & b, float * y) {
    const float d = half(b.d);
    for (int j = 0; j < kQK; ++j) {
        y[j] = float(b.qs[j]) * d;
    }
}

SI_HD void dequant(const BlockQ4_K & b, float * y) {
    const float d    = half(b.d);
    const float dmin = half(b.dmin);
    for (int g = 0; g < 4; ++g) {  // 64 elements per group: sub-blocks 2g and 2g+1
        const uint8_t * q = b.qs + 32 * g;
        int sc0, m0, sc1, m1;
        k_scale_min(b.scales, 2 * g, sc0, m0);
        k_scale_min(b.scales, 2 * g + 1, sc1, m1);
        const float d0 = d * float(sc0), o0 = dmin * float(m0);
        const float d1 = d * float(sc1), o1 = dmin * float(m1);
        for (int l = 0; l < 32; ++l) {
            y[64 * g + l]      = d0 * float(q[l] & 0x0f) - o0;
            y[64 * g + 32 + l] = d1 * float(q[l] >> 4) - o1;
        }
    }
}

SI_HD void dequant(const BlockQ5_K & b, float * y) {
    const float d    = half(b.d);
    const float dmin = half(b.dmin);
    for (int g = 0; g < 4; ++g) {
        const uint8_t * q = b.qs + 32 * g;
        int sc0, m0, sc1, m1;
        k_scale_min(b.scales, 2 * g, sc0, m0);
        k_scale_min(b.scales, 2 * g + 1, sc1, m1);
        const float d0 = d * float(sc0), o0 = dmin * float(m0);
        const float d1 = d * float(sc1), o1 = dmin * float(m1);
        for (int l = 0; l < 32; ++l) {
            const int lo = (q[l] & 0x0f) + (((b.qh[l] >> (2 * g)) & 1) << 4);
            const int hi = (q[l] >> 4) + (((b.qh[l] >> (2 * g + 1)) & 1) << 4);
            y[64 * g + l]      = d0 * float(lo) - o0;
            y[64 * g + 32 + l] = d1 * float(hi) - o1;
        }
    }
}

// Q6_K: per 128 elements, 64 bytes of ql and 32 of qh. Element l (0..31) of the
// four 32-runs takes the low/high nibble of ql[l] or ql[l+32] and a 2-bit field
// of qh[l]; the scale changes every 16 elements.
SI_HD void dequant(const BlockQ6_K & b, float * y) {
    const float d = half(b.d);
    for (int h = 0; h < 2; ++h) {
        const uint8_t * ql = b.ql + 64 * h;
        const uint8_t * qh = b.qh + 32 * h;
        const int8_t *  sc = b.scales + 8 * h;
        float *         o  = y + 128 * h;
        for (int l = 0; l < 32; ++l) {
            const int s  = l / 16;
            const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            o[l]      = d * float(sc[s + 0]) * float(q0);
            o[l + 32] = d * float(sc[s + 2]) * float(q1);
            o[l + 64] = d * float(sc[s + 4]) * float(q2);
            o[l + 96] = d * float(sc[s + 6]) * float(q3);
        }
    }
}

// --- integer form (Note [integer form]) ----------------------------------------

// Entry n (0..15) of a 16-entry int8 table packed little-endian in two words
// (no array: the same code serves CUDA device functions).
SI_HD constexpr int table16(uint64_t lo, uint64_t hi, int n) {
    return int(int8_t(uint8_t((n < 8 ? lo >> (8 * n) : hi >> (8 * (n - 8))) & 0xffu)));
}
// A 16-entry int8 table as two little-endian words (entries 0..7, 8..15); the
// CUDA mat-vec looks entries up four at a time in the same words (byte permutes).
struct Table16 {
    uint64_t lo, hi;
};
// IQ4_NL's non-linear levels: -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113.
constexpr Table16 kIQ4NLLevels{0xF6EADDCFBFAD9881ull, 0x7159453526190D01ull};
SI_HD constexpr int iq4nl_level(int n) { return table16(kIQ4NLLevels.lo, kIQ4NLLevels.hi, n); }
// E2M1 (sign, 2-bit exponent, 1-bit mantissa) doubled, so that it is an integer:
// 0 1 2 3 4 6 8 12 and their negatives.
constexpr Table16 kE2M1Twice{0x0C08060403020100ull, 0xF4F8FAFCFDFEFF00ull};
SI_HD constexpr int e2m1_twice(int n) { return table16(kE2M1Twice.lo, kE2M1Twice.hi, n); }

// E8M0 scale 2^(e - 127), halved to pair with e2m1_twice; e = 0 and 1 give the
// subnormals 2^-128 and 2^-127. No NaN: e = 255 is 2^127.
SI_HD float e8m0_half(uint8_t e) {
    return num::f32_from_bits(e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23);
}
// Unsigned E4M3 scale (4-bit exponent, bias 7, 3-bit mantissa; bit 7 is not
// read), halved to pair with e2m1_twice. 0 and the NaN code 0x7F read as 0.
SI_HD float ue4m3_half(uint8_t x) {
    if (x == 0 || x == 0x7F) {
        return 0.0f;
    }
    const int e = (x >> 3) & 15, m = x & 7;
    // Both cases are exact: m * 2^-10, or (8 + m) * 2^(e - 11).
    return e == 0 ? float(m) * num::f32_from_bits(uint32_t(127 - 10) << 23)
                  : float(8 + m) * num::f32_from_bits(uint32_t(127 + e - 11) << 23);
}

// Run r (16 elements) of a block in integer form: q[0..15], its scale, and its
// minimum (written only for formats with kMin).
SI_HD void decode_run(const BlockQ2_K & b, int r, int8_t * q, float & sc, float & mn) {
    const uint8_t * qs = b.qs + 32 * (r / 8) + 16 * (r % 2);
    const int shift = 2 * ((r % 8) / 2);
    for (int l = 0; l < 16; ++l) q[l] = int8_t((qs[l] >> shift) & 3);
    sc = half(b.d) * float(b.scales[r] & 15);
    mn = half(b.dmin) * float(b.scales[r] >> 4);
}

SI_HD void decode_run(const BlockQ3_K & b, int r, int8_t * q, float & sc, float &) {
    const uint8_t * qs = b.qs + 32 * (r / 8) + 16 * (r % 2);
    const uint8_t * hm = b.hmask + 16 * (r % 2);
    const int shift = 2 * ((r % 8) / 2), hbit = r / 2;
    for (int l = 0; l < 16; ++l) q[l] = int8_t(((qs[l] >> shift) & 3) - (((hm[l] >> hbit) & 1) ? 0 : 4));
    const int lo = r < 8 ? b.scales[r] & 15 : b.scales[r - 8] >> 4;
    const int hi = (b.scales[8 + r % 4] >> (2 * (r / 4))) & 3;
    sc = half(b.d) * float((lo | (hi << 4)) - 32);
}

SI_HD void decode_run(const BlockIQ4_NL & b, int r, int8_t * q, float & sc, float &) {
    for (int l = 0; l < 16; ++l) q[l] = int8_t(iq4nl_level(r ? b.qs[l] >> 4 : b.qs[l] & 15));
    sc = half(b.d);
}

SI_HD void decode_run(const BlockIQ4_XS & b, int r, int8_t * q, float & sc, float &) {
    const int ib = r / 2;
    const uint8_t * qs = b.qs + 16 * ib;
    for (int l = 0; l < 16; ++l) q[l] = int8_t(iq4nl_level(r % 2 ? qs[l] >> 4 : qs[l] & 15));
    const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((b.scales_h >> (2 * ib)) & 3) << 4);
    sc = half(b.d) * float(ls - 32);
}

SI_HD void decode_run(const BlockMXFP4 & b, int r, int8_t * q, float & sc, float &) {
    for (int l = 0; l < 16; ++l) q[l] = int8_t(e2m1_twice(r ? b.qs[l] >> 4 : b.qs[l] & 15));
    sc = e8m0_half(b.e);
}

SI_HD void decode_run(const BlockNVFP4 & b, int r, int8_t * q, float & sc, float &) {
    const uint8_t * qs = b.qs + 8 * r;
    for (int l = 0; l < 8; ++l) {
        q[l]     = int8_t(e2m1_twice(qs[l] & 15));
        q[l + 8] = int8_t(e2m1_twice(qs[l] >> 4));
    }
    sc = ue4m3_half(b.d[r]);
}

SI_HD void decode_run(const BlockQ1_0 & b, int r, int8_t * q, float & sc, float &) {
    for (int l = 0; l < 16; ++l) q[l] = ((b.qs[2 * r + l / 8] >> (l % 8)) & 1) ? 1 : -1;
    sc = half(b.d);
}

SI_HD void decode_run(const BlockQ2_0 & b, int r, int8_t * q, float & sc, float &) {
    for (int l = 0; l < 16; ++l) q[l] = int8_t(((b.qs[4 * r + l / 4] >> (2 * (l % 4))) & 3) - 1);
    sc = half(b.d);
}

SI_HD void decode_run(const BlockTQ2_0 & b, int r, int8_t * q, float & sc, float &) {
    const uint8_t * qs = b.qs + 32 * (r / 8) + 16 * (r % 2);
    const int shift = 2 * ((r % 8) / 2);
    for (int l = 0; l < 16; ++l) q[l] = int8_t(((qs[l] >> shift) & 3) - 1);
    sc = half(b.d);
}

// Digit n (0..4) of a base-3 byte: the byte holds the 5-digit number v
// scaled by 256 / 243, so the byte times 3^n (mod 256) is the fraction left
// after n digits, and that times 3 has digit n as its integer part.
SI_HD int ternary_digit(uint8_t x, int n) {
    const int pow3 = n == 0 ? 1 : n == 1 ? 3 : n == 2 ? 9 : n == 3 ? 27 : 81;
    return (int(uint8_t(x * pow3)) * 3) >> 8;
}

// TQ1_0's 256 elements: 160 from qs[0..31] (element 32n + m: digit n of
// qs[m]), 80 from qs[32..47] (160 + 16n + m: digit n of qs[32 + m]), 16 from
// qh (240 + 4n + j: digit n of qh[j]).
SI_HD void decode_run(const BlockTQ1_0 & b, int r, int8_t * q, float & sc, float &) {
    for (int l = 0; l < 16; ++l) {
        const int e = 16 * r + l;
        int t;
        if (e < 160) {
            t = ternary_digit(b.qs[e % 32], e / 32);
        } else if (e < 240) {
            t = ternary_digit(b.qs[32 + (e - 160) % 16], (e - 160) / 16);
        } else {
            t = ternary_digit(b.qh[(e - 240) % 4], (e - 240) / 4);
        }
        q[l] = int8_t(t - 1);
    }
    sc = half(b.d);
}

} // namespace standin::quant
// The i-quants on grids (IQ1_S, IQ1_M, IQ2_*, IQ3_*), in a file of their own;
// here because they use the helpers above and the list below names them.
#include "kernels/common/quants_iq.h"
namespace standin::quant {

// One value of the integer form: one product, then the minimum, as ggml's
// reference computes them (the single statement of it: dequant and the CUDA
// decoders go through it).
template <class B> SI_HD float int_form_value(float sc, int q, float mn) {
    return B::kMin ? sc * float(q) - mn : sc * float(q);
}

// Run r (16 elements) of a block to floats.
template <class B> SI_HD void run_to_f32(const B & b, int r, float * y) {
    int8_t q[16];
    float  sc = 0.0f, mn = 0.0f;
    decode_run(b, r, q, sc, mn);
    for (int l = 0; l < 16; ++l) y[l] = int_form_value<B>(sc, q[l], mn);
}

// A whole block to floats through its integer form.
template <class B>
SI_HD void dequant_int_form(const B & b, float * y) {
    for (int r = 0; r < B::kElems / 16; ++r) run_to_f32(b, r, y + 16 * r);
}

SI_HD void dequant(const BlockQ2_K & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockQ3_K & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockIQ4_NL & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockIQ4_XS & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockMXFP4 & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockNVFP4 & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockQ1_0 & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockQ2_0 & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockTQ2_0 & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockTQ1_0 & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockIQ2_XXS & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockIQ2_XS & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockIQ2_S & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockIQ3_XXS & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockIQ3_S & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockIQ1_S & b, float * y) { dequant_int_form(b, y); }
SI_HD void dequant(const BlockIQ1_M & b, float * y) { dequant_int_form(b, y); }

// --- the type list -----------------------------------------------------------------
// Every block type this header decodes, stated once: ggml type, block struct,
// and the group size of ggml-cpu's activation blocks for it (its vec_dot_type:
// Q8_0/Q8_1 groups of 32, Q8_K groups of 256). block_elems, block_bytes,
// act_group and to_f32_row are derived from it, and so is the host device's
// list of quantized weight types (kernels/op_table.cpp): every type here has a
// host MUL_MAT kernel (mul_mat_q.cpp, or mul_mat_qd.cpp for the integer form).
#define SI_QUANT_INT_FORM_TYPES(X)          \
    X(GGML_TYPE_Q2_K, BlockQ2_K, kQK_K)     \
    X(GGML_TYPE_Q3_K, BlockQ3_K, kQK_K)     \
    X(GGML_TYPE_IQ4_NL, BlockIQ4_NL, kQK)   \
    X(GGML_TYPE_IQ4_XS, BlockIQ4_XS, kQK_K) \
    X(GGML_TYPE_MXFP4, BlockMXFP4, kQK)     \
    X(GGML_TYPE_NVFP4, BlockNVFP4, kQK)     \
    X(GGML_TYPE_Q1_0, BlockQ1_0, kQK)       \
    X(GGML_TYPE_Q2_0, BlockQ2_0, kQK)       \
    X(GGML_TYPE_TQ2_0, BlockTQ2_0, kQK_K)   \
    X(GGML_TYPE_TQ1_0, BlockTQ1_0, kQK_K)   \
    X(GGML_TYPE_IQ2_XXS, BlockIQ2_XXS, kQK_K) \
    X(GGML_TYPE_IQ2_XS, BlockIQ2_XS, kQK_K) \
    X(GGML_TYPE_IQ2_S, BlockIQ2_S, kQK_K)   \
    X(GGML_TYPE_IQ3_XXS, BlockIQ3_XXS, kQK_K) \
    X(GGML_TYPE_IQ3_S, BlockIQ3_S, kQK_K)   \
    X(GGML_TYPE_IQ1_S, BlockIQ1_S, kQK_K)   \
    X(GGML_TYPE_IQ1_M, BlockIQ1_M, kQK_K)

#define SI_QUANT_BLOCK_TYPES(X)         \
    X(GGML_TYPE_Q4_0, BlockQ4_0, kQK)   \
    X(GGML_TYPE_Q4_1, BlockQ4_1, kQK)   \
    X(GGML_TYPE_Q5_0, BlockQ5_0, kQK)   \
    X(GGML_TYPE_Q5_1, BlockQ5_1, kQK)   \
    X(GGML_TYPE_Q8_0, BlockQ8_0, kQK)   \
    X(GGML_TYPE_Q4_K, BlockQ4_K, kQK_K) \
    X(GGML_TYPE_Q5_K, BlockQ5_K, kQK_K) \
    X(GGML_TYPE_Q6_K, BlockQ6_K, kQK_K) \
    SI_QUANT_INT_FORM_TYPES(X)

} // namespace standin::quant
// The quantizers of the types a KV cache or CPY may be written in
// (quants_encode.h), and of the K types and IQ4_XS (quants_encode_k.h).
#include "kernels/common/quants_encode.h"
#include "kernels/common/quants_encode_k.h"
namespace standin::quant {

// The block types from_f32_row encodes, stated once (quants_encode.h,
// quants_encode_k.h).
#define SI_QUANT_ENCODE_TYPES(X)      \
    X(GGML_TYPE_Q8_0, BlockQ8_0)      \
    X(GGML_TYPE_Q4_0, BlockQ4_0)      \
    X(GGML_TYPE_Q4_1, BlockQ4_1)      \
    X(GGML_TYPE_Q5_0, BlockQ5_0)      \
    X(GGML_TYPE_Q5_1, BlockQ5_1)      \
    X(GGML_TYPE_Q1_0, BlockQ1_0)      \
    X(GGML_TYPE_Q2_0, BlockQ2_0)      \
    X(GGML_TYPE_MXFP4, BlockMXFP4)    \
    X(GGML_TYPE_NVFP4, BlockNVFP4)    \
    X(GGML_TYPE_TQ2_0, BlockTQ2_0)    \
    X(GGML_TYPE_IQ4_NL, BlockIQ4_NL)  \
    X(GGML_TYPE_Q2_K, BlockQ2_K)      \
    X(GGML_TYPE_Q3_K, BlockQ3_K)      \
    X(GGML_TYPE_Q4_K, BlockQ4_K)      \
    X(GGML_TYPE_Q5_K, BlockQ5_K)      \
    X(GGML_TYPE_Q6_K, BlockQ6_K)      \
    X(GGML_TYPE_IQ4_XS, BlockIQ4_XS)

// --- rows --------------------------------------------------------------------

// Elements per block and bytes per block for the types this header knows, 0 otherwise.
SI_HD int block_elems(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32:
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16: return 1;
#define SI_X(type, Block, group) case type: return Block::kElems;
        SI_QUANT_BLOCK_TYPES(SI_X)
#undef SI_X
        default: return 0;
    }
}

SI_HD int block_bytes(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32:  return 4;
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16: return 2;
#define SI_X(type, Block, group) case type: return int(sizeof(Block));
        SI_QUANT_BLOCK_TYPES(SI_X)
#undef SI_X
        default: return 0;
    }
}

// Whether to_f32_row can decode this type.
SI_HD bool can_decode(ggml_type t) { return block_elems(t) != 0; }

// The group size of ggml-cpu's activation blocks for a weight type (its
// vec_dot_type: Q8_0/Q8_1 groups of 32, Q8_K groups of 256); 0 when the
// activations are not quantized (float weights, or a type not listed).
SI_HD int act_group(ggml_type t) {
    switch (t) {
#define SI_X(type, Block, group) case type: return group;
        SI_QUANT_BLOCK_TYPES(SI_X)
#undef SI_X
        default: return 0;
    }
}

// Whether from_f32_row can encode this type.
SI_HD bool can_encode(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32:
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16: return true;
#define SI_X(type, Block) case type: return true;
        SI_QUANT_ENCODE_TYPES(SI_X)
#undef SI_X
        default: return false;
    }
}

// n elements of a row of type t (n a multiple of the block size) to floats.
// Returns false for a type it cannot decode.
SI_HD bool to_f32_row(ggml_type t, const void * src, float * y, int64_t n) {
    switch (t) {
        case GGML_TYPE_F32: {
            const float * s = static_cast<const float *>(src);
            for (int64_t i = 0; i < n; ++i) y[i] = s[i];
            return true;
        }
        case GGML_TYPE_F16: {
            const uint16_t * s = static_cast<const uint16_t *>(src);
            for (int64_t i = 0; i < n; ++i) y[i] = num::fp16_to_f32(s[i]);
            return true;
        }
        case GGML_TYPE_BF16: {
            const uint16_t * s = static_cast<const uint16_t *>(src);
            for (int64_t i = 0; i < n; ++i) y[i] = num::bf16_to_f32(s[i]);
            return true;
        }
        default: break;
    }
    const int64_t qk = block_elems(t);
    if (qk <= 1) {
        return false;
    }
    for (int64_t i = 0; i < n / qk; ++i) {
        float * o = y + i * qk;
        switch (t) {
#define SI_X(type, Block, group) case type: dequant(static_cast<const Block *>(src)[i], o); break;
            SI_QUANT_BLOCK_TYPES(SI_X)
#undef SI_X
            default: return false;
        }
    }
    return true;
}

// n floats into a row of type t (n a multiple of the block size). Returns false
// for a type it cannot encode.
SI_HD bool from_f32_row(ggml_type t, const float * x, void * dst, int64_t n) {
    switch (t) {
        case GGML_TYPE_F32: {
            float * d = static_cast<float *>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = x[i];
            return true;
        }
        case GGML_TYPE_F16: {
            uint16_t * d = static_cast<uint16_t *>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = num::f32_to_fp16(x[i]);
            return true;
        }
        case GGML_TYPE_BF16: {
            uint16_t * d = static_cast<uint16_t *>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = num::f32_to_bf16(x[i]);
            return true;
        }
#define SI_X(type, Block)                                                                \
        case type:                                                                       \
            for (int64_t i = 0; i < n / Block::kElems; ++i) {                            \
                quantize(x + i * Block::kElems, static_cast<Block *>(dst)[i]);           \
            }                                                                            \
            return true;
        SI_QUANT_ENCODE_TYPES(SI_X)
#undef SI_X
        default:
            return false;
    }
}

} // namespace standin::quant
