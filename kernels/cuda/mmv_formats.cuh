// The integer mat-vecs' block formats (mul_mat_vec_q8.cu, and its staged
// variant mul_mat_vec_bulk.cu): how a lane loads the words of one block of 32
// weights (Note [lane per block] in mul_mat_vec_q8.cu), decodes them into 8
// words of codes with the block's scale and minimum, dots them with the
// quantized activations and adds the block's product to its sum.
#pragma once

#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/mmq_formats.cuh"

namespace standin::kernels::cuda::mm {

// Bit j (j = 0..3) of `bits` to bit 4 of byte j.
__device__ __forceinline__ uint32_t fifth_bits(uint32_t bits) {
    return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}

// dp4a of 4 unsigned bytes with 4 signed ones.
__device__ __forceinline__ int dp4a_us(uint32_t a, int b, int c) {
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// Word k of a block's bytes from byte F on, for a block that starts a8 / 8
// bytes (0 to 3) into W[0] (Note [lane per block]): a funnel shift clamped at
// 32 bits, so a shift of 32 yields W[F / 4 + k + 1] itself.
template <int F> __device__ __forceinline__ uint32_t field(const uint32_t * W, uint32_t a8, int k) {
    return __funnelshift_rc(W[F / 4 + k], W[F / 4 + k + 1], 8u * (F % 4) + a8);
}

__device__ __forceinline__ float half_lo(uint32_t w) { return quant::half(uint16_t(w & 0xffffu)); }
__device__ __forceinline__ float half_hi(uint32_t w) { return quant::half(uint16_t(w >> 16)); }

// The table formats' codes: mmq_formats.cuh's TableWords (shared with mmq).
using mmq::TableWords;

// The formats whose blocks of 32 are read as kW 4-byte words from the word
// holding their first byte: block b's words, and how far into W[0] it starts
// (a8 bits: 0, 8, 16 or 24), from its address, so rows need only the
// alignment the words allow (q8_weights_ok: 2 bytes for the 18-, 22- and
// 34-byte blocks, 4 for Q4_1's and Q5_1's, any for MXFP4's 17; rows of
// gpt-oss's 2880 columns are 1530 / 1620 / 3060 bytes). The words end at or
// before the word holding the block's last byte, never past it.
// Where a lane's words come from: global memory through the read-only path,
// or a copy of the row's step in shared memory (mul_mat_vec_bulk.cu).
struct FromGlobal {
    template <typename W> __device__ static W at(const W * p) { return __ldg(p); }
};
struct FromShared {
    template <typename W> __device__ static W at(const W * p) { return *p; }
};

template <int kBytes_, int kW_> struct RawWords {
    static constexpr int kBytes = kBytes_, kW = kW_;
    // Bytes of one step of a row (32 blocks): a multiple of 16.
    static constexpr uint32_t kStepBytes = 32u * uint32_t(kBytes);
    template <typename Src = FromGlobal> __device__ static void load(const uint8_t * row, int b, uint32_t (&w)[kW]) {
        const uintptr_t at = reinterpret_cast<uintptr_t>(row) + uint32_t(b) * uint32_t(kBytes);
        const uint32_t * src = reinterpret_cast<const uint32_t *>(at & ~uintptr_t(3));
#pragma unroll
        for (int k = 0; k < kW; ++k) w[k] = Src::at(src + k);
    }
    __device__ static uint32_t a8(const uint8_t * row, int b) {
        const uintptr_t at = reinterpret_cast<uintptr_t>(row) + uint32_t(b) * uint32_t(kBytes);
        return kBytes % 4 == 0 ? 0u : uint32_t(at & 3u) * 8u;
    }
};

// The scale and the 4 words of nibbles of a block laid out as Q4_0 and IQ4_NL
// are (a half scale, then 16 bytes), starting a8 bits into W[0].
__device__ __forceinline__ void half_and_nibbles(const uint32_t * W, uint32_t a8, float & d, uint32_t (&q)[4]) {
    d = half_lo(field<0>(W, a8, 0));
#pragma unroll
    for (int j = 0; j < 4; ++j) q[j] = field<2>(W, a8, j);
}

// One format: the words a lane holds for one block of 32 (kW) and how it
// loads them (load(row, b, W): block b of a row, the kernel's 32-bit offsets),
// the constant offset of its codes (0 for the formats with a minimum, Q8_0 and
// the table formats), whether it has a minimum, and the decoding of block b
// from its words into 8 words of 4 codes (words j and 4 + j hold elements
// 4j..4j+3 and 16+4j..16+4j+3; Q8_0: word j elements 4j..4j+3), its scale and
// minimum. Q4_0 and Q4_1 leave the high nibbles in place (16 times the code,
// dotted unsigned: kHiShift); the table formats (IQ4_NL, IQ4_XS, MXFP4) look
// their codes up in quants.h's tables, values and scales as decode_run gives them.
template <int T> struct Q8Fmt;

template <> struct Q8Fmt<GGML_TYPE_Q4_0> : RawWords<sizeof(quant::BlockQ4_0), 5> {
    static constexpr int kOff = 8;
    static constexpr bool kMin = false, kHiShift = true;
    __device__ static void get(const uint32_t * W, int, uint32_t s, uint32_t (&c)[8], float & d, float & m) {
        uint32_t q[4];
        half_and_nibbles(W, s, d, q);
        m = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            c[j] = q[j] & 0x0f0f0f0fu;
            c[4 + j] = q[j] & 0xf0f0f0f0u;
        }
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q4_1> : RawWords<sizeof(quant::BlockQ4_1), 5> {
    static constexpr int kOff = 0;
    static constexpr bool kMin = true, kHiShift = true;
    __device__ static void get(const uint32_t * W, int, uint32_t, uint32_t (&c)[8], float & d, float & m) {
        d = half_lo(W[0]);
        m = half_hi(W[0]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            c[j] = W[1 + j] & 0x0f0f0f0fu;
            c[4 + j] = W[1 + j] & 0xf0f0f0f0u;
        }
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q5_0> : RawWords<sizeof(quant::BlockQ5_0), 6> {
    static constexpr int kOff = 16;
    static constexpr bool kMin = false, kHiShift = false;
    __device__ static void get(const uint32_t * W, int, uint32_t s, uint32_t (&c)[8], float & d, float & m) {
        d = half_lo(field<0>(W, s, 0));
        m = 0.0f;
        const uint32_t qh = field<2>(W, s, 0);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint32_t q = field<6>(W, s, j);
            c[j] = (q & 0x0f0f0f0fu) | fifth_bits(qh >> (4 * j));
            c[4 + j] = ((q >> 4) & 0x0f0f0f0fu) | fifth_bits(qh >> (16 + 4 * j));
        }
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q5_1> : RawWords<sizeof(quant::BlockQ5_1), 6> {
    static constexpr int kOff = 0;
    static constexpr bool kMin = true, kHiShift = false;
    __device__ static void get(const uint32_t * W, int, uint32_t, uint32_t (&c)[8], float & d, float & m) {
        d = half_lo(W[0]);
        m = half_hi(W[0]);
        const uint32_t qh = W[1];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint32_t q = W[2 + j];
            c[j] = (q & 0x0f0f0f0fu) | fifth_bits(qh >> (4 * j));
            c[4 + j] = ((q >> 4) & 0x0f0f0f0fu) | fifth_bits(qh >> (16 + 4 * j));
        }
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q8_0> : RawWords<sizeof(quant::BlockQ8_0), 9> {
    static constexpr int kOff = 0;
    static constexpr bool kMin = false, kHiShift = false;
    __device__ static void get(const uint32_t * W, int, uint32_t s, uint32_t (&c)[8], float & d, float & m) {
        d = half_lo(field<0>(W, s, 0));
        m = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) c[j] = field<2>(W, s, j);
    }
};

template <> struct Q8Fmt<GGML_TYPE_IQ4_NL> : RawWords<sizeof(quant::BlockIQ4_NL), 5> {
    static constexpr int kOff = 0;
    static constexpr bool kMin = false, kHiShift = false;
    __device__ static void get(const uint32_t * W, int, uint32_t s, uint32_t (&c)[8], float & d, float & m) {
        uint32_t q[4];
        half_and_nibbles(W, s, d, q);
        m = 0.0f;
        constexpr TableWords kTab(quant::kIQ4NLLevels);
        kTab.codes(q, c);
    }
};

// MXFP4's 17-byte blocks start at any byte of a word (a8 up to 24 bits).
template <> struct Q8Fmt<GGML_TYPE_MXFP4> : RawWords<sizeof(quant::BlockMXFP4), 5> {
    static constexpr int kOff = 0;
    static constexpr bool kMin = false, kHiShift = false;
    __device__ static void get(const uint32_t * W, int, uint32_t s, uint32_t (&c)[8], float & d, float & m) {
        d = quant::e8m0_half(uint8_t(field<0>(W, s, 0) & 0xffu));
        m = 0.0f;
        const uint32_t q[4] = {field<1>(W, s, 0), field<1>(W, s, 1), field<1>(W, s, 2), field<1>(W, s, 3)};
        constexpr TableWords kTab(quant::kE2M1Twice);
        kTab.codes(q, c);
    }
};

// IQ4_XS: block b of 32 is run pair b % 8 of super-block b / 8 (136 bytes, so
// 8-byte aligned in an 8-byte aligned row): the super-block's 8-byte header
// (d, scales_h, scales_l) and the run pair's 16 bytes of nibbles, with 8-byte loads.
template <> struct Q8Fmt<GGML_TYPE_IQ4_XS> {
    static constexpr int kW = 6, kOff = 0;
    static constexpr bool kMin = false, kHiShift = false;
    template <typename Src = FromGlobal> __device__ static void load(const uint8_t * row, int b, uint32_t (&w)[kW]) {
        const uint8_t * sb = row + uint32_t(b >> 3) * uint32_t(sizeof(quant::BlockIQ4_XS));
        const uint2 h = Src::at(reinterpret_cast<const uint2 *>(sb));
        const uint2 q0 = Src::at(reinterpret_cast<const uint2 *>(sb + 8 + 16 * (b & 7)));
        const uint2 q1 = Src::at(reinterpret_cast<const uint2 *>(sb + 16 + 16 * (b & 7)));
        w[0] = h.x; w[1] = h.y; w[2] = q0.x; w[3] = q0.y; w[4] = q1.x; w[5] = q1.y;
    }
    __device__ static uint32_t a8(const uint8_t *, int) { return 0u; }
    __device__ static void get(const uint32_t * W, int b, uint32_t, uint32_t (&c)[8], float & d, float & m) {
        const int ib = b & 7;
        // The run pair's 6-bit scale, as decode_run reads it (offset 32).
        const int ls = int((W[1] >> (4 * ib)) & 15u) | int(((W[0] >> (16 + 2 * ib)) & 3u) << 4);
        d = half_lo(W[0]) * float(ls - 32);
        m = 0.0f;
        const uint32_t q[4] = {W[2], W[3], W[4], W[5]};
        constexpr TableWords kTab(quant::kIQ4NLLevels);
        kTab.codes(q, c);
    }
};

// The integer dot product of a block's 8 code words with the activation's 8
// words of the same 32 elements.
template <int T> __device__ __forceinline__ int block_dot(const uint32_t (&c)[8], const int (&x)[8]) {
    int s = 0;
    if constexpr (Q8Fmt<T>::kHiShift) {
        int sh = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            s = __dp4a(int(c[j]), x[j], s);
            sh = dp4a_us(c[4 + j], x[4 + j], sh);
        }
        return s + (sh >> 4);  // sh is 16 times the high nibbles' sum: exact
    } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) s = __dp4a(int(c[j]), x[j], s);
        return s;
    }
}

// The 8 code words and {d, d * sum} of block ib of a matrix's activation
// columns (codes at qa + 32 ib, scales at da + ib: column c's blocks are
// c * nb .. c * nb + nb - 1).
__device__ __forceinline__ void load_act(const int8_t * qa, const float2 * da, int ib, int (&x)[8], float2 & ds) {
    const int4 * src = reinterpret_cast<const int4 *>(qa + uint32_t(ib) * 32u);
    const int4 x0 = __ldg(src), x1 = __ldg(src + 1);
    x[0] = x0.x; x[1] = x0.y; x[2] = x0.z; x[3] = x0.w;
    x[4] = x1.x; x[5] = x1.y; x[6] = x1.z; x[7] = x1.w;
    ds = da[ib];
}

// acc += one block's product: dw * (da * s - offset * da * sum(q)), or with a
// minimum dw * da * s + m * da * sum(q).
template <int T> __device__ __forceinline__ void accumulate(float & a, int s, float d, float mn, float2 ds) {
    using F = Q8Fmt<T>;
    constexpr float kOffset = -float(F::kOff);
    const float sf = float(s);
    if constexpr (F::kMin) {
        a = fmaf(d * ds.x, sf, fmaf(mn, ds.y, a));
    } else if constexpr (F::kOff != 0) {
        a = fmaf(d, fmaf(ds.x, sf, kOffset * ds.y), a);
    } else {
        a = fmaf(d * ds.x, sf, a);
    }
}

// A lane's products of one step: block b of RW rows (their words w[r], each
// starting a8[r] bits into its first word) with NC activation columns, added
// to acc[r * NC + c]. Few columns: each column's activation words held, each
// row decoded once against all of them; more columns: each row's codes held,
// each column's words loaded once (registers).
template <int T, int NC, int RW>
__device__ __forceinline__ void step_dot(const uint32_t (&w)[RW][Q8Fmt<T>::kW], const uint32_t (&a8)[RW], int b,
                                         const int8_t * qa, const float2 * da, int nb, int ncols,
                                         float (&acc)[RW * NC]) {
    using F = Q8Fmt<T>;
    if constexpr (NC <= 2) {
        int x[NC][8];
        float2 ds[NC];
#pragma unroll
        for (int c = 0; c < NC; ++c) {
            if (c < ncols) load_act(qa, da, c * nb + b, x[c], ds[c]);
        }
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            uint32_t codes[8];
            float d, mn;
            F::get(w[r], b, a8[r], codes, d, mn);
#pragma unroll
            for (int c = 0; c < NC; ++c) {
                if (c < ncols) accumulate<T>(acc[r * NC + c], block_dot<T>(codes, x[c]), d, mn, ds[c]);
            }
        }
    } else {
        uint32_t codes[RW][8];
        float d[RW], mn[RW];
#pragma unroll
        for (int r = 0; r < RW; ++r) F::get(w[r], b, a8[r], codes[r], d[r], mn[r]);
        // Columns in groups of kG, each group's words all asked for before
        // any is used. A column's load inside its `c < ncols` branch, next to
        // its arithmetic, could not be issued before the previous column's
        // arithmetic (a load is not moved above a branch), so a step waited
        // for L1 or L2 once per column. Four rows a warp keep that order
        // (kG 1): their arithmetic covers the wait, and four columns' words
        // would cost them resident warps. Measured on the H100 (4096 x 14336,
        // `standin matmul --rotate 4 --reps 30`, results/h200/summary-104.txt, call 1),
        // us, column by column -> kG 4: Q8_0 at 3 / 4 / 5 / 8 columns 33.5 /
        // 37.3 / 45.2 / 60.2 -> 28.6 / 29.3 / 34.0 / 36.9 (ggml-cuda 31.9 /
        // 32.8 / 43.1 / 48.0); Q4_0 at 5 / 8 33.6 / 45.4 -> 26.7 / 31.3; Q4_0 at
        // 3 / 4 columns (four rows) 19.1 / 21.7 -> 22.2 / 22.9, kG 2 there 23.8 / 24.8.
        constexpr int kG = RW >= 4 ? 1 : 4;
        static_assert(NC % kG == 0, "the column widths above two are multiples of four (with_col_width)");
#pragma unroll
        for (int c0 = 0; c0 < NC; c0 += kG) {
            if (c0 < ncols) {
                int x[kG][8];
                float2 ds[kG];
#pragma unroll
                for (int g = 0; g < kG; ++g) {
                    if (c0 + g < ncols) load_act(qa, da, (c0 + g) * nb + b, x[g], ds[g]);
                }
#pragma unroll
                for (int g = 0; g < kG; ++g) {
                    if (c0 + g < ncols) {
#pragma unroll
                        for (int r = 0; r < RW; ++r) {
                            accumulate<T>(acc[r * NC + c0 + g], block_dot<T>(codes[r], x[g]), d[r], mn[r], ds[g]);
                        }
                    }
                }
            }
        }
    }
}

} // namespace standin::kernels::cuda::mm
