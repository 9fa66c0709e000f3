// UPSCALE (ggml_interpolate) sampling, one definition for the host and CUDA
// kernels. dst[i0, i1, i2, i3] samples src at the position the scale factors
// sf = dst extent / src extent give: NEAREST takes the pixel floor(i / sf);
// BILINEAR and BICUBIC (alpha -0.75, as PyTorch) interpolate dims 0 and 1 at
// (i + offset) / sf - offset with offset 0.5 (0 with ALIGN_CORNERS, whose
// factors are (dst - 1) / (src - 1)), clamping at the borders; BILINEAR with
// ANTIALIAS weights every source pixel under a triangle filter widened by
// 1 / sf when shrinking. Dims 2 and 3 are always nearest.
#pragma once

#include <cmath>
#include <cstdint>

#include "ggml.h"
#include "kernels/common/numerics.h"  // SI_HD

namespace standin::upscale {

struct Params {
    float   sf[4];
    float   offset;
    int     mode;       // ggml_scale_mode
    bool    antialias;
    int64_t ne00, ne01; // source extent of dims 0 and 1
};

inline Params params_of(const ggml_tensor * dst, int32_t mode_flags) {
    const ggml_tensor * s = dst->src[0];
    Params p;
    for (int d = 0; d < 4; ++d) p.sf[d] = float(dst->ne[d]) / float(s->ne[d]);
    p.offset = 0.5f;
    p.mode = mode_flags & 0xFF;
    p.antialias = (mode_flags & GGML_SCALE_FLAG_ANTIALIAS) != 0;
    p.ne00 = s->ne[0];
    p.ne01 = s->ne[1];
    if (mode_flags & GGML_SCALE_FLAG_ALIGN_CORNERS) {
        p.offset = 0.0f;
        if (dst->ne[0] > 1 && s->ne[0] > 1) p.sf[0] = float(dst->ne[0] - 1) / float(s->ne[0] - 1);
        if (dst->ne[1] > 1 && s->ne[1] > 1) p.sf[1] = float(dst->ne[1] - 1) / float(s->ne[1] - 1);
    }
    return p;
}

// Source index along a nearest-sampled dim.
SI_HD int64_t nearest(int64_t i, float sf) { return int64_t(float(i) / sf); }

SI_HD int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

SI_HD float cubic_near(float x) { return ((-0.75f + 2.0f) * x - (-0.75f + 3.0f)) * x * x + 1.0f; }
SI_HD float cubic_far(float x) { return ((-0.75f * x - 5.0f * -0.75f) * x + 8.0f * -0.75f) * x - 4.0f * -0.75f; }
SI_HD float cubic(float p0, float p1, float p2, float p3, float t) {
    return p0 * cubic_far(t + 1.0f) + p1 * cubic_near(t) + p2 * cubic_near(1.0f - t) + p3 * cubic_far(2.0f - t);
}

// The value of dst element (i0, i1) of one plane; at(x, y) reads the source
// plane (the one nearest() picks for i2, i3).
template <typename At> SI_HD float sample(const Params & p, int64_t i0, int64_t i1, const At & at) {
    if (p.mode == GGML_SCALE_MODE_NEAREST) {
        return at(nearest(i0, p.sf[0]), nearest(i1, p.sf[1]));
    }
    const float x = (float(i0) + p.offset) / p.sf[0];
    const float y = (float(i1) + p.offset) / p.sf[1];
    if (p.mode == GGML_SCALE_MODE_BILINEAR && p.antialias) {
        const float sup0 = fmaxf(1.0f, 1.0f / p.sf[0]), inv0 = 1.0f / sup0;
        const float sup1 = fmaxf(1.0f, 1.0f / p.sf[1]), inv1 = 1.0f / sup1;
        const int64_t x_lo = int64_t(x - sup0 + p.offset) > 0 ? int64_t(x - sup0 + p.offset) : 0;
        const int64_t x_hi = int64_t(x + sup0 + p.offset) < p.ne00 ? int64_t(x + sup0 + p.offset) : p.ne00;
        const int64_t y_lo = int64_t(y - sup1 + p.offset) > 0 ? int64_t(y - sup1 + p.offset) : 0;
        const int64_t y_hi = int64_t(y + sup1 + p.offset) < p.ne01 ? int64_t(y + sup1 + p.offset) : p.ne01;
        float val = 0.0f, total = 0.0f;
        for (int64_t sy = y_lo; sy < y_hi; ++sy) {
            const float wy = fmaxf(1.0f - fabsf((float(sy) - y + p.offset) * inv1), 0.0f);
            for (int64_t sx = x_lo; sx < x_hi; ++sx) {
                const float w = fmaxf(1.0f - fabsf((float(sx) - x + p.offset) * inv0), 0.0f) * wy;
                if (w <= 0.0f) continue;
                val += at(sx, sy) * w;
                total += w;
            }
        }
        return total > 0.0f ? val / total : val;
    }
    const float xs = x - p.offset, ys = y - p.offset;
    const int64_t xf = int64_t(floorf(xs)), yf = int64_t(floorf(ys));
    if (p.mode == GGML_SCALE_MODE_BILINEAR) {
        const int64_t x0 = clampi(xf, 0, p.ne00 - 1), x1 = clampi(xf + 1, 0, p.ne00 - 1);
        const int64_t y0 = clampi(yf, 0, p.ne01 - 1), y1 = clampi(yf + 1, 0, p.ne01 - 1);
        const float dx = fminf(fmaxf(xs - float(x0), 0.0f), 1.0f);
        const float dy = fminf(fmaxf(ys - float(y0), 0.0f), 1.0f);
        return at(x0, y0) * (1 - dx) * (1 - dy) + at(x1, y0) * dx * (1 - dy) + at(x0, y1) * (1 - dx) * dy +
               at(x1, y1) * dx * dy;
    }
    // BICUBIC
    const float dx = xs - float(xf), dy = ys - float(yf);
    float rows[4];
    for (int r = 0; r < 4; ++r) {
        const int64_t yy = clampi(yf + r - 1, 0, p.ne01 - 1);
        float px[4];
        for (int c = 0; c < 4; ++c) px[c] = at(clampi(xf + c - 1, 0, p.ne00 - 1), yy);
        rows[r] = cubic(px[0], px[1], px[2], px[3], dx);
    }
    return cubic(rows[0], rows[1], rows[2], rows[3], dy);
}

} // namespace standin::upscale
