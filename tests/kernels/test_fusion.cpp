// Node ordering for fusion (kernels/fusion.h): products sharing src1 are made
// adjacent when that is safe, never when a node in between writes what a
// moved product reads, and the order stays topological.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ggml.h"
#include "kernels/fusion.h"

using standin::kernels::order_for_fusion;
using standin::rt::Kind;

namespace {

struct Graph {
    ggml_context * ctx = nullptr;
    ggml_cgraph *  g   = nullptr;
    Graph() {
        ggml_init_params p{64 * 1024 * 1024, nullptr, true};
        ctx = ggml_init(p);
        g = ggml_new_graph(ctx);
    }
    ~Graph() { ggml_free(ctx); }
    ggml_tensor * weight(const char * name, int64_t k, int64_t m) {
        ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, k, m);
        ggml_set_name(w, name);
        return w;
    }
    std::vector<ggml_tensor *> nodes() const {
        std::vector<ggml_tensor *> v;
        for (int i = 0; i < ggml_graph_n_nodes(g); ++i) v.push_back(ggml_graph_node(g, i));
        return v;
    }
    std::vector<std::string> names() const {
        std::vector<std::string> v;
        for (ggml_tensor * t : nodes()) v.emplace_back(ggml_get_name(t));
        return v;
    }
    int reorder() { return order_for_fusion(Kind::cuda, ggml_graph_nodes(g), ggml_graph_n_nodes(g)); }
};

ggml_tensor * named(ggml_tensor * t, const char * name) {
    ggml_set_name(t, name);
    return t;
}

// Every source that is a node comes before its reader.
void expect_topological(const Graph & gr) {
    const std::vector<ggml_tensor *> order = gr.nodes();
    for (size_t i = 0; i < order.size(); ++i) {
        for (const ggml_tensor * s : order[i]->src) {
            if (s == nullptr) continue;
            const auto it = std::find(order.begin(), order.end(), s);
            if (it != order.end()) {
                EXPECT_LT(size_t(it - order.begin()), i) << ggml_get_name(order[i]) << " reads a later node";
            }
        }
    }
}

int index_of(const std::vector<std::string> & v, const std::string & name) {
    return int(std::find(v.begin(), v.end(), name) - v.begin());
}

} // namespace

// llama's attention block: Q is roped before K and V are computed.
TEST(Fusion, QkvProductsBecomeAdjacent) {
    Graph gr;
    ggml_tensor * x = named(ggml_new_tensor_1d(gr.ctx, GGML_TYPE_F32, 256), "x");
    ggml_tensor * cur = named(ggml_rms_norm(gr.ctx, x, 1e-5f), "norm");
    ggml_tensor * q = named(ggml_mul_mat(gr.ctx, gr.weight("wq", 256, 256), cur), "q");
    ggml_tensor * qs = named(ggml_scale(gr.ctx, q, 0.5f), "q_scaled");
    ggml_tensor * k = named(ggml_mul_mat(gr.ctx, gr.weight("wk", 256, 64), cur), "k");
    ggml_tensor * ks = named(ggml_scale(gr.ctx, k, 0.5f), "k_scaled");
    ggml_tensor * v = named(ggml_mul_mat(gr.ctx, gr.weight("wv", 256, 64), cur), "v");
    ggml_build_forward_expand(gr.g, qs);
    ggml_build_forward_expand(gr.g, ks);
    ggml_build_forward_expand(gr.g, v);
    const std::vector<std::string> before = gr.names();
    ASSERT_EQ(index_of(before, "q_scaled"), index_of(before, "q") + 1);

    EXPECT_EQ(gr.reorder(), 2);
    const std::vector<std::string> after = gr.names();
    const int iq = index_of(after, "q");
    EXPECT_EQ(index_of(after, "k"), iq + 1);
    EXPECT_EQ(index_of(after, "v"), iq + 2);
    EXPECT_EQ(after.size(), before.size());
    expect_topological(gr);
    EXPECT_EQ(gr.reorder(), 0) << "a second pass finds nothing more to move";
}

// A node in between that writes into src1's memory pins the later product.
TEST(Fusion, InPlaceWriteToSrc1BlocksTheMove) {
    Graph gr;
    ggml_tensor * x = named(ggml_new_tensor_1d(gr.ctx, GGML_TYPE_F32, 256), "x");
    ggml_tensor * cur = named(ggml_rms_norm(gr.ctx, x, 1e-5f), "norm");
    ggml_tensor * q = named(ggml_mul_mat(gr.ctx, gr.weight("wq", 256, 256), cur), "q");
    ggml_tensor * changed = named(ggml_scale_inplace(gr.ctx, cur, 2.0f), "norm_scaled_in_place");
    ggml_tensor * k = named(ggml_mul_mat(gr.ctx, gr.weight("wk", 256, 64), cur), "k");
    ggml_build_forward_expand(gr.g, q);
    ggml_build_forward_expand(gr.g, changed);
    ggml_build_forward_expand(gr.g, k);
    const std::vector<std::string> before = gr.names();
    ASSERT_LT(index_of(before, "norm_scaled_in_place"), index_of(before, "k"));
    EXPECT_EQ(gr.reorder(), 0);
    EXPECT_EQ(gr.names(), before);
}

// Products of computed (not weight) matrices, and products over another src1,
// stay where they are; host devices are never reordered.
TEST(Fusion, OnlyWeightProductsOfOneSrc1Move) {
    Graph gr;
    ggml_tensor * x = named(ggml_new_tensor_1d(gr.ctx, GGML_TYPE_F32, 256), "x");
    ggml_tensor * y = named(ggml_new_tensor_1d(gr.ctx, GGML_TYPE_F32, 256), "y");
    ggml_tensor * a = named(ggml_rms_norm(gr.ctx, x, 1e-5f), "a");
    ggml_tensor * b = named(ggml_rms_norm(gr.ctx, y, 1e-5f), "b");
    ggml_tensor * p1 = named(ggml_mul_mat(gr.ctx, gr.weight("w1", 256, 64), a), "p1");
    ggml_tensor * s1 = named(ggml_scale(gr.ctx, p1, 0.5f), "s1");
    ggml_tensor * p2 = named(ggml_mul_mat(gr.ctx, gr.weight("w2", 256, 64), b), "p2");
    ggml_tensor * s2 = named(ggml_scale(gr.ctx, p2, 0.5f), "s2");
    ggml_tensor * m = named(ggml_new_tensor_2d(gr.ctx, GGML_TYPE_F32, 256, 8), "m");
    ggml_tensor * mm = named(ggml_cont(gr.ctx, m), "m_computed");
    ggml_tensor * p3 = named(ggml_mul_mat(gr.ctx, mm, a), "p3_of_computed");
    ggml_build_forward_expand(gr.g, s1);
    ggml_build_forward_expand(gr.g, s2);
    ggml_build_forward_expand(gr.g, p3);
    const std::vector<std::string> before = gr.names();
    EXPECT_EQ(order_for_fusion(Kind::host, ggml_graph_nodes(gr.g), ggml_graph_n_nodes(gr.g)), 0);
    EXPECT_EQ(gr.reorder(), 0);
    EXPECT_EQ(gr.names(), before);
}
