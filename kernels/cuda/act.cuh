// Activation functions shared by the CUDA UNARY and GLU kernels, with the
// definitions of kernels/host/unary.cpp and glu.cpp (ggml's): GELU is the tanh
// approximation, GELU_QUICK uses the 1.702 sigmoid, GELU_ERF the exact erf.
#pragma once

namespace standin::kernels::cuda::act {

constexpr float kGeluA         = 0.044715f;
constexpr float kGeluQuickCoef = -1.702f;
constexpr float kSqrt2OverPi   = 0.79788456080286535587989211986876f;
constexpr float kSqrt2Inv      = 0.70710678118654752440084436210484f;

__device__ __forceinline__ float relu(float x) { return x > 0.0f ? x : 0.0f; }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float gelu(float x) {
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kGeluA * x * x)));
}
__device__ __forceinline__ float gelu_quick(float x) { return x * (1.0f / (1.0f + expf(kGeluQuickCoef * x))); }
__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * kSqrt2Inv)); }

} // namespace standin::kernels::cuda::act
