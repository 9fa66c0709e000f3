// Op-table rows of the small elementwise and tensor-building ops (Note [op
// table families]): SQR SQRT LOG SIN COS CLAMP LEAKY_RELU.
// Kernels: kernels/host/math.cpp, kernels/cuda/math.cu.
#include "kernels/op_rows.h"

namespace standin::kernels::rows {

namespace {

// Same shape and type (F32 or F16) on both sides, dim-0 elements adjacent.
bool sup_math(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    return is_f32_or_f16(n->type) && a->type == n->type && ggml_are_same_shape(a, n) && rows_contiguous(a) &&
           rows_contiguous(n);
}

} // namespace

void append_math_rows(std::vector<OpRow> & rows) {
    rows.insert(rows.end(), {
        // op                 sub  host                    cuda                              local
        {GGML_OP_SQR,         -1, {sup_math, host::math}, SI_CUDA(sup_math, cuda::math), true},
        {GGML_OP_SQRT,        -1, {sup_math, host::math}, SI_CUDA(sup_math, cuda::math), true},
        {GGML_OP_LOG,         -1, {sup_math, host::math}, SI_CUDA(sup_math, cuda::math), true},
        {GGML_OP_SIN,         -1, {sup_math, host::math}, SI_CUDA(sup_math, cuda::math), true},
        {GGML_OP_COS,         -1, {sup_math, host::math}, SI_CUDA(sup_math, cuda::math), true},
        {GGML_OP_CLAMP,       -1, {sup_math, host::math}, SI_CUDA(sup_math, cuda::math), true},
        {GGML_OP_LEAKY_RELU,  -1, {sup_math, host::math}, SI_CUDA(sup_math, cuda::math), true},
    });
}

} // namespace standin::kernels::rows
