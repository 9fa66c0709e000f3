// The shared formulas of the op families added for MoE, state-space and
// encoder models (kernels/common/{math_ops,dsv4,upscale}.h), and the support
// predicates' refusals of cases their kernels do not run (test-backend-ops
// only exercises what a predicate claims, so the refusals are checked here).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ggml.h"
#include "kernels/common/dsv4.h"
#include "kernels/common/math_ops.h"
#include "kernels/common/upscale.h"
#include "kernels/op_table.h"

using namespace standin;

TEST(FamilyMath, ClampTakesTheBoundsInGgmlsOrder) {
    const mathop::Params p{GGML_OP_CLAMP, -1.0f, 2.0f};
    EXPECT_EQ(mathop::apply(p, -3.0f), -1.0f);
    EXPECT_EQ(mathop::apply(p, 0.5f), 0.5f);
    EXPECT_EQ(mathop::apply(p, 7.0f), 2.0f);
    EXPECT_EQ(mathop::apply(p, NAN), 2.0f);  // min(NaN, max) is max in ggml's reference
    const mathop::Params lr{GGML_OP_LEAKY_RELU, 0.1f, 0.0f};
    EXPECT_FLOAT_EQ(mathop::apply(lr, -2.0f), -0.2f);
    EXPECT_EQ(mathop::apply(lr, 3.0f), 3.0f);
}

// After the Sinkhorn passes every destination's weights sum to one (up to the
// eps terms), whatever the logits.
TEST(FamilyMath, HyperConnectionMixingIsNormalised) {
    float m[16];
    for (int i = 0; i < 16; ++i) m[i] = std::sin(float(i) * 1.7f) * 3.0f;
    dsv4::hc_comb(m, 1e-6f, 20);
    for (int d = 0; d < 4; ++d) {
        float sum = 0.0f;
        for (int s = 0; s < 4; ++s) {
            EXPECT_GT(m[d + 4 * s], 0.0f);
            sum += m[d + 4 * s];
        }
        EXPECT_NEAR(sum, 1.0f, 1e-4f);
    }
    for (int s = 0; s < 4; ++s) {  // and, after enough passes, every source too
        float sum = 0.0f;
        for (int d = 0; d < 4; ++d) sum += m[d + 4 * s];
        EXPECT_NEAR(sum, 1.0f, 1e-3f);
    }
}

class FamilyTensors : public ::testing::Test {
protected:
    void SetUp() override {
        ggml_init_params p = {256 * ggml_tensor_overhead(), nullptr, true};
        ctx = ggml_init(p);
    }
    void TearDown() override { ggml_free(ctx); }
    ggml_context * ctx = nullptr;
};

// A 2x upscale samples pixel floor(i / 2) (nearest) and interpolates halfway
// between neighbours (bilinear), clamping at the border.
TEST_F(FamilyTensors, UpscaleSamplesWhereGgmlDoes) {
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 1);
    const float src[4] = {0.0f, 10.0f, 20.0f, 30.0f};
    const auto at = [&](int64_t x, int64_t) { return src[x]; };
    ggml_tensor * nearest = ggml_interpolate(ctx, a, 8, 1, 1, 1, GGML_SCALE_MODE_NEAREST);
    const upscale::Params pn = upscale::params_of(nearest, GGML_SCALE_MODE_NEAREST);
    EXPECT_EQ(upscale::sample(pn, 5, 0, at), 20.0f);
    ggml_tensor * bil = ggml_interpolate(ctx, a, 8, 1, 1, 1, GGML_SCALE_MODE_BILINEAR);
    const upscale::Params pb = upscale::params_of(bil, GGML_SCALE_MODE_BILINEAR);
    EXPECT_FLOAT_EQ(upscale::sample(pb, 0, 0, at), 0.0f);   // x = -0.25 clamps to pixel 0
    EXPECT_FLOAT_EQ(upscale::sample(pb, 3, 0, at), 12.5f);  // x = 1.25
    EXPECT_FLOAT_EQ(upscale::sample(pb, 7, 0, at), 30.0f);  // x = 3.25 clamps to pixel 3
    const upscale::Params pa = upscale::params_of(bil, GGML_SCALE_MODE_BILINEAR | GGML_SCALE_FLAG_ALIGN_CORNERS);
    EXPECT_FLOAT_EQ(upscale::sample(pa, 7, 0, at), 30.0f);  // the corners line up
    EXPECT_NEAR(upscale::sample(pa, 1, 0, at), 30.0f / 7.0f, 1e-5f);
}

TEST_F(FamilyTensors, PredicatesRefuseWhatTheKernelsDoNotRun) {
    const auto host = [](const ggml_tensor * t) { return kernels::supports(rt::Kind::host, t); };
    ggml_tensor * f32 = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 16, 4);
    ggml_tensor * f16 = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 16, 4);
    EXPECT_TRUE(host(ggml_argsort(ctx, f32, GGML_SORT_ORDER_DESC)));
    EXPECT_FALSE(host(ggml_argsort(ctx, f16, GGML_SORT_ORDER_DESC)));  // F32 keys only
    EXPECT_TRUE(host(ggml_top_k(ctx, f32, 4)));
    EXPECT_TRUE(host(ggml_clamp(ctx, f16, -1.0f, 1.0f)));
    EXPECT_FALSE(host(ggml_cumsum(ctx, ggml_transpose(ctx, f32))));  // dim-0 elements must be adjacent
    EXPECT_TRUE(host(ggml_fill(ctx, f16, 2.0f)));
    // A pool kind ggml has no kernel for is refused.
    ggml_tensor * img = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 8, 8, 2);
    EXPECT_TRUE(host(ggml_pool_2d(ctx, img, GGML_OP_POOL_MAX, 2, 2, 2, 2, 0, 0)));
    ggml_tensor * bad_pool = ggml_pool_2d(ctx, img, GGML_OP_POOL_MAX, 2, 2, 2, 2, 0, 0);
    bad_pool->op_params[0] = GGML_OP_POOL_COUNT;
    EXPECT_FALSE(host(bad_pool));
    // Upscale with antialias is bilinear only; a bicubic one is refused.
    ggml_tensor * up = ggml_interpolate(ctx, img, 16, 16, 2, 1, GGML_SCALE_MODE_BICUBIC);
    EXPECT_TRUE(host(up));
    up->op_params[0] = GGML_SCALE_MODE_BICUBIC | GGML_SCALE_FLAG_ANTIALIAS;
    EXPECT_FALSE(host(up));
    // Integer copies: to the same type, or F32 <-> I32; I32 -> F16 is not claimed.
    ggml_tensor * i32 = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 16, 4);
    EXPECT_TRUE(host(ggml_cont(ctx, ggml_transpose(ctx, i32))));
    EXPECT_TRUE(host(ggml_cast(ctx, i32, GGML_TYPE_F32)));
    EXPECT_FALSE(host(ggml_cast(ctx, i32, GGML_TYPE_F16)));
}
