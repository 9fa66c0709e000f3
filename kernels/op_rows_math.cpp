// Op-table rows of the small elementwise and tensor-building ops (Note [op
// table families]): SQR SQRT LOG SIN COS CLAMP LEAKY_RELU, SET ROLL ARANGE
// TIMESTEP_EMBEDDING, DeepSeek-V4's DSV4_HC_COMB/PRE/POST and the sparse
// attention indexer LIGHTNING_INDEXER.
// Kernels: kernels/host/{math,tensor_build,dsv4,indexer}.cpp and the .cu files
// of the same names.
#include "kernels/common/dsv4.h"
#include "kernels/common/op_params.h"
#include "kernels/op_rows.h"
#include "kernels/cuda/limits.h"

namespace standin::kernels::rows {

namespace {

// Same shape and type (F32 or F16) on both sides, dim-0 elements adjacent.
bool sup_math(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    return is_f32_or_f16(n->type) && a->type == n->type && ggml_are_same_shape(a, n) && rows_contiguous(a) &&
           rows_contiguous(n);
}

// SET: element types without blocks; src0 and dst contiguous and alike, src1
// rows contiguous, and every element of the view inside dst.
bool sup_set(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    if (ggml_blck_size(n->type) != 1 || ggml_is_quantized(n->type) || a->type != n->type || b->type != n->type ||
        !ggml_are_same_shape(a, n) || !ggml_is_contiguous(a) || !ggml_is_contiguous(n) || !rows_contiguous(b)) {
        return false;
    }
    const int64_t nb1 = op_i32(n, 0), nb2 = op_i32(n, 1), nb3 = op_i32(n, 2), off = op_i32(n, 3);
    if (nb1 < 0 || nb2 < 0 || nb3 < 0 || off < 0 || ggml_nelements(b) == 0) return false;
    const int64_t last = off + (b->ne[0] - 1) * int64_t(ggml_type_size(n->type)) + (b->ne[1] - 1) * nb1 +
                         (b->ne[2] - 1) * nb2 + (b->ne[3] - 1) * nb3;
    return last + int64_t(ggml_type_size(n->type)) <= int64_t(ggml_nbytes(n));
}

bool sup_roll(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    for (int d = 0; d < 4; ++d) {
        const int64_t s = op_i32(n, d);
        if (s <= -a->ne[d] || s >= a->ne[d]) return false;
    }
    return f32_rows(a) && f32_rows(n) && ggml_are_same_shape(a, n);
}

bool sup_arange(const ggml_tensor * n) { return f32_rows(n) && ggml_nelements(n) == n->ne[0]; }

bool sup_timestep(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    return is_f32(a) && f32_rows(n) && op_i32(n, 0) == n->ne[0] && op_i32(n, 1) > 0 && n->ne[1] == a->ne[0] &&
           ggml_nelements(a) == a->ne[0];
}

bool all_f32(const ggml_tensor * n, int n_src) {
    for (int i = 0; i < n_src; ++i) {
        if (n->src[i] == nullptr || !is_f32(n->src[i])) return false;
    }
    return is_f32(n);
}

bool sup_hc_comb(const ggml_tensor * n) {
    const ggml_tensor *m = n->src[0], *s = n->src[1], *b = n->src[2];
    return all_f32(n, 3) && m->ne[0] == dsv4::kMixDim && m->ne[2] == 1 && m->ne[3] == 1 && s->ne[0] >= 3 &&
           b->ne[0] == dsv4::kMixDim && n->ne[0] == dsv4::kHc && n->ne[1] == dsv4::kHc && n->ne[2] == m->ne[1] &&
           n->ne[3] == 1 && op_i32(n, 1) > 0;
}

bool sup_hc_pre(const ggml_tensor * n) {
    const ggml_tensor *x = n->src[0], *w = n->src[1];
    return all_f32(n, 2) && x->ne[3] == 1 && w->ne[0] == x->ne[1] && w->ne[1] == x->ne[2] && n->ne[0] == x->ne[0] &&
           n->ne[1] == x->ne[2] && n->ne[2] == 1 && n->ne[3] == 1;
}

bool sup_hc_post(const ggml_tensor * n) {
    const ggml_tensor *x = n->src[0], *r = n->src[1], *p = n->src[2], *c = n->src[3];
    const int64_t hc = r->ne[1], nt = x->ne[1];
    return all_f32(n, 4) && x->ne[2] == 1 && x->ne[3] == 1 && r->ne[0] == x->ne[0] && r->ne[2] == nt &&
           p->ne[0] == hc && p->ne[1] == nt && c->ne[0] == hc && c->ne[1] == hc && c->ne[2] == nt &&
           n->ne[0] == x->ne[0] && n->ne[1] == hc && n->ne[2] == nt && n->ne[3] == 1;
}

bool sup_indexer(const ggml_tensor * n) {
    const ggml_tensor *q = n->src[0], *k = n->src[1], *w = n->src[2], *m = n->src[3];
    const int64_t qk = quant::block_elems(k->type);
    return f32_rows(q) && f32_rows(w) && m != nullptr && m->type == GGML_TYPE_F16 && rows_contiguous(m) &&
           quant::can_decode(k->type) && qk > 0 && k->nb[0] == ggml_type_size(k->type) && q->ne[0] % qk == 0 &&
           f32_rows(n) && q->ne[0] == k->ne[0] && k->ne[1] == 1 && m->ne[0] >= k->ne[2] && m->ne[1] >= q->ne[2] &&
           q->ne[1] == w->ne[0] && q->ne[2] == w->ne[1] && q->ne[3] == k->ne[3] && k->ne[3] == w->ne[3] &&
           m->ne[3] > 0 && w->ne[3] % m->ne[3] == 0 && n->ne[0] == k->ne[2] && n->ne[1] == q->ne[2] &&
           n->ne[3] == q->ne[3];
}

#ifdef STANDIN_WITH_CUDA
bool cuda_indexer(const ggml_tensor * n) { return sup_indexer(n) && n->src[0]->ne[3] <= cuda::limits::kGridYZ; }

// SET on the CUDA device moves whole elements of 1, 2, 4 or 8 bytes.
bool cuda_set(const ggml_tensor * n) {
    const size_t es = ggml_type_size(n->type);
    return sup_set(n) && (es == 1 || es == 2 || es == 4 || es == 8);
}
#endif

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
        {GGML_OP_SET,         -1, {sup_set, host::set},   SI_CUDA(cuda_set, cuda::set), true},
        {GGML_OP_ROLL,        -1, {sup_roll, host::roll}, SI_CUDA(sup_roll, cuda::roll), true},
        {GGML_OP_ARANGE,      -1, {sup_arange, host::arange}, SI_CUDA(sup_arange, cuda::arange), true},
        {GGML_OP_TIMESTEP_EMBEDDING, -1, {sup_timestep, host::timestep_embedding},
         SI_CUDA(sup_timestep, cuda::timestep_embedding), true},
        {GGML_OP_DSV4_HC_COMB, -1, {sup_hc_comb, host::dsv4_hc_comb}, SI_CUDA(sup_hc_comb, cuda::dsv4_hc_comb), true},
        {GGML_OP_DSV4_HC_PRE,  -1, {sup_hc_pre, host::dsv4_hc_pre},   SI_CUDA(sup_hc_pre, cuda::dsv4_hc_pre), true},
        {GGML_OP_DSV4_HC_POST, -1, {sup_hc_post, host::dsv4_hc_post}, SI_CUDA(sup_hc_post, cuda::dsv4_hc_post), true},
        {GGML_OP_LIGHTNING_INDEXER, -1, {sup_indexer, host::lightning_indexer},
         SI_CUDA(cuda_indexer, cuda::lightning_indexer), true},
    });
}

} // namespace standin::kernels::rows
