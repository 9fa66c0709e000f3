// Op-table rows of the ops training graphs add (Note [op table families]):
// OUT_PROD, the product of a weight's gradient.
// Kernels: kernels/host/out_prod.cpp, kernels/cuda/out_prod.cu.
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

} // namespace

void append_train_rows(std::vector<OpRow> & rows) {
    rows.insert(rows.end(), {
        // op              sub  host                             cuda                                        local
        {GGML_OP_OUT_PROD, -1, {sup_out_prod, host::out_prod}, SI_CUDA(sup_out_prod, cuda::out_prod), true},
    });
}

} // namespace standin::kernels::rows
