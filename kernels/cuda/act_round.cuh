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
// columns of ldy elements of O (float or __half).
//
// Test: the logits ctests on STANDIN_CUDA0 with a Q8_0 model (NMSE <= 1e-4
// against ggml-cpu), test-backend-ops -o MUL_MAT.
#pragma once

#include <cuda_fp16.h>

#include "kernels/common/quants.h"
#include "kernels/cuda/common.cuh"

namespace standin::kernels::cuda::mm {

template <typename O, int G>
__global__ void act_round_kernel(Shape b, const char * bd, O * y, int64_t ldy, int64_t n_groups) {
    constexpr int kPer = G / 32;
    const int lane = int(threadIdx.x & 31u);
    const int64_t K = b.ne[0], groups_per_col = K / G;
    for (int64_t g = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; g < n_groups;
         g += int64_t(gridDim.x) * blockDim.x / 32) {
        const int64_t col = g / groups_per_col, k0 = (g % groups_per_col) * G;
        float x[kPer];
        float amax = 0.0f;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            x[j] = load_f(b.type, bd + offset_of(b, col * K + k0 + lane * kPer + j));
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
        O * out = y + col * ldy + k0 + lane * kPer;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const float v = __fmul_rn(float(__float2int_rn(__fmul_rn(x[j], id))), d);
            if constexpr (sizeof(O) == 4) {
                out[j] = v;
            } else {
                out[j] = __float2half_rn(v);
            }
        }
    }
}

// Launches the rounding of all of b (ne[0] a multiple of `group`, from
// quant::act_group) into y.
template <typename O>
void act_round(const ggml_tensor * b, int group, O * y, int64_t ldy, cudaStream_t st) {
    const int64_t n_groups = ggml_nrows(b) * (b->ne[0] / group);
    if (n_groups == 0) return;
    constexpr int kThreads = 256;
    const unsigned grid = grid_for(n_groups * 32, kThreads);
    const Shape s = shape_of(b);
    const char * d = static_cast<const char *>(b->data);
    if (group == 32) {
        act_round_kernel<O, 32><<<grid, kThreads, 0, st>>>(s, d, y, ldy, n_groups);
    } else {
        act_round_kernel<O, 256><<<grid, kThreads, 0, st>>>(s, d, y, ldy, n_groups);
    }
}

} // namespace standin::kernels::cuda::mm
