// Weight formats of the integer tensor-core product (mmq.cu): how a lane
// takes the codes and scales of one 32-element sub-block out of a chunk of
// raw weight bytes staged in shared memory.
//
// A product of weights w = s * q + mn (codes q, per-sub-block scale s and, for
// the formats with a minimum, mn) with activations x = da * qa (int8 codes qa
// per 32 values, scale da, ds = {da, da * sum(qa)}) is, per sub-block,
//     sum(w * x) = s * da * sum(q * qa) + mn * da * sum(qa)
// so the tensor cores form the integer sums and the epilogue applies
// s * ds.x and mn * ds.y. Every format's constant offset (Q4_0's 8, Q5_0's 16,
// Q3_K's 4, Q6_K's 32) is taken off the codes here, so codes are signed int8 and need
// no correction term: a b-bit code x placed at the top of its byte with that
// top bit flipped is the byte 2^(8-b) (x - 2^(b-1)), one shift and one logic
// operation per word (a bytewise subtraction is several instructions), and
// the scale carries the exact factor 2^(b-8) back (the larger integer sums
// stay below 2^20, exact as int32 and as float).
//
// codes(row, s, t, lo, hi): the 4 codes of elements 4t..4t+3 (lo) and
// 16+4t..16+4t+3 (hi) of sub-block s of the chunk that starts at `row`, as
// four signed bytes each: exactly the A fragment words of mma.m16n8k32 for
// thread t of a quad (kernels/cuda/mmq.cu).
// scale(row, s, sc, mn): s and mn of sub-block s; Q3_K, Q6_K, IQ2_XS and
// IQ2_S (16-element scales, kSplit16) give the scale of each half: sc for
// elements 0..15, mn for 16..31, and their products use two m16n8k16 steps.
// Q2_K (kMinCodes) has a second set of codes, min_codes(row, s, lo, hi), for
// its minimum.
//
// Sub-blocks and chunks of a format are those of its own layout (for the K
// formats sub-block s of a chunk is elements 32s..32s+31 of it), so the
// activations need no reordering.
//
// The 4-bit table formats (IQ4_NL, IQ4_XS, MXFP4) take their codes from a
// 16-entry int8 table (quants.h's levels, E2M1 doubled), with no offset: the
// entries are signed already, and 32 products of at most 127 * 127 keep a
// sub-block's sum below 2^20 as well.
//
// Functions are __host__ __device__: tests/kernels/mmq_formats_check.cu
// rebuilds every element of random blocks from them on the host and compares
// with quants.h's dequant().
#pragma once

#include <cstdint>

#include "ggml.h"
#include "kernels/common/quants.h"

namespace standin::kernels::cuda::mmq {

using quant::half;

// Four bytes at a 2-byte aligned address, little-endian.
__host__ __device__ __forceinline__ uint32_t u32_a2(const uint8_t * p) {
    const uint16_t * h = reinterpret_cast<const uint16_t *>(p);
    return uint32_t(h[0]) | (uint32_t(h[1]) << 16);
}

__host__ __device__ __forceinline__ uint32_t u32_a4(const uint8_t * p) { return *reinterpret_cast<const uint32_t *>(p); }

// Bit j (j = 0..3) of `bits` to bit 4 of byte j.
__host__ __device__ __forceinline__ uint32_t bit4_of_bytes(uint32_t bits) {
    return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}

constexpr uint32_t kLowNibbles = 0x0f0f0f0fu, kHighNibbles = 0xf0f0f0f0u, kTopBits = 0x80808080u;

// Four bytes at any address, little-endian. On the device, from the two words
// around them (the word after may be a staged row's padding, never past it:
// rows are padded to 16 bytes); on the host, as bytes.
__host__ __device__ __forceinline__ uint32_t u32_a1(const uint8_t * p) {
#ifdef __CUDA_ARCH__
    const uint32_t * w = reinterpret_cast<const uint32_t *>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(3));
    return __funnelshift_r(w[0], w[1], 8u * uint32_t(reinterpret_cast<uintptr_t>(p) & 3u));
#else
    return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
#endif
}

// __byte_perm's selection (bits 2:0 of each of the selector's 4 low nibbles
// pick one of the 8 bytes of y:x; bit 3 is not used), also on the host, so the
// format check (tests/kernels/mmq_formats_check.cu) runs the device's lookups.
__host__ __device__ __forceinline__ uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
    return __byte_perm(x, y, s);
#else
    const uint64_t v = (uint64_t(y) << 32) | x;
    uint32_t r = 0;
    for (int n = 0; n < 4; ++n) r |= uint32_t((v >> (8 * ((s >> (4 * n)) & 7u))) & 0xffu) << (8 * n);
    return r;
#endif
}

// A 16-entry int8 table (quant::Table16) as four words, looked up 8 nibbles
// at a time. split(q): a word's 8 nibbles, in memory order (low then high
// nibble of each byte), go straight into the selectors of byte permutes, 4 at
// a time: one permute picks entries 0..7 (t0:t1) by a nibble's bits 2:0,
// another entries 8..15 (t2:t3), a third picks between the two by bit 3; two
// more gather the low nibbles' entries and the high ones'. About 12
// instructions per word of 8 codes, where looking up low and high nibbles
// apart took about 20 (the table formats' mat-vec was issue-bound: Nsight
// Compute on the H100, results/h200/summary-76.txt). codes() gives the 8 code
// words of 4 words of nibbles q (low nibbles elements 4j..4j+3, high nibbles
// 16+4j..: Q4_0's layout, which the table formats share), as the integer
// mat-vec (mul_mat_vec_q8.cu) takes them.
struct TableWords {
    uint32_t t0, t1, t2, t3;
    __host__ __device__ constexpr explicit TableWords(const quant::Table16 & t)
        : t0(uint32_t(t.lo)), t1(uint32_t(t.lo >> 32)), t2(uint32_t(t.hi)), t3(uint32_t(t.hi >> 32)) {}
    // The code words of one word of nibbles: low nibbles' entries (lo) and high ones' (hi).
    __host__ __device__ __forceinline__ void split(uint32_t q, uint32_t & lo, uint32_t & hi) const {
        // Nibble n of `pick`: n % 4, plus 4 (the high half's byte) where code n has bit 3.
        const uint32_t pick = 0x32103210u | ((q & 0x88888888u) >> 1);
        uint32_t e[2];  // entries of nibbles 0..3 (bytes 0, 1 of q) and 4..7 (bytes 2, 3)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint32_t sel = q >> (16 * h);
            e[h] = byte_perm(byte_perm(t0, t1, sel), byte_perm(t2, t3, sel), pick >> (16 * h));
        }
        lo = byte_perm(e[0], e[1], 0x6420u);
        hi = byte_perm(e[0], e[1], 0x7531u);
    }
    __host__ __device__ __forceinline__ void codes(const uint32_t (&q)[4], uint32_t (&c)[8]) const {
#pragma unroll
        for (int j = 0; j < 4; ++j) split(q[j], c[j], c[4 + j]);
    }
};

// Bytes per row of a staged chunk, padded so that 8 rows read at the same word
// offset fall in 8 distinct groups of 4 banks (row stride / 16 odd).
constexpr int padded_stride(int bytes) {
    int s = (bytes + 15) / 16 * 16;
    return (s / 16) % 2 == 1 ? s : s + 16;
}

template <int T> struct Fmt;

// The scale of a block that opens with it as a half, with no minimum (Q8_0, IQ4_NL).
__host__ __device__ __forceinline__ void block_half_scale(const uint8_t * block, float & sc, float & mn) {
    sc = half(*reinterpret_cast<const uint16_t *>(block));
    mn = 0.0f;
}

// The 32-element formats: a chunk is 8 consecutive blocks (256 elements).
template <> struct Fmt<GGML_TYPE_Q4_0> {
    static constexpr int kBytes = 18, kQK = 32, kChunkBlocks = 8;
    static constexpr bool kMin = false, kSplit16 = false;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint32_t q = u32_a2(row + s * kBytes + 2 + 4 * t);
        lo = ((q << 4) & kHighNibbles) ^ kTopBits;  // 16 (x - 8)
        hi = (q & kHighNibbles) ^ kTopBits;
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        sc = half(*reinterpret_cast<const uint16_t *>(row + s * kBytes)) * 0.0625f;
        mn = 0.0f;
    }
};

template <> struct Fmt<GGML_TYPE_Q4_1> {
    static constexpr int kBytes = 20, kQK = 32, kChunkBlocks = 8;
    static constexpr bool kMin = true, kSplit16 = false;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint32_t q = u32_a2(row + s * kBytes + 4 + 4 * t);
        lo = q & kLowNibbles;
        hi = (q >> 4) & kLowNibbles;
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        const uint16_t * h = reinterpret_cast<const uint16_t *>(row + s * kBytes);
        sc = half(h[0]);
        mn = half(h[1]);
    }
};

template <> struct Fmt<GGML_TYPE_Q5_0> {
    static constexpr int kBytes = 22, kQK = 32, kChunkBlocks = 8;
    static constexpr bool kMin = false, kSplit16 = false;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * b = row + s * kBytes;
        const uint32_t qh = u32_a2(b + 2), q = u32_a2(b + 6 + 4 * t);
        lo = (((q & kLowNibbles) | bit4_of_bytes(qh >> (4 * t))) << 3) ^ kTopBits;  // 8 (x - 16)
        hi = ((((q >> 4) & kLowNibbles) | bit4_of_bytes(qh >> (16 + 4 * t))) << 3) ^ kTopBits;
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        sc = half(*reinterpret_cast<const uint16_t *>(row + s * kBytes)) * 0.125f;
        mn = 0.0f;
    }
};

template <> struct Fmt<GGML_TYPE_Q5_1> {
    static constexpr int kBytes = 24, kQK = 32, kChunkBlocks = 8;
    static constexpr bool kMin = true, kSplit16 = false;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * b = row + s * kBytes;
        const uint32_t qh = u32_a2(b + 4), q = u32_a2(b + 8 + 4 * t);
        lo = (q & kLowNibbles) | bit4_of_bytes(qh >> (4 * t));
        hi = ((q >> 4) & kLowNibbles) | bit4_of_bytes(qh >> (16 + 4 * t));
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        const uint16_t * h = reinterpret_cast<const uint16_t *>(row + s * kBytes);
        sc = half(h[0]);
        mn = half(h[1]);
    }
};

template <> struct Fmt<GGML_TYPE_Q8_0> {
    static constexpr int kBytes = 34, kQK = 32, kChunkBlocks = 8;
    static constexpr bool kMin = false, kSplit16 = false;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * q = row + s * kBytes + 2;
        lo = u32_a2(q + 4 * t);
        hi = u32_a2(q + 16 + 4 * t);
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        block_half_scale(row + s * kBytes, sc, mn);
    }
};

// The table formats of 32 elements: Q4_0's nibble layout with IQ4_NL's
// levels (scale: a half) or doubled E2M1 values (MXFP4: an E8M0 byte, halved;
// 17-byte blocks start at any byte).
template <> struct Fmt<GGML_TYPE_IQ4_NL> {
    static constexpr int kBytes = 18, kQK = 32, kChunkBlocks = 8;
    static constexpr bool kMin = false, kSplit16 = false;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        constexpr TableWords kTab(quant::kIQ4NLLevels);
        kTab.split(u32_a2(row + s * kBytes + 2 + 4 * t), lo, hi);
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        block_half_scale(row + s * kBytes, sc, mn);
    }
};

template <> struct Fmt<GGML_TYPE_MXFP4> {
    static constexpr int kBytes = 17, kQK = 32, kChunkBlocks = 8;
    static constexpr bool kMin = false, kSplit16 = false;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        constexpr TableWords kTab(quant::kE2M1Twice);
        kTab.split(u32_a1(row + s * kBytes + 1 + 4 * t), lo, hi);
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        sc = quant::e8m0_half(row[s * kBytes]);
        mn = 0.0f;
    }
};

// The K formats: a chunk is one 256-element super-block (Q6_K: two, so that
// a chunk is a whole number of 4-byte words), sub-block s of 32 elements.
// Q4_K / Q5_K: w = d * sc_s * q - dmin * m_s with 6-bit sc_s, m_s.
template <> struct Fmt<GGML_TYPE_Q4_K> {
    static constexpr int kBytes = 144, kQK = 256, kChunkBlocks = 1;
    static constexpr bool kMin = true, kSplit16 = false;
    // Sub-blocks 2p and 2p+1 share the 32 bytes qs[32p..32p+31], low and high nibbles.
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * qs = row + 16 + 32 * (s / 2);
        const int sh = 4 * (s % 2);
        lo = (u32_a4(qs + 4 * t) >> sh) & kLowNibbles;
        hi = (u32_a4(qs + 16 + 4 * t) >> sh) & kLowNibbles;
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        const uint16_t * h = reinterpret_cast<const uint16_t *>(row);
        int isc, im;
        quant::k_scale_min(row + 4, s, isc, im);
        sc = half(h[0]) * float(isc);
        mn = -(half(h[1]) * float(im));
    }
};

template <> struct Fmt<GGML_TYPE_Q5_K> {
    static constexpr int kBytes = 176, kQK = 256, kChunkBlocks = 1;
    static constexpr bool kMin = true, kSplit16 = false;
    // Low 4 bits as Q4_K (qs at 48); the fifth bit of element l of sub-block s
    // is bit s of qh[l].
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * qs = row + 48 + 32 * (s / 2);
        const uint8_t * qh = row + 16;
        const int sh = 4 * (s % 2);
        lo = ((u32_a4(qs + 4 * t) >> sh) & kLowNibbles) | (((u32_a4(qh + 4 * t) >> s) & 0x01010101u) << 4);
        hi = ((u32_a4(qs + 16 + 4 * t) >> sh) & kLowNibbles) | (((u32_a4(qh + 16 + 4 * t) >> s) & 0x01010101u) << 4);
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        Fmt<GGML_TYPE_Q4_K>::scale(row, s, sc, mn);  // same d, dmin and packed scales
    }
};

// Q6_K: w = d * sc16 * (q - 32), 6-bit codes from ql (4 bits) and qh (2),
// one signed 8-bit scale per 16 elements. Element l of sub-block s (half
// n = s / 4 of the block, j = s % 4): ql[64n + 32(j & 1) + l] >> 4(j >> 1) and
// qh[32n + l] >> 2j; scale 8n + 2j + l / 16.
template <> struct Fmt<GGML_TYPE_Q6_K> {
    static constexpr int kBytes = 210, kQK = 256, kChunkBlocks = 2;
    static constexpr bool kMin = false, kSplit16 = true;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * b = row + (s / 8) * kBytes;
        const int sb = s % 8, n = sb / 4, j = sb % 4;
        const uint8_t * ql = b + 64 * n + 32 * (j & 1);
        const uint8_t * qh = b + 128 + 32 * n;
        const int shl = 4 * (j >> 1), shh = 2 * j;
        const uint32_t l0 = (u32_a2(ql + 4 * t) >> shl) & kLowNibbles;
        const uint32_t l1 = (u32_a2(ql + 16 + 4 * t) >> shl) & kLowNibbles;
        const uint32_t h0 = ((u32_a2(qh + 4 * t) >> shh) & 0x03030303u) << 4;
        const uint32_t h1 = ((u32_a2(qh + 16 + 4 * t) >> shh) & 0x03030303u) << 4;
        lo = ((l0 | h0) << 2) ^ kTopBits;  // 4 (x - 32)
        hi = ((l1 | h1) << 2) ^ kTopBits;
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        const uint8_t * b = row + (s / 8) * kBytes;
        const int sb = s % 8, n = sb / 4, j = sb % 4;
        const int8_t * scales = reinterpret_cast<const int8_t *>(b + 192);
        const float d = half(*reinterpret_cast<const uint16_t *>(b + 208)) * 0.25f;
        sc = d * float(scales[8 * n + 2 * j]);
        mn = d * float(scales[8 * n + 2 * j + 1]);
    }
};

// Q3_K: w = d * sc16 * (x - 4), 3-bit codes x from qs (2 bits) and hmask (the
// third), one signed 6-bit scale (offset 32) per 16 elements (quants.h's
// BlockQ3_K and decode_run state the layout). Element l of sub-block s (n =
// s / 4 of the block's halves, j = s % 4): qs[32n + l] >> 2j and bit s of
// hmask[l]; scales 2s (elements 0..15) and 2s + 1. Two super-blocks per chunk
// (110-byte blocks: a chunk of whole 4-byte words), read as Q6_K's are.
__host__ __device__ __forceinline__ int q3k_scale(const uint8_t * b, int r) {
    const int lo = r < 8 ? b[96 + r] & 15 : b[96 + r - 8] >> 4;
    const int hi = (b[104 + r % 4] >> (2 * (r / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

template <> struct Fmt<GGML_TYPE_Q3_K> {
    static constexpr int kBytes = 110, kQK = 256, kChunkBlocks = 2;
    static constexpr bool kMin = false, kSplit16 = true;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * b = row + (s / 8) * kBytes;
        const int sb = s % 8, sh = 2 * (sb % 4);
        const uint8_t * qs = b + 32 + 32 * (sb / 4);
        // Low 2 bits from qs, the third from hmask (b + 0), per byte.
        const auto x = [&](int at) {
            return ((u32_a2(qs + at) >> sh) & 0x03030303u) | (((u32_a2(b + at) >> sb) & 0x01010101u) << 2);
        };
        const uint32_t x0 = x(4 * t), x1 = x(16 + 4 * t);
        lo = (x0 << 5) ^ kTopBits;  // 32 (x - 4)
        hi = (x1 << 5) ^ kTopBits;
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        const uint8_t * b = row + (s / 8) * kBytes;
        const float d = half(*reinterpret_cast<const uint16_t *>(b + 108)) * 0.03125f;
        const int sb = s % 8;
        sc = d * float(q3k_scale(b, 2 * sb));
        mn = d * float(q3k_scale(b, 2 * sb + 1));
    }
};

// Q2_K: w = d * sc16 * q - dmin * m16, 2-bit codes q, a 4-bit scale sc16
// (low) and minimum m16 (high nibble of scales[r]) per 16 elements. Its
// minimum changes every 16 elements, where the activations carry one sum per
// 32, so it is a second integer product (kMinCodes): min_codes() gives m16
// of each half of the sub-block repeated in every byte, and that product
// with the activation codes is m_lo * sum(qa, 0..15) + m_hi * sum(qa,
// 16..31). The scales go into the codes themselves (sc16 * q <= 45, int8),
// so scale() gives the block's d (sc) and -dmin (mn), the factors of the two
// products. Element l of sub-block s: qs[32 (s / 4) + l] >> 2 (s % 4).
template <> struct Fmt<GGML_TYPE_Q2_K> {
    static constexpr int kBytes = 84, kQK = 256, kChunkBlocks = 1;
    static constexpr bool kMin = false, kSplit16 = false, kMinCodes = true;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * qs = row + 16 + 32 * (s / 4);
        const int sh = 2 * (s % 4);
        // Bytes of at most 3 times a 4-bit scale: no carry between bytes.
        lo = ((u32_a4(qs + 4 * t) >> sh) & 0x03030303u) * uint32_t(row[2 * s] & 15);
        hi = ((u32_a4(qs + 16 + 4 * t) >> sh) & 0x03030303u) * uint32_t(row[2 * s + 1] & 15);
    }
    __host__ __device__ static void min_codes(const uint8_t * row, int s, uint32_t & lo, uint32_t & hi) {
        lo = uint32_t(row[2 * s] >> 4) * 0x01010101u;
        hi = uint32_t(row[2 * s + 1] >> 4) * 0x01010101u;
    }
    __host__ __device__ static void scale(const uint8_t * row, int, float & sc, float & mn) {
        const uint16_t * h = reinterpret_cast<const uint16_t *>(row + 80);
        sc = half(h[0]);
        mn = -half(h[1]);
    }
};

// IQ4_XS: IQ4_NL's levels in super-blocks of 256, a 6-bit scale (offset 32)
// per sub-block of 32: low 4 bits in scales_l (nibble s % 2 of byte s / 2),
// top 2 in scales_h (bits 2s, 2s+1); sub-block s's nibbles are qs[16 s ..].
template <> struct Fmt<GGML_TYPE_IQ4_XS> {
    static constexpr int kBytes = 136, kQK = 256, kChunkBlocks = 1;
    static constexpr bool kMin = false, kSplit16 = false;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        constexpr TableWords kTab(quant::kIQ4NLLevels);
        kTab.split(u32_a4(row + 8 + 16 * s + 4 * t), lo, hi);
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        const uint16_t * h = reinterpret_cast<const uint16_t *>(row);
        const int ls = ((row[4 + s / 2] >> (4 * (s % 2))) & 15) | (((h[1] >> (2 * s)) & 3) << 4);
        sc = half(h[0]) * float(ls - 32);
        mn = 0.0f;
    }
};

// The i-quants on grids (quants_iq.h states their layouts): each group of 8
// elements (IQ2) or 4 (IQ3) is a grid entry of small non-negative bytes, signs
// apart, so a code word is 4 bytes of an entry with its 4 sign bits applied.
// Their 66- to 110-byte blocks are not whole 4-byte words: two per chunk.
//
// Bytes of `w` negated where bits 0..3 of `s` are set: (w ^ m) - m with m
// 0xff in those bytes, subtracted bytewise.
__host__ __device__ __forceinline__ uint32_t signed_word(uint32_t w, uint32_t s) {
    const uint32_t m = (((s & 15u) * 0x00204081u) & 0x01010101u) * 0xffu;  // bit j to byte j
#ifdef __CUDA_ARCH__
    return __vsub4(w ^ m, m);
#else
    uint32_t r = 0;
    for (int j = 0; j < 4; ++j) r |= (((((w ^ m) >> (8 * j)) & 0xffu) - ((m >> (8 * j)) & 0xffu)) & 0xffu) << (8 * j);
    return r;
#endif
}

// A 7-bit sign index to its 8 sign bits (quant::signs_of_index, by popcount).
__host__ __device__ __forceinline__ uint32_t sign_bits(uint32_t i) {
#ifdef __CUDA_ARCH__
    return i | ((uint32_t(__popc(i)) & 1u) << 7);
#else
    return quant::signs_of_index(i);
#endif
}

// Half h (bytes 4h..4h+3) of entry i of an 8-byte grid, as a word.
#define SI_GRID_HALF(name, i, h) (reinterpret_cast<const uint32_t *>(&SI_GRID_AT(quant::grid::name, 0))[2 * (i) + (h)])

// A lane's code words take group t / 2 (IQ2: elements 8l..8l+7 of the
// sub-block, l = t / 2 for lo and 2 + t / 2 for hi), half t % 2 of it.
// IQ2_XXS: per sub-block 8 bytes at 2 + 8s: 4 grid indices, then a word of
// four 7-bit sign indices and the scale (bits 28..31).
template <> struct Fmt<GGML_TYPE_IQ2_XXS> {
    static constexpr int kBytes = 66, kQK = 256, kChunkBlocks = 2;
    static constexpr bool kMin = false, kSplit16 = false;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * g = row + (s / 8) * kBytes + 2 + 8 * (s % 8);
        const uint32_t a = u32_a2(g + 4);
        const int l = t / 2, h = t % 2;
        lo = signed_word(SI_GRID_HALF(kIq2xxs, g[l], h), sign_bits((a >> (7 * l)) & 127u) >> (4 * h));
        hi = signed_word(SI_GRID_HALF(kIq2xxs, g[l + 2], h), sign_bits((a >> (7 * (l + 2))) & 127u) >> (4 * h));
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        const uint8_t * b = row + (s / 8) * kBytes;
        const uint32_t a = u32_a2(b + 2 + 8 * (s % 8) + 4);
        sc = half(*reinterpret_cast<const uint16_t *>(b)) * (0.5f + float(a >> 28)) * 0.25f;
        mn = 0.0f;
    }
};

// IQ2_XS and IQ2_S: a 4-bit scale per 16 elements (kSplit16), nibbles of
// scales[s] (bytes 66.. IQ2_XS, 74.. IQ2_S).
__host__ __device__ __forceinline__ void iq2_scales16(const uint8_t * b, int at, int s, float & sc, float & mn) {
    const float d = half(*reinterpret_cast<const uint16_t *>(b)) * 0.25f;
    const int v = b[at + s];
    sc = d * (0.5f + float(v & 15));
    mn = d * (0.5f + float(v >> 4));
}

// IQ2_XS: per group of 8 a 16-bit word at 2 + 2 (4s + l): 9-bit grid index, 7-bit sign index.
template <> struct Fmt<GGML_TYPE_IQ2_XS> {
    static constexpr int kBytes = 74, kQK = 256, kChunkBlocks = 2;
    static constexpr bool kMin = false, kSplit16 = true;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint16_t * q = reinterpret_cast<const uint16_t *>(row + (s / 8) * kBytes + 2) + 4 * (s % 8);
        const int l = t / 2, h = t % 2;
        const uint32_t v0 = q[l], v1 = q[l + 2];
        lo = signed_word(SI_GRID_HALF(kIq2xs, v0 & 511u, h), sign_bits(v0 >> 9) >> (4 * h));
        hi = signed_word(SI_GRID_HALF(kIq2xs, v1 & 511u, h), sign_bits(v1 >> 9) >> (4 * h));
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        iq2_scales16(row + (s / 8) * kBytes, 66, s % 8, sc, mn);
    }
};

// IQ2_S: group l's grid index is qs[4s + l] with bits 2l, 2l+1 of qh[s] (at
// 66) on top; its 8 signs the byte qs[32 + 4s + l].
template <> struct Fmt<GGML_TYPE_IQ2_S> {
    static constexpr int kBytes = 82, kQK = 256, kChunkBlocks = 2;
    static constexpr bool kMin = false, kSplit16 = true;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * b = row + (s / 8) * kBytes;
        const int sb = s % 8, l = t / 2, h = t % 2;
        const uint8_t * qs = b + 2 + 4 * sb;
        const uint32_t qh = b[66 + sb];
        const uint32_t i0 = qs[l] | ((qh << (8 - 2 * l)) & 0x300u), i1 = qs[l + 2] | ((qh << (4 - 2 * l)) & 0x300u);
        lo = signed_word(SI_GRID_HALF(kIq2s, i0, h), uint32_t(qs[32 + l]) >> (4 * h));
        hi = signed_word(SI_GRID_HALF(kIq2s, i1, h), uint32_t(qs[32 + l + 2]) >> (4 * h));
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        iq2_scales16(row + (s / 8) * kBytes, 74, s % 8, sc, mn);
    }
};

// IQ3_XXS: a grid entry (4 bytes) per group of 4: elements 4t.. are group t
// (index byte qs[8s + t] at 2), 16 + 4t.. group 4 + t; the sub-block's word
// of sign indices and scale at 66 + 4s, as IQ2_XXS's.
template <> struct Fmt<GGML_TYPE_IQ3_XXS> {
    static constexpr int kBytes = 98, kQK = 256, kChunkBlocks = 2;
    static constexpr bool kMin = false, kSplit16 = false;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * b = row + (s / 8) * kBytes;
        const int sb = s % 8, l = t / 2, h = t % 2;
        const uint8_t * q = b + 2 + 8 * sb;
        const uint32_t a = u32_a2(b + 66 + 4 * sb);
        lo = signed_word(SI_GRID_AT(quant::grid::kIq3xxs, q[t]), sign_bits((a >> (7 * l)) & 127u) >> (4 * h));
        hi = signed_word(SI_GRID_AT(quant::grid::kIq3xxs, q[t + 4]), sign_bits((a >> (7 * (l + 2))) & 127u) >> (4 * h));
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        const uint8_t * b = row + (s / 8) * kBytes;
        const uint32_t a = u32_a2(b + 66 + 4 * (s % 8));
        sc = half(*reinterpret_cast<const uint16_t *>(b)) * (0.5f + float(a >> 28)) * 0.5f;
        mn = 0.0f;
    }
};

// IQ3_S: group j of 4 (j = t for lo, 4 + t for hi) has grid index qs[8s + j]
// (at 2) with bit j of qh[s] (at 66) as its ninth bit; 8 explicit signs per
// group of 8 (signs[4s + l] at 74); an odd scale 1 + 2v per sub-block, v the
// nibble s % 2 of scales[s / 2] (at 106).
template <> struct Fmt<GGML_TYPE_IQ3_S> {
    static constexpr int kBytes = 110, kQK = 256, kChunkBlocks = 2;
    static constexpr bool kMin = false, kSplit16 = false;
    __host__ __device__ static void codes(const uint8_t * row, int s, int t, uint32_t & lo, uint32_t & hi) {
        const uint8_t * b = row + (s / 8) * kBytes;
        const int sb = s % 8, l = t / 2, h = t % 2;
        const uint8_t * q = b + 2 + 8 * sb;
        const uint32_t qh = b[66 + sb];
        const uint32_t i0 = q[t] | (((qh >> t) & 1u) << 8), i1 = q[t + 4] | (((qh >> (t + 4)) & 1u) << 8);
        lo = signed_word(SI_GRID_AT(quant::grid::kIq3s, i0), uint32_t(b[74 + 4 * sb + l]) >> (4 * h));
        hi = signed_word(SI_GRID_AT(quant::grid::kIq3s, i1), uint32_t(b[74 + 4 * sb + l + 2]) >> (4 * h));
    }
    __host__ __device__ static void scale(const uint8_t * row, int s, float & sc, float & mn) {
        const uint8_t * b = row + (s / 8) * kBytes;
        const int sb = s % 8;
        sc = half(*reinterpret_cast<const uint16_t *>(b)) * float(1 + 2 * ((b[106 + sb / 2] >> (4 * (sb % 2))) & 15));
        mn = 0.0f;
    }
};
#undef SI_GRID_HALF

// Whether a format has a second integer product for its minimum (Fmt<Q2_K>).
template <typename F, typename = void> struct HasMinCodes { static constexpr bool value = false; };
template <typename F> struct HasMinCodes<F, decltype(void(F::kMinCodes))> {
    static constexpr bool value = F::kMinCodes;
};
template <int T> constexpr bool kMinCodes = HasMinCodes<Fmt<T>>::value;

// Elements of one chunk (the pipeline's step along K) and its raw bytes per row.
template <int T> constexpr int chunk_elems() { return Fmt<T>::kChunkBlocks * Fmt<T>::kQK; }
template <int T> constexpr int chunk_bytes() { return Fmt<T>::kChunkBlocks * Fmt<T>::kBytes; }

} // namespace standin::kernels::cuda::mmq
