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
        const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
        float d;
        if constexpr (G == 32) {
            d = __half2float(__float2half_rn(__fdiv_rn(amax, 127.0f)));
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

// Quantizes all of b (ne[0] a multiple of 32) to 32-groups: codes into q
// (column c at q + c * ne[0]) and {scale, scale * code sum} into ds (column c
// at ds + c * ne[0] / 32).
inline void quantize_act(const ggml_tensor * b, int8_t * q, float2 * ds, cudaStream_t st) {
    launch_act<32>(b, QuantOut{q, ds, b->ne[0]}, st);
}

} // namespace standin::kernels::cuda::mm
