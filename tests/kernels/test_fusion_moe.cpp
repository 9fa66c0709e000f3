// The mixture-of-experts patterns of Note [fusion] (kernels/fusion_moe.cpp),
// matched on graphs built the way llama's MoE layer builds them: the router
// variants (softmax, sigmoid with a choice bias, softmax over the chosen
// weights; with and without the normalisation and the scale), the weighted
// sum with its partial sums written only where read, and what must not match.
// The fused kernels run in test-backend-ops -o TOPK_MOE,MOE_WEIGHTED_REDUCTION.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ggml.h"
#include "kernels/fusion.h"
#include "tests/kernels/fusion_graph.h"

using standin::kernels::match_moe_route;
using standin::kernels::match_moe_sum;
using standin::kernels::MoeRoute;
using standin::kernels::MoeSum;
using standin::test::scan_uses;

namespace {

using Ctx = standin::test::FusionGraph;

enum class Gate { softmax, sigmoid, weights_softmax };

struct Router {
    ggml_tensor * gate = nullptr, * bias = nullptr, * argsort = nullptr, * weights = nullptr, * wsoftmax = nullptr;
    ggml_tensor * sum = nullptr, * clamp = nullptr, * div = nullptr, * scale = nullptr, * result = nullptr;
};

// build_moe_ffn's routing: logits [n_exp, T] -> the k weights [1, k, T].
Router build_router(Ctx & c, int64_t n_exp, int64_t k, int64_t T, Gate gate, bool bias, bool norm, float scale) {
    Router r;
    ggml_tensor * x = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 64, T);
    ggml_tensor * w_gate = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 64, n_exp);
    ggml_tensor * logits = ggml_mul_mat(c.ctx, w_gate, x);
    ggml_tensor * probs = logits;
    if (gate == Gate::softmax) probs = r.gate = ggml_soft_max(c.ctx, logits);
    if (gate == Gate::sigmoid) probs = r.gate = ggml_sigmoid(c.ctx, logits);
    ggml_tensor * chosen_by = probs;
    if (bias) chosen_by = r.bias = ggml_add(c.ctx, probs, ggml_new_tensor_1d(c.ctx, GGML_TYPE_F32, n_exp));
    ggml_tensor * chosen = ggml_argsort_top_k(c.ctx, chosen_by, int(k));
    r.argsort = chosen->view_src;
    ggml_tensor * w = r.weights = ggml_get_rows(c.ctx, ggml_reshape_3d(c.ctx, probs, 1, n_exp, T), chosen);
    if (gate == Gate::weights_softmax) {
        w = r.wsoftmax = ggml_soft_max(c.ctx, ggml_reshape_2d(c.ctx, w, k, T));
        w = ggml_reshape_3d(c.ctx, w, 1, k, T);
    }
    if (norm) {
        ggml_tensor * w2 = ggml_reshape_2d(c.ctx, w, k, T);
        r.sum = ggml_sum_rows(c.ctx, w2);
        r.clamp = ggml_clamp(c.ctx, r.sum, 6.103515625e-5f, INFINITY);
        r.div = ggml_div(c.ctx, w2, r.clamp);
        w = ggml_reshape_3d(c.ctx, r.div, 1, k, T);
    }
    if (scale != 0.0f) w = r.scale = ggml_scale(c.ctx, w, scale);
    r.result = w;
    ggml_build_forward_expand(c.g, w);
    return r;
}

void expect_route(Ctx & c, const Router & want) {
    const ggml_tensor * first = want.gate != nullptr ? want.gate : want.argsort;
    MoeRoute m;
    ASSERT_TRUE(match_moe_route(c.g, c.pos(first), m));
    EXPECT_EQ(m.gate, want.gate);
    EXPECT_EQ(m.bias, want.bias);
    EXPECT_EQ(m.argsort, want.argsort);
    EXPECT_EQ(m.weights, want.weights);
    EXPECT_EQ(m.wsoftmax, want.wsoftmax);
    EXPECT_EQ(m.sum, want.sum);
    EXPECT_EQ(m.clamp, want.clamp);
    EXPECT_EQ(m.div, want.div);
    EXPECT_EQ(m.scale, want.scale);
    const ggml_tensor * last = want.result->view_src != nullptr ? want.result->view_src : want.result;
    EXPECT_EQ(m.last, c.pos(last)) << "the run ends at the router's result";
}


} // namespace

TEST(FusionMoe, EveryRouterVariantIsOneRun) {
    for (Gate gate : {Gate::softmax, Gate::sigmoid, Gate::weights_softmax}) {
        for (bool norm : {false, true}) {
            for (float scale : {0.0f, 2.5f}) {
                const bool bias = gate == Gate::sigmoid;
                Ctx c;
                SCOPED_TRACE(::testing::Message() << "gate " << int(gate) << " norm " << norm << " scale " << scale);
                expect_route(c, build_router(c, 128, 8, 5, gate, bias, norm, scale));
            }
        }
    }
}

// An ascending sort, weights gathered from another tensor, or a step that
// reads something else than the weights end the run (or prevent it).
TEST(FusionMoe, ForeignStepsAreNotTaken) {
    {
        Ctx c;
        ggml_tensor * probs = ggml_soft_max(c.ctx, ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 16, 3));
        ggml_tensor * order = ggml_argsort(c.ctx, probs, GGML_SORT_ORDER_ASC);
        ggml_tensor * chosen = ggml_view_2d(c.ctx, order, 4, 3, order->nb[1], 0);
        ggml_build_forward_expand(c.g, ggml_get_rows(c.ctx, ggml_reshape_3d(c.ctx, probs, 1, 16, 3), chosen));
        MoeRoute m;
        EXPECT_FALSE(match_moe_route(c.g, c.pos(probs), m)) << "ascending order";
    }
    {
        Ctx c;
        ggml_tensor * probs = ggml_soft_max(c.ctx, ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 16, 3));
        ggml_tensor * other = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 1, 16, 3);
        ggml_tensor * chosen = ggml_argsort_top_k(c.ctx, probs, 4);
        ggml_build_forward_expand(c.g, ggml_get_rows(c.ctx, other, chosen));
        MoeRoute m;
        EXPECT_FALSE(match_moe_route(c.g, c.pos(probs), m)) << "weights from another tensor";
    }
    {
        Ctx c;
        Router r = build_router(c, 32, 4, 2, Gate::softmax, false, false, 0.0f);
        // A SUM_ROWS of something else after the weights: the run stops at GET_ROWS.
        ggml_tensor * s = ggml_sum_rows(c.ctx, ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 4, 2));
        ggml_build_forward_expand(c.g, ggml_div(c.ctx, ggml_reshape_2d(c.ctx, r.weights, 4, 2), ggml_clamp(c.ctx, s, 0.0f, 1.0f)));
        MoeRoute m;
        ASSERT_TRUE(match_moe_route(c.g, c.pos(r.gate), m));
        EXPECT_EQ(m.last, c.pos(r.weights));
        EXPECT_EQ(m.sum, nullptr);
        EXPECT_EQ(m.div, nullptr);
    }
}

namespace {

struct WeightedSum {
    ggml_tensor * mul = nullptr;
    std::vector<ggml_tensor *> adds;
};

// build_moe_ffn's end: experts [n, k, T] times their weights, the k views summed.
WeightedSum build_sum(Ctx & c, int64_t n, int64_t k, int64_t T) {
    WeightedSum s;
    ggml_tensor * experts = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, n, k, T);
    ggml_tensor * weights = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 1, k, T);
    s.mul = ggml_mul(c.ctx, experts, weights);
    ggml_build_forward_expand(c.g, s.mul);
    std::vector<ggml_tensor *> views;
    for (int64_t e = 0; e < k; ++e) {
        views.push_back(ggml_view_2d(c.ctx, s.mul, n, T, s.mul->nb[2], size_t(e) * s.mul->nb[1]));
        ggml_build_forward_expand(c.g, views.back());
    }
    ggml_tensor * out = views[0];
    for (int64_t e = 1; e < k; ++e) {
        out = ggml_add(c.ctx, out, views[size_t(e)]);
        s.adds.push_back(out);
        ggml_build_forward_expand(c.g, out);
    }
    return s;
}

} // namespace

TEST(FusionMoe, WeightedSumIsOneRunWritingOnlyReadPartials) {
    Ctx c;
    WeightedSum w = build_sum(c, 64, 8, 3);
    // Something besides the next ADD reads the third partial sum.
    ggml_build_forward_expand(c.g, ggml_scale(c.ctx, w.adds[2], 2.0f));
    MoeSum m;
    ASSERT_TRUE(match_moe_sum(c.g, c.pos(w.mul), m, scan_uses));
    EXPECT_EQ(m.mul, w.mul);
    ASSERT_EQ(m.n_adds, 7);
    for (int a = 0; a < 7; ++a) EXPECT_EQ(m.adds[a], w.adds[size_t(a)]);
    EXPECT_EQ(m.last, c.pos(w.adds.back()));
    EXPECT_EQ(m.write_mask, (1u << 2) | (1u << 6)) << "the read partial and the result";
    // Without use counts every partial sum is written.
    ASSERT_TRUE(match_moe_sum(c.g, c.pos(w.mul), m, nullptr));
    EXPECT_EQ(m.write_mask, (1u << 7) - 1);
}

TEST(FusionMoe, SumsOfOtherViewsAreNotTaken) {
    {
        Ctx c;
        ggml_tensor * experts = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 64, 4, 3);
        ggml_tensor * mul = ggml_mul(c.ctx, experts, ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 1, 4, 3));
        // Slots 0 and 2 first: not the left-to-right fold of the views.
        ggml_tensor * v0 = ggml_view_2d(c.ctx, mul, 64, 3, mul->nb[2], 0);
        ggml_tensor * v2 = ggml_view_2d(c.ctx, mul, 64, 3, mul->nb[2], 2 * mul->nb[1]);
        ggml_build_forward_expand(c.g, ggml_add(c.ctx, v0, v2));
        MoeSum m;
        EXPECT_FALSE(match_moe_sum(c.g, c.pos(mul), m, scan_uses));
    }
    {
        Ctx c;
        // A MUL by a full-width tensor is no weighting.
        ggml_tensor * a = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 64, 4, 3);
        ggml_tensor * mul = ggml_mul(c.ctx, a, ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, 64, 4, 3));
        ggml_tensor * v0 = ggml_view_2d(c.ctx, mul, 64, 3, mul->nb[2], 0);
        ggml_tensor * v1 = ggml_view_2d(c.ctx, mul, 64, 3, mul->nb[2], mul->nb[1]);
        ggml_build_forward_expand(c.g, ggml_add(c.ctx, v0, v1));
        MoeSum m;
        EXPECT_FALSE(match_moe_sum(c.g, c.pos(mul), m, scan_uses));
    }
}
