// Softmax numerics shared by the host and CUDA kernels (SOFT_MAX and
// FLASH_ATTN_EXT): the op_params layout, ALiBi head slopes, the logit soft
// cap, and the running (online) max/sum used to normalise attention weights
// one block of keys at a time.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/numerics.h"

namespace standin::num {

// ALiBi slopes as ggml defines them: with n = the largest power of two not
// above n_head, heads h < n get m0^(h+1) and the rest m1^(2(h-n)+1), where
// m0 = 2^(-max_bias/n), m1 = 2^(-max_bias/(2n)). max_bias == 0 disables ALiBi
// (every slope is 1, so the mask is added unscaled).
struct Alibi {
    float    max_bias;
    uint32_t n_head_log2;
    float    m0;
    float    m1;

    SI_HD float slope(uint32_t h) const {
        if (!(max_bias > 0.0f)) {
            return 1.0f;
        }
        return h < n_head_log2 ? powf(m0, float(h + 1)) : powf(m1, float(2 * (h - n_head_log2) + 1));
    }
};

SI_HD Alibi make_alibi(float max_bias, uint32_t n_head) {
    Alibi a;
    a.max_bias = max_bias;
    // floor(log2(n_head)) as a power of two; n_head >= 1.
    uint32_t p = 1;
    while (p * 2u <= n_head) {
        p *= 2u;
    }
    a.n_head_log2 = p;
    a.m0          = powf(2.0f, -max_bias / float(p));
    a.m1          = powf(2.0f, -(max_bias / 2.0f) / float(p));
    return a;
}

// SOFT_MAX op_params: scale, max_bias (two floats).
struct SoftmaxParams {
    float scale;
    float max_bias;
};

SI_HD SoftmaxParams softmax_params_from(const int32_t * p) {
    return {f32_from_bits(uint32_t(p[0])), f32_from_bits(uint32_t(p[1]))};
}

// FLASH_ATTN_EXT op_params: scale, max_bias, logit_softcap (floats), then
// precision and an n_kv hint (ints) that do not change the result.
struct AttnParams {
    float scale;
    float max_bias;
    float logit_softcap;
};

SI_HD AttnParams attn_params_from(const int32_t * p) {
    return {f32_from_bits(uint32_t(p[0])), f32_from_bits(uint32_t(p[1])), f32_from_bits(uint32_t(p[2]))};
}

// Score of one query/key pair before the mask: with a soft cap c the scaled
// dot product s becomes c * tanh(s / c) (Gemma 2); without, just s * scale.
SI_HD float attn_score(float dot, float scale, float softcap) {
    if (softcap != 0.0f) {
        return softcap * tanhf(dot * (scale / softcap));
    }
    return dot * scale;
}

// Running max and sum of exp(s - max) over the scores seen so far. Folding a
// block of scores with new maximum m_blk returns the factor by which earlier
// partial results (the weighted value sum) must be rescaled.
struct OnlineSoftmax {
    float m = -INFINITY;  // max so far (-inf: nothing unmasked yet)
    float s = 0.0f;       // sum of exp(score - m)

    // Raises the max to at least m_new; returns exp(m_old - m_new) (1 when
    // unchanged, 0 when there was nothing before).
    SI_HD float rescale_to(float m_new) {
        if (!(m_new > m)) {
            return 1.0f;
        }
        const float f = (m == -INFINITY) ? 0.0f : expf(m - m_new);
        m             = m_new;
        s *= f;
        return f;
    }

    // Adds one weight exp(score - m) already computed by the caller.
    SI_HD void add(float w) { s += w; }

    // Includes a "sink" logit: a score that joins the normalisation but has
    // no value row. Returns the rescale factor for the accumulated values.
    SI_HD float add_sink(float sink) {
        const float f = rescale_to(sink);
        s += expf(sink - m);
        return f;
    }

    // Normaliser for the accumulated values (0 when every key was masked).
    SI_HD float inv_sum() const { return s == 0.0f ? 0.0f : 1.0f / s; }
};

} // namespace standin::num
