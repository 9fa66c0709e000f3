#include "kernels/op_table.h"

#include <array>

#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#ifdef STANDIN_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#define SI_CUDA(pred, fn) DeviceImpl{pred, fn}
#else
#define SI_CUDA(pred, fn) DeviceImpl{}
#endif

namespace standin::kernels {

namespace {

using host::is_float_type;

// --- support predicates: what each kernel claims, stated once ----------------

bool sup_view(const ggml_tensor *) { return true; }

bool sup_binary(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    return is_float_type(n->type) && a->type == n->type && is_float_type(b->type) &&
           ggml_can_repeat(b, a) && ggml_are_same_shape(a, n);
}

bool sup_scale(const ggml_tensor * n) {
    return n->type == GGML_TYPE_F32 && n->src[0]->type == GGML_TYPE_F32 && ggml_are_same_shape(n, n->src[0]);
}

bool sup_copy(const ggml_tensor * n) {
    const ggml_tensor * s = n->src[0];
    return is_float_type(s->type) && is_float_type(n->type) && ggml_nelements(s) == ggml_nelements(n);
}

const std::vector<OpRow> & rows_storage() {
    using namespace host;
    static const std::vector<OpRow> rows = {
        // op               sub  host                         cuda                                local
        {GGML_OP_NONE,      -1, {sup_view, nullptr},         SI_CUDA(sup_view, nullptr),           true},
        {GGML_OP_VIEW,      -1, {sup_view, nullptr},         SI_CUDA(sup_view, nullptr),           true},
        {GGML_OP_RESHAPE,   -1, {sup_view, nullptr},         SI_CUDA(sup_view, nullptr),           true},
        {GGML_OP_PERMUTE,   -1, {sup_view, nullptr},         SI_CUDA(sup_view, nullptr),           true},
        {GGML_OP_TRANSPOSE, -1, {sup_view, nullptr},         SI_CUDA(sup_view, nullptr),           true},
        {GGML_OP_ADD,       -1, {sup_binary, host::binary},  SI_CUDA(sup_binary, cuda::binary),    true},
        {GGML_OP_SUB,       -1, {sup_binary, host::binary},  SI_CUDA(sup_binary, cuda::binary),    true},
        {GGML_OP_MUL,       -1, {sup_binary, host::binary},  SI_CUDA(sup_binary, cuda::binary),    true},
        {GGML_OP_DIV,       -1, {sup_binary, host::binary},  SI_CUDA(sup_binary, cuda::binary),    true},
        {GGML_OP_SCALE,     -1, {sup_scale, host::scale},    SI_CUDA(sup_scale, cuda::scale),      true},
        {GGML_OP_CPY,       -1, {sup_copy, host::copy},      SI_CUDA(sup_copy, cuda::copy),        true},
        {GGML_OP_DUP,       -1, {sup_copy, host::copy},      SI_CUDA(sup_copy, cuda::copy),        true},
        {GGML_OP_CONT,      -1, {sup_copy, host::copy},      SI_CUDA(sup_copy, cuda::copy),        true},
        // --- rows: matmul, quantized types, gather/scatter (GET_ROWS, SET_ROWS, MUL_MAT, CPY->quant)
        // --- end rows: matmul
        // --- rows: normalisation, rope, softmax, attention, activations, reductions
        // --- end rows: normalisation
    };
    return rows;
}

int sub_op_of(const ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_UNARY: return int(ggml_get_unary_op(node));
        case GGML_OP_GLU:   return int(ggml_get_glu_op(node));
        default:            return -1;
    }
}

const DeviceImpl * impl_for(const OpRow & row, rt::Kind kind) {
    switch (kind) {
        case rt::Kind::host: return &row.host;
        case rt::Kind::cuda: return &row.cuda;
        case rt::Kind::sycl: return nullptr;
    }
    return nullptr;
}

} // namespace

const std::vector<OpRow> & op_rows() { return rows_storage(); }

const OpRow * find_row(const ggml_tensor * node) {
    // First row of each op; rows of one op are adjacent (checked by a unit test).
    static const std::array<int, GGML_OP_COUNT> first = [] {
        std::array<int, GGML_OP_COUNT> f{};
        f.fill(-1);
        const auto & rows = rows_storage();
        for (int i = int(rows.size()) - 1; i >= 0; --i) {
            f[rows[i].op] = i;
        }
        return f;
    }();
    if (node->op < 0 || node->op >= GGML_OP_COUNT || first[node->op] < 0) {
        return nullptr;
    }
    const auto & rows = rows_storage();
    const int sub = sub_op_of(node);
    for (size_t i = size_t(first[node->op]); i < rows.size() && rows[i].op == node->op; ++i) {
        if (rows[i].sub == -1 || rows[i].sub == sub) {
            return &rows[i];
        }
    }
    return nullptr;
}

bool is_view_op(ggml_op op) {
    return op == GGML_OP_NONE || op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE ||
           op == GGML_OP_TRANSPOSE;
}

bool supports(rt::Kind kind, const ggml_tensor * node) {
    const OpRow * row = find_row(node);
    if (row == nullptr) {
        return false;
    }
    const DeviceImpl * impl = impl_for(*row, kind);
    return impl != nullptr && impl->supports != nullptr && impl->supports(node);
}

bool run_node(rt::Kind kind, rt::Stream & stream, ggml_tensor * node) {
    const OpRow * row = find_row(node);
    const DeviceImpl * impl = row ? impl_for(*row, kind) : nullptr;
    if (impl == nullptr || impl->supports == nullptr || !impl->supports(node)) {
        return false;
    }
    return impl->run == nullptr || impl->run(stream, node);
}

} // namespace standin::kernels
