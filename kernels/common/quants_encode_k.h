// Quantizers for the super-block types (256 elements) a CPY or SET_ROWS may
// write: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS. ggml-cpu's from_float for
// the five K types is ggml's reference quantizer (quantize_row_q*_K_ref), and
// for IQ4_XS quantize_iq4_xs without an importance matrix; test-backend-ops
// compares what a backend writes with that. Each is a search: per run of 16
// or 32 elements, candidate scales are tried and the one of least weighted
// error kept, then the run scales are themselves quantized and the elements
// rounded again under the stored scales. Every comparison in that search
// decides bytes, so the same float operations are done in the same order as
// the reference, and every product that meets a sum goes through mul_unfused
// (quants_encode.h): ggml-base is built without FMA, the host kernels with it.
//
// Included by quants.h after quants_encode.h (mul_unfused, enc::signed_amax,
// enc::nearest_iq4nl), whose list of encoded types names these; scalar SI_HD
// code like the rest. The CUDA kernels encode one 32-element block per
// thread and take none of these types (cuda_encodes, kernels/op_table.cpp).
#pragma once

namespace standin::quant {

namespace enc {

// Below this largest magnitude a run is taken as all zeros.
constexpr float kRunEps = 1e-15f;

// Round to the nearest integer, ties to even, the way ggml's quantizers do:
// adding 1.5 * 2^23 leaves the rounded value in the low 22 mantissa bits. The
// identity product keeps a caller's product from being fused into the add.
// Equal to rintf for |v| < 2^22 and, unlike a float-to-int cast, defined for
// every v (NaN gives 0, as in ggml).
SI_HD int round_half_even(float v) {
    const float t = mul_unfused(v, 1.0f) + 12582912.0f;
    return int(num::f32_bits(t) & 0x007fffffu) - 0x00400000;
}

SI_HD int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// --- run fits ------------------------------------------------------------------

// Symmetric levels -kMax .. kMax-1 (Q6_K, kMax = 32). The inverse scale that
// maps the signed extreme to -kMax, then 18 nudged ones, -(kMax + s/10) / vmax
// for s = +-1 .. +-9; a candidate is kept when its least-squares fit (weights
// x^2) explains more, sumlx^2 / suml2. Returns the fitted scale; L holds
// level + kMax. An all-but-zero run gives scale 0 and L = 0.
template <int kN, int kMax>
SI_HD void symmetric_sums(const float * x, float iscale, float & sumlx, float & suml2, uint8_t * L) {
    sumlx = 0.0f;
    suml2 = 0.0f;
    for (int i = 0; i < kN; ++i) {
        const int   l = clamp_int(round_half_even(iscale * x[i]), -kMax, kMax - 1);
        const float w = x[i] * x[i];
        if (L != nullptr) L[i] = uint8_t(l + kMax);
        sumlx += mul_unfused(w * x[i], float(l));
        suml2 += mul_unfused(w * float(l), float(l));
    }
}

template <int kN, int kMax>
SI_HD float fit_symmetric(const float * x, uint8_t * L) {
    float amax;
    const float vmax = signed_amax(x, kN, amax);
    if (amax < kRunEps) {
        for (int i = 0; i < kN; ++i) L[i] = 0;
        return 0.0f;
    }
    float sumlx, suml2;
    symmetric_sums<kN, kMax>(x, -float(kMax) / vmax, sumlx, suml2, L);
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best  = scale * sumlx;
    for (int s = -9; s <= 9; ++s) {
        if (s == 0) continue;
        const float iscale = -(float(kMax) + mul_unfused(0.1f, float(s))) / vmax;
        symmetric_sums<kN, kMax>(x, iscale, sumlx, suml2, nullptr);
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            symmetric_sums<kN, kMax>(x, iscale, sumlx, suml2, L);
            scale = sumlx / suml2;
            best  = scale * sumlx;
        }
    }
    return scale;
}

// Q3_K's run of 16 on levels -4..3: start from the scale mapping the signed
// extreme to -4, then up to 5 sweeps that move single elements to the level
// the others' least-squares scale asks for (weights x^2), keeping a move when
// the fit improves. Returns the fitted scale; L holds level + 4.
SI_HD float fit_q3_run(const float * x, int8_t * L) {
    constexpr int kN = 16, kMax = 4;
    float amax;
    const float vmax = signed_amax(x, kN, amax);
    if (amax < kRunEps) {
        for (int i = 0; i < kN; ++i) L[i] = 0;
        return 0.0f;
    }
    const float iscale = -float(kMax) / vmax;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < kN; ++i) {
        const int   l = clamp_int(round_half_even(iscale * x[i]), -kMax, kMax - 1);
        const float w = x[i] * x[i];
        L[i] = int8_t(l);
        sumlx += mul_unfused(w * x[i], float(l));
        suml2 += mul_unfused(w * float(l), float(l));
    }
    for (int sweep = 0; sweep < 5; ++sweep) {
        int moved = 0;
        for (int i = 0; i < kN; ++i) {
            const float w  = x[i] * x[i];
            const float li = float(L[i]);
            float slx = sumlx - mul_unfused(w * x[i], li);  // the sums without element i
            if (!(slx > 0.0f)) continue;
            float sl2 = suml2 - mul_unfused(w * li, li);
            const int nl = clamp_int(round_half_even(x[i] * sl2 / slx), -kMax, kMax - 1);
            if (nl == L[i]) continue;
            slx += mul_unfused(w * x[i], float(nl));
            sl2 += mul_unfused(w * float(nl), float(nl));
            if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i]  = int8_t(nl);
                sumlx = slx;
                suml2 = sl2;
                ++moved;
            }
        }
        if (moved == 0) break;
    }
    for (int i = 0; i < kN; ++i) L[i] = int8_t(L[i] + kMax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Error of levels Lv under value = scale * l + mn, weighted by w: sum of
// w |diff| (kAbs) or w diff^2.
template <int kN, bool kAbs>
SI_HD float min_fit_error(const float * x, const float * w, const uint8_t * Lv, float scale, float mn) {
    float err = 0.0f;
    for (int i = 0; i < kN; ++i) {
        float diff = mul_unfused(scale, float(Lv[i])) + mn - x[i];
        diff = kAbs ? fabsf(diff) : diff * diff;
        err += mul_unfused(w[i], diff);
    }
    return err;
}

// Levels 0..kMax with a scale and a minimum <= 0 (Q2_K, Q4_K, Q5_K): the
// range [min(x, 0), max x] split evenly first, then nstep + 1 inverse scales
// (rmin + rdelta * s + kMax) / range, each followed by the weighted
// least-squares scale and minimum of its levels (the minimum held at 0 when it
// would be positive); the candidate of least error (min_fit_error) is kept.
// Returns the scale; neg_min gets -minimum (>= 0).
template <int kN, int kMax, bool kAbs>
SI_HD float fit_with_min(const float * x, const float * w, uint8_t * L, float & neg_min, float rmin, float rdelta,
                         int nstep) {
    float lo = x[0], hi = x[0];
    float sum_w = w[0];
    float sum_x = mul_unfused(sum_w, x[0]);
    for (int i = 1; i < kN; ++i) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += mul_unfused(w[i], x[i]);
    }
    if (lo > 0.0f) lo = 0.0f;
    if (hi == lo) {
        for (int i = 0; i < kN; ++i) L[i] = 0;
        neg_min = -lo;
        return 0.0f;
    }
    float iscale = float(kMax) / (hi - lo);
    float scale  = 1.0f / iscale;
    for (int i = 0; i < kN; ++i) {
        L[i] = uint8_t(clamp_int(round_half_even(iscale * (x[i] - lo)), 0, kMax));
    }
    float best = min_fit_error<kN, kAbs>(x, w, L, scale, lo);
    uint8_t cand[kN];
    for (int s = 0; s <= nstep; ++s) {
        iscale = (rmin + mul_unfused(rdelta, float(s)) + float(kMax)) / (hi - lo);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < kN; ++i) {
            const int l = clamp_int(round_half_even(iscale * (x[i] - lo)), 0, kMax);
            cand[i] = uint8_t(l);
            sum_l  += mul_unfused(w[i], float(l));
            sum_l2 += mul_unfused(w[i] * float(l), float(l));
            sum_xl += mul_unfused(w[i] * float(l), x[i]);
        }
        const float det = mul_unfused(sum_w, sum_l2) - mul_unfused(sum_l, sum_l);
        if (!(det > 0.0f)) continue;
        float c_scale = (mul_unfused(sum_w, sum_xl) - mul_unfused(sum_x, sum_l)) / det;
        float c_min   = (mul_unfused(sum_l2, sum_x) - mul_unfused(sum_l, sum_xl)) / det;
        if (c_min > 0.0f) {
            c_min   = 0.0f;
            c_scale = sum_xl / sum_l2;
        }
        const float err = min_fit_error<kN, kAbs>(x, w, cand, c_scale, c_min);
        if (err < best) {
            for (int i = 0; i < kN; ++i) L[i] = cand[i];
            best  = err;
            scale = c_scale;
            lo    = c_min;
        }
    }
    neg_min = -lo;
    return scale;
}

// IQ4_XS's run of 32: the IQ4_NL level indices of x at inverse scale id
// (levels as iq4nl_level), and the sums sum w q x and sum w q^2 with w = x^2.
SI_HD void iq4_sums(const float * x, float id, float & sumqx, float & sumq2) {
    sumqx = 0.0f;
    sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
        const float q = float(iq4nl_level(nearest_iq4nl(mul_unfused(id, x[j]))));
        const float w = x[j] * x[j];
        sumqx += mul_unfused(w * q, x[j]);
        sumq2 += mul_unfused(w * q, q);
    }
}

// The run's scale: the one mapping the signed extreme to the first level,
// refitted by least squares, then 15 inverse scales (t - 127) / vmax for
// t = -7..7, each refitted and kept when it explains more. 0 for an
// all-but-zero run.
SI_HD float fit_iq4_run(const float * x) {
    float amax;
    const float vmax = signed_amax(x, 32, amax);
    if (amax < kRunEps) return 0.0f;
    float sumqx, sumq2;
    iq4_sums(x, 1.0f / (-vmax / float(iq4nl_level(0))), sumqx, sumq2);
    float d    = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int t = -7; t <= 7; ++t) {
        iq4_sums(x, float(t + iq4nl_level(0)) / vmax, sumqx, sumq2);
        if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
            d    = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

// --- shared by the K types ------------------------------------------------------

// Q4_K and Q5_K: 8 runs of 32 fitted with a minimum (weights: the run's rms
// plus |x|), their scales and minimums quantized to 6 bits against the largest
// of each (stored in the 12 bytes k_scale_min reads), then every element
// rounded again under the stored scale and minimum (a run whose stored scale
// is zero keeps its fitted levels). L gets the levels 0..kMax.
template <int kMax>
SI_HD void fit_k_min_block(const float * x, uint16_t & d, uint16_t & dmin, uint8_t (&packed)[12], uint8_t * L,
                           float rmin, int nstep) {
    float sc[8], mn[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
        const float * xs = x + 32 * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; ++l) sum_x2 += mul_unfused(xs[l], xs[l]);
        const float rms = sqrtf(sum_x2 / 32.0f);
        float w[32];
        for (int l = 0; l < 32; ++l) w[l] = rms + fabsf(xs[l]);
        sc[j] = fit_with_min<32, kMax, false>(xs, w, L + 32 * j, mn[j], rmin, 0.1f, nstep);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mn[j] > max_min) max_min = mn[j];
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min   = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; ++j) {
        // the 8-bit wrap first, then the cap, as the reference stores them
        uint8_t ls = uint8_t(round_half_even(inv_scale * sc[j]));
        uint8_t lm = uint8_t(round_half_even(inv_min * mn[j]));
        ls = ls < 63 ? ls : uint8_t(63);
        lm = lm < 63 ? lm : uint8_t(63);
        if (j < 4) {
            packed[j]     = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = uint8_t((ls & 15) | ((lm & 15) << 4));
            packed[j - 4] = uint8_t(packed[j - 4] | ((ls >> 4) << 6));
            packed[j]     = uint8_t(packed[j] | ((lm >> 4) << 6));
        }
    }
    d    = num::f32_to_fp16(max_scale / 63.0f);
    dmin = num::f32_to_fp16(max_min / 63.0f);
    for (int j = 0; j < 8; ++j) {
        int s, m;
        k_scale_min(packed, j, s, m);
        const float ds = half(d) * float(s);
        if (ds == 0.0f) continue;
        const float dm = mul_unfused(half(dmin), float(m));
        for (int l = 0; l < 32; ++l) {
            L[32 * j + l] = uint8_t(clamp_int(round_half_even((x[32 * j + l] + dm) / ds), 0, kMax));
        }
    }
}

// Four 2-bit fields per byte, in the layout of Q2_K and Q3_K's qs (element e
// in field (e % 128) / 32 of byte 32 * (e / 128) + e % 32).
SI_HD void pack_2bit(const uint8_t * L, uint8_t * qs) {
    for (int h = 0; h < 2; ++h) {
        const uint8_t * Lh = L + 128 * h;
        for (int m = 0; m < 32; ++m) {
            qs[32 * h + m] = uint8_t(Lh[m] | (Lh[m + 32] << 2) | (Lh[m + 64] << 4) | (Lh[m + 96] << 6));
        }
    }
}

} // namespace enc

// --- quantizers -------------------------------------------------------------------

// Q2_K: 16 runs of 16 fitted with a minimum (weights |x|, absolute error),
// scales and minimums to 4 bits against the largest of each, then every
// element rounded again to 0..3 under the stored scale and minimum.
SI_HD void quantize(const float * x, BlockQ2_K & b) {
    uint8_t L[kQK_K];
    float sc[16], mn[16];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int r = 0; r < 16; ++r) {
        const float * xr = x + 16 * r;
        float w[16];
        for (int l = 0; l < 16; ++l) w[l] = fabsf(xr[l]);
        sc[r] = enc::fit_with_min<16, 3, true>(xr, w, L + 16 * r, mn[r], -0.5f, 0.1f, 15);
        if (sc[r] > max_scale) max_scale = sc[r];
        if (mn[r] > max_min) max_min = mn[r];
    }
    for (int r = 0; r < 16; ++r) b.scales[r] = 0;
    b.d = num::f32_to_fp16(0.0f);
    if (max_scale > 0.0f) {
        const float iscale = 15.0f / max_scale;
        for (int r = 0; r < 16; ++r) b.scales[r] = uint8_t(enc::round_half_even(iscale * sc[r]));
        b.d = num::f32_to_fp16(max_scale / 15.0f);
    }
    b.dmin = num::f32_to_fp16(0.0f);
    if (max_min > 0.0f) {
        const float iscale = 15.0f / max_min;
        for (int r = 0; r < 16; ++r) {
            b.scales[r] = uint8_t(b.scales[r] | (unsigned(enc::round_half_even(iscale * mn[r])) << 4));
        }
        b.dmin = num::f32_to_fp16(max_min / 15.0f);
    }
    for (int r = 0; r < 16; ++r) {
        const float d = half(b.d) * float(b.scales[r] & 15);
        if (d == 0.0f) continue;
        const float dm = mul_unfused(half(b.dmin), float(b.scales[r] >> 4));
        for (int l = 0; l < 16; ++l) {
            L[16 * r + l] = uint8_t(enc::clamp_int(enc::round_half_even((x[16 * r + l] + dm) / d), 0, 3));
        }
    }
    enc::pack_2bit(L, b.qs);
}

// Q3_K: 16 runs of 16 (fit_q3_run), signed scales to 6 bits against the one
// of largest magnitude (mapped to -32), every element rounded again to -4..3
// under the stored scale; low 2 bits in qs, the third in hmask.
SI_HD void quantize(const float * x, BlockQ3_K & b) {
    int8_t L[kQK_K];
    float sc[16];
    float max_scale = 0.0f, amax = 0.0f;
    for (int r = 0; r < 16; ++r) {
        sc[r] = enc::fit_q3_run(x + 16 * r, L + 16 * r);
        if (fabsf(sc[r]) > amax) {
            amax = fabsf(sc[r]);
            max_scale = sc[r];
        }
    }
    for (int i = 0; i < 12; ++i) b.scales[i] = 0;
    b.d = num::f32_to_fp16(0.0f);
    if (max_scale != 0.0f) {
        const float iscale = -32.0f / max_scale;
        for (int r = 0; r < 16; ++r) {
            // through int8, as the reference holds it, then clamped and offset
            const int l = enc::clamp_int(int8_t(enc::round_half_even(iscale * sc[r])), -32, 31) + 32;
            b.scales[r % 8] = uint8_t(b.scales[r % 8] | ((l & 15) << (r < 8 ? 0 : 4)));
            b.scales[8 + r % 4] = uint8_t(b.scales[8 + r % 4] | ((l >> 4) << (2 * (r / 4))));
        }
        b.d = num::f32_to_fp16(1.0f / iscale);
    }
    for (int r = 0; r < 16; ++r) {
        const int lo = r < 8 ? b.scales[r] & 15 : b.scales[r - 8] >> 4;
        const int hi = (b.scales[8 + r % 4] >> (2 * (r / 4))) & 3;
        const float d = half(b.d) * float(int8_t((lo | (hi << 4)) - 32));
        if (d == 0.0f) continue;
        for (int l = 0; l < 16; ++l) {
            L[16 * r + l] = int8_t(enc::clamp_int(enc::round_half_even(x[16 * r + l] / d), -4, 3) + 4);
        }
    }
    uint8_t low[kQK_K];
    for (int i = 0; i < kQK_K / 8; ++i) b.hmask[i] = 0;
    for (int e = 0; e < kQK_K; ++e) {
        int l = L[e];
        if (l > 3) {
            b.hmask[e % 32] = uint8_t(b.hmask[e % 32] | (1u << (e / 32)));
            l -= 4;
        }
        low[e] = uint8_t(l);
    }
    enc::pack_2bit(low, b.qs);
}

SI_HD void quantize(const float * x, BlockQ4_K & b) {
    uint8_t L[kQK_K];
    enc::fit_k_min_block<15>(x, b.d, b.dmin, b.scales, L, -1.0f, 20);
    for (int g = 0; g < 4; ++g) {
        for (int l = 0; l < 32; ++l) b.qs[32 * g + l] = uint8_t(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
    }
}

SI_HD void quantize(const float * x, BlockQ5_K & b) {
    uint8_t L[kQK_K];
    enc::fit_k_min_block<31>(x, b.d, b.dmin, b.scales, L, -0.5f, 15);
    for (int l = 0; l < 32; ++l) b.qh[l] = 0;
    for (int g = 0; g < 4; ++g) {
        for (int l = 0; l < 32; ++l) {
            const int lo = L[64 * g + l], hi = L[64 * g + 32 + l];
            b.qs[32 * g + l] = uint8_t((lo & 15) | ((hi & 15) << 4));
            b.qh[l] = uint8_t(b.qh[l] | ((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
        }
    }
}

// Q6_K: 16 runs of 16 on levels -32..31 (fit_symmetric), signed 8-bit scales
// against the one of largest magnitude (mapped to -128, capped at 127), every
// element rounded again under the stored scale. An all-but-zero block is all
// zero bytes.
SI_HD void quantize(const float * x, BlockQ6_K & b) {
    uint8_t L[kQK_K];
    float sc[16];
    float max_scale = 0.0f, amax = 0.0f;
    for (int r = 0; r < 16; ++r) {
        sc[r] = enc::fit_symmetric<16, 32>(x + 16 * r, L + 16 * r);
        if (fabsf(sc[r]) > amax) {
            amax = fabsf(sc[r]);
            max_scale = sc[r];
        }
    }
    if (amax < enc::kRunEps) {
        for (int i = 0; i < kQK_K / 2; ++i) b.ql[i] = 0;
        for (int i = 0; i < kQK_K / 4; ++i) b.qh[i] = 0;
        for (int i = 0; i < 16; ++i) b.scales[i] = 0;
        b.d = 0;
        return;
    }
    const float iscale = -128.0f / max_scale;
    b.d = num::f32_to_fp16(1.0f / iscale);
    for (int r = 0; r < 16; ++r) {
        const int s = enc::round_half_even(iscale * sc[r]);
        b.scales[r] = int8_t(s < 127 ? s : 127);
    }
    for (int r = 0; r < 16; ++r) {
        const float d = half(b.d) * float(b.scales[r]);
        if (d == 0.0f) continue;
        for (int l = 0; l < 16; ++l) {
            L[16 * r + l] = uint8_t(enc::clamp_int(enc::round_half_even(x[16 * r + l] / d), -32, 31) + 32);
        }
    }
    for (int h = 0; h < 2; ++h) {
        const uint8_t * Lh = L + 128 * h;
        uint8_t * ql = b.ql + 64 * h;
        uint8_t * qh = b.qh + 32 * h;
        for (int l = 0; l < 32; ++l) {
            const int q0 = Lh[l], q1 = Lh[l + 32], q2 = Lh[l + 64], q3 = Lh[l + 96];
            ql[l]      = uint8_t((q0 & 15) | ((q2 & 15) << 4));
            ql[l + 32] = uint8_t((q1 & 15) | ((q3 & 15) << 4));
            qh[l]      = uint8_t((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
        }
    }
}

// IQ4_XS: 8 runs of 32 fitted on the IQ4_NL levels (fit_iq4_run), the super
// scale mapping the run scale of largest magnitude to -32 (kept unrounded for
// what follows, as the reference does), each run scale to 6 bits, and every
// element's level chosen again under its quantized run scale.
SI_HD void quantize(const float * x, BlockIQ4_XS & b) {
    float sc[8];
    float max_scale = 0.0f, amax = 0.0f;
    for (int r = 0; r < 8; ++r) {
        sc[r] = enc::fit_iq4_run(x + 32 * r);
        if (fabsf(sc[r]) > amax) {
            amax = fabsf(sc[r]);
            max_scale = sc[r];
        }
    }
    const float d  = -max_scale / 32.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = num::f32_to_fp16(d);
    b.scales_h = 0;
    for (int i = 0; i < 4; ++i) b.scales_l[i] = 0;
    for (int r = 0; r < 8; ++r) {
        const float * xr = x + 32 * r;
        const int   l   = enc::clamp_int(enc::round_half_even(id * sc[r]), -32, 31);
        const float dl  = d * float(l);
        const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
        for (int j = 0; j < 16; ++j) {
            const int lo = enc::nearest_iq4nl(mul_unfused(idl, xr[j]));
            const int hi = enc::nearest_iq4nl(mul_unfused(idl, xr[j + 16]));
            b.qs[16 * r + j] = uint8_t(lo | (hi << 4));
        }
        const int ls = l + 32;
        b.scales_l[r / 2] = uint8_t(b.scales_l[r / 2] | ((ls & 15) << (4 * (r % 2))));
        b.scales_h = uint16_t(b.scales_h | ((ls >> 4) << (2 * r)));
    }
}

} // namespace standin::quant
