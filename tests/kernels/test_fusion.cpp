// Node ordering for fusion (kernels/fusion.h): products sharing src1 are made
// adjacent when that is safe, never when a node in between writes what a
// moved product reads, and the order stays topological.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "kernels/fusion.h"
#include "tests/kernels/fusion_graph.h"
#ifdef STANDIN_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

using standin::kernels::order_for_fusion;
using standin::rt::Kind;

namespace {

struct Graph : standin::test::FusionGraph {
    ggml_tensor * weight(const char * name, int64_t k, int64_t m) {
        ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, k, m);
        ggml_set_name(w, name);
        return w;
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

// llama's decoding attention block as its graph builder writes it (llm_graph's
// build_qkv and build_attn, llama_kv_cache's cpy_k / cpy_v with flash
// attention); `reader` makes K's rotated result read by more than its cache
// write.
struct DecodeBlock {
    Graph gr;
    ggml_tensor *q = nullptr, *k = nullptr, *k_set = nullptr, *v_set = nullptr;
    ggml_tensor *cur = nullptr, *qm = nullptr, *km = nullptr, *vm = nullptr;  // the norm's result, the products
    explicit DecodeBlock(bool k_read_elsewhere = false, int rope_mode = 0) {
        const int64_t d = 128, n_head = 8, n_kv = 2, n_embd = d * n_head, n_gqa = d * n_kv, n_ctx = 64;
        ggml_context * c = gr.ctx;
        ggml_tensor * x = named(ggml_new_tensor_2d(c, GGML_TYPE_F32, n_embd, 1), "x");
        ggml_tensor * g = named(ggml_new_tensor_1d(c, GGML_TYPE_F32, n_embd), "attn_norm");
        ggml_tensor * pos = named(ggml_new_tensor_1d(c, GGML_TYPE_I32, 1), "inp_pos");
        ggml_tensor * idx = named(ggml_new_tensor_1d(c, GGML_TYPE_I64, 1), "kv_idxs");
        ggml_tensor * kc = named(ggml_new_tensor_3d(c, GGML_TYPE_F16, n_gqa, n_ctx, 1), "cache_k");
        ggml_tensor * vc = named(ggml_new_tensor_3d(c, GGML_TYPE_F16, n_gqa, n_ctx, 1), "cache_v");
        for (ggml_tensor * t : {x, g, pos, idx, kc, vc}) ggml_set_input(t);
        cur = named(ggml_mul(c, ggml_rms_norm(c, x, 1e-5f), g), "norm_mul");
        qm = named(ggml_mul_mat(c, gr.weight("wq", n_embd, n_embd), cur), "q");
        km = named(ggml_mul_mat(c, gr.weight("wk", n_embd, n_gqa), cur), "k");
        vm = named(ggml_mul_mat(c, gr.weight("wv", n_embd, n_gqa), cur), "v");
        ggml_tensor * v = ggml_reshape_3d(c, vm, d, n_kv, 1);
        q = named(ggml_rope_ext(c, ggml_reshape_3d(c, qm, d, n_head, 1), pos, nullptr, int(d), rope_mode, 4096,
                                10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f), "q_rope");
        k = named(ggml_rope_ext(c, ggml_reshape_3d(c, km, d, n_kv, 1), pos, nullptr, int(d), rope_mode, 4096,
                                10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f), "k_rope");
        ggml_build_forward_expand(gr.g, q);
        ggml_build_forward_expand(gr.g, v);
        ggml_build_forward_expand(gr.g, k);
        k_set = named(ggml_set_rows(c, kc, ggml_view_2d(c, k, n_gqa, 1, k->nb[2], 0), idx), "k_set");
        v_set = named(ggml_set_rows(c, vc, ggml_view_2d(c, v, n_gqa, 1, v->nb[2], 0), idx), "v_set");
        ggml_build_forward_expand(gr.g, k_set);
        ggml_build_forward_expand(gr.g, v_set);
        // Readers of each, as the attention is (it reads K from the cache).
        ggml_build_forward_expand(gr.g, named(ggml_add(c, ggml_sum(c, q), ggml_sum(c, k_set)), "reader"));
        ggml_build_forward_expand(gr.g, named(ggml_sum(c, v_set), "reader_v"));
        if (k_read_elsewhere) ggml_build_forward_expand(gr.g, named(ggml_sum(c, k), "reader_k"));
    }
};

// After the reorder, Q's ROPE, K's ROPE, K's cache write and V's cache write
// are the next four nodes with work, and they qualify as one rope_qkv launch;
// when ggml puts K's rotated result over Q's unrotated source (its memory is
// free once Q's ROPE ran, one by one), they qualify only if that result is
// not written.
TEST(Fusion, LlamaDecodeRopesAndCacheWritesAreOneRun) {
    DecodeBlock b;
    Graph & gr = b.gr;
    EXPECT_EQ(gr.reorder(), 2);
    expect_topological(gr);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_gallocr_alloc_graph(galloc, gr.g));
    ggml_backend_buffer_t weights = ggml_backend_alloc_ctx_tensors_from_buft(gr.ctx, ggml_backend_cpu_buffer_type());
    std::vector<ggml_tensor *> work;
    for (ggml_tensor * t : gr.nodes()) {
        if (standin::kernels::has_work(t)) work.push_back(t);
    }
    const auto at = std::find(work.begin(), work.end(), b.q) - work.begin();
    ASSERT_LE(size_t(at + 4), work.size());
    EXPECT_EQ(work[at + 1], b.k);
    EXPECT_EQ(work[at + 2], b.k_set);
    EXPECT_EQ(work[at + 3], b.v_set);
#ifdef STANDIN_WITH_CUDA
    using standin::kernels::cuda::rope_qkv_ok;
    EXPECT_TRUE(rope_qkv_ok(b.q, b.k, b.k_set, b.v_set, false));
    EXPECT_TRUE(rope_qkv_ok(b.q, b.k, b.k_set, b.v_set, true));
    ggml_tensor * k_view = b.k_set->src[0];
    b.k->data = b.q->src[0]->data;
    k_view->data = b.k->data;
    EXPECT_FALSE(rope_qkv_ok(b.q, b.k, b.k_set, b.v_set, false));
    EXPECT_TRUE(rope_qkv_ok(b.q, b.k, b.k_set, b.v_set, true));
    // The cache rows themselves may never hold what another job reads, V's
    // own source included (only a rope may write over its source).
    void * k_cache = b.k_set->data;
    b.k_set->data = b.q->src[0]->data;
    EXPECT_FALSE(rope_qkv_ok(b.q, b.k, b.k_set, b.v_set, true));
    b.k_set->data = k_cache;
    b.v_set->data = b.v_set->src[0]->data;
    EXPECT_FALSE(rope_qkv_ok(b.q, b.k, b.k_set, b.v_set, true));
#endif
    ggml_backend_buffer_free(weights);
    ggml_gallocr_free(galloc);
}

using standin::test::scan_uses;

// K's rotated result is left unwritten only when its cache write is all that
// reads it, the graph has counts, and nobody asked for it as an output.
TEST(Fusion, CacheOnlyWhenNothingElseReadsK) {
    DecodeBlock only;
    EXPECT_TRUE(standin::kernels::read_only_by(only.gr.g, only.k, only.k_set, scan_uses));
    EXPECT_FALSE(standin::kernels::read_only_by(only.gr.g, only.k, only.k_set, nullptr));
    EXPECT_FALSE(standin::kernels::read_only_by(only.gr.g, only.k, only.k_set,
                                                [](const ggml_cgraph *, const ggml_tensor *) { return -1; }));
    ggml_set_output(only.k);
    EXPECT_FALSE(standin::kernels::read_only_by(only.gr.g, only.k, only.k_set, scan_uses));
    DecodeBlock more(true);
    EXPECT_FALSE(standin::kernels::read_only_by(more.gr.g, more.k, more.k_set, scan_uses));
    // Q's result has no cache write reading it through a view.
    EXPECT_FALSE(standin::kernels::read_only_by(only.gr.g, only.q, only.k_set, scan_uses));
}

// What the products' results feed: Q's and K's only their ROPE (through one
// reshape), V's only its cache write (through two views); an extra reader of
// a view or of the product, or no counts, and they no longer do.
TEST(Fusion, ProductsFeedOnlyTheirRopeOrCacheWrite) {
    using standin::kernels::feeds_only;
    DecodeBlock b;
    ggml_cgraph * g = b.gr.g;
    EXPECT_TRUE(feeds_only(g, b.qm, b.q, scan_uses));
    EXPECT_TRUE(feeds_only(g, b.km, b.k, scan_uses));
    EXPECT_TRUE(feeds_only(g, b.vm, b.v_set, scan_uses));
    EXPECT_FALSE(feeds_only(g, b.vm, b.q, scan_uses));
    EXPECT_FALSE(feeds_only(g, b.qm, b.k, scan_uses));
    EXPECT_FALSE(feeds_only(g, b.qm, b.q, nullptr));
    ggml_build_forward_expand(g, named(ggml_sum(b.gr.ctx, b.vm), "reader_vm"));
    EXPECT_FALSE(feeds_only(g, b.vm, b.v_set, scan_uses));
    ggml_build_forward_expand(g, named(ggml_sum(b.gr.ctx, b.q->src[0]), "reader_q_view"));
    EXPECT_FALSE(feeds_only(g, b.qm, b.q, scan_uses));
}

#ifdef STANDIN_WITH_CUDA
// The Q/K/V products take their ROPE and cache writes in their epilogue
// (Note [rope epilogue]) when laid out as llama's decoding graph is; not for
// NEOX pairs (channels j and j + d/2: two warps), not for a weight type
// whose mat-vec has no epilogue, not when a product's result still written
// would share memory with a rotated result or a cache.
TEST(Fusion, DecodeQkvRopeInTheProductEpilogue) {
    using standin::kernels::cuda::norm_mul_mat_rope_ok;
    using standin::kernels::cuda::QkvRope;
    const auto prepare = [](DecodeBlock & b, ggml_gallocr_t galloc) {
        b.gr.reorder();
        return ggml_gallocr_alloc_graph(galloc, b.gr.g);
    };
    const auto request = [](const DecodeBlock & b) {
        QkvRope r;
        r.q = b.q;
        r.k = b.k;
        r.k_set = b.k_set;
        r.v_set = b.v_set;
        r.k_cache_only = true;
        for (bool & keep : r.keep) keep = false;
        return r;
    };
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    DecodeBlock b;
    ASSERT_TRUE(prepare(b, galloc));
    ggml_backend_buffer_t weights = ggml_backend_alloc_ctx_tensors_from_buft(b.gr.ctx, ggml_backend_cpu_buffer_type());
    ggml_tensor * mms[3] = {b.qm, b.km, b.vm};
    QkvRope r = request(b);
    EXPECT_TRUE(norm_mul_mat_rope_ok(b.cur, mms, 3, r));
    ggml_tensor * swapped[3] = {b.vm, b.qm, b.km};  // the members in any order
    EXPECT_TRUE(norm_mul_mat_rope_ok(b.cur, swapped, 3, r));
    EXPECT_FALSE(norm_mul_mat_rope_ok(b.cur, mms, 2, r));
    // V's product still written, over K's cache: refused; elsewhere: fine.
    r.keep[2] = true;
    EXPECT_TRUE(norm_mul_mat_rope_ok(b.cur, mms, 3, r));
    void * v_data = b.vm->data;
    b.vm->data = b.k_set->data;
    EXPECT_FALSE(norm_mul_mat_rope_ok(b.cur, mms, 3, r));
    b.vm->data = v_data;
    // Q's product still written where Q's rotated result goes (a ROPE in place).
    r.keep[0] = true;
    void * q_data = b.q->data;
    b.q->data = b.qm->data;
    EXPECT_FALSE(norm_mul_mat_rope_ok(b.cur, mms, 3, r));
    r.keep[0] = false;
    EXPECT_TRUE(norm_mul_mat_rope_ok(b.cur, mms, 3, r));
    b.q->data = q_data;
    // Weight types without the epilogue; another 32-element format and the
    // K formats of the K-quant mixes with it, one type per member or mixed.
    b.km->src[0]->type = GGML_TYPE_IQ4_NL;
    EXPECT_FALSE(norm_mul_mat_rope_ok(b.cur, mms, 3, r));
    b.km->src[0]->type = GGML_TYPE_Q2_K;
    EXPECT_FALSE(norm_mul_mat_rope_ok(b.cur, mms, 3, r));
    b.km->src[0]->type = GGML_TYPE_Q8_0;
    EXPECT_TRUE(norm_mul_mat_rope_ok(b.cur, mms, 3, r));
    const ggml_type q_type = b.qm->src[0]->type, v_type = b.vm->src[0]->type;
    b.qm->src[0]->type = b.km->src[0]->type = GGML_TYPE_Q4_K;
    b.vm->src[0]->type = GGML_TYPE_Q6_K;
    EXPECT_TRUE(norm_mul_mat_rope_ok(b.cur, mms, 3, r));
    b.qm->src[0]->type = b.km->src[0]->type = GGML_TYPE_Q5_K;
    EXPECT_TRUE(norm_mul_mat_rope_ok(b.cur, mms, 3, r));
    b.qm->src[0]->type = q_type;
    b.km->src[0]->type = GGML_TYPE_Q8_0;
    b.vm->src[0]->type = v_type;
    ggml_backend_buffer_free(weights);

    DecodeBlock neox(false, GGML_ROPE_TYPE_NEOX);
    ASSERT_TRUE(prepare(neox, galloc));
    weights = ggml_backend_alloc_ctx_tensors_from_buft(neox.gr.ctx, ggml_backend_cpu_buffer_type());
    ggml_tensor * neox_mms[3] = {neox.qm, neox.km, neox.vm};
    EXPECT_FALSE(norm_mul_mat_rope_ok(neox.cur, neox_mms, 3, request(neox)));
    ggml_backend_buffer_free(weights);
    ggml_gallocr_free(galloc);
}
#endif
