// Device-side decoding of the block formats of kernels/common/quants.h, in the
// two shapes the CUDA kernels need (the block layouts, half(), k_scale_min()
// and load_u32_le() come from quants.h itself):
//   elem(type, row, i)   element i of a row (a run of whole blocks); used where
//                        threads map to single elements (GET_ROWS, CPY decode,
//                        the tile loads of the batched MUL_MAT).
//   Part<T>::get(...)    8 values of one block ("part" p of kParts): two runs
//                        of 4 consecutive elements starting at a and b inside
//                        the block. The parts of a block tile it exactly, and
//                        neighbouring lanes taking neighbouring parts read
//                        neighbouring bytes (mat-vec, one warp per weight row).
//   Integer-form formats (Note [integer form], quants.h): quants.h's own
//   decode_run / run_to_f32 (runs of 16), on the device as on the host; elem()
//   takes one element of its run, run_words() packs a run for dp4a (the
//   integer mat-vec, mul_mat_vec_run.cu) and run_dot() takes its dot product.
// Every value is computed with the float operations, in the order, of
// quants.h's dequant() for the same block (nvcc may fuse a multiply-add where
// the host does not; the difference is within one rounding).
//
// Blocks are only 2-byte aligned (sizes 18, 20, 22, 34, 210 bytes), so bytes
// are gathered with 16-bit loads. The functions are __host__ __device__ so
// that a host program built by nvcc can compare them with quants.h (every
// element of random blocks of every type, and that the parts of a block cover
// each element exactly once: bit-identical).
//
// Test: tests/kernels/mmq_formats_check.cu on the host (parts, elem() and
// run_dot() of every integer-form type against quants.h); test-backend-ops -b
// STANDIN_CUDA0 -o GET_ROWS (every decodable type), and MUL_MAT (parts, in the
// mat-vec path).
#pragma once

#include <cstdint>

#include "ggml.h"
#include "kernels/common/quants.h"
#include "kernels/cuda/common.cuh"

namespace standin::kernels::cuda::dq {

using namespace standin::quant;

// Four bytes at a 2-byte aligned address, little-endian.
__host__ __device__ __forceinline__ uint32_t u32_at(const uint8_t * p) {
    const uint16_t * h = reinterpret_cast<const uint16_t *>(p);
    return uint32_t(h[0]) | (uint32_t(h[1]) << 16);
}

__host__ __device__ __forceinline__ int nib(const uint8_t * qs, int j) {  // element j of a 32-block of nibbles
    return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
}

// --- integer-form formats ----------------------------------------------------------

// The block struct of an integer-form type T (IntForm<T>::kIs false for the others).
template <int T> struct IntForm { static constexpr bool kIs = false; };
#define SI_X(type, Block, group)              \
    template <> struct IntForm<type> {        \
        static constexpr bool kIs = true;     \
        using B = Block;                      \
    };
SI_QUANT_INT_FORM_TYPES(SI_X)
#undef SI_X
template <int T> constexpr bool kIntForm = IntForm<T>::kIs;

// Alignment the blocks of an integer-form type need (1 for the byte-only
// MXFP4 and NVFP4, 2 for the others), 0 for any other type.
__host__ __device__ inline int int_form_align(int type) {
    switch (type) {
#define SI_X(t, Block, group) case t: return int(alignof(Block));
        SI_QUANT_INT_FORM_TYPES(SI_X)
#undef SI_X
        default: return 0;
    }
}

// Element i of a row of an integer-form type: its run decoded, one value taken.
__host__ __device__ inline float int_form_elem(int type, const char * row, int64_t i) {
    switch (type) {
#define SI_X(t, Block, group)                                                               \
        case t: {                                                                           \
            const Block & b = reinterpret_cast<const Block *>(row)[i / Block::kElems];      \
            const int e = int(i % Block::kElems);                                          \
            int8_t q[16];                                                                   \
            float sc = 0.0f, mn = 0.0f;                                                     \
            decode_run(b, e / 16, q, sc, mn);                                               \
            return int_form_value<Block>(sc, q[e % 16], mn);                                \
        }
        SI_QUANT_INT_FORM_TYPES(SI_X)
#undef SI_X
        default: return 0.0f;
    }
}

// Run r of a block in integer form packed for dp4a: codes 4i..4i+3 in word
// i (little-endian bytes), the scale and the minimum (0 without kMin).
struct RunWords {
    int   w[4];
    float sc, mn;
};
template <class B> __host__ __device__ __forceinline__ RunWords run_words(const uint8_t * blk, int r) {
    int8_t q[16];
    RunWords o;
    o.sc = 0.0f;
    o.mn = 0.0f;
    decode_run(*reinterpret_cast<const B *>(blk), r, q, o.sc, o.mn);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        o.w[i] = int(uint32_t(uint8_t(q[4 * i])) | (uint32_t(uint8_t(q[4 * i + 1])) << 8) |
                     (uint32_t(uint8_t(q[4 * i + 2])) << 16) | (uint32_t(uint8_t(q[4 * i + 3])) << 24));
    }
    return o;
}

// Four int8 products summed into c (dp4a; the host program checking these
// decoders computes the same sum).
__host__ __device__ __forceinline__ int dp4a_hd(int a, int b, int c) {
#if defined(__CUDA_ARCH__)
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; ++i) c += int(int8_t(uint8_t(uint32_t(a) >> (8 * i)))) * int(int8_t(uint8_t(uint32_t(b) >> (8 * i))));
    return c;
#endif
}

// A run's share of a dot product with 16 activation codes a (4 words) of
// scale da: sc * da * sum(q * a), less mn * da * sum(a) for formats with a
// minimum (Q2_K). The codes' products are exact in int32.
template <class B> __host__ __device__ __forceinline__ float run_dot(const RunWords & w, const int (&a)[4], float da) {
    const int s = dp4a_hd(w.w[0], a[0], dp4a_hd(w.w[1], a[1], dp4a_hd(w.w[2], a[2], dp4a_hd(w.w[3], a[3], 0))));
    float r = w.sc * (da * float(s));
    if constexpr (B::kMin) {
        constexpr int kOnes = 0x01010101;
        const int sa = dp4a_hd(kOnes, a[0], dp4a_hd(kOnes, a[1], dp4a_hd(kOnes, a[2], dp4a_hd(kOnes, a[3], 0))));
        r -= w.mn * (da * float(sa));
    }
    return r;
}

// Element i of a row of `type` (F32/F16/BF16 or any block type of quants.h).
__host__ __device__ __forceinline__ float elem(int type, const char * row, int64_t i) {
    switch (type) {
        case GGML_TYPE_F32:  return reinterpret_cast<const float *>(row)[i];
        case GGML_TYPE_F16:  return num::fp16_to_f32(reinterpret_cast<const uint16_t *>(row)[i]);
        case GGML_TYPE_BF16: return num::bf16_to_f32(reinterpret_cast<const uint16_t *>(row)[i]);
        case GGML_TYPE_Q4_0: {
            const BlockQ4_0 & b = reinterpret_cast<const BlockQ4_0 *>(row)[i / kQK];
            return float(nib(b.qs, int(i % kQK)) - 8) * half(b.d);
        }
        case GGML_TYPE_Q4_1: {
            const BlockQ4_1 & b = reinterpret_cast<const BlockQ4_1 *>(row)[i / kQK];
            return float(nib(b.qs, int(i % kQK))) * half(b.d) + half(b.m);
        }
        case GGML_TYPE_Q5_0: {
            const BlockQ5_0 & b = reinterpret_cast<const BlockQ5_0 *>(row)[i / kQK];
            const int j = int(i % kQK);
            const int q = nib(b.qs, j) | int(((u32_at(b.qh) >> j) & 1u) << 4);
            return float(q - 16) * half(b.d);
        }
        case GGML_TYPE_Q5_1: {
            const BlockQ5_1 & b = reinterpret_cast<const BlockQ5_1 *>(row)[i / kQK];
            const int j = int(i % kQK);
            const int q = nib(b.qs, j) | int(((u32_at(b.qh) >> j) & 1u) << 4);
            return float(q) * half(b.d) + half(b.m);
        }
        case GGML_TYPE_Q8_0: {
            const BlockQ8_0 & b = reinterpret_cast<const BlockQ8_0 *>(row)[i / kQK];
            return float(b.qs[i % kQK]) * half(b.d);
        }
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K: {
            const int j = int(i % kQK_K), g = j / 64, l = j % 32, hi = (j % 64) >= 32;
            const uint8_t * base = reinterpret_cast<const uint8_t *>(row) + (i / kQK_K) * block_bytes(ggml_type(type));
            // Q4_K and Q5_K share d, dmin and scales at the same offsets.
            const BlockQ4_K & b = *reinterpret_cast<const BlockQ4_K *>(base);
            int sc, m;
            k_scale_min(b.scales, 2 * g + hi, sc, m);
            int q;
            if (type == GGML_TYPE_Q4_K) {
                q = hi ? (b.qs[32 * g + l] >> 4) : (b.qs[32 * g + l] & 0x0f);
            } else {
                const BlockQ5_K & b5 = *reinterpret_cast<const BlockQ5_K *>(base);
                q = (hi ? (b5.qs[32 * g + l] >> 4) : (b5.qs[32 * g + l] & 0x0f)) +
                    (((b5.qh[l] >> (2 * g + hi)) & 1) << 4);
            }
            const float d = half(b.d) * float(sc), o = half(b.dmin) * float(m);
            return d * float(q) - o;
        }
        case GGML_TYPE_Q6_K: {
            const BlockQ6_K & b = reinterpret_cast<const BlockQ6_K *>(row)[i / kQK_K];
            const int j = int(i % kQK_K), h = j / 128, quarter = (j % 128) / 32, l = j % 32;
            const uint8_t ql = b.ql[64 * h + l + 32 * (quarter & 1)];
            const int hb = (b.qh[32 * h + l] >> (2 * quarter)) & 3;
            const int q = ((quarter >= 2 ? (ql >> 4) : (ql & 0x0f)) | (hb << 4)) - 32;
            return half(b.d) * float(b.scales[8 * h + l / 16 + 2 * quarter]) * float(q);
        }
        default:
            return int_form_elem(type, row, i);  // 0 for a type quants.h does not decode
    }
}

// --- parts: 8 values of a block, two runs of 4 -----------------------------------

template <int T> struct Part;

// 32-element formats: part p (0..3) takes qs bytes 4p..4p+3, i.e. elements
// 4p.. (low nibbles) and 16+4p.. (high nibbles).
template <> struct Part<GGML_TYPE_Q4_0> {
    static constexpr int kQKb = kQK, kParts = 4, kBytes = sizeof(BlockQ4_0);
    __host__ __device__ static void get(const uint8_t * blk, int p, float v[8], int & a, int & b) {
        const BlockQ4_0 & x = *reinterpret_cast<const BlockQ4_0 *>(blk);
        const float d = half(x.d);
        const uint32_t w = u32_at(x.qs + 4 * p);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            v[i]     = float(int((w >> (8 * i)) & 15u) - 8) * d;
            v[i + 4] = float(int((w >> (8 * i + 4)) & 15u) - 8) * d;
        }
        a = 4 * p;
        b = 16 + 4 * p;
    }
};

template <> struct Part<GGML_TYPE_Q4_1> {
    static constexpr int kQKb = kQK, kParts = 4, kBytes = sizeof(BlockQ4_1);
    __host__ __device__ static void get(const uint8_t * blk, int p, float v[8], int & a, int & b) {
        const BlockQ4_1 & x = *reinterpret_cast<const BlockQ4_1 *>(blk);
        const float d = half(x.d), m = half(x.m);
        const uint32_t w = u32_at(x.qs + 4 * p);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            v[i]     = float((w >> (8 * i)) & 15u) * d + m;
            v[i + 4] = float((w >> (8 * i + 4)) & 15u) * d + m;
        }
        a = 4 * p;
        b = 16 + 4 * p;
    }
};

template <> struct Part<GGML_TYPE_Q5_0> {
    static constexpr int kQKb = kQK, kParts = 4, kBytes = sizeof(BlockQ5_0);
    __host__ __device__ static void get(const uint8_t * blk, int p, float v[8], int & a, int & b) {
        const BlockQ5_0 & x = *reinterpret_cast<const BlockQ5_0 *>(blk);
        const float d = half(x.d);
        const uint32_t w = u32_at(x.qs + 4 * p), qh = u32_at(x.qh);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int j  = 4 * p + i;
            const int lo = int((w >> (8 * i)) & 15u) | int(((qh >> j) & 1u) << 4);
            const int hi = int((w >> (8 * i + 4)) & 15u) | int(((qh >> (j + 16)) & 1u) << 4);
            v[i]     = float(lo - 16) * d;
            v[i + 4] = float(hi - 16) * d;
        }
        a = 4 * p;
        b = 16 + 4 * p;
    }
};

template <> struct Part<GGML_TYPE_Q5_1> {
    static constexpr int kQKb = kQK, kParts = 4, kBytes = sizeof(BlockQ5_1);
    __host__ __device__ static void get(const uint8_t * blk, int p, float v[8], int & a, int & b) {
        const BlockQ5_1 & x = *reinterpret_cast<const BlockQ5_1 *>(blk);
        const float d = half(x.d), m = half(x.m);
        const uint32_t w = u32_at(x.qs + 4 * p), qh = u32_at(x.qh);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int j  = 4 * p + i;
            const int lo = int((w >> (8 * i)) & 15u) | int(((qh >> j) & 1u) << 4);
            const int hi = int((w >> (8 * i + 4)) & 15u) | int(((qh >> (j + 16)) & 1u) << 4);
            v[i]     = float(lo) * d + m;
            v[i + 4] = float(hi) * d + m;
        }
        a = 4 * p;
        b = 16 + 4 * p;
    }
};

// Q8_0: part p is the 8 consecutive elements 8p..8p+7.
template <> struct Part<GGML_TYPE_Q8_0> {
    static constexpr int kQKb = kQK, kParts = 4, kBytes = sizeof(BlockQ8_0);
    __host__ __device__ static void get(const uint8_t * blk, int p, float v[8], int & a, int & b) {
        const BlockQ8_0 & x = *reinterpret_cast<const BlockQ8_0 *>(blk);
        const float d = half(x.d);
        const uint8_t * q = reinterpret_cast<const uint8_t *>(x.qs) + 8 * p;
        const uint32_t w0 = u32_at(q), w1 = u32_at(q + 4);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            v[i]     = float(int8_t(uint8_t(w0 >> (8 * i)))) * d;
            v[i + 4] = float(int8_t(uint8_t(w1 >> (8 * i)))) * d;
        }
        a = 8 * p;
        b = 8 * p + 4;
    }
};

// Q4_K / Q5_K: the scales and offsets of sub-blocks 2g and 2g+1 of a block.
template <class Block>
__host__ __device__ inline void k_group_scales(const Block & x, int g, float & d0, float & o0, float & d1, float & o1) {
    int sc0, m0, sc1, m1;
    k_scale_min(x.scales, 2 * g, sc0, m0);
    k_scale_min(x.scales, 2 * g + 1, sc1, m1);
    const float d = half(x.d), dmin = half(x.dmin);
    d0 = d * float(sc0), o0 = dmin * float(m0);
    d1 = d * float(sc1), o1 = dmin * float(m1);
}

// Q4_K / Q5_K: part p (0..31) of group g = p/8 takes qs bytes 32g + l0..+3
// (l0 = 4 (p%8)): elements 64g + l0.. (sub-block 2g, low nibbles) and
// 64g + 32 + l0.. (sub-block 2g+1, high nibbles).
template <> struct Part<GGML_TYPE_Q4_K> {
    static constexpr int kQKb = kQK_K, kParts = 32, kBytes = sizeof(BlockQ4_K);
    __host__ __device__ static void get(const uint8_t * blk, int p, float v[8], int & a, int & b) {
        const BlockQ4_K & x = *reinterpret_cast<const BlockQ4_K *>(blk);
        const int g = p / 8, l0 = 4 * (p % 8);
        float d0, o0, d1, o1;
        k_group_scales(x, g, d0, o0, d1, o1);
        const uint32_t w = u32_at(x.qs + 32 * g + l0);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            v[i]     = d0 * float((w >> (8 * i)) & 15u) - o0;
            v[i + 4] = d1 * float((w >> (8 * i + 4)) & 15u) - o1;
        }
        a = 64 * g + l0;
        b = 64 * g + 32 + l0;
    }
};

template <> struct Part<GGML_TYPE_Q5_K> {
    static constexpr int kQKb = kQK_K, kParts = 32, kBytes = sizeof(BlockQ5_K);
    __host__ __device__ static void get(const uint8_t * blk, int p, float v[8], int & a, int & b) {
        const BlockQ5_K & x = *reinterpret_cast<const BlockQ5_K *>(blk);
        const int g = p / 8, l0 = 4 * (p % 8);
        float d0, o0, d1, o1;
        k_group_scales(x, g, d0, o0, d1, o1);
        const uint32_t w = u32_at(x.qs + 32 * g + l0), h = u32_at(x.qh + l0);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t hb = h >> (8 * i);
            const int lo = int((w >> (8 * i)) & 15u) + int(((hb >> (2 * g)) & 1u) << 4);
            const int hi = int((w >> (8 * i + 4)) & 15u) + int(((hb >> (2 * g + 1)) & 1u) << 4);
            v[i]     = d0 * float(lo) - o0;
            v[i + 4] = d1 * float(hi) - o1;
        }
        a = 64 * g + l0;
        b = 64 * g + 32 + l0;
    }
};

// Q6_K: part p (0..31): half h = p/16, j = (p/8)%2, l0 = 4 (p%8). ql bytes
// 64h + 32j + l0..+3 give elements 128h + 32j + l0.. (low nibbles, qh bits
// 2j..2j+1) and 128h + 32j + 64 + l0.. (high nibbles, qh bits 2j+4..2j+5).
template <> struct Part<GGML_TYPE_Q6_K> {
    static constexpr int kQKb = kQK_K, kParts = 32, kBytes = sizeof(BlockQ6_K);
    __host__ __device__ static void get(const uint8_t * blk, int p, float v[8], int & a, int & b) {
        const BlockQ6_K & x = *reinterpret_cast<const BlockQ6_K *>(blk);
        const int h = p / 16, j = (p / 8) % 2, l0 = 4 * (p % 8), s = l0 / 16;
        const float d = half(x.d);
        const float dlo = d * float(x.scales[8 * h + s + 2 * j]);
        const float dhi = d * float(x.scales[8 * h + s + 2 * j + 4]);
        const uint32_t w = u32_at(x.ql + 64 * h + 32 * j + l0), qh = u32_at(x.qh + 32 * h + l0);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t hb = qh >> (8 * i);
            const int lo = int(((w >> (8 * i)) & 15u) | (((hb >> (2 * j)) & 3u) << 4)) - 32;
            const int hi = int(((w >> (8 * i + 4)) & 15u) | (((hb >> (2 * j + 4)) & 3u) << 4)) - 32;
            v[i]     = dlo * float(lo);
            v[i + 4] = dhi * float(hi);
        }
        a = 128 * h + 32 * j + l0;
        b = 128 * h + 32 * j + 64 + l0;
    }
};

} // namespace standin::kernels::cuda::dq
