// Op-table rows of the ops training graphs add (Note [op table families]):
// OUT_PROD, the product of a weight's gradient; the gradients of forward ops
// and the optimizer steps.
// Kernels: kernels/host/out_prod.cpp, kernels/cuda/out_prod.cu, kernels/host/backward.cpp,
// kernels/cuda/backward.cu.
#include "kernels/common/op_params.h"
#include "kernels/op_rows.h"

namespace standin::kernels::rows {

namespace {

// src0 of any type quants.h decodes (F32, F16, BF16, block types; ggml-cpu
// takes F32, F16 and every block type), src1 F32 with any strides, dst F32
// of ggml_out_prod's shape. src0 may be broadcast over dims 2 and 3 whatever
// its type (ggml-cpu broadcasts F32 only; the kernels index every type alike).
bool sup_out_prod(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    return b != nullptr && f32_rows(n) && is_f32(b) && quant::can_decode(a->type) && rows_contiguous(a) &&
           a->ne[0] == n->ne[0] && a->ne[0] % quant::block_elems(a->type) == 0 && a->ne[1] == b->ne[1] &&
           n->ne[1] == b->ne[0] && n->ne[2] == b->ne[2] && n->ne[3] == b->ne[3] && a->ne[2] > 0 && a->ne[3] > 0 &&
           b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0;
}

bool f32_dense(const ggml_tensor * t) { return t != nullptr && is_f32(t) && ggml_is_contiguous(t); }

bool sup_get_rows_back(const ggml_tensor * n) {
    const ggml_tensor * g = n->src[0];
    const ggml_tensor * i = n->src[1];
    return is_f32_or_f16(g->type) && rows_contiguous(g) && g->ne[2] == 1 && g->ne[3] == 1 && i != nullptr &&
           i->type == GGML_TYPE_I32 && ggml_is_contiguous(i) && ggml_nelements(i) <= g->ne[1] && f32_dense(n) &&
           n->ne[0] == g->ne[0];
}

bool sup_repeat_back(const ggml_tensor * n) {
    const ggml_tensor * s = n->src[0];
    return f32_rows(s) && f32_rows(n) && ggml_can_repeat(n, s);
}

// Same-shape F32 rows in src[0], src[1] and dst (SILU_BACK, RMS_NORM_BACK).
bool sup_rows_pair(const ggml_tensor * n) {
    return f32_rows(n->src[0]) && f32_rows(n->src[1]) && f32_rows(n) && ggml_are_same_shape(n->src[0], n) &&
           ggml_are_same_shape(n->src[1], n);
}

// ALiBi has no gradient here (ggml-cpu has none either).
bool sup_soft_max_back(const ggml_tensor * n) {
    return sup_rows_pair(n) && op_f32(n, 1) == 0.0f;
}

bool sup_cross_entropy_loss(const ggml_tensor * n) {
    return f32_rows(n->src[0]) && f32_rows(n->src[1]) && ggml_are_same_shape(n->src[0], n->src[1]) &&
           n->type == GGML_TYPE_F32 && ggml_nelements(n) == 1;
}

bool sup_cross_entropy_loss_back(const ggml_tensor * n) {
    return f32_dense(n->src[0]) && ggml_nelements(n->src[0]) == 1 && f32_rows(n->src[1]) && f32_rows(n->src[2]) &&
           f32_rows(n) && ggml_are_same_shape(n->src[1], n) && ggml_are_same_shape(n->src[2], n);
}

bool sup_count_equal(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    return a->type == GGML_TYPE_I32 && b->type == GGML_TYPE_I32 && rows_contiguous(a) && rows_contiguous(b) &&
           ggml_are_same_shape(a, b) && n->type == GGML_TYPE_I64 && ggml_nelements(n) == 1;
}

// Weights, gradients and moments one contiguous F32 array each.
bool sup_opt_step(const ggml_tensor * n) {
    const int n_state = n->op == GGML_OP_OPT_STEP_ADAMW ? 4 : 2;  // w g [m v], then the parameters
    const int n_params = n->op == GGML_OP_OPT_STEP_ADAMW ? 7 : 2;
    for (int i = 0; i < n_state; ++i) {
        if (!f32_dense(n->src[i]) || !ggml_are_same_shape(n->src[i], n->src[0])) return false;
    }
    return f32_dense(n->src[n_state]) && ggml_nelements(n->src[n_state]) == n_params;
}

} // namespace

void append_train_rows(std::vector<OpRow> & rows) {
    // The CUDA kernels of the gradients and optimizer steps (backward.cu) take
    // the host's predicates unchanged; every case of them ggml-cuda supports
    // passed test-backend-ops on the H200 (results/h200/summary-38.txt).
    rows.insert(rows.end(), {
        // op                             sub host                                           cuda                                                        local
        {GGML_OP_OUT_PROD,                -1, {sup_out_prod, host::out_prod},                SI_CUDA(sup_out_prod, cuda::out_prod), true},
        {GGML_OP_GET_ROWS_BACK,           -1, {sup_get_rows_back, host::backward},           SI_CUDA(sup_get_rows_back, cuda::backward), true},
        {GGML_OP_REPEAT_BACK,             -1, {sup_repeat_back, host::backward},             SI_CUDA(sup_repeat_back, cuda::backward), true},
        {GGML_OP_SILU_BACK,               -1, {sup_rows_pair, host::backward},               SI_CUDA(sup_rows_pair, cuda::backward), true},
        {GGML_OP_RMS_NORM_BACK,           -1, {sup_rows_pair, host::backward},               SI_CUDA(sup_rows_pair, cuda::backward), true},
        {GGML_OP_SOFT_MAX_BACK,           -1, {sup_soft_max_back, host::backward},           SI_CUDA(sup_soft_max_back, cuda::backward), true},
        {GGML_OP_CROSS_ENTROPY_LOSS,      -1, {sup_cross_entropy_loss, host::backward},      SI_CUDA(sup_cross_entropy_loss, cuda::backward), true},
        {GGML_OP_CROSS_ENTROPY_LOSS_BACK, -1, {sup_cross_entropy_loss_back, host::backward}, SI_CUDA(sup_cross_entropy_loss_back, cuda::backward), true},
        {GGML_OP_COUNT_EQUAL,             -1, {sup_count_equal, host::backward},             SI_CUDA(sup_count_equal, cuda::backward), true},
        {GGML_OP_OPT_STEP_ADAMW,          -1, {sup_opt_step, host::backward},                SI_CUDA(sup_opt_step, cuda::backward), true},
        {GGML_OP_OPT_STEP_SGD,            -1, {sup_opt_step, host::backward},                SI_CUDA(sup_opt_step, cuda::backward), true},
    });
}

} // namespace standin::kernels::rows
