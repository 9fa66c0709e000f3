// Activation functions shared by the host and CUDA UNARY and GLU kernels, with
// ggml's definitions: GELU is the tanh approximation, GELU_QUICK uses the 1.702
// sigmoid, GELU_ERF the exact erf. The float functions of <cmath> (expf, tanhf,
// erff) exist on both sides, so one definition serves both.
#pragma once

#include <cmath>

#include "kernels/common/numerics.h"  // SI_HD

namespace standin::act {

constexpr float kGeluA         = 0.044715f;
constexpr float kGeluQuickCoef = -1.702f;
constexpr float kSqrt2OverPi   = 0.79788456080286535587989211986876f;
constexpr float kSqrt2Inv      = 0.70710678118654752440084436210484f;

SI_HD float relu(float x) { return x > 0.0f ? x : 0.0f; }
SI_HD float silu(float x) { return x / (1.0f + expf(-x)); }
SI_HD float gelu(float x) { return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kGeluA * x * x))); }
SI_HD float gelu_quick(float x) { return x * (1.0f / (1.0f + expf(kGeluQuickCoef * x))); }
SI_HD float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * kSqrt2Inv)); }
// The softplus of the state-space scans (dt), linear above 20 as in ggml.
SI_HD float softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

} // namespace standin::act
