// Op-table rows of the MoE routing family (Note [op table families]):
// ARGSORT, TOP_K and ADD_ID. The TOPK_MOE pattern of test-backend-ops is these
// with SOFT_MAX / SIGMOID, GET_ROWS, SUM_ROWS, CLAMP, DIV and SCALE.
// Kernels: kernels/host/route.cpp, kernels/cuda/route.cu.
#include "kernels/common/op_params.h"
#include "kernels/op_rows.h"

namespace standin::kernels::rows {

namespace {

bool same_rows(const ggml_tensor * a, const ggml_tensor * b) {
    return a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}

bool sup_argsort(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const int order = op_i32(n, 0);
    return f32_rows(a) && n->type == GGML_TYPE_I32 && rows_contiguous(n) && ggml_are_same_shape(a, n) &&
           (order == GGML_SORT_ORDER_ASC || order == GGML_SORT_ORDER_DESC);
}

bool sup_top_k(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    return f32_rows(a) && n->type == GGML_TYPE_I32 && rows_contiguous(n) && same_rows(a, n) && n->ne[0] >= 1 &&
           n->ne[0] <= a->ne[0];
}

bool sup_add_id(const ggml_tensor * n) {
    const ggml_tensor * a   = n->src[0];
    const ggml_tensor * b   = n->src[1];
    const ggml_tensor * ids = n->src[2];
    return f32_rows(a) && f32_rows(b) && f32_rows(n) && ids != nullptr && ids->type == GGML_TYPE_I32 &&
           ggml_are_same_shape(a, n) && b->ne[0] == n->ne[0] && ids->ne[0] >= n->ne[1] && ids->ne[1] >= n->ne[2];
}

} // namespace

void append_moe_rows(std::vector<OpRow> & rows) {
    rows.insert(rows.end(), {
        // op              sub  host                           cuda                                   local
        {GGML_OP_ARGSORT,  -1, {sup_argsort, host::argsort}, SI_CUDA(sup_argsort, cuda::argsort), true},
        {GGML_OP_TOP_K,    -1, {sup_top_k, host::top_k},     SI_CUDA(sup_top_k, cuda::top_k),     true},
        {GGML_OP_ADD_ID,   -1, {sup_add_id, host::add_id},   SI_CUDA(sup_add_id, cuda::add_id),   true},
    });
}

} // namespace standin::kernels::rows
