// DeepSeek-V4 hyper-connection mixing (DSV4_HC_COMB), one definition for the
// host and CUDA kernels. With hc = 4 residual streams, a token's 16 logits
// m[d + 4 s] (destination d, source s) become a doubly-stochastic-ish matrix:
// a softmax over d for each s, plus eps; then Sinkhorn normalisation, first
// over s for each d ("columns"), and n_iter - 1 more times rows then columns,
// every sum starting from eps.
#pragma once

#include <cmath>

#include "kernels/common/numerics.h"  // SI_HD

namespace standin::dsv4 {

constexpr int kHc = 4;
constexpr int kCombOffset = 2 * kHc;       // comb logits follow pre and post in a token's mix row
constexpr int kMixDim = (2 + kHc) * kHc;   // 24

// Normalises m so each destination d sums to 1 over its sources (by_dst) or
// each source s sums to 1 over its destinations.
SI_HD void hc_normalise(float * m, float eps, bool by_dst) {
    for (int a = 0; a < kHc; ++a) {
        float sum = eps;
        for (int b = 0; b < kHc; ++b) sum += m[by_dst ? a + kHc * b : b + kHc * a];
        const float inv = 1.0f / sum;
        for (int b = 0; b < kHc; ++b) m[by_dst ? a + kHc * b : b + kHc * a] *= inv;
    }
}

// m: the 16 logits (mix * scale + base), replaced by the mixing matrix.
SI_HD void hc_comb(float * m, float eps, int n_iter) {
    for (int s = 0; s < kHc; ++s) {
        float mx = -INFINITY;
        for (int d = 0; d < kHc; ++d) mx = fmaxf(mx, m[d + kHc * s]);
        float sum = 0.0f;
        for (int d = 0; d < kHc; ++d) {
            m[d + kHc * s] = expf(m[d + kHc * s] - mx);
            sum += m[d + kHc * s];
        }
        const float inv = 1.0f / sum;
        for (int d = 0; d < kHc; ++d) m[d + kHc * s] = m[d + kHc * s] * inv + eps;
    }
    hc_normalise(m, eps, true);
    for (int i = 1; i < n_iter; ++i) {
        hc_normalise(m, eps, false);
        hc_normalise(m, eps, true);
    }
}

} // namespace standin::dsv4
