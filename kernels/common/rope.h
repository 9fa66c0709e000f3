// Rotary position embedding numerics shared by the host and CUDA kernels:
// the op_params layout of GGML_OP_ROPE, the YaRN correction range and ramp,
// and the per-pair rotation angle (with frequency factors, multi-section
// "mrope" position selection and attention scaling), as ggml defines them.
//
// Angles follow ggml's reference: theta for pair k starts at the position and
// is multiplied by theta_scale = base^(-2/n_dims) once per pair, so a kernel
// that walks the pairs in order (rope_cache_fill) reproduces the reference
// rounding; rope_theta_direct gives the closed form for a single pair when a
// thread only needs one.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/numerics.h"

namespace standin::num {

// ggml's rope mode values (ggml.h GGML_ROPE_TYPE_*), repeated here so that
// CUDA code can use them without ggml.h.
constexpr int kRopeNormal = 0;
constexpr int kRopeNeox   = 2;
constexpr int kRopeMrope  = 8;
constexpr int kRopeVision = 24;
constexpr int kRopeImrope = 40;

struct RopeParams {
    int   n_dims;
    int   mode;
    int   n_ctx_orig;
    float freq_base;
    float freq_scale;
    float ext_factor;
    float attn_factor;
    float beta_fast;
    float beta_slow;
    int   sections[4];
    int   n_offs;  // first rotated channel (ggml_rope_set_offset)
};

// Decodes the 16 int32 op_params words of a ROPE / ROPE_BACK node.
SI_HD RopeParams rope_params_from(const int32_t * p) {
    RopeParams r;
    r.n_dims     = p[1];
    r.mode       = p[2];
    r.n_ctx_orig = p[4];
    r.freq_base   = f32_from_bits(uint32_t(p[5]));
    r.freq_scale  = f32_from_bits(uint32_t(p[6]));
    r.ext_factor  = f32_from_bits(uint32_t(p[7]));
    r.attn_factor = f32_from_bits(uint32_t(p[8]));
    r.beta_fast   = f32_from_bits(uint32_t(p[9]));
    r.beta_slow   = f32_from_bits(uint32_t(p[10]));
    for (int i = 0; i < 4; ++i) {
        r.sections[i] = p[11 + i];
    }
    r.n_offs = p[15];
    return r;
}

SI_HD bool rope_is_mrope(int mode) { return (mode & kRopeMrope) != 0; }  // also true for vision and imrope

SI_HD float rope_theta_scale(float freq_base, int n_dims) { return powf(freq_base, -2.0f / float(n_dims)); }

// The dimension index at which a rotation of n_rot full turns over the
// original context happens (YaRN's "find_correction_dim").
SI_HD float rope_yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return float(n_dims) * logf(float(n_ctx_orig) / (n_rot * 2.0f * 3.14159265358979323846f)) / (2.0f * logf(base));
}

// [low, high] dimension range over which YaRN blends interpolation into
// extrapolation; beta_fast / beta_slow are rotation counts.
SI_HD void rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                               float dims[2]) {
    const float start = floorf(rope_yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
    const float end   = ceilf(rope_yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
    dims[0] = start > 0.0f ? start : 0.0f;
    dims[1] = end < float(n_dims - 1) ? end : float(n_dims - 1);
}

// 1 below the correction range, 0 above it, linear in between (per pair).
SI_HD float rope_yarn_ramp(float low, float high, int i0) {
    const float span = (high - low) > 0.001f ? (high - low) : 0.001f;
    const float y    = (float(i0 / 2) - low) / span;
    const float c    = y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
    return 1.0f - c;
}

// cos/sin of the final angle of pair i0 (channel index, even), given the
// unscaled ("extrapolated") angle. ext_factor mixes in the extrapolated angle
// inside the YaRN ramp and then also raises the magnitude scale.
SI_HD void rope_yarn(float theta_extrap, float freq_scale, const float corr_dims[2], int i0, float ext_factor,
                     float mscale, float * cos_theta, float * sin_theta) {
    const float theta_interp = freq_scale * theta_extrap;
    float       theta        = theta_interp;
    if (ext_factor != 0.0f) {
        const float ramp_mix = rope_yarn_ramp(corr_dims[0], corr_dims[1], i0) * ext_factor;
        theta                = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
    }
    *cos_theta = cosf(theta) * mscale;
    *sin_theta = sinf(theta) * mscale;
}

// Which of the four position streams (0 = time, 1 = height, 2 = width,
// 3 = extra) drives pair `sector` (pair index modulo the section total).
SI_HD int rope_mrope_stream(int sector, const int sections[4], bool interleaved) {
    const int sec_w = sections[0] + sections[1];
    if (interleaved) {  // IMROPE: t, h, w interleaved over the first 3*n pairs
        if (sector % 3 == 1 && sector < 3 * sections[1]) return 1;
        if (sector % 3 == 2 && sector < 3 * sections[2]) return 2;
        if (sector % 3 == 0 && sector < 3 * sections[0]) return 0;
        return 3;
    }
    if (sector >= sections[0] && sector < sec_w) return 1;
    if (sector >= sec_w && sector < sec_w + sections[2]) return 2;
    if (sector >= sec_w + sections[2]) return 3;
    return 0;
}

// VISION mode: at the first pair of a section its stream's angle restarts
// from the position (only the first stream whose section starts there, as
// the reference does when sections are empty).
SI_HD void rope_vision_restart(int sector, const int starts[4], const float pos[4], float theta[4]) {
    for (int q = 0; q < 4; ++q) {
        if (sector == starts[q]) {
            theta[q] = pos[q];
            return;
        }
    }
}

// Fills cache[i0] = cos, cache[i0 + 1] = sin (times sin_sign: -1 for the
// backward pass) for every pair i0 = 0, 2, .., ne0 - 2. pos[k] is the position
// of stream k (only pos[0] is read unless the mode is a multi-section one).
// freq_factors (may be null) divide the angle of each pair.
SI_HD void rope_cache_fill(const RopeParams & rp, const float pos[4], const float * freq_factors, const float corr[2],
                           float theta_scale, int64_t ne0, float sin_sign, float * cache) {
    const bool mrope = rope_is_mrope(rp.mode);
    if (!mrope) {
        float theta = pos[0];
        for (int64_t i0 = 0; i0 < ne0; i0 += 2) {
            const float ff = freq_factors ? freq_factors[i0 / 2] : 1.0f;
            rope_yarn(theta / ff, rp.freq_scale, corr, int(i0), rp.ext_factor, rp.attn_factor, &cache[i0],
                      &cache[i0 + 1]);
            cache[i0 + 1] *= sin_sign;
            theta *= theta_scale;
        }
        return;
    }
    const bool interleaved = rp.mode == kRopeImrope;
    const bool indep       = rp.mode == kRopeVision;  // each section restarts its angle
    const int * sec        = rp.sections;
    const int  sect_dims   = sec[0] + sec[1] + sec[2] + sec[3];
    const int  starts[4]   = {0, sec[0], sec[0] + sec[1], sec[0] + sec[1] + sec[2]};
    float      theta[4]    = {pos[0], pos[1], pos[2], pos[3]};
    for (int64_t i0 = 0; i0 < ne0; i0 += 2) {
        const float ff     = freq_factors ? freq_factors[i0 / 2] : 1.0f;
        const int   sector = int((i0 / 2) % sect_dims);
        if (indep) rope_vision_restart(sector, starts, pos, theta);
        const int s = rope_mrope_stream(sector, sec, interleaved);
        rope_yarn(theta[s] / ff, rp.freq_scale, corr, int(i0), rp.ext_factor, rp.attn_factor, &cache[i0],
                  &cache[i0 + 1]);
        cache[i0 + 1] *= sin_sign;
        for (int k = 0; k < 4; ++k) {
            theta[k] *= theta_scale;
        }
    }
}

// The angle rope_cache_fill uses for pair k in VISION mode (before frequency
// factors and YaRN), replayed alone: the same resets and the same products in
// the same order, so a thread that needs one pair gets the host's value.
SI_HD float rope_vision_theta(const RopeParams & rp, const float pos[4], float theta_scale, int k) {
    const int * sec      = rp.sections;
    const int sect_dims  = sec[0] + sec[1] + sec[2] + sec[3];
    const int starts[4]  = {0, sec[0], sec[0] + sec[1], sec[0] + sec[1] + sec[2]};
    float     theta[4]   = {pos[0], pos[1], pos[2], pos[3]};
    for (int j = 0;; ++j) {
        const int sector = j % sect_dims;
        rope_vision_restart(sector, starts, pos, theta);
        if (j == k) return theta[rope_mrope_stream(sector, sec, false)];
        for (int q = 0; q < 4; ++q) theta[q] *= theta_scale;
    }
}

// Closed form of the non-multi-section angle of pair i0 before frequency
// factors and YaRN: pos * theta_scale^(i0/2). Equal to the cache's value up to
// the rounding of the repeated product.
SI_HD float rope_theta_direct(float pos, float theta_scale, int i0) { return pos * powf(theta_scale, float(i0 / 2)); }

} // namespace standin::num
