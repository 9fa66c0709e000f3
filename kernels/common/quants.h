// Quantized block formats shared by the host and CUDA kernels: our own
// definitions of the on-disk layouts of ggml's Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q4_K, Q5_K and Q6_K blocks (a GGUF file's bytes are read through these
// structs, so every size and field offset is fixed by the file format), their
// dequantisation, the two quantizers standin needs for KV-cache writes (Q8_0,
// Q4_0) and row conversions between F32, F16 and BF16 and these types.
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
    uint16_t d;            // scale
    uint8_t  qs[kQK / 2];  // element j in the low nibble of qs[j], j+16 in the high one
};
struct BlockQ4_1 {
    uint16_t d;            // scale
    uint16_t m;            // minimum
    uint8_t  qs[kQK / 2];
};
struct BlockQ5_0 {
    uint16_t d;
    uint8_t  qh[4];        // fifth bit of element j is bit j of this little-endian word
    uint8_t  qs[kQK / 2];
};
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t  qh[4];
    uint8_t  qs[kQK / 2];
};
struct BlockQ8_0 {
    uint16_t d;
    int8_t   qs[kQK];
};
// K formats: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes.
struct BlockQ4_K {
    uint16_t d;             // super-block scale of the sub-block scales
    uint16_t dmin;          // super-block scale of the sub-block mins
    uint8_t  scales[12];
    uint8_t  qs[kQK_K / 2]; // per 64 elements: 32 bytes, low nibbles first 32, high nibbles next 32
};
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t  scales[12];
    uint8_t  qh[kQK_K / 8]; // fifth bits: bit 2g (2g+1) of qh[l] belongs to sub-block 2g (2g+1)
    uint8_t  qs[kQK_K / 2];
};
// Q6_K: 16 sub-blocks of 16 with signed 8-bit scales.
struct BlockQ6_K {
    uint8_t  ql[kQK_K / 2]; // low 4 bits
    uint8_t  qh[kQK_K / 4]; // high 2 bits
    int8_t   scales[kQK_K / 16];
    uint16_t d;
};

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

// --- quantizers ----------------------------------------------------------------
// These round exactly like ggml's CPU backend, which is what test-backend-ops
// holds every backend to (a KV cache written by SET_ROWS must hold the same
// bytes): for Q4_0 that is the reference quantize_row_q4_0_ref; for Q8_0 the
// CPU backend's own quantizer, which differs from the reference only on exact
// ties (it multiplies by 127/amax and rounds half to even).

// a * b rounded to float and never fused with a following add (the host kernels
// are compiled with FMA contraction on; the reference is not). The empty asm
// hides the product from the optimizer, so it cannot form an FMA with it.
SI_HD float mul_unfused(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#elif defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    float p = a * b;
    __asm__("" : "+x"(p));
    return p;
#else
    volatile float p = a * b;
    return p;
#endif
}

// Q8_0: d = amax / 127, q = x * (127 / amax) rounded half to even.
SI_HD void quantize(const float * x, BlockQ8_0 & b) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
        const float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    const float d  = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b.d = num::f32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) {
        b.qs[j] = int8_t(rintf(x[j] * id));
    }
}

// Q4_0: the signed value of largest magnitude maps to -8; the others to
// trunc(x/d + 8.5) clamped to 15.
SI_HD void quantize(const float * x, BlockQ4_0 & b) {
    // vmax: the first element of largest magnitude (NaN never compares larger),
    // found without data-dependent branches in the max loop.
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
        const float a = fabsf(x[j]);
        amax = a > amax ? a : amax;
    }
    float vmax = 0.0f;
    if (amax > 0.0f) {
        for (int j = 0; j < kQK; ++j) {
            if (fabsf(x[j]) == amax) {
                vmax = x[j];
                break;
            }
        }
    }
    const float d  = vmax / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = num::f32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
        const int lo = int(int8_t(mul_unfused(x[j], id) + 8.5f));
        const int hi = int(int8_t(mul_unfused(x[j + kQK / 2], id) + 8.5f));
        b.qs[j] = uint8_t((lo < 15 ? lo : 15) | ((hi < 15 ? hi : 15) << 4));
    }
}

// --- rows --------------------------------------------------------------------

// Elements per block and bytes per block for the types this header knows, 0 otherwise.
SI_HD int block_elems(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32:
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16: return 1;
        case GGML_TYPE_Q4_0:
        case GGML_TYPE_Q4_1:
        case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_0: return kQK;
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: return kQK_K;
        default:             return 0;
    }
}

SI_HD int block_bytes(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32:  return 4;
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16: return 2;
        case GGML_TYPE_Q4_0: return int(sizeof(BlockQ4_0));
        case GGML_TYPE_Q4_1: return int(sizeof(BlockQ4_1));
        case GGML_TYPE_Q5_0: return int(sizeof(BlockQ5_0));
        case GGML_TYPE_Q5_1: return int(sizeof(BlockQ5_1));
        case GGML_TYPE_Q8_0: return int(sizeof(BlockQ8_0));
        case GGML_TYPE_Q4_K: return int(sizeof(BlockQ4_K));
        case GGML_TYPE_Q5_K: return int(sizeof(BlockQ5_K));
        case GGML_TYPE_Q6_K: return int(sizeof(BlockQ6_K));
        default:             return 0;
    }
}

// Whether to_f32_row can decode this type.
SI_HD bool can_decode(ggml_type t) { return block_elems(t) != 0; }

// The group size of ggml-cpu's activation blocks for a weight type (its
// vec_dot_type: Q8_0/Q8_1 groups of 32, Q8_K groups of 256); 0 when the
// activations are not quantized (float weights, or no matmul kernel for it).
SI_HD int act_group(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0:
            return 32;
        case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
            return kQK_K;
        default:
            return 0;
    }
}

// Whether from_f32_row can encode this type.
SI_HD bool can_encode(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16 || t == GGML_TYPE_Q8_0 ||
           t == GGML_TYPE_Q4_0;
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
            case GGML_TYPE_Q4_0: dequant(static_cast<const BlockQ4_0 *>(src)[i], o); break;
            case GGML_TYPE_Q4_1: dequant(static_cast<const BlockQ4_1 *>(src)[i], o); break;
            case GGML_TYPE_Q5_0: dequant(static_cast<const BlockQ5_0 *>(src)[i], o); break;
            case GGML_TYPE_Q5_1: dequant(static_cast<const BlockQ5_1 *>(src)[i], o); break;
            case GGML_TYPE_Q8_0: dequant(static_cast<const BlockQ8_0 *>(src)[i], o); break;
            case GGML_TYPE_Q4_K: dequant(static_cast<const BlockQ4_K *>(src)[i], o); break;
            case GGML_TYPE_Q5_K: dequant(static_cast<const BlockQ5_K *>(src)[i], o); break;
            case GGML_TYPE_Q6_K: dequant(static_cast<const BlockQ6_K *>(src)[i], o); break;
            default:             return false;
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
        case GGML_TYPE_Q8_0:
            for (int64_t i = 0; i < n / kQK; ++i) quantize(x + i * kQK, static_cast<BlockQ8_0 *>(dst)[i]);
            return true;
        case GGML_TYPE_Q4_0:
            for (int64_t i = 0; i < n / kQK; ++i) quantize(x + i * kQK, static_cast<BlockQ4_0 *>(dst)[i]);
            return true;
        default:
            return false;
    }
}

} // namespace standin::quant
