// src1 rounded the way ggml-cpu quantizes activations for block-quantized
// weights (its vec_dot_type; kernels/host/vec_dot.h, Note [activation
// blocks]): per group of G values along K (32 for Q4_0..Q8_0, 256 for the K
// formats), amax = max |x|, q = rint(x * 127 / amax), and the value kept is
// q * d with d = half(amax / 127) for 32-groups and 1 / (127 / amax) for
// 256-groups. ggml-cpu multiplies the weights by exactly these values (its
// integer sums times the scales), so products formed from them differ from it
// only by the order of additions; unrounded activations would leave quantized
// models ~5e-4 apart in logits NMSE instead.
//
// One warp per group; the source may have any float type and strides (the
// element with linear index k is at offset_of(b, k)); the output is dense
// columns of ldy elements of O (float or __half), or, for the integer kernels,
// the codes and scales themselves (quantize_act). The integer kernels take
// 32-groups for every weight type (Note [integer activations], mul_mat.cuh);
// the rounded values for the float paths follow ggml-cpu's group sizes.
//
// Test: the logits ctests on STANDIN_CUDA0 with a Q8_0 model (NMSE <= 1e-4
// against ggml-cpu), test-backend-ops -o MUL_MAT.
#pragma once

#include <cuda_fp16.h>

#include "kernels/common/quants.h"
#include "kernels/cuda/common.cuh"

namespace standin::kernels::cuda::mm {

// Where a group's results go: rounded values q * d as O (float or __half) in
// dense columns of ldy elements, or (QuantOut) the int8 codes q and the scale
// d themselves, for the integer mat-vec (mul_mat_vec_q8.cu).
template <typename O> struct RoundOut {
    O *     y;
    int64_t ldy;
    template <int kPer>
    __device__ void put(int64_t col, int64_t k, int lane, const int (&q)[kPer], float d) const {
        O * out = y + col * ldy + k;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const float v = __fmul_rn(float(q[j]), d);
            if constexpr (sizeof(O) == 4) {
                out[j] = v;
            } else {
                out[j] = __float2half_rn(v);
            }
        }
        (void) lane;
    }
};

// One warp per 32-group (the whole warp calls put). The group sum of the
// codes lets the mat-vec fold a weight format's constant offset (Q4_0's 8,
// Q5_0's 16) or minimum into one product per block instead of one per code.
struct QuantOut {
    int8_t * q;   // column c at q + c * K
    float2 * ds;  // column c at ds + c * (K / 32): {d, d * sum of the group's codes}
    int64_t  K;
    template <int kPer>
    __device__ void put(int64_t col, int64_t k, int lane, const int (&qv)[kPer], float dv) const {
        static_assert(kPer == 1, "32-groups: one code per lane");
        q[col * K + k] = int8_t(qv[0]);
        const int sum = warp_sum(qv[0]);
        if (lane == 0) ds[col * (K / 32) + k / 32] = make_float2(dv, dv * float(sum));
    }
};

template <int G, typename Out>
__global__ void act_round_kernel(Shape b, const char * bd, Out out, int64_t n_groups, bool dense_f32) {
    constexpr int kPer = G / 32;
    pdl_wait();
    pdl_trigger();
    const int lane = int(threadIdx.x & 31u);
    const int64_t K = b.ne[0], groups_per_col = K / G;
    for (int64_t g = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; g < n_groups;
         g += int64_t(gridDim.x) * blockDim.x / 32) {
        const int64_t col = g / groups_per_col, k0 = (g % groups_per_col) * G;
        float x[kPer];
        float amax = 0.0f;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const int64_t k = col * K + k0 + lane * kPer + j;
            x[j] = dense_f32 ? reinterpret_cast<const float *>(bd)[k] : load_f(b.type, bd + offset_of(b, k));
            amax = fmaxf(amax, fabsf(x[j]));
        }
        amax = warp_max(amax);
        const Act32Scale s32 = act32_scale(amax);
        const float id = s32.id;
        float d;
        if constexpr (G == 32) {
            d = s32.d;
        } else {
            d = id != 0.0f ? __fdiv_rn(1.0f, id) : 0.0f;
        }
        int q[kPer];
#pragma unroll
        for (int j = 0; j < kPer; ++j) q[j] = __float2int_rn(__fmul_rn(x[j], id));
        out.template put<kPer>(col, k0 + lane * kPer, lane, q, d);
    }
}

template <int G, typename Out> void launch_act(const ggml_tensor * b, const Out & out, cudaStream_t st) {
    const int64_t n_groups = ggml_nrows(b) * (b->ne[0] / G);
    if (n_groups == 0) return;
    constexpr int kThreads = 256;
    // Dense F32 (the usual src1) is read without the per-element index split.
    const bool dense_f32 = b->type == GGML_TYPE_F32 && ggml_is_contiguous(b);
    launch(act_round_kernel<G, Out>, dim3(grid_for(n_groups * 32, kThreads)), dim3(kThreads), 0, st, shape_of(b),
           static_cast<const char *>(b->data), out, n_groups, dense_f32);
}

// Launches the rounding of all of b (ne[0] a multiple of `group`, from
// quant::act_group) into y.
template <typename O>
void act_round(const ggml_tensor * b, int group, O * y, int64_t ldy, cudaStream_t st) {
    if (group == 32) {
        launch_act<32>(b, RoundOut<O>{y, ldy}, st);
    } else {
        launch_act<256>(b, RoundOut<O>{y, ldy}, st);
    }
}

// One 32-group held by 8 consecutive lanes of a warp (sub = lane % 8, values
// 4 sub to 4 sub + 3 in x), rounded as QuantOut's groups are, bit for bit:
// where `live`, the lane's 4 codes go to q (4-byte aligned) and, from sub 0,
// {d, d * sum of the codes} to *ds. Every lane of the warp calls it (shuffles).
__device__ __forceinline__ void quantize_group8(const float (&x)[4], bool live, uint32_t sub, int8_t * q,
                                                float2 * ds) {
    float amax = fmaxf(fmaxf(fabsf(x[0]), fabsf(x[1])), fmaxf(fabsf(x[2]), fabsf(x[3])));
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const Act32Scale s = act32_scale(amax);
    int c[4], sum = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        c[j] = __float2int_rn(__fmul_rn(x[j], s.id));
        sum += c[j];
    }
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (live) {
        *reinterpret_cast<uint32_t *>(q) = uint32_t(c[0] & 0xff) | uint32_t(c[1] & 0xff) << 8 |
                                           uint32_t(c[2] & 0xff) << 16 | uint32_t(c[3] & 0xff) << 24;
        if (sub == 0) *ds = make_float2(s.d, s.d * float(sum));
    }
}

// The integer kernels' quantization (QuantOut's results, bit for bit) with
// 8 lanes per 32-group, 4 values each: one 16-byte load (dense F32) and one
// 4-byte store of codes per lane, reductions over 8 lanes, and 32-bit group
// indices (n_groups < 2^31). Measured on the H200 (results/h200): the
// warp-per-group kernel took 6.4-6.9 us for 32 columns of 14336 and 9.5-10
// us for 64 beside mmq's 44 / 60 (summary-63); this one 3.3-4.2 for 32
// (summary-64).
template <bool kDense>
__global__ void quantize_act_kernel(Shape b, const char * bd, QuantOut out, uint32_t n_groups, uint32_t per_col) {
    pdl_wait();
    pdl_trigger();
    const uint32_t sub = threadIdx.x & 7u;
    const uint32_t step = gridDim.x * blockDim.x / 8;
    // Whole warps iterate alike (their shuffles need every lane); lanes past
    // the last group compute on zeros and store nothing.
    for (uint32_t g0 = (blockIdx.x * blockDim.x + (threadIdx.x & ~31u)) / 8; g0 < n_groups; g0 += step) {
        const uint32_t g = g0 + (threadIdx.x & 31u) / 8;
        const bool live = g < n_groups;
        const uint32_t col = live ? g / per_col : 0u, k = live ? (g % per_col) * 32 + sub * 4 : 0u;
        const size_t lin = size_t(col) * size_t(out.K) + k;
        float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (live) {
            if constexpr (kDense) {
                const float4 v = *reinterpret_cast<const float4 *>(reinterpret_cast<const float *>(bd) + lin);
                x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) x[j] = load_f(b.type, bd + offset_of(b, int64_t(lin) + j));
            }
        }
        quantize_group8(x, live, sub, out.q + lin, out.ds + lin / 32);
    }
}

// From how many groups quantize_act takes the 8-lane kernel: about one block
// of it per multiprocessor.
constexpr int64_t kQuantizeLanes8From = 4096;

// Quantizes all of b (ne[0] a multiple of 32) to 32-groups: codes into q
// (column c at q + c * ne[0]) and {scale, scale * code sum} into ds (column c
// at ds + c * ne[0] / 32).
inline void quantize_act(const ggml_tensor * b, int8_t * q, float2 * ds, cudaStream_t st) {
    const int64_t n_groups = ggml_nrows(b) * (b->ne[0] / 32);
    const QuantOut out{q, ds, b->ne[0]};
    if (n_groups == 0) return;
    // Few groups (a decoded token's 128 to 448) are latency-bound, and there
    // the warp per group, with four times the warps in flight, measured
    // faster: 1B Q4_K_M tg128 963-986 against 934-936 t/s with the 8-lane
    // kernel (results/h200/summary-70.txt). Past 2^31 groups the 8-lane
    // kernel's 32-bit indices would not do either.
    if (n_groups < kQuantizeLanes8From || n_groups >= (int64_t(1) << 31)) {
        launch_act<32>(b, out, st);
        return;
    }
    constexpr int kThreads = 256;
    const bool dense_f32 = b->type == GGML_TYPE_F32 && ggml_is_contiguous(b) && uintptr_t(b->data) % 16 == 0;
    const auto kernel = dense_f32 ? quantize_act_kernel<true> : quantize_act_kernel<false>;
    launch(kernel, dim3(grid_for(n_groups * 8, kThreads)), dim3(kThreads), 0, st, shape_of(b),
           static_cast<const char *>(b->data), out, uint32_t(n_groups), uint32_t(b->ne[0] / 32));
}

} // namespace standin::kernels::cuda::mm
