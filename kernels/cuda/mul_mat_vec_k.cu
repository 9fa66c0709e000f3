// MUL_MAT of up to 4 src1 columns (token generation; the kernel table takes
// it up to 2, plan::vec_int) with weights in the K formats Q2_K, Q3_K, Q4_K,
// Q5_K and Q6_K, in integers, the way mul_mat_vec_q8.cu does it for the
// 32-element formats:
//   - src1 is quantized per 32 values (Note [integer activations],
//     mul_mat.cuh: codes and {d, d * sum} per 32);
//   - each super-block of 256 weights goes to 8 lanes. A lane multiplies its
//     share of the codes (without the format's offset or minimum) with the
//     activation codes by dp4a and applies the sub-block scales once per
//     sub-block: Q4_K/Q5_K add d * sc * da * sum(q * qa) and subtract
//     dmin * m * da * sum(qa) (the activation sum comes with the scale, so
//     the minimum costs one multiply per sub-block); Q6_K's codes are made
//     signed (q - 32) in registers first, Q3_K's (q - 4) too; Q2_K's
//     minimum changes every 16 elements, so its lanes sum their own
//     activation codes for it.
// Memory: Q4_K and Q5_K super-blocks are 144 and 176 bytes, multiples of 16,
// so a lane reads its 16 code bytes and the block's 16-byte header with
// 16-byte loads; Q6_K's are 210 bytes and Q3_K's 110 (2-byte aligned), so a
// lane reads 4-byte words around its 8-byte pieces and realigns them with
// funnel shifts; Q2_K's 84 bytes are read as 4-byte words. The
// next super-block's weights are loaded before the current one is decoded,
// and a model's first (weights_fixed) before the wait on the previous kernel
// (Note [dependent launch]). A warp takes RW rows by one column, the activation loads shared
// by the rows, or one row by NC columns, the weight loads shared by the
// columns; short matrices and long rows split K over the 4 warps of a block,
// which meet in shared memory.
// Same launch groups (Q8Group), fused ADD epilogue, row sums and rope
// epilogue as the 32-element mat-vec; one-column groups may hold a second K
// format from Q8Group::second on (launch_qk2, one row per warp).
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT -p 'type_a=(q[2-6]_K|iq[23]_.*)' (with
// GGML_STANDIN_MMQ=off for 3 and 4 columns) and the MUL_MAT_VEC_FUSION cases;
// time with `standin matmul` (scripts/gpu-check kquant).
#include "diag/check.h"
#include "kernels/common/quants.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mmq_formats.cuh"
#include "kernels/cuda/mul_mat.cuh"

namespace standin::kernels::cuda::mm {

namespace {

constexpr int kWarps = 4;
constexpr int kLanesPerBlock = 8;                        // lanes sharing one super-block
constexpr int kBlocksPerWarp = 32 / kLanesPerBlock;      // super-blocks a warp decodes at once
constexpr int kQK = quant::kQK_K;

__device__ __forceinline__ int dot4(const uint4 & w, const int4 & a) {
    return __dp4a(int(w.x), a.x, __dp4a(int(w.y), a.y, __dp4a(int(w.z), a.z, __dp4a(int(w.w), a.w, 0))));
}

__device__ __forceinline__ uint4 low_nibbles(const uint4 & v) {
    return make_uint4(v.x & 0x0f0f0f0fu, v.y & 0x0f0f0f0fu, v.z & 0x0f0f0f0fu, v.w & 0x0f0f0f0fu);
}

__device__ __forceinline__ uint4 high_nibbles(const uint4 & v) {
    return low_nibbles(make_uint4(v.x >> 4, v.y >> 4, v.z >> 4, v.w >> 4));
}

// Byte i (0..11) of the 12 scale bytes a Q4_K/Q5_K header holds in y, z, w.
__device__ __forceinline__ int scale_byte(const uint4 & h, int i) {
    const uint32_t w = i < 4 ? h.y : i < 8 ? h.z : h.w;
    return int((w >> (8 * (i & 3))) & 0xffu);
}

// Scale and minimum of sub-block j, as quant::k_scale_min reads them.
__device__ __forceinline__ void scale_min(const uint4 & h, int j, int & sc, int & m) {
    if (j < 4) {
        sc = scale_byte(h, j) & 63;
        m = scale_byte(h, j + 4) & 63;
    } else {
        sc = (scale_byte(h, j + 4) & 0x0f) | ((scale_byte(h, j - 4) >> 6) << 4);
        m = (scale_byte(h, j + 4) >> 4) | ((scale_byte(h, j) >> 6) << 4);
    }
}

// 8 bytes at a 2-byte aligned address: two 4-byte loads, or three shifted
// together when the address is not 4-byte aligned. The words then cover the
// 2 bytes before and after the piece: after it, still inside the super-block
// for every piece read here; before it, at most the previous super-block's
// last bytes (a tensor's first super-block is 4-byte aligned).
__device__ __forceinline__ uint2 load8_a2(const uint8_t * p) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    const uint32_t * w = reinterpret_cast<const uint32_t *>(a & ~uintptr_t(3));
    const unsigned sh = unsigned(a & 2u) * 8u;
    const uint32_t x0 = __ldg(w), x1 = __ldg(w + 1), x2 = sh != 0 ? __ldg(w + 2) : 0u;
    return make_uint2(__funnelshift_r(x0, x1, sh), __funnelshift_r(x1, x2, sh));
}

// A format: what a lane t (0..7 of its super-block) loads of a row's block
// (W), of the activations (A, shared by the rows of a warp), and its share of
// the row's dot product.
template <int T> struct KFmt;

// Q4_K and Q5_K: lane t takes the 64-element group g = t / 2 and within it
// elements 16h..16h+15 (h = t % 2) of both sub-blocks 2g (low nibbles) and
// 2g+1 (high nibbles).
struct KActPair {
    int4   a0, a1;    // codes of sub-blocks 2g and 2g+1 at 16h
    float2 d0, d1;    // their {d, d * sum}
};

__device__ __forceinline__ KActPair load_act_pair(const int8_t * q, const float2 * ds, int t) {
    const int g = t >> 1, h = t & 1;
    KActPair a;
    a.a0 = *reinterpret_cast<const int4 *>(q + 64 * g + 16 * h);
    a.a1 = *reinterpret_cast<const int4 *>(q + 64 * g + 32 + 16 * h);
    a.d0 = ds[2 * g];
    a.d1 = ds[2 * g + 1];
    return a;
}

// The sub-block sums s0, s1 of a lane against the scales of its header.
__device__ __forceinline__ float scaled_pair(const uint4 & hd, int s0, int s1, const KActPair & a, int t) {
    const int g = t >> 1;
    int sc0, m0, sc1, m1;
    scale_min(hd, 2 * g, sc0, m0);
    scale_min(hd, 2 * g + 1, sc1, m1);
    const float d = quant::half(uint16_t(hd.x & 0xffffu)), dmin = quant::half(uint16_t(hd.x >> 16));
    float r = d * (float(sc0) * a.d0.x * float(s0) + float(sc1) * a.d1.x * float(s1));
    // The minimum applies to all 32 codes of a sub-block: one lane of the pair subtracts it.
    if ((t & 1) == 0) r -= dmin * (float(m0) * a.d0.y + float(m1) * a.d1.y);
    return r;
}

template <> struct KFmt<GGML_TYPE_Q4_K> {
    static constexpr int kBytes = sizeof(quant::BlockQ4_K), kMaxRW = 4;
    struct W { uint4 hd, qs; };
    using A = KActPair;
    __device__ static W load(const uint8_t * b, int t) {
        const int g = t >> 1, h = t & 1;
        W w;
        w.hd = __ldg(reinterpret_cast<const uint4 *>(b));
        w.qs = __ldg(reinterpret_cast<const uint4 *>(b + 16 + 32 * g + 16 * h));
        return w;
    }
    __device__ static A load_act(const int8_t * q, const float2 * ds, int t) { return load_act_pair(q, ds, t); }
    __device__ static float dot(const W & w, const A & a, int t) {
        return scaled_pair(w.hd, dot4(low_nibbles(w.qs), a.a0), dot4(high_nibbles(w.qs), a.a1), a, t);
    }
};

template <> struct KFmt<GGML_TYPE_Q5_K> {
    static constexpr int kBytes = sizeof(quant::BlockQ5_K), kMaxRW = 2;
    struct W { uint4 hd, qh, qs; };
    using A = KActPair;
    __device__ static W load(const uint8_t * b, int t) {
        const int g = t >> 1, h = t & 1;
        W w;
        w.hd = __ldg(reinterpret_cast<const uint4 *>(b));
        w.qh = __ldg(reinterpret_cast<const uint4 *>(b + 16 + 16 * h));
        w.qs = __ldg(reinterpret_cast<const uint4 *>(b + 48 + 32 * g + 16 * h));
        return w;
    }
    __device__ static A load_act(const int8_t * q, const float2 * ds, int t) { return load_act_pair(q, ds, t); }
    // Bit `bit` of each byte of v to bit 4.
    __device__ static uint4 fifth(const uint4 & v, int bit) {
        const auto f = [bit](uint32_t x) { return ((x >> bit) & 0x01010101u) << 4; };
        return make_uint4(f(v.x), f(v.y), f(v.z), f(v.w));
    }
    __device__ static uint4 with(const uint4 & lo, const uint4 & hi) {
        return make_uint4(lo.x | hi.x, lo.y | hi.y, lo.z | hi.z, lo.w | hi.w);
    }
    __device__ static float dot(const W & w, const A & a, int t) {
        const int g = t >> 1;
        const uint4 q0 = with(low_nibbles(w.qs), fifth(w.qh, 2 * g));
        const uint4 q1 = with(high_nibbles(w.qs), fifth(w.qh, 2 * g + 1));
        return scaled_pair(w.hd, dot4(q0, a.a0), dot4(q1, a.a1), a, t);
    }
};

// Q6_K, Q2_K and Q3_K split a block alike: lane t takes half n = t / 4 (128
// elements) and in it positions l = 8p..8p+7 (p = t % 4) of its four
// 32-element sub-blocks j (Q2_K's and Q3_K's 2-bit codes: bits 2j, 2j+1 of
// qs[32n + l]); element 128n + 32j + l has scale (and minimum) 8n + 2j + l / 16.
struct KActQuarters {
    int2  a[4];  // codes of sub-block 4n + j at 8p
    float d[4];  // their scales
    int   sum[4];  // Q2_K: sum of a[j]'s 8 codes (its minimum changes every 16 elements, ds.y spans 32)
};

template <bool kSums>
__device__ __forceinline__ KActQuarters load_act_quarters(const int8_t * q, const float2 * ds, int t) {
    const int n = t >> 2, p = t & 3;
    KActQuarters a;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        a.a[j] = *reinterpret_cast<const int2 *>(q + 128 * n + 32 * j + 8 * p);
        a.d[j] = ds[4 * n + j].x;
        a.sum[j] = kSums ? __dp4a(0x01010101, a.a[j].x, __dp4a(0x01010101, a.a[j].y, 0)) : 0;
    }
    return a;
}

// Q6_K: lane t takes half n = t / 4 of the block (128 elements) and in it
// positions l = 8p..8p+7 (p = t % 4) of each of its four 32-element
// quarters k, whose codes are ql[64n + l] (k = 0: low, k = 2: high nibble),
// ql[64n + 32 + l] (k = 1, 3) and two bits of qh[32n + l] (bits 2k, 2k+1);
// element 128n + 32k + l has scale scales[8n + 2k + l / 16].
template <> struct KFmt<GGML_TYPE_Q6_K> {
    static constexpr int kBytes = sizeof(quant::BlockQ6_K), kMaxRW = 4;
    struct W { uint2 la, lb, qh, sc; uint32_t d; };
    using A = KActQuarters;
    __device__ static W load(const uint8_t * b, int t) {
        const int n = t >> 2, p = t & 3;
        W w;
        w.la = load8_a2(b + 64 * n + 8 * p);
        w.lb = load8_a2(b + 64 * n + 32 + 8 * p);
        w.qh = load8_a2(b + 128 + 32 * n + 8 * p);
        w.sc = load8_a2(b + 192 + 8 * n);
        w.d = __ldg(reinterpret_cast<const uint16_t *>(b + 208));
        return w;
    }
    __device__ static A load_act(const int8_t * q, const float2 * ds, int t) {
        return load_act_quarters<false>(q, ds, t);
    }
    __device__ static float dot(const W & w, const A & a, int t) {
        const int p = t & 3;
        int s[4] = {0, 0, 0, 0};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint32_t la = h ? w.la.y : w.la.x, lb = h ? w.lb.y : w.lb.x, qh = h ? w.qh.y : w.qh.x;
            const uint32_t q[4] = {
                (la & 0x0f0f0f0fu) | ((qh << 4) & 0x30303030u),
                (lb & 0x0f0f0f0fu) | ((qh << 2) & 0x30303030u),
                ((la >> 4) & 0x0f0f0f0fu) | (qh & 0x30303030u),
                ((lb >> 4) & 0x0f0f0f0fu) | ((qh >> 2) & 0x30303030u),
            };
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                // Codes 0..63 less 32, per byte (no borrow crosses bytes).
                const int v = int(__vsub4(q[k], 0x20202020u));
                s[k] = __dp4a(v, h ? a.a[k].y : a.a[k].x, s[k]);
            }
        }
        // Scales 8n + 2k + p / 2 of the block's 16: bytes p / 2 + 2k of the 8 at 8n.
        float r = 0.0f;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int i = (p >> 1) + 2 * k;
            const int sc = int(int8_t(((i < 4 ? w.sc.x : w.sc.y) >> (8 * (i & 3))) & 0xffu));
            r = fmaf(float(sc) * a.d[k], float(s[k]), r);
        }
        return quant::half(uint16_t(w.d)) * r;
    }
};

// Four bytes at a 2-byte aligned address, from two 2-byte loads.
__device__ __forceinline__ uint32_t load4_a2(const uint8_t * p) {
    const uint16_t * h = reinterpret_cast<const uint16_t *>(p);
    return uint32_t(__ldg(h)) | (uint32_t(__ldg(h + 1)) << 16);
}

// Byte i (0..7) of a uint2.
__device__ __forceinline__ uint32_t byte_of(const uint2 & v, int i) {
    return ((i < 4 ? v.x : v.y) >> (8 * (i & 3))) & 0xffu;
}

// Q2_K (84-byte blocks, 4-byte aligned rows: launch_q8 checks): w = d * sc *
// q - dmin * m per 16 elements, sc and m the nibbles of scales[r]. A lane adds
// da * (d * sc * sum(q * qa) - dmin * m * sum(qa)) per sub-block.
template <> struct KFmt<GGML_TYPE_Q2_K> {
    static constexpr int kBytes = sizeof(quant::BlockQ2_K), kMaxRW = 4;
    struct W { uint2 qs, sc; uint32_t dd; };
    using A = KActQuarters;
    __device__ static W load(const uint8_t * b, int t) {
        const int n = t >> 2, p = t & 3;
        const uint32_t * w = reinterpret_cast<const uint32_t *>(b);
        W r;
        r.qs = make_uint2(__ldg(w + 4 + 8 * n + 2 * p), __ldg(w + 5 + 8 * n + 2 * p));
        r.sc = make_uint2(__ldg(w + 2 * n), __ldg(w + 2 * n + 1));
        r.dd = __ldg(w + 20);
        return r;
    }
    __device__ static A load_act(const int8_t * q, const float2 * ds, int t) {
        return load_act_quarters<true>(q, ds, t);
    }
    __device__ static float dot(const W & w, const A & a, int t) {
        const int p = t & 3;
        float rd = 0.0f, rm = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int s = __dp4a(int((w.qs.x >> (2 * j)) & 0x03030303u), a.a[j].x,
                                 __dp4a(int((w.qs.y >> (2 * j)) & 0x03030303u), a.a[j].y, 0));
            const uint32_t scm = byte_of(w.sc, (p >> 1) + 2 * j);
            rd = fmaf(a.d[j], float(int(scm & 15u) * s), rd);
            rm = fmaf(a.d[j], float(int(scm >> 4) * a.sum[j]), rm);
        }
        return quant::half(uint16_t(w.dd & 0xffffu)) * rd - quant::half(uint16_t(w.dd >> 16)) * rm;
    }
};

// Q3_K (110-byte blocks, 2-byte aligned): the third bit of element 128n + 32j
// + l is bit 4n + j of hmask[l] (clear: code - 4); 6-bit signed scales, low
// nibbles in scales[0..7] (nibble n of byte i % 8 for scale i), top bits in
// scales[8..11] (bits 2 (i / 4) of byte 8 + i % 4), offset 32.
template <> struct KFmt<GGML_TYPE_Q3_K> {
    static constexpr int kBytes = sizeof(quant::BlockQ3_K), kMaxRW = 4;
    struct W { uint2 qs, hm, sl; uint32_t sh, d; };
    using A = KActQuarters;
    __device__ static W load(const uint8_t * b, int t) {
        const int n = t >> 2, p = t & 3;
        W w;
        w.qs = load8_a2(b + 32 + 32 * n + 8 * p);
        w.hm = load8_a2(b + 8 * p);
        w.sl = load8_a2(b + 96);
        w.sh = load4_a2(b + 104);
        w.d = __ldg(reinterpret_cast<const uint16_t *>(b + 108));
        return w;
    }
    __device__ static A load_act(const int8_t * q, const float2 * ds, int t) {
        return load_act_quarters<false>(q, ds, t);
    }
    __device__ static float dot(const W & w, const A & a, int t) {
        const int n = t >> 2, p = t & 3;
        float r = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const auto code = [&](uint32_t qs, uint32_t hm) {
                // Codes 0..7 less 4, per byte (no borrow crosses bytes).
                const uint32_t x = ((qs >> (2 * j)) & 0x03030303u) | (((hm >> (4 * n + j)) & 0x01010101u) << 2);
                return int(__vsub4(x, 0x04040404u));
            };
            const int s = __dp4a(code(w.qs.x, w.hm.x), a.a[j].x, __dp4a(code(w.qs.y, w.hm.y), a.a[j].y, 0));
            const int i = (p >> 1) + 2 * j;  // the scale's byte in scales[0..7] (scale 8n + i)
            const int lo = int(byte_of(w.sl, i) >> (4 * n)) & 15;
            const int hi = int(w.sh >> (8 * (i & 3) + 2 * (2 * n + (i >> 2)))) & 3;
            r = fmaf(a.d[j], float(((lo | (hi << 4)) - 32) * s), r);
        }
        return quant::half(uint16_t(w.d)) * r;
    }
};

// The IQ2/IQ3 grids through mmq's formats (mmq_formats.cuh, one statement of
// each layout): lane t takes sub-block t of the super-block, its 8 code words
// (Fmt::codes for quads 0..3) and scales decoded in load(), a super-block
// ahead of their use, so the grid lookups' latency hides behind the current
// dot products. The block is read in place (2-byte aligned halves and bytes).
template <int T> struct GridKFmt {
    using F = mmq::Fmt<T>;
    static constexpr int kBytes = F::kBytes, kMaxRW = 2;
    struct W {
        uint32_t lo[4], hi[4];
        float    sc, mn;
    };
    struct A {
        int4  a0, a1;  // codes of elements 0..15 and 16..31 of sub-block t
        float d;
    };
    __device__ static W load(const uint8_t * b, int t) {
        W w;
#pragma unroll
        for (int u = 0; u < 4; ++u) F::codes(b, t, u, w.lo[u], w.hi[u]);
        F::scale(b, t, w.sc, w.mn);
        return w;
    }
    __device__ static A load_act(const int8_t * q, const float2 * ds, int t) {
        A a;
        a.a0 = *reinterpret_cast<const int4 *>(q + 32 * t);
        a.a1 = *reinterpret_cast<const int4 *>(q + 32 * t + 16);
        a.d = ds[t].x;
        return a;
    }
    __device__ static float dot(const W & w, const A & a, int) {
        const int a0[4] = {a.a0.x, a.a0.y, a.a0.z, a.a0.w}, a1[4] = {a.a1.x, a.a1.y, a.a1.z, a.a1.w};
        int lo = 0, hi = 0;
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            lo = __dp4a(int(w.lo[u]), a0[u], lo);
            hi = __dp4a(int(w.hi[u]), a1[u], hi);
        }
        // kSplit16: sc scales elements 0..15, mn 16..31 (IQ2_XS, IQ2_S).
        return a.d * (F::kSplit16 ? fmaf(w.sc, float(lo), w.mn * float(hi)) : w.sc * float(lo + hi));
    }
};
template <> struct KFmt<GGML_TYPE_IQ2_XXS> : GridKFmt<GGML_TYPE_IQ2_XXS> {};
template <> struct KFmt<GGML_TYPE_IQ2_XS> : GridKFmt<GGML_TYPE_IQ2_XS> {};
template <> struct KFmt<GGML_TYPE_IQ2_S> : GridKFmt<GGML_TYPE_IQ2_S> {};
template <> struct KFmt<GGML_TYPE_IQ3_XXS> : GridKFmt<GGML_TYPE_IQ3_XXS> {};
template <> struct KFmt<GGML_TYPE_IQ3_S> : GridKFmt<GGML_TYPE_IQ3_S> {};

// Blocks per SM the register budget must allow: a warp holds two super-blocks
// of weights per row (the one decoded, the one loading), so more rows per warp
// take more registers and fewer warps keep as many bytes in flight (Q5_K's
// rows hold a third word, its fifth bits); several columns hold their
// activations. Chosen where ptxas spills at most 16 bytes (none for most).
template <int T, int NC, int RW>
constexpr int kMinBlocks = NC > 1 || RW >= 4 || (RW == 2 && T == GGML_TYPE_Q5_K) ? 4 : RW == 2 ? 5 : 6;

// A launch's blocks per SM: those of the format that allows fewer.
template <int T, int U, int NC, int RW>
constexpr int kPairMinBlocks = kMinBlocks<T, NC, RW> < kMinBlocks<U, NC, RW> ? kMinBlocks<T, NC, RW> : kMinBlocks<U, NC, RW>;

// The sums of one row group over one matrix: RW consecutive weight rows from
// `row` by NC columns from col0 (one weight load serves them all), this
// warp's share of K (warp `sub` of the R that interleave along the row; the
// warp's 4 lane groups take consecutive super-blocks).
// Note [activations ahead]
// With kActAhead a step's activation words are asked for a step ahead, with
// its weights, instead of at the top of the step that uses them, where every
// step waited for them (ncu on the H100, Q4_K 14336 x 4096: waits on global
// loads 47% of the cycles between a warp's issues, L1 hit rate of all its
// loads 46%). One column of one format only: the launch bounds leave no
// room for it at two columns (4096 x 14336 Q4_K at 2 columns 30.5 -> 36.4 us)
// nor in the two-format launch (ptxas: about 300 bytes spilled). Measured on
// the H100 (results/h200/summary-105.txt, calls 2 and 3): 8B Q4_K_M tg128
// 294.77 / 292.28 / 293.23 -> 302.07 / 305.47 / 299.05 t/s in alternating
// runs (ggml-cuda 258.95 / 255.28 / 258.94), although one product alone is no
// faster (`standin matmul --n 1`, Q4_K 14336 x 4096 20.8 / 21.8 -> 21.7 / 21.6
// us). The same in the 32-element formats' register mat-vec (8B Q8_0 277.19 /
// 270.64 -> 276.02 / 275.13) and, asking before the wait on the copy, in the
// Q4_0 bulk mat-vec (8B Q4_0 424.78 / 428.80 -> 418.47 / 419.12) gained
// nothing there, so those kernels are unchanged.
template <int T, int NC, int R, int RW, bool kActAhead>
__device__ __forceinline__ void k_row_sums(const Q8Args & p, const uint8_t * row, int64_t col0, bool live, int lane,
                                           int sub, float (&acc)[RW * NC]) {
    using F = KFmt<T>;
    const int t = lane % kLanesPerBlock;
    const int64_t n_sb = p.K / kQK;
    const int ncols = int(p.N);
    constexpr int64_t kStride = int64_t(R) * kBlocksPerWarp;
    typename F::W w[RW];
    typename F::A a[NC];
    // Columns past N read column 0 again (their sums are not stored).
    auto load_acts = [&](int64_t sb, typename F::A (&to)[NC]) {
#pragma unroll
        for (int c = 0; c < NC; ++c) {
            const int64_t col = col0 + (c < ncols ? c : 0);
            to[c] = F::load_act(p.q + col * p.K + sb * kQK, p.ds + col * (p.K / 32) + sb * (kQK / 32), t);
        }
    };
    int64_t s = live ? int64_t(sub) * kBlocksPerWarp + lane / kLanesPerBlock : n_sb;
    if (!p.early) pdl_wait();
    if (s < n_sb) {
#pragma unroll
        for (int r = 0; r < RW; ++r) w[r] = F::load(row + r * p.a_nb1 + s * F::kBytes, t);
    }
    pdl_wait();
    pdl_trigger();
    if (kActAhead && s < n_sb) load_acts(s, a);
    for (; s < n_sb; s += kStride) {
        if (!kActAhead) load_acts(s, a);
        typename F::W next[RW];
        typename F::A next_a[NC];
        const bool more = s + kStride < n_sb;
        if (more) {
#pragma unroll
            for (int r = 0; r < RW; ++r) next[r] = F::load(row + r * p.a_nb1 + (s + kStride) * F::kBytes, t);
            if (kActAhead) load_acts(s + kStride, next_a);
        }
#pragma unroll
        for (int r = 0; r < RW; ++r) {
#pragma unroll
            for (int c = 0; c < NC; ++c) acc[r * NC + c] += F::dot(w[r], a[c], t);
        }
        if (more) {
#pragma unroll
            for (int r = 0; r < RW; ++r) w[r] = next[r];
            if (kActAhead) {
#pragma unroll
                for (int c = 0; c < NC; ++c) a[c] = next_a[c];
            }
        }
    }
}

// RW consecutive weight rows per warp (every member's M a multiple of RW) by
// NC columns; R warps per row group (1 or kWarps). Members from g.second on
// have weights of type U (U == T: one type).
template <int T, int U, int NC, int R, int RW, bool kRope>
__global__ void __launch_bounds__(kWarps * 32, kPairMinBlocks<T, U, NC, RW>) mmv_k_kernel(const __grid_constant__ Q8Group g) {
    __shared__ float part_sums[kWarps][RW * NC];
    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x / 32);
    const int sub = warp % R;
    const int64_t grow = (int64_t(blockIdx.x) * (kWarps / R) + warp / R) * RW;
    const bool live = grow < g.rows;
    const int j = group_member(g, grow);
    const Q8Args & p = g.m[j];
    const int64_t m = grow - g.row0[j];
    const int ncols = int(p.N);
    constexpr bool kAhead = NC == 1 && U == T;  // Note [activations ahead]

    for (uint32_t z = blockIdx.y; z < matrix_count(p); z += gridDim.y) {
        const MatrixAt at = matrix_at(p, m, z);
        float acc[RW * NC];
#pragma unroll
        for (int o = 0; o < RW * NC; ++o) acc[o] = 0.0f;
        if constexpr (U != T) {
            if (j >= g.second) {
                k_row_sums<U, NC, R, RW, kAhead>(p, at.row, at.col0, live, lane, sub, acc);
            } else {
                k_row_sums<T, NC, R, RW, kAhead>(p, at.row, at.col0, live, lane, sub, acc);
            }
        } else {
            k_row_sums<T, NC, R, RW, kAhead>(p, at.row, at.col0, live, lane, sub, acc);
        }
        if (!at.live) {
#pragma unroll
            for (int o = 0; o < RW * NC; ++o) acc[o] = 0.0f;
        }
        end_row_group<NC, R, kWarps, RW, kRope>(p, acc, part_sums, live, ncols,
                                                p.d + at.i12 * p.d_nb2 + at.i13 * p.d_nb3 + m * 4, m);
    }
}

template <int T, int U, int NC, int R, int RW> void launch_k(const Q8Group & g, cudaStream_t st) {
    constexpr int kGroups = kWarps / R;
    const dim3 grid(unsigned((g.rows / RW + kGroups - 1) / kGroups), grid_yz(g.m[0].ne12 * g.m[0].ne13));
    // The RowRope epilogue in instances of their own (Note [rope epilogue]):
    // a rotation pair in one warp, or with a warp per row group in two.
    if constexpr (NC == 1 && (RW % 2 == 0 || (RW == 1 && R == 1))) {
        if (g.rope) return launch(mmv_k_kernel<T, U, NC, R, RW, true>, grid, dim3(kWarps * 32), 0, st, g);
    }
    SI_ASSERT_MSG(!g.rope, "a RowRope epilogue reached a K-format launch that pairs no rows");
    launch(mmv_k_kernel<T, U, NC, R, RW, false>, grid, dim3(kWarps * 32), 0, st, g);
}

static_assert(plan::kKSplitWarps == kWarps && plan::kKSplitStep == int64_t(kWarps) * kBlocksPerWarp,
              "the plan's split (mm_plan.h: k_vec_shape) is this kernel's");

template <int T, int U, int NC, int RW> void launch_k_rw(const Q8Group & g, int r, cudaStream_t st) {
    if (r > 1) {
        launch_k<T, U, NC, kWarps, RW>(g, st);
    } else {
        launch_k<T, U, NC, 1, RW>(g, st);
    }
}

bool rows_multiple_of(const Q8Group & g, int64_t rw) {
    for (int i = 0; i < g.n; ++i) {
        if (g.m[i].M % rw != 0) return false;
    }
    return true;
}

// Members [a, b) of g as a group of their own.
Q8Group members(const Q8Group & g, int a, int b) {
    Q8Group r{};
    for (int i = a; i < b; ++i) {
        r.row0[r.n] = g.row0[i] - g.row0[a];
        r.m[r.n] = g.m[i];
        r.rope = r.rope || g.m[i].rope.kind != RowRope::none;
        ++r.n;
    }
    r.rows = (b < g.n ? g.row0[b] : g.rows) - g.row0[a];
    return r;
}

// The launch's shape from the plan (mm_plan.h: k_vec_shape); several columns
// with one format only.
template <int T, int U = T> void launch_k_t(const Q8Group & g, cudaStream_t st) {
    constexpr int kMaxRW = KFmt<T>::kMaxRW < KFmt<U>::kMaxRW ? KFmt<T>::kMaxRW : KFmt<U>::kMaxRW;
    const int rows_rw = rows_multiple_of(g, 4) ? 4 : rows_multiple_of(g, 2) ? 2 : 1;
    const plan::KVecShape sh = plan::k_vec_shape(g.rows, g.m[0].K / kQK, g.m[0].ne12 * g.m[0].ne13, g.m[0].N, kMaxRW,
                                                 rows_rw, g.rope);
    if constexpr (U != T) {
        SI_ASSERT_MSG(g.m[0].N == 1, "a K-format launch of two formats has one column");
        // Two formats share a launch at one row per warp; with more, both
        // bodies' registers spill (ptxas: Q4_K and Q6_K at two rows 120
        // bytes, at four 564), so each format takes a launch of its own.
        if (sh.rw > 1) {
            launch_k_t<T>(members(g, 0, g.second), st);
            launch_k_t<U>(members(g, g.second, g.n), st);
        } else {
            launch_k_rw<T, U, 1, 1>(g, sh.r, st);
        }
    } else if (g.m[0].N > 2) {
        launch_k_rw<T, T, 4, 1>(g, sh.r, st);
    } else if (g.m[0].N == 2) {
        launch_k_rw<T, T, 2, 1>(g, sh.r, st);
    } else if (sh.rw >= 4) {
        launch_k_rw<T, T, 1, kMaxRW >= 4 ? 4 : 2>(g, sh.r, st);
    } else if (sh.rw == 2) {
        launch_k_rw<T, T, 1, 2>(g, sh.r, st);
    } else {
        launch_k_rw<T, T, 1, 1>(g, sh.r, st);
    }
}

} // namespace

void launch_qk(ggml_type t, const Q8Group & g, cudaStream_t st) {
    switch (t) {
        case GGML_TYPE_Q4_K: launch_k_t<GGML_TYPE_Q4_K>(g, st); break;
        case GGML_TYPE_Q5_K: launch_k_t<GGML_TYPE_Q5_K>(g, st); break;
        case GGML_TYPE_Q6_K: launch_k_t<GGML_TYPE_Q6_K>(g, st); break;
        case GGML_TYPE_Q2_K: launch_k_t<GGML_TYPE_Q2_K>(g, st); break;
        case GGML_TYPE_Q3_K: launch_k_t<GGML_TYPE_Q3_K>(g, st); break;
        case GGML_TYPE_IQ2_XXS: launch_k_t<GGML_TYPE_IQ2_XXS>(g, st); break;
        case GGML_TYPE_IQ2_XS: launch_k_t<GGML_TYPE_IQ2_XS>(g, st); break;
        case GGML_TYPE_IQ2_S: launch_k_t<GGML_TYPE_IQ2_S>(g, st); break;
        case GGML_TYPE_IQ3_XXS: launch_k_t<GGML_TYPE_IQ3_XXS>(g, st); break;
        case GGML_TYPE_IQ3_S: launch_k_t<GGML_TYPE_IQ3_S>(g, st); break;
        default:             SI_ASSERT_MSG(false, "the integer mat-vec has no kernel for this weight type"); break;
    }
}

// The Q4_K_M and Q5_K_M mixes give V (and down) Q6_K in some layers, so
// decoding's Q/K/V group had taken two launches there. 1B tg128 on the H100
// with V in Q's and K's launch against two launches (no rope epilogue
// either way; results/h200/summary-102.txt, call 2, two runs each): Q4_K_M
// 1065.14 / 1094.99 t/s against 1049.49 / 1092.73, Q5_K_M 1024.74 / 1024.97
// against 987.78 / 1012.27.
bool qk_mixes(ggml_type t, ggml_type u) {
    return (t == GGML_TYPE_Q4_K || t == GGML_TYPE_Q5_K) && u == GGML_TYPE_Q6_K;
}

void launch_qk2(ggml_type t, ggml_type u, const Q8Group & g, cudaStream_t st) {
    SI_ASSERT_MSG(qk_mixes(t, u) && g.second > 0 && g.second < g.n, "a K-format launch of two formats it mixes");
    if (t == GGML_TYPE_Q4_K) {
        launch_k_t<GGML_TYPE_Q4_K, GGML_TYPE_Q6_K>(g, st);
    } else {
        launch_k_t<GGML_TYPE_Q5_K, GGML_TYPE_Q6_K>(g, st);
    }
}

} // namespace standin::kernels::cuda::mm
