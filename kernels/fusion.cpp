// The fusion patterns of Note [fusion] (fusion.h): matching and ordering here
// (the MoE patterns' matching in fusion_moe.cpp), the fused kernels in
// kernels/cuda/ (norm.cu, mul_mat_vec_q8.cu, rope.cu, moe_fuse.cu).
// MUL_MAT+ADD is matched before MUL_MAT groups: a product followed directly
// by its residual ADD (the output projections) has no partner sharing src1.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o RMS_NORM_MUL_ADD,MUL_MAT_VEC_FUSION
// (fused graphs against ggml-cpu); the CUDA logits ctests and `standin logits`
// on whole models (fusion is on by default; GGML_STANDIN_FUSION=0 for the
// unfused reference); tests/kernels/test_fusion.cpp for the ordering.
#include "kernels/fusion.h"

#include <algorithm>
#include <vector>

#include "kernels/op_table.h"

#ifdef STANDIN_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/cuda/cuda_device.h"
#endif

namespace standin::kernels {

namespace {

constexpr int kWindow = 32;     // how far ahead a partner MUL_MAT is looked for
constexpr int kMaxMembers = 8;  // MUL_MAT nodes per fused run

const ggml_tensor * base_of(const ggml_tensor * t) { return t->view_src != nullptr ? t->view_src : t; }

bool is_weight_product(const ggml_tensor * t) {
    return t->op == GGML_OP_MUL_MAT && t->src[0] != nullptr && t->src[1] != nullptr &&
           t->src[0]->op == GGML_OP_NONE && t->type == GGML_TYPE_F32;
}

// Whether nodes[j] may run right before nodes[pos] (pos < j): none of the
// nodes it would jump over produces one of its sources or writes into the
// memory of one (an in-place write shows as a view of that memory).
bool can_hoist(ggml_tensor * const * nodes, int pos, int j) {
    const ggml_tensor * t = nodes[j];
    for (int k = pos; k < j; ++k) {
        const ggml_tensor * over = nodes[k];
        for (const ggml_tensor * s : t->src) {
            if (s == nullptr) continue;
            if (over == s || base_of(over) == base_of(s)) return false;
        }
    }
    return true;
}

#ifdef STANDIN_WITH_CUDA
// Decoding's ROPE (Q), ROPE (K), SET_ROWS (K), SET_ROWS (V) right after
// position `last`, every one on this device: their graph position of the
// last, or -1. keep[i]: whether mms[i]'s own result has other readers.
int match_qkv_rope(ggml_cgraph * g, int last, const std::vector<ggml_tensor *> & mms, UseCount uses,
                   cuda::QkvRope & qr) {
    ggml_tensor * at[4];
    int k = last;
    for (ggml_tensor *& t : at) {
        k = next_work(g, k);
        if (k < 0) return -1;
        t = ggml_graph_node(g, k);
        if (!supports(rt::Kind::cuda, t)) return -1;
    }
    if (at[0]->op != GGML_OP_ROPE || at[1]->op != GGML_OP_ROPE || at[2]->op != GGML_OP_SET_ROWS ||
        at[3]->op != GGML_OP_SET_ROWS || mms.size() != 3) {
        return -1;
    }
    qr.q = at[0];
    qr.k = at[1];
    qr.k_set = at[2];
    qr.v_set = at[3];
    qr.k_cache_only = read_only_by(g, qr.k, qr.k_set, uses);
    for (size_t i = 0; i < mms.size(); ++i) {
        qr.keep[i] = !(feeds_only(g, mms[i], qr.q, uses) || feeds_only(g, mms[i], qr.k, uses) ||
                       feeds_only(g, mms[i], qr.v_set, uses));
    }
    return k;
}

FusedRun run_fused_cuda(rt::cuda::CudaStream & stream, ggml_cgraph * g, int i, UseCount uses) {
    FusedRun r;
    ggml_tensor * node = ggml_graph_node(g, i);
    const int j = next_work(g, i);
    if (j < 0) return r;
    ggml_tensor * next = ggml_graph_node(g, j);
    if (!supports(rt::Kind::cuda, node) || !supports(rt::Kind::cuda, next)) return r;
    if (node->op == GGML_OP_RMS_NORM && cuda::rms_norm_mul_ok(node, next)) {
        // The products right after it that read its result through the
        // integer mat-vec (Q/K/V, gate/up, the output head) take their
        // quantized input from the norm's own launch.
        std::vector<ggml_tensor *> mms;
        int last = j;
        for (int k = next_work(g, j); k >= 0 && int(mms.size()) < kMaxMembers; k = next_work(g, k)) {
            ggml_tensor * t = ggml_graph_node(g, k);
            if (!supports(rt::Kind::cuda, t) || !cuda::norm_mul_mat_ok(next, t) ||
                (!mms.empty() && !cuda::mul_mat_group_ok(mms[0], t))) {
                break;
            }
            mms.push_back(t);
            last = k;
        }
        if (!mms.empty()) {
            // Decoding's Q/K/V: their ROPE and cache writes in the products' epilogue.
            cuda::QkvRope qr;
            const int rope_last = match_qkv_rope(g, last, mms, uses, qr);
            if (rope_last >= 0 && cuda::norm_mul_mat_rope_ok(next, mms.data(), int(mms.size()), qr)) {
                r.covered = rope_last - i + 1;
                r.status = cuda::norm_mul_mat(stream, node, next, mms.data(), int(mms.size()), &qr);
                return r;
            }
            r.covered = last - i + 1;
            r.status = cuda::norm_mul_mat(stream, node, next, mms.data(), int(mms.size()));
            return r;
        }
        r.covered = j - i + 1;
        r.status = cuda::rms_norm_mul(stream, node, next);
        return r;
    }
    // Both MoE patterns: every node they cover must run on this device.
    const auto all_here = [&](int from, int to) {
        for (int k = from; k <= to; ++k) {
            ggml_tensor * t = ggml_graph_node(g, k);
            if (has_work(t) && !supports(rt::Kind::cuda, t)) return false;
        }
        return true;
    };
    if (MoeRoute mr; match_moe_route(g, i, mr) && all_here(i, mr.last) && cuda::moe_route_ok(mr)) {
        r.covered = mr.last - i + 1;
        r.status = cuda::moe_route(stream, mr);
        return r;
    }
    if (MoeSum ms; match_moe_sum(g, i, ms, uses) && all_here(i, ms.last) && cuda::moe_sum_ok(ms)) {
        r.covered = ms.last - i + 1;
        r.status = cuda::moe_sum(stream, ms);
        return r;
    }
    if (node->op == GGML_OP_ROPE && next->op == GGML_OP_ROPE) {
        // Q, then K with its cache write, then V's cache write: one launch.
        const int j2 = next_work(g, j), j3 = j2 >= 0 ? next_work(g, j2) : -1;
        ggml_tensor * k_set = j2 >= 0 ? ggml_graph_node(g, j2) : nullptr;
        ggml_tensor * v_set = j3 >= 0 ? ggml_graph_node(g, j3) : nullptr;
        if (v_set != nullptr && supports(rt::Kind::cuda, k_set) && supports(rt::Kind::cuda, v_set)) {
            const bool k_cache_only = read_only_by(g, next, k_set, uses);
            if (cuda::rope_qkv_ok(node, next, k_set, v_set, k_cache_only)) {
                r.covered = j3 - i + 1;
                r.status = cuda::rope_qkv(stream, node, next, k_set, v_set, k_cache_only);
                return r;
            }
        }
    }
    if (node->op == GGML_OP_ROPE && cuda::rope_set_rows_ok(node, next)) {
        r.covered = j - i + 1;
        r.status = cuda::rope_set_rows(stream, node, next);
        return r;
    }
    const bool glu_mm = node->op == GGML_OP_GLU && cuda::glu_mul_mat_ok(node, next);
    if (glu_mm || (node->op == GGML_OP_FLASH_ATTN_EXT && cuda::fa_mul_mat_ok(node, next))) {
        const int k = next_work(g, j);
        ggml_tensor * add = k >= 0 ? ggml_graph_node(g, k) : nullptr;
        const bool with_add = add != nullptr && supports(rt::Kind::cuda, add) && cuda::mul_mat_add_ok(next, add);
        r.covered = (with_add ? k : j) - i + 1;
        add = with_add ? add : nullptr;
        r.status = glu_mm ? cuda::glu_mul_mat(stream, node, next, add) : cuda::fa_mul_mat(stream, node, next, add);
        return r;
    }
    if (node->op == GGML_OP_MUL_MAT && cuda::mul_mat_add_ok(node, next)) {
        r.covered = j - i + 1;
        r.status = cuda::mul_mat_add(stream, node, next);
        return r;
    }
    if (node->op == GGML_OP_MUL_MAT && cuda::mul_mat_group_ok(node, next)) {
        std::vector<ggml_tensor *> members{node};
        int last = i;
        for (int k = j; k >= 0 && int(members.size()) < kMaxMembers; k = next_work(g, k)) {
            ggml_tensor * t = ggml_graph_node(g, k);
            if (!supports(rt::Kind::cuda, t) || !cuda::mul_mat_group_ok(node, t)) break;
            // A member must not read what an earlier member writes.
            const bool reads_member = std::any_of(members.begin(), members.end(), [t](const ggml_tensor * m) {
                return base_of(t->src[0]) == m || base_of(t->src[1]) == m;
            });
            if (reads_member) break;
            members.push_back(t);
            last = k;
        }
        if (members.size() >= 2) {
            r.covered = last - i + 1;
            r.status = cuda::mul_mat_group(stream, members.data(), int(members.size()));
        }
    }
    return r;
}
#endif

} // namespace

int next_work(ggml_cgraph * g, int i) {
    const int n = ggml_graph_n_nodes(g);
    for (int j = i + 1; j < n; ++j) {
        if (has_work(ggml_graph_node(g, j))) return j;
    }
    return -1;
}

bool has_work(const ggml_tensor * node) {
    // Nodes without the COMPUTE flag are placeholders another engine (the
    // meta backend) computes; empty tensors and views have nothing to do.
    return (node->flags & GGML_TENSOR_FLAG_COMPUTE) != 0 && !ggml_is_empty(node) && !is_view_op(node->op);
}

bool read_only_by(ggml_cgraph * g, const ggml_tensor * t, const ggml_tensor * set, UseCount uses) {
    // feeds_only, through exactly one view of t.
    const ggml_tensor * view = set->src[0];
    return view != nullptr && view != t && view->view_src == t && view->src[0] == t && feeds_only(g, t, set, uses);
}

bool feeds_only(ggml_cgraph * g, const ggml_tensor * t, const ggml_tensor * reader, UseCount uses) {
    if (uses == nullptr) return false;
    for (const ggml_tensor * cur = reader->src[0]; cur != t; cur = cur->src[0]) {
        if (cur == nullptr || !is_view_op(cur->op) || (cur->flags & GGML_TENSOR_FLAG_OUTPUT) != 0 || uses(g, cur) != 1) {
            return false;
        }
    }
    return (t->flags & GGML_TENSOR_FLAG_OUTPUT) == 0 && uses(g, t) == 1;
}

int order_for_fusion(rt::Kind kind, ggml_tensor ** nodes, int n_nodes) {
    if (kind != rt::Kind::cuda) return 0;
    int moved = 0;
    for (int i = 0; i < n_nodes; ++i) {
        if (!is_weight_product(nodes[i])) continue;
        int pos = i + 1;  // where the next partner goes
        for (int j = pos; j < n_nodes && j <= i + kWindow; ++j) {
            ggml_tensor * t = nodes[j];
            if (!is_weight_product(t) || t->src[1] != nodes[i]->src[1]) continue;
            if (j != pos) {
                if (!can_hoist(nodes, pos, j)) continue;
                std::rotate(nodes + pos, nodes + j, nodes + j + 1);
                ++moved;
            }
            ++pos;
        }
        i = pos - 1;
    }
    return moved;
}

FusedRun run_fused(rt::Kind kind, rt::Stream & stream, ggml_cgraph * graph, int i, UseCount uses) {
#ifdef STANDIN_WITH_CUDA
    if (kind == rt::Kind::cuda) return run_fused_cuda(rt::cuda::CudaStream::of(stream), graph, i, uses);
#endif
    (void) uses;
    (void) kind;
    (void) stream;
    (void) graph;
    (void) i;
    return FusedRun{};
}

} // namespace standin::kernels
