#include "kernels/op_table.h"

#include <array>

#include "diag/check.h"
#include "diag/config.h"
#include "kernels/op_rows.h"
#include "kernels/cuda/limits.h"
#include "kernels/cuda/weight_types.h"
#include "runtime/host/host_device.h"
#ifdef STANDIN_WITH_CUDA
#include "runtime/cuda/cuda_device.h"
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

// --- predicates: matmul, quantized types, gather/scatter
// (kernels in kernels/host/{get_rows,set_rows,mul_mat,mul_mat_q,mul_mat_id,cpy_quant}.cpp)

// Host weight types with a MUL_MAT kernel: floats (mul_mat.cpp) and every
// block type of quants.h's list (SI_QUANT_BLOCK_TYPES; mul_mat_q.cpp and, for
// the integer form, mul_mat_qd.cpp). The CUDA device keeps its own narrower
// list (cuda_weight_type, op_table.h).
bool is_mm_weight_type(ggml_type t) { return is_float_type(t) || quant::block_elems(t) > 1; }

bool dim0_dense(const ggml_tensor * t) { return t->nb[0] == ggml_type_size(t->type); }

bool sup_get_rows(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * i = n->src[1];
    if (i->type != GGML_TYPE_I32 || !dim0_dense(a) || !dim0_dense(n) || n->ne[0] != a->ne[0] ||
        n->ne[1] != i->ne[0] || n->ne[2] != i->ne[1] || n->ne[3] != i->ne[2] || a->ne[2] != i->ne[1] ||
        a->ne[3] != i->ne[2]) {
        return false;
    }
    if (a->type == GGML_TYPE_I32) {
        return n->type == GGML_TYPE_I32;
    }
    return n->type == GGML_TYPE_F32 && quant::can_decode(a->type) && a->ne[0] % quant::block_elems(a->type) == 0;
}

bool sup_set_rows(const ggml_tensor * n) {
    const ggml_tensor * s = n->src[0];
    const ggml_tensor * i = n->src[1];
    return (s->type == GGML_TYPE_F32 || s->type == GGML_TYPE_F16) &&
           (i->type == GGML_TYPE_I64 || i->type == GGML_TYPE_I32) && quant::can_encode(n->type) &&
           n->ne[0] % quant::block_elems(n->type) == 0 && dim0_dense(s) && dim0_dense(n) && n->ne[0] == s->ne[0] &&
           n->ne[2] == s->ne[2] && n->ne[3] == s->ne[3] && i->ne[0] == s->ne[1] && i->ne[1] > 0 && i->ne[2] > 0 &&
           s->ne[2] % i->ne[1] == 0 && s->ne[3] % i->ne[2] == 0;
}

bool sup_mul_mat(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    // src1 F32, or F16/BF16 under weights of the same type: the pairs the CPU
    // backend supports too, so test-backend-ops checks every claimed pair.
    const bool b_ok = b->type == GGML_TYPE_F32 || (b->type == a->type && is_float_type(b->type));
    return is_mm_weight_type(a->type) && b_ok && n->type == GGML_TYPE_F32 && dim0_dense(a) &&
           dim0_dense(n) && a->ne[0] == b->ne[0] && a->ne[0] % ggml_blck_size(a->type) == 0 &&
           a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0 &&
           n->ne[0] == a->ne[1] && n->ne[1] == b->ne[1] && n->ne[2] == b->ne[2] && n->ne[3] == b->ne[3];
}

bool sup_mul_mat_id(const ggml_tensor * n) {
    const ggml_tensor * a   = n->src[0];
    const ggml_tensor * b   = n->src[1];
    const ggml_tensor * ids = n->src[2];
    const bool b_ok = b->type == GGML_TYPE_F32 || (b->type == a->type && is_float_type(b->type));
    return is_mm_weight_type(a->type) && b_ok && ids != nullptr && ids->type == GGML_TYPE_I32 &&
           n->type == GGML_TYPE_F32 && dim0_dense(a) && dim0_dense(n) && a->ne[0] == b->ne[0] &&
           a->ne[0] % ggml_blck_size(a->type) == 0 && a->ne[3] == 1 && b->ne[3] == 1 && b->ne[1] > 0 &&
           ids->ne[0] % b->ne[1] == 0 && ids->ne[1] == b->ne[2] && n->ne[0] == a->ne[1] &&
           n->ne[1] == ids->ne[0] && n->ne[2] == ids->ne[1];
}

// CPY/DUP/CONT with a block type on either side (cpy_quant.cpp): float to a
// type quants.h encodes, decodable block type to float, or whole blocks of one type.
bool sup_copy_quant(const ggml_tensor * n) {
    const ggml_tensor * s = n->src[0];
    const ggml_type st = s->type, dt = n->type;
    const int64_t qk = ggml_blck_size(st) > ggml_blck_size(dt) ? ggml_blck_size(st) : ggml_blck_size(dt);
    if (ggml_nelements(s) != ggml_nelements(n) || qk <= 1 || s->ne[0] % qk != 0 || n->ne[0] % qk != 0) {
        return false;
    }
    if (st == dt) {
        return dim0_dense(s) && dim0_dense(n);
    }
    if (is_float_type(st)) {
        return quant::can_encode(dt) && dim0_dense(n);
    }
    return is_float_type(dt) && quant::can_decode(st) && dim0_dense(s);
}

// The host copy kernel routes block types to copy_quant (cpy.cpp); copy_any
// (cpy_int.cpp) takes integer and F32<->I32 copies first.
bool sup_copy_host(const ggml_tensor * n) { return sup_copy(n) || sup_copy_quant(n) || host::is_elem_copy(n); }

// --- end predicates: matmul

// --- predicates: normalisation, rope, softmax, attention, activations, reductions
// (kernels in kernels/host/{norm,rope,softmax,flash_attn,unary,glu,reduce,shape}.cpp)

using rows::is_f32_or_f16;
using rows::rows_contiguous;

bool sup_norm(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    return n->type == GGML_TYPE_F32 && a->type == GGML_TYPE_F32 && ggml_are_same_shape(a, n);
}

bool sup_rope(const ggml_tensor * n) {
    const ggml_tensor * a   = n->src[0];
    const ggml_tensor * pos = n->src[1];
    const ggml_tensor * ff  = n->src[2];
    if (!is_f32_or_f16(n->type) || a->type != n->type || !ggml_are_same_shape(a, n) || !rows_contiguous(a) ||
        !rows_contiguous(n) || pos == nullptr || pos->type != GGML_TYPE_I32 || !ggml_is_contiguous(pos)) {
        return false;
    }
    const int32_t * p = reinterpret_cast<const int32_t *>(n->op_params);
    const int n_dims = p[1], mode = p[2], n_offs = p[15];
    const int sect_total = p[11] + p[12] + p[13] + p[14];
    const bool multi = (mode & GGML_ROPE_TYPE_MROPE) != 0;
    const bool vision = mode == GGML_ROPE_TYPE_VISION;
    if (mode != GGML_ROPE_TYPE_NORMAL && mode != GGML_ROPE_TYPE_NEOX && mode != GGML_ROPE_TYPE_MROPE &&
        mode != GGML_ROPE_TYPE_IMROPE && !vision) {
        return false;
    }
    if (n_dims <= 0 || n_dims % 2 != 0 || n_offs < 0 || n_offs % 2 != 0 || n_offs + n_dims > a->ne[0] ||
        pos->ne[0] < (multi ? 4 : 1) * a->ne[2] || (multi && sect_total <= 0) ||
        (vision && (2 * int64_t(n_dims) != a->ne[0] || n_offs != 0))) {
        return false;
    }
    // The angle cache reads one factor per rotated pair.
    return ff == nullptr ||
           (ff->type == GGML_TYPE_F32 && ggml_is_contiguous(ff) && ff->ne[0] >= (vision ? n_dims : n_dims / 2));
}

bool sup_softmax(const ggml_tensor * n) {
    const ggml_tensor * a    = n->src[0];
    const ggml_tensor * mask = n->src[1];
    const ggml_tensor * sink = n->src[2];
    if (n->type != GGML_TYPE_F32 || a->type != GGML_TYPE_F32 || !ggml_are_same_shape(a, n) || !rows_contiguous(a) ||
        !rows_contiguous(n)) {
        return false;
    }
    if (mask != nullptr && (!is_f32_or_f16(mask->type) || !rows_contiguous(mask) || mask->ne[0] != a->ne[0] ||
                            mask->ne[1] < a->ne[1] || a->ne[2] % mask->ne[2] != 0 || a->ne[3] % mask->ne[3] != 0)) {
        return false;
    }
    return sink == nullptr || (sink->type == GGML_TYPE_F32 && ggml_is_contiguous(sink) && sink->ne[0] >= a->ne[2]);
}

// FLASH_ATTN_EXT's shapes, mask and sinks: everything but the K/V types.
bool flash_attn_shape_ok(const ggml_tensor * n) {
    const ggml_tensor * q = n->src[0];
    const ggml_tensor * k = n->src[1];
    const ggml_tensor * v = n->src[2];
    const ggml_tensor * mask = n->src[3];
    const ggml_tensor * sinks = n->src[4];
    if (n->type != GGML_TYPE_F32 || n->nb[0] != sizeof(float) || q->type != GGML_TYPE_F32 || !rows_contiguous(q) ||
        !rows_contiguous(k) || !rows_contiguous(v)) {
        return false;
    }
    if (k->ne[0] != q->ne[0] || v->ne[0] != n->ne[0] || v->ne[1] != k->ne[1] || n->ne[1] != q->ne[2] ||
        n->ne[2] != q->ne[1] || q->ne[2] % k->ne[2] != 0 || q->ne[2] % v->ne[2] != 0 || q->ne[3] % k->ne[3] != 0 ||
        q->ne[3] % v->ne[3] != 0) {
        return false;
    }
    if (mask != nullptr && (mask->type != GGML_TYPE_F16 || !rows_contiguous(mask) || mask->ne[0] < k->ne[1] ||
                            mask->ne[1] < q->ne[1] || q->ne[2] % mask->ne[2] != 0 || q->ne[3] % mask->ne[3] != 0)) {
        return false;
    }
    return sinks == nullptr || (sinks->type == GGML_TYPE_F32 && ggml_is_contiguous(sinks) && sinks->ne[0] >= q->ne[2]);
}

// K and V of any types quants.h decodes, whole blocks per row: read in place
// by flash_attn.cpp (Note [quantized KV cache]; a block-type K needs MUL_MAT's
// dot kernel for its type) or decoded to F16 first (flash_attn_cvt.cpp).
bool sup_flash_attn(const ggml_tensor * n) {
    const ggml_tensor * k = n->src[1];
    const ggml_tensor * v = n->src[2];
    return flash_attn_shape_ok(n) && is_mm_weight_type(k->type) && quant::can_decode(v->type) &&
           k->ne[0] % quant::block_elems(k->type) == 0 && v->ne[0] % quant::block_elems(v->type) == 0;
}

bool sup_unary(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    return is_f32_or_f16(a->type) && is_f32_or_f16(n->type) && ggml_are_same_shape(a, n) && rows_contiguous(a) &&
           rows_contiguous(n);
}

bool sup_glu(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    const ggml_glu_op op = ggml_get_glu_op(n);
    if (!is_f32_or_f16(a->type) || n->type != a->type || !rows_contiguous(a) || !rows_contiguous(n) ||
        (op == GGML_GLU_OP_SWIGLU_OAI && a->type != GGML_TYPE_F32)) {
        return false;
    }
    for (int d = 1; d < GGML_MAX_DIMS; ++d) {
        if (a->ne[d] != n->ne[d]) return false;
    }
    if (b == nullptr) {
        return a->ne[0] / 2 == n->ne[0];  // an odd last element is ignored, as in ggml
    }
    return b->type == a->type && rows_contiguous(b) && ggml_are_same_shape(a, b) && a->ne[0] == n->ne[0];
}

bool sup_reduce(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    switch (n->op) {
        case GGML_OP_SUM_ROWS:
        case GGML_OP_MEAN:
            return a->type == GGML_TYPE_F32 && n->type == GGML_TYPE_F32 && n->ne[0] == 1 && n->ne[1] == a->ne[1] &&
                   n->ne[2] == a->ne[2] && n->ne[3] == a->ne[3];
        case GGML_OP_SUM:
            // Rows must be contiguous: ggml-cpu's reference reads each row as
            // contiguous, so a transposed input has no agreed result to match.
            return is_float_type(a->type) && n->type == a->type && ggml_nelements(n) == 1 && rows_contiguous(a);
        case GGML_OP_ARGMAX:
            return a->type == GGML_TYPE_F32 && n->type == GGML_TYPE_I32 && a->ne[2] == 1 && a->ne[3] == 1 &&
                   n->ne[0] == a->ne[1];
        default:
            return false;
    }
}

bool sup_shape(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    switch (n->op) {
        case GGML_OP_CONCAT: {
            const int dim = n->op_params[0];
            if (a->type != n->type || b->type != n->type || dim < 0 || dim >= GGML_MAX_DIMS) return false;
            // Block types are copied whole blocks at a time: rows must be
            // contiguous and a dim-0 split must fall on a block boundary.
            return ggml_blck_size(n->type) == 1 ||
                   (rows_contiguous(a) && rows_contiguous(b) && rows_contiguous(n) &&
                    a->ne[0] % ggml_blck_size(n->type) == 0 && b->ne[0] % ggml_blck_size(n->type) == 0);
        }
        case GGML_OP_REPEAT:
            return a->type == n->type && !ggml_is_quantized(n->type) && ggml_blck_size(n->type) == 1 &&
                   ggml_can_repeat(a, n);
        case GGML_OP_ADD1:
            return is_float_type(n->type) && a->type == n->type && is_float_type(b->type) && ggml_nelements(b) == 1 &&
                   ggml_are_same_shape(a, n);
        case GGML_OP_ACC:
            return n->type == GGML_TYPE_F32 && a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32 &&
                   ggml_are_same_shape(a, n) && ggml_is_contiguous(a) && ggml_is_contiguous(n);
        default:
            return false;
    }
}

// --- end predicates: normalisation

// --- predicates: CUDA device (kernels in kernels/cuda/*.cu)
// Rows whose CUDA kernel covers exactly the host predicate use it directly;
// these are the narrower ones.
#ifdef STANDIN_WITH_CUDA

bool cuda_mul_mat(const ggml_tensor * n) { return sup_mul_mat(n) && cuda_weight_type(n->src[0]->type); }
bool cuda_mul_mat_id(const ggml_tensor * n) { return sup_mul_mat_id(n) && cuda_weight_type(n->src[0]->type); }
bool cuda_get_rows(const ggml_tensor * n) {
    return sup_get_rows(n) && (n->src[0]->type == GGML_TYPE_I32 || cuda_weight_type(n->src[0]->type));
}

// The types quants.h encodes that set_rows.cu and cpy_quant.cu (which encode
// through from_f32_row, a block of 32 per thread) run: the float types and
// every encoder of 32-element blocks, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (run on the
// H200: results/h200/summary-34.txt), MXFP4 and IQ4_NL (summary-36.txt).
// Q1_0, Q2_0, NVFP4, TQ2_0 and the super-block types (Q2_K..Q6_K, IQ4_XS)
// are not blocks of 32: host only.
bool cuda_encodes(ggml_type t) {
    return quant::can_encode(t) && (is_float_type(t) || quant::block_elems(t) == quant::kQK);
}

bool cuda_set_rows(const ggml_tensor * n) { return sup_set_rows(n) && cuda_encodes(n->type); }

// Block copies move 16-bit words (cpy_quant.cu); contiguous same-type copies
// of any block type are one memcpy (elementwise.cu).
bool cuda_copy(const ggml_tensor * n) {
    const ggml_tensor * s = n->src[0];
    if (sup_copy(n)) return true;
    if (host::is_elem_copy(n)) return true;  // copy_any (cpy_int.cu)
    if (!sup_copy_quant(n)) return false;
    if (s->type != n->type && is_float_type(s->type) && !cuda_encodes(n->type)) return false;
    if (s->type != n->type && !is_float_type(s->type) && !cuda_weight_type(s->type)) return false;  // no decoder
    const bool memcpy_case = s->type == n->type && ggml_is_contiguous(s) && ggml_is_contiguous(n);
    return memcpy_case || s->type != n->type || ggml_type_size(s->type) % 2 == 0;  // decodes read bytes (MXFP4: 17)
}

// The cos/sin cache of one position must fit in shared memory (Note [kernel
// limits]): n_dims floats, twice that in VISION mode (every channel rotated).
bool cuda_rope(const ggml_tensor * n) {
    const int32_t * p = reinterpret_cast<const int32_t *>(n->op_params);
    const int64_t floats = (p[2] == GGML_ROPE_TYPE_VISION ? 2 : 1) * int64_t(p[1]);
    return sup_rope(n) && floats * int64_t(sizeof(float)) <= cuda::limits::kRopeCacheBytes;
}

// K/V pairs the kernels do not read natively - block-quantized caches
// (-ctk q8_0 -ctv q8_0 ...) and two float types - are decoded to F16 first
// (flash_attn_cvt.cu; all 5181 cases passed on the H200, summary-34).
// K and V of one float type, or (converted) of any types quants.h decodes;
// V rows within registers per lane; heads and batches within the grid's y/z
// limits (Note [kernel limits]).
bool cuda_flash_attn(const ggml_tensor * n) {
    const ggml_tensor * q = n->src[0];
    const ggml_type kt = n->src[1]->type, vt = n->src[2]->type;
    const bool native = kt == vt && is_float_type(kt);
    const bool converted = quant::can_decode(kt) && quant::can_decode(vt);
    return flash_attn_shape_ok(n) && (native || converted) && n->src[2]->ne[0] <= cuda::limits::kFlashAttnMaxDV &&
           q->ne[2] <= cuda::limits::kGridYZ && q->ne[3] <= cuda::limits::kGridYZ;
}

// CONCAT and REPEAT of element types (1, 2, 4 or 8 bytes), and CONCAT of
// block types under sup_shape's condition (copied in units that divide the
// block: kernels/cuda/shape.cu); ADD1 and ACC take the host predicate
// (kernels/cuda/tensor_build.cu).
bool cuda_shape(const ggml_tensor * n) {
    if (n->op != GGML_OP_CONCAT && n->op != GGML_OP_REPEAT) return false;
    const size_t es = ggml_type_size(n->type);
    const bool element = ggml_blck_size(n->type) == 1 && (es == 1 || es == 2 || es == 4 || es == 8);
    return sup_shape(n) && (element || (n->op == GGML_OP_CONCAT && ggml_blck_size(n->type) > 1));
}

#endif  // STANDIN_WITH_CUDA
// --- end predicates: CUDA device

std::vector<OpRow> core_rows() {
    using namespace host;
    return {
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
        {GGML_OP_CPY,       -1, {sup_copy_host, host::copy_any}, SI_CUDA(cuda_copy, cuda::copy_any),       true},
        {GGML_OP_DUP,       -1, {sup_copy_host, host::copy_any}, SI_CUDA(cuda_copy, cuda::copy_any),       true},
        {GGML_OP_CONT,      -1, {sup_copy_host, host::copy_any}, SI_CUDA(cuda_copy, cuda::copy_any),       true},
        // --- rows: matmul, quantized types, gather/scatter (GET_ROWS, SET_ROWS, MUL_MAT, CPY->quant)
        {GGML_OP_GET_ROWS,  -1, {sup_get_rows, host::get_rows}, SI_CUDA(cuda_get_rows, cuda::get_rows), true},
        {GGML_OP_SET_ROWS,  -1, {sup_set_rows, host::set_rows}, SI_CUDA(cuda_set_rows, cuda::set_rows), true},
        {GGML_OP_MUL_MAT,   -1, {sup_mul_mat, host::mul_mat},   SI_CUDA(cuda_mul_mat, cuda::mul_mat),   true},
        {GGML_OP_MUL_MAT_ID, -1, {sup_mul_mat_id, host::mul_mat_id}, SI_CUDA(cuda_mul_mat_id, cuda::mul_mat_id), true},
        // --- end rows: matmul
        // --- rows: normalisation, rope, softmax, attention, activations, reductions
        {GGML_OP_RMS_NORM,  -1, {sup_norm, host::norm}, SI_CUDA(sup_norm, cuda::norm), true},
        {GGML_OP_NORM,      -1, {sup_norm, host::norm}, SI_CUDA(sup_norm, cuda::norm), true},
        {GGML_OP_ROPE,      -1, {sup_rope, host::rope}, SI_CUDA(cuda_rope, cuda::rope), true},
        {GGML_OP_ROPE_BACK, -1, {sup_rope, host::rope}, SI_CUDA(cuda_rope, cuda::rope), true},
        {GGML_OP_SOFT_MAX,  -1, {sup_softmax, host::softmax}, SI_CUDA(sup_softmax, cuda::softmax), true},
        {GGML_OP_FLASH_ATTN_EXT, -1, {sup_flash_attn, host::flash_attn_ext_any},
         SI_CUDA(cuda_flash_attn, cuda::flash_attn_ext), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_ABS, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_SGN, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_NEG, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_STEP, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_TANH, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_ELU, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_RELU, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_SIGMOID, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_GELU, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_GELU_QUICK, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_SILU, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_HARDSWISH, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_HARDSIGMOID, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_EXP, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_EXPM1, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_SOFTPLUS, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_GELU_ERF, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_XIELU, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_FLOOR, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_CEIL, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_ROUND, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_UNARY, GGML_UNARY_OP_TRUNC, {sup_unary, host::unary}, SI_CUDA(sup_unary, cuda::unary), true},
        {GGML_OP_GLU, GGML_GLU_OP_REGLU, {sup_glu, host::glu}, SI_CUDA(sup_glu, cuda::glu), true},
        {GGML_OP_GLU, GGML_GLU_OP_GEGLU, {sup_glu, host::glu}, SI_CUDA(sup_glu, cuda::glu), true},
        {GGML_OP_GLU, GGML_GLU_OP_SWIGLU, {sup_glu, host::glu}, SI_CUDA(sup_glu, cuda::glu), true},
        {GGML_OP_GLU, GGML_GLU_OP_SWIGLU_OAI, {sup_glu, host::glu}, SI_CUDA(sup_glu, cuda::glu), true},
        {GGML_OP_GLU, GGML_GLU_OP_GEGLU_ERF, {sup_glu, host::glu}, SI_CUDA(sup_glu, cuda::glu), true},
        {GGML_OP_GLU, GGML_GLU_OP_GEGLU_QUICK, {sup_glu, host::glu}, SI_CUDA(sup_glu, cuda::glu), true},
        {GGML_OP_GLU, GGML_GLU_OP_SWIGLU_CLAMP, {sup_glu, host::glu}, SI_CUDA(sup_glu, cuda::glu), true},
        {GGML_OP_SUM_ROWS,  -1, {sup_reduce, host::reduce}, SI_CUDA(sup_reduce, cuda::reduce), true},
        {GGML_OP_MEAN,      -1, {sup_reduce, host::reduce}, SI_CUDA(sup_reduce, cuda::reduce), true},
        {GGML_OP_SUM,       -1, {sup_reduce, host::reduce}, SI_CUDA(sup_reduce, cuda::reduce), true},
        {GGML_OP_ARGMAX,    -1, {sup_reduce, host::reduce}, SI_CUDA(sup_reduce, cuda::reduce), true},
        {GGML_OP_CONCAT,    -1, {sup_shape, host::shape}, SI_CUDA(cuda_shape, cuda::shape), true},
        {GGML_OP_REPEAT,    -1, {sup_shape, host::shape}, SI_CUDA(cuda_shape, cuda::shape), true},
        {GGML_OP_ADD1,      -1, {sup_shape, host::shape}, SI_CUDA_UNPROVEN(sup_shape, cuda::acc_add1), true},
        {GGML_OP_ACC,       -1, {sup_shape, host::shape}, SI_CUDA(sup_shape, cuda::acc_add1), true},
        // --- end rows: normalisation
    };
}

const std::vector<OpRow> & rows_storage() {
    static const std::vector<OpRow> rows = [] {
        std::vector<OpRow> r = core_rows();
        rows::append_moe_rows(r);
        rows::append_ssm_rows(r);
        rows::append_math_rows(r);
        rows::append_encoder_rows(r);
        rows::append_train_rows(r);
        return r;
    }();
    return rows;
}

int sub_op_of(const ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_UNARY: return int(ggml_get_unary_op(node));
        case GGML_OP_GLU:   return int(ggml_get_glu_op(node));
        default:            return -1;
    }
}

// Whether a device's entry claims the node: it has a predicate that accepts
// it, and is proven or GGML_STANDIN_CUDA_UNPROVEN=1 is set.
template <typename Fn> bool claims(const DeviceImpl<Fn> & impl, const ggml_tensor * node) {
    return (impl.proven || diag::config().cuda_unproven) && impl.supports != nullptr && impl.supports(node);
}

template <typename Fn, typename S> Status run_entry(const DeviceImpl<Fn> & impl, S & stream, ggml_tensor * node) {
    if (!claims(impl, node)) {
        return Status::unsupported;
    }
    return impl.run == nullptr ? Status(Status::ok) : impl.run(stream, node);
}

} // namespace

const std::vector<OpRow> & op_rows() { return rows_storage(); }

bool cuda_weight_type(ggml_type t) {
    return cuda::with_weight_type(t, [](auto) {});  // Note [CUDA weight types]
}

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
    switch (kind) {
        case rt::Kind::host: return claims(row->host, node);
        case rt::Kind::cuda: return claims(row->cuda, node);
        case rt::Kind::sycl: return false;
    }
    return false;
}

Status run_node(rt::Kind kind, rt::Stream & stream, ggml_tensor * node) {
    const OpRow * row = find_row(node);
    if (row == nullptr) {
        return Status::unsupported;
    }
    switch (kind) {
        case rt::Kind::host: return run_entry(row->host, rt::host::HostStream::of(stream), node);
        case rt::Kind::cuda:
#ifdef STANDIN_WITH_CUDA
            return run_entry(row->cuda, rt::cuda::CudaStream::of(stream), node);
#else
            return Status::unsupported;  // no CUDA kernels in this build
#endif
        case rt::Kind::sycl: return Status::unsupported;
    }
    return Status::unsupported;
}

} // namespace standin::kernels
