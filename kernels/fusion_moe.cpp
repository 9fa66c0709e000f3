// The mixture-of-experts patterns of Note [fusion] (fusion.h), matched by the
// graph's structure: which op reads which node, through which view. The
// fused kernels and their limits are kernels/cuda/moe_fuse.cu's.
//
// The shapes are those of llama's MoE layer (llama-graph.cpp, build_moe_ffn):
//   probs    = gate(logits)                     [n_expert, T]
//   chosen   = argsort(probs [+ bias], desc)[:k] [k, T] (a view)
//   weights  = get_rows(probs as [1, n_expert, T], chosen)  [1, k, T]
//   weights  = softmax / weights over their clamped sum / scale (optional, through reshapes)
//   ...
//   weighted = experts [n, k, T] * weights
//   out      = view(weighted, 0) + view(weighted, 1) + ... + view(weighted, k - 1)
//
// Test: tests/kernels/test_fusion.cpp (matching, no GPU); test-backend-ops -b
// STANDIN_CUDA0 -o TOPK_MOE,MOE_WEIGHTED_REDUCTION (the fused launches).
#include "kernels/fusion.h"

#include "kernels/common/op_params.h"

namespace standin::kernels {

namespace {

// t is x itself or a view of all of x from its start (a reshape).
bool whole_view_of(const ggml_tensor * t, const ggml_tensor * x) {
    return t == x || (t != nullptr && t->view_src == x && t->view_offs == 0 && ggml_nelements(t) == ggml_nelements(x));
}

bool is_sigmoid(const ggml_tensor * t) {
    return t->op == GGML_OP_UNARY && ggml_get_unary_op(t) == GGML_UNARY_OP_SIGMOID;
}

// The node at the next working position after *pos, if it has op `op`
// (advancing *pos to it), else nullptr.
ggml_tensor * next_if(ggml_cgraph * g, int * pos, ggml_op op) {
    const int j = next_work(g, *pos);
    if (j < 0) return nullptr;
    ggml_tensor * t = ggml_graph_node(g, j);
    if (t->op != op) return nullptr;
    *pos = j;
    return t;
}

} // namespace

bool match_moe_route(ggml_cgraph * g, int i, MoeRoute & r) {
    r = MoeRoute{};
    int pos = i;
    ggml_tensor * t = ggml_graph_node(g, i);
    if (t->op == GGML_OP_SOFT_MAX || is_sigmoid(t)) {
        r.gate = t;
        const int j = next_work(g, pos);
        if (j < 0) return false;
        t = ggml_graph_node(g, j);
        if (t->op == GGML_OP_ADD && t->src[0] == r.gate) {
            r.bias = t;
            pos = j;
            t = next_if(g, &pos, GGML_OP_ARGSORT);
            if (t == nullptr) return false;
        } else if (t->op == GGML_OP_ARGSORT) {
            pos = j;
        } else {
            return false;
        }
    }
    if (t->op != GGML_OP_ARGSORT || op_i32(t, 0) != GGML_SORT_ORDER_DESC) return false;
    r.argsort = t;
    // What the experts are chosen by, and what their weights are taken from.
    const ggml_tensor * chosen_by = r.bias != nullptr ? r.bias : r.gate;
    const ggml_tensor * probs = r.gate;
    if (chosen_by == nullptr) chosen_by = probs = t->src[0];
    if (t->src[0] != chosen_by) return false;

    ggml_tensor * w = next_if(g, &pos, GGML_OP_GET_ROWS);
    if (w == nullptr) return false;
    const ggml_tensor * ids = w->src[1];
    if (!whole_view_of(w->src[0], probs) || w->src[0]->ne[0] != 1 || ids == nullptr || ids->view_src != r.argsort ||
        ids->view_offs != 0 || ids->ne[0] > r.argsort->ne[0] || ids->ne[1] != r.argsort->ne[1] ||
        ids->nb[1] != r.argsort->nb[1]) {
        return false;
    }
    r.weights = w;
    r.last = pos;

    // The optional steps over the weights, each reading the latest through a reshape.
    ggml_tensor * cur = w;
    int p = pos;
    if (ggml_tensor * sm = next_if(g, &p, GGML_OP_SOFT_MAX); sm != nullptr && whole_view_of(sm->src[0], cur)) {
        r.wsoftmax = cur = sm;
        r.last = pos = p;
    }
    p = pos;
    ggml_tensor * sum = next_if(g, &p, GGML_OP_SUM_ROWS);
    ggml_tensor * clamp = sum != nullptr && whole_view_of(sum->src[0], cur) ? next_if(g, &p, GGML_OP_CLAMP) : nullptr;
    ggml_tensor * div = clamp != nullptr && clamp->src[0] == sum ? next_if(g, &p, GGML_OP_DIV) : nullptr;
    if (div != nullptr && whole_view_of(div->src[0], cur) && div->src[1] == clamp) {
        r.sum = sum;
        r.clamp = clamp;
        r.div = cur = div;
        r.last = pos = p;
    }
    p = pos;
    if (ggml_tensor * sc = next_if(g, &p, GGML_OP_SCALE); sc != nullptr && whole_view_of(sc->src[0], cur)) {
        r.scale = sc;
        r.last = p;
    }
    return true;
}

bool match_moe_sum(ggml_cgraph * g, int i, MoeSum & s, UseCount uses) {
    s = MoeSum{};
    ggml_tensor * mul = ggml_graph_node(g, i);
    const ggml_tensor * ex = mul->src[0];
    const ggml_tensor * w = mul->src[1];
    if (mul->op != GGML_OP_MUL || ex == nullptr || w == nullptr || w->ne[0] != 1 || w->ne[1] != ex->ne[1] ||
        w->ne[2] != ex->ne[2] || ex->ne[3] != 1 || w->ne[3] != 1 || ex->ne[1] < 2) {
        return false;
    }
    const int64_t k = mul->ne[1];
    // View e of the MUL: its rows of expert slot e, [n, T].
    auto slot_view = [&](const ggml_tensor * v, int64_t e) {
        return v != nullptr && v->view_src == mul && v->view_offs == size_t(e) * mul->nb[1] && v->ne[0] == mul->ne[0] &&
               v->ne[1] == mul->ne[2] && v->ne[2] == 1 && v->ne[3] == 1 && v->nb[0] == mul->nb[0] &&
               v->nb[1] == mul->nb[2];
    };
    int pos = i;
    const ggml_tensor * acc = nullptr;
    for (int64_t e = 1; e < k && s.n_adds < kMoeSumMaxAdds; ++e) {
        int p = pos;
        ggml_tensor * add = next_if(g, &p, GGML_OP_ADD);
        if (add == nullptr || !slot_view(add->src[1], e) || !(e == 1 ? slot_view(add->src[0], 0) : add->src[0] == acc)) {
            break;
        }
        s.adds[s.n_adds++] = add;
        acc = add;
        pos = p;
    }
    if (s.n_adds == 0) return false;
    for (int a = 0; a < s.n_adds; ++a) {
        const ggml_tensor * add = s.adds[a];
        const bool only_next = uses != nullptr && a + 1 < s.n_adds && (add->flags & GGML_TENSOR_FLAG_OUTPUT) == 0 &&
                               uses(g, add) == 1;
        if (!only_next) s.write_mask |= 1u << a;
    }
    s.mul = mul;
    s.last = pos;
    return true;
}

} // namespace standin::kernels
