// The shared rope and softmax numerics (kernels/common/rope.h, softmax.h)
// against direct formulas and ggml's exported helpers, and the host kernels
// that use them run on small tensors: softmax rows sum to 1, ALiBi slopes,
// sinks, rope rotation angles, and ADD1 (which test-backend-ops never builds).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ggml.h"
#include "kernels/common/rope.h"
#include "kernels/common/softmax.h"
#include "kernels/op_table.h"
#include "runtime/host/host_device.h"

using namespace standin;

namespace {

// Positions are small integers and bases typical of llama models.
TEST(RopeNumerics, CorrDimsMatchGgml) {
    for (int n_dims : {64, 128}) {
        for (float base : {10000.0f, 500000.0f}) {
            for (int n_ctx : {2048, 8192}) {
                float ours[2], ref[2];
                num::rope_yarn_corr_dims(n_dims, n_ctx, base, 32.0f, 1.0f, ours);
                ggml_rope_yarn_corr_dims(n_dims, n_ctx, base, 32.0f, 1.0f, ref);
                EXPECT_EQ(ours[0], ref[0]);
                EXPECT_EQ(ours[1], ref[1]);
            }
        }
    }
}

TEST(RopeNumerics, RampIsOneBelowAndZeroAboveTheRange) {
    EXPECT_EQ(num::rope_yarn_ramp(4.0f, 10.0f, 0), 1.0f);
    EXPECT_EQ(num::rope_yarn_ramp(4.0f, 10.0f, 2 * 20), 0.0f);
    EXPECT_NEAR(num::rope_yarn_ramp(4.0f, 10.0f, 2 * 7), 0.5f, 1e-6f);
}

num::RopeParams plain_params(int n_dims, float base) {
    num::RopeParams rp{};
    rp.n_dims      = n_dims;
    rp.mode        = num::kRopeNeox;
    rp.n_ctx_orig  = 4096;
    rp.freq_base   = base;
    rp.freq_scale  = 1.0f;
    rp.attn_factor = 1.0f;
    rp.beta_fast   = 32.0f;
    rp.beta_slow   = 1.0f;
    return rp;
}

TEST(RopeNumerics, CacheAnglesMatchTheDirectFormula) {
    const int n_dims = 128;
    const num::RopeParams rp = plain_params(n_dims, 10000.0f);
    float corr[2];
    num::rope_yarn_corr_dims(n_dims, rp.n_ctx_orig, rp.freq_base, rp.beta_fast, rp.beta_slow, corr);
    std::vector<float> cache(n_dims);
    for (int pos : {0, 1, 17, 511}) {
        const float p[4] = {float(pos), 0, 0, 0};
        num::rope_cache_fill(rp, p, nullptr, corr, num::rope_theta_scale(rp.freq_base, n_dims), n_dims, 1.0f,
                             cache.data());
        for (int i0 = 0; i0 < n_dims; i0 += 2) {
            const double theta = pos * std::pow(10000.0, -double(i0) / n_dims);
            EXPECT_NEAR(cache[i0], std::cos(theta), 2e-4) << "pos " << pos << " pair " << i0;
            EXPECT_NEAR(cache[i0 + 1], std::sin(theta), 2e-4) << "pos " << pos << " pair " << i0;
            const float direct = num::rope_theta_direct(float(pos), num::rope_theta_scale(rp.freq_base, n_dims), i0);
            EXPECT_NEAR(direct, theta, 1e-5 * (1.0 + theta));
        }
    }
}

TEST(RopeNumerics, FreqFactorsDivideTheAngleAndBackwardFlipsSin) {
    const int n_dims = 8;
    const num::RopeParams rp = plain_params(n_dims, 100.0f);
    float corr[2];
    num::rope_yarn_corr_dims(n_dims, rp.n_ctx_orig, rp.freq_base, rp.beta_fast, rp.beta_slow, corr);
    const float ff[4] = {1.0f, 2.0f, 4.0f, 8.0f};
    const float p[4]  = {3.0f, 0, 0, 0};
    std::vector<float> fwd(n_dims), back(n_dims);
    num::rope_cache_fill(rp, p, ff, corr, num::rope_theta_scale(100.0f, n_dims), n_dims, 1.0f, fwd.data());
    num::rope_cache_fill(rp, p, ff, corr, num::rope_theta_scale(100.0f, n_dims), n_dims, -1.0f, back.data());
    for (int i0 = 0; i0 < n_dims; i0 += 2) {
        const double theta = 3.0 * std::pow(100.0, -double(i0) / n_dims) / ff[i0 / 2];
        EXPECT_NEAR(fwd[i0], std::cos(theta), 1e-6);
        EXPECT_NEAR(fwd[i0 + 1], std::sin(theta), 1e-6);
        EXPECT_EQ(back[i0], fwd[i0]);
        EXPECT_EQ(back[i0 + 1], -fwd[i0 + 1]);
    }
}

TEST(RopeNumerics, YarnExtFactorScalesTheMagnitude) {
    const int n_dims = 64;
    num::RopeParams rp = plain_params(n_dims, 10000.0f);
    rp.freq_scale  = 0.25f;
    rp.ext_factor  = 1.0f;
    rp.attn_factor = 0.8f;
    float corr[2];
    num::rope_yarn_corr_dims(n_dims, rp.n_ctx_orig, rp.freq_base, rp.beta_fast, rp.beta_slow, corr);
    std::vector<float> cache(n_dims);
    const float p[4] = {100.0f, 0, 0, 0};
    num::rope_cache_fill(rp, p, nullptr, corr, num::rope_theta_scale(rp.freq_base, n_dims), n_dims, 1.0f,
                         cache.data());
    const double mscale = 0.8 * (1.0 + 0.1 * std::log(1.0 / 0.25));
    for (int i0 = 0; i0 < n_dims; i0 += 2) {
        EXPECT_NEAR(std::hypot(cache[i0], cache[i0 + 1]), mscale, 1e-5);
    }
    // Below the correction range the angle is pure extrapolation (unscaled);
    // above it pure interpolation (freq_scale times the angle).
    EXPECT_NEAR(cache[0] / mscale, std::cos(100.0), 1e-4);
    const int last = n_dims - 2;
    const double theta_last = 100.0 * std::pow(10000.0, -double(last) / n_dims) * 0.25;
    EXPECT_NEAR(cache[last] / mscale, std::cos(theta_last), 1e-4);
}

TEST(RopeNumerics, MropeSectionsPickTheirPositionStream) {
    const int sec[4] = {2, 3, 3, 0};
    const int want[8] = {0, 0, 1, 1, 1, 2, 2, 2};
    for (int s = 0; s < 8; ++s) EXPECT_EQ(num::rope_mrope_stream(s, sec, false), want[s]) << s;
    // Interleaved: t, h, w repeating while each stream has pairs left.
    const int isec[4] = {2, 2, 2, 0};
    const int iwant[8] = {0, 1, 2, 0, 1, 2, 3, 3};
    for (int s = 0; s < 8; ++s) EXPECT_EQ(num::rope_mrope_stream(s, isec, true), iwant[s]) << s;
}

// The CUDA kernel computes each VISION pair's angle alone (rope_vision_theta);
// it must be the angle rope_cache_fill reaches walking the pairs, bit for bit,
// for section layouts with restarts, empty sections and sections that repeat.
TEST(RopeNumerics, VisionAngleOfOnePairIsTheCachesAngle) {
    const int layouts[][4] = {{16, 16, 0, 0}, {8, 4, 4, 0}, {0, 12, 4, 0}, {6, 6, 6, 6}, {3, 5, 0, 0}};
    for (const auto & sec : layouts) {
        num::RopeParams rp = plain_params(64, 10000.0f);
        rp.mode = num::kRopeVision;
        for (int i = 0; i < 4; ++i) rp.sections[i] = sec[i];
        const int64_t ne0 = 2 * rp.n_dims;  // VISION rotates every channel: n_dims pairs
        float corr[2];
        num::rope_yarn_corr_dims(rp.n_dims, rp.n_ctx_orig, rp.freq_base, rp.beta_fast, rp.beta_slow, corr);
        const float ts = num::rope_theta_scale(rp.freq_base, rp.n_dims);
        const float p[4] = {37.0f, 5.0f, 11.0f, 2.0f};
        std::vector<float> cache(static_cast<size_t>(ne0));
        num::rope_cache_fill(rp, p, nullptr, corr, ts, ne0, 1.0f, cache.data());
        for (int k = 0; k < rp.n_dims; ++k) {
            float c, sn;
            num::rope_yarn(num::rope_vision_theta(rp, p, ts, k), rp.freq_scale, corr, 2 * k, rp.ext_factor,
                           rp.attn_factor, &c, &sn);
            EXPECT_EQ(c, cache[2 * k]) << "sections " << sec[0] << "," << sec[1] << " pair " << k;
            EXPECT_EQ(sn, cache[2 * k + 1]) << "sections " << sec[0] << "," << sec[1] << " pair " << k;
        }
    }
}

TEST(SoftmaxNumerics, AlibiSlopesFollowTheDefinition) {
    for (uint32_t n_head : {8u, 12u}) {
        const float max_bias = 8.0f;
        const num::Alibi a = num::make_alibi(max_bias, n_head);
        const uint32_t n = 1u << uint32_t(std::floor(std::log2(double(n_head))));
        EXPECT_EQ(a.n_head_log2, n);
        for (uint32_t h = 0; h < n_head; ++h) {
            const double want = h < n ? std::pow(2.0, -double(max_bias) / n * (h + 1))
                                      : std::pow(2.0, -double(max_bias) / (2.0 * n) * (2.0 * (h - n) + 1.0));
            EXPECT_NEAR(a.slope(h), want, 1e-6 * want) << "n_head " << n_head << " h " << h;
        }
    }
    EXPECT_EQ(num::make_alibi(0.0f, 32).slope(5), 1.0f);
}

TEST(SoftmaxNumerics, OnlineSoftmaxMatchesTheDirectSum) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-20.0f, 20.0f);
    std::vector<float> s(100);
    for (float & v : s) v = dist(rng);
    num::OnlineSoftmax st;
    double acc = 0.0;  // a running weighted sum, rescaled like the value rows
    for (size_t b = 0; b < s.size(); b += 7) {
        float mx = -INFINITY;
        for (size_t i = b; i < std::min(s.size(), b + 7); ++i) mx = std::max(mx, s[i]);
        acc *= st.rescale_to(mx);
        for (size_t i = b; i < std::min(s.size(), b + 7); ++i) {
            const float w = std::exp(s[i] - st.m);
            st.add(w);
            acc += w * double(i);
        }
    }
    acc *= st.add_sink(25.0f);
    double mx = 25.0, den = 0.0, num_ = 0.0;
    for (float v : s) mx = std::max(mx, double(v));
    for (size_t i = 0; i < s.size(); ++i) {
        den += std::exp(s[i] - mx);
        num_ += std::exp(s[i] - mx) * double(i);
    }
    den += std::exp(25.0 - mx);
    EXPECT_NEAR(acc * st.inv_sum(), num_ / den, 1e-4 * (num_ / den));
    EXPECT_EQ(num::OnlineSoftmax{}.inv_sum(), 0.0f);  // every key masked
}

TEST(SoftmaxNumerics, SoftCapBoundsTheScore) {
    EXPECT_NEAR(num::attn_score(1000.0f, 1.0f, 10.0f), 10.0f, 1e-5f);
    EXPECT_NEAR(num::attn_score(0.5f, 2.0f, 0.0f), 1.0f, 0.0f);
}

// --- host kernels on small tensors ------------------------------------------

class HostKernels : public ::testing::Test {
protected:
    void SetUp() override {
        ggml_init_params p = {16 << 20, nullptr, false};
        ctx = ggml_init(p);
    }
    void TearDown() override { ggml_free(ctx); }

    void run(ggml_tensor * node) {
        ASSERT_TRUE(kernels::supports(rt::Kind::host, node)) << ggml_op_desc(node);
        ASSERT_TRUE(kernels::run_node(rt::Kind::host, stream, node)) << ggml_op_desc(node);
    }

    static void fill(ggml_tensor * t, float lo, float hi, unsigned seed) {
        std::mt19937 rng(seed);
        std::uniform_real_distribution<float> d(lo, hi);
        float * x = static_cast<float *>(t->data);
        for (int64_t i = 0; i < ggml_nelements(t); ++i) x[i] = d(rng);
    }

    // ggml_add1 is deprecated in ggml.h, but graphs may still hold ADD1 nodes.
    ggml_tensor * add1_node(ggml_tensor * a, ggml_tensor * b) {
        ggml_tensor * y = ggml_dup_tensor(ctx, a);
        y->op     = GGML_OP_ADD1;
        y->src[0] = a;
        y->src[1] = b;
        return y;
    }

    ggml_context * ctx = nullptr;
    rt::host::HostStream stream{2};
};

TEST_F(HostKernels, SoftmaxRowsSumToOneAndFollowAlibiMaskAndSinks) {
    const int64_t n = 37, rows = 5, heads = 6;
    ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n, rows, heads);
    ggml_tensor * m = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, rows);
    ggml_tensor * s = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, heads);
    fill(a, -5.0f, 5.0f, 1);
    fill(m, -2.0f, 2.0f, 2);
    fill(s, -1.0f, 3.0f, 3);
    static_cast<float *>(m->data)[4] = -INFINITY;  // masked key of row 0
    const float scale = 0.3f, max_bias = 4.0f;
    ggml_tensor * plain = ggml_soft_max(ctx, a);
    ggml_tensor * ext = ggml_soft_max_ext(ctx, a, m, scale, max_bias);
    ggml_soft_max_add_sinks(ext, s);
    run(plain);
    run(ext);
    const num::Alibi alibi = num::make_alibi(max_bias, uint32_t(heads));
    for (int64_t h = 0; h < heads; ++h) {
        for (int64_t r = 0; r < rows; ++r) {
            const float * x = static_cast<const float *>(a->data) + (h * rows + r) * n;
            const float * mr = static_cast<const float *>(m->data) + r * n;
            const float * yp = static_cast<const float *>(plain->data) + (h * rows + r) * n;
            const float * ye = static_cast<const float *>(ext->data) + (h * rows + r) * n;
            double sum = 0.0, mx = static_cast<const float *>(s->data)[h];
            for (int64_t i = 0; i < n; ++i) {
                sum += yp[i];
                mx = std::max(mx, double(x[i]) * scale + alibi.slope(uint32_t(h)) * mr[i]);
            }
            EXPECT_NEAR(sum, 1.0, 1e-5);
            double den = std::exp(double(static_cast<const float *>(s->data)[h]) - mx);
            for (int64_t i = 0; i < n; ++i) den += std::exp(double(x[i]) * scale + alibi.slope(uint32_t(h)) * mr[i] - mx);
            for (int64_t i = 0; i < n; ++i) {
                const double want = std::exp(double(x[i]) * scale + alibi.slope(uint32_t(h)) * mr[i] - mx) / den;
                EXPECT_NEAR(ye[i], want, 1e-6 + 1e-5 * want) << "h " << h << " r " << r << " i " << i;
            }
            if (r == 0) {
                EXPECT_EQ(ye[4], 0.0f);
            }
        }
    }
}

TEST_F(HostKernels, RopeRotatesEachPairByItsAngle) {
    const int64_t d = 16, heads = 3, toks = 4;
    ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d, heads, toks);
    ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, toks);
    fill(x, -1.0f, 1.0f, 4);
    for (int t = 0; t < toks; ++t) static_cast<int32_t *>(pos->data)[t] = 7 * t + 1;
    ggml_tensor * y = ggml_rope_ext(ctx, x, pos, nullptr, int(d), GGML_ROPE_TYPE_NEOX, 4096, 10000.0f, 1.0f, 0.0f,
                                    1.0f, 32.0f, 1.0f);
    run(y);
    for (int64_t t = 0; t < toks; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
            const float * xr = static_cast<const float *>(x->data) + (t * heads + h) * d;
            const float * yr = static_cast<const float *>(y->data) + (t * heads + h) * d;
            for (int64_t k = 0; k < d / 2; ++k) {
                const double th = (7.0 * t + 1.0) * std::pow(10000.0, -2.0 * k / d);
                const double y0 = xr[k] * std::cos(th) - xr[k + d / 2] * std::sin(th);
                const double y1 = xr[k] * std::sin(th) + xr[k + d / 2] * std::cos(th);
                EXPECT_NEAR(yr[k], y0, 1e-5);
                EXPECT_NEAR(yr[k + d / 2], y1, 1e-5);
            }
        }
    }
}

TEST_F(HostKernels, Add1AddsTheScalarToEveryElement) {
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 19, 3);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    fill(a, -3.0f, 3.0f, 5);
    static_cast<float *>(b->data)[0] = 1.25f;
    ggml_tensor * y = add1_node(a, b);
    run(y);
    for (int64_t i = 0; i < ggml_nelements(a); ++i) {
        EXPECT_EQ(static_cast<const float *>(y->data)[i], static_cast<const float *>(a->data)[i] + 1.25f);
    }
    // F16 tensor plus an F32 scalar, rounded once.
    ggml_tensor * h = ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 9);
    for (int i = 0; i < 9; ++i) static_cast<ggml_fp16_t *>(h->data)[i] = ggml_fp32_to_fp16(0.1f * i);
    ggml_tensor * yh = add1_node(h, b);
    run(yh);
    for (int i = 0; i < 9; ++i) {
        const float want = ggml_fp16_to_fp32(ggml_fp32_to_fp16(ggml_fp16_to_fp32(ggml_fp32_to_fp16(0.1f * i)) + 1.25f));
        EXPECT_EQ(ggml_fp16_to_fp32(static_cast<const ggml_fp16_t *>(yh->data)[i]), want);
    }
}

TEST_F(HostKernels, UnsupportedRopeModesAreRefused) {
    ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 16, 2, 3);
    ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3);
    ggml_tensor * y = ggml_rope(ctx, x, pos, 16, GGML_ROPE_TYPE_NEOX);
    EXPECT_TRUE(kernels::supports(rt::Kind::host, y));
    y->op_params[2] = 4;  // not a ggml rope mode
    EXPECT_FALSE(kernels::supports(rt::Kind::host, y));
    // The host flash attention takes a quantized K cache (read by its dot
    // kernel), but not a K of a type without one.
    ggml_tensor * q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 64, 1, 4);
    ggml_tensor * k = ggml_new_tensor_3d(ctx, GGML_TYPE_Q8_0, 64, 32, 4);
    ggml_tensor * ki = ggml_new_tensor_3d(ctx, GGML_TYPE_I32, 64, 32, 4);
    ggml_tensor * v = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 64, 32, 4);
    EXPECT_TRUE(kernels::supports(rt::Kind::host, ggml_flash_attn_ext(ctx, q, k, v, nullptr, 0.125f, 0.0f, 0.0f)));
    EXPECT_FALSE(kernels::supports(rt::Kind::host, ggml_flash_attn_ext(ctx, q, ki, v, nullptr, 0.125f, 0.0f, 0.0f)));
}

} // namespace
