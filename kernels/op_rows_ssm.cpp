// Op-table rows of the state-space / linear-attention family (Note [op table
// families]): SSM_CONV, SSM_SCAN, RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7,
// GATED_DELTA_NET, the chunking helpers CUMSUM, TRI, FILL, DIAG, DIAG_MASK_INF, SOLVE_TRI,
// and the L2_NORM / GROUP_NORM normalisations.
// Kernels: kernels/host/{ssm,linear_attn,triangular,group_norm}.cpp and the
// .cu files of the same names.
#include "kernels/common/op_params.h"
#include "kernels/op_rows.h"
#include "kernels/cuda/limits.h"

namespace standin::kernels::rows {

namespace {

bool all_f32_contiguous(const ggml_tensor * n, int n_src) {
    for (int i = 0; i < n_src; ++i) {
        if (n->src[i] == nullptr || !is_f32(n->src[i]) || !ggml_is_contiguous(n->src[i])) return false;
    }
    return is_f32(n) && ggml_is_contiguous(n);
}

bool sup_ssm_conv(const ggml_tensor * n) {
    const ggml_tensor * sx = n->src[0];
    const ggml_tensor * w  = n->src[1];
    return f32_rows(sx) && f32_rows(w) && is_f32(n) && sx->ne[3] == 1 && w->ne[2] == 1 && w->ne[3] == 1 &&
           sx->ne[0] == w->ne[0] - 1 + n->ne[1] && sx->ne[1] == w->ne[1] && n->ne[0] == w->ne[1] &&
           n->ne[2] == sx->ne[2] && n->ne[3] == 1;
}

bool sup_ssm_scan(const ggml_tensor * n) {
    const ggml_tensor *S = n->src[0], *X = n->src[1], *DT = n->src[2], *A = n->src[3], *B = n->src[4],
                      *C = n->src[5], *ids = n->src[6];
    if (ids == nullptr || ids->type != GGML_TYPE_I32 || !f32_rows(S) || !ggml_is_contiguous(S) || !f32_rows(X) ||
        !f32_rows(DT) || !f32_rows(A) || !f32_rows(B) || !f32_rows(C) || !is_f32(n) || !ggml_is_contiguous(n)) {
        return false;
    }
    const int64_t ds = S->ne[0], hd = X->ne[0], nh = X->ne[1], nt = X->ne[2], ns = X->ne[3];
    const int64_t K = op_i32(n, 0);
    return K >= 1 && S->ne[1] == hd && S->ne[2] == nh && DT->ne[0] == nh && DT->ne[1] == nt && DT->ne[2] == ns &&
           (A->ne[0] == 1 || A->ne[0] == ds) && A->ne[1] == nh && ggml_are_same_shape(B, C) && B->ne[0] == ds &&
           B->ne[1] > 0 && nh % B->ne[1] == 0 && B->ne[2] == nt && B->ne[3] == ns && ids->ne[0] == ns &&
           ggml_nelements(n) == hd * nh * nt * ns + K * ds * hd * nh * ns;
}

// WKV6 (6 sources), GLA (5), WKV7 (7): the last source is the state.
bool sup_wkv(const ggml_tensor * n, int n_src) {
    if (!all_f32_contiguous(n, n_src)) return false;
    const ggml_tensor * st = n->src[n_src - 1];
    const ggml_tensor * v  = n->src[1];
    const int64_t C = n->ne[0], H = v->ne[1], T = v->ne[2];
    if (H <= 0 || C % H != 0 || v->ne[0] * H != C || st->ne[1] <= 0 || T % st->ne[1] != 0) return false;
    const int64_t S = C / H;
    for (int i = 0; i < n_src - 1; ++i) {
        const ggml_tensor * s = n->src[i];
        const bool per_head = n->op == GGML_OP_RWKV_WKV6 && i == 3;  // time_first {S, H}
        if (s->ne[0] != S || s->ne[1] != H || s->ne[2] != (per_head ? 1 : T)) return false;
    }
    return ggml_nelements(st) == S * S * H * st->ne[1] && n->ne[1] == T + S * st->ne[1];
}

bool sup_wkv6(const ggml_tensor * n) { return sup_wkv(n, 6); }
bool sup_gla(const ggml_tensor * n) { return sup_wkv(n, 5); }
bool sup_wkv7(const ggml_tensor * n) { return sup_wkv(n, 7); }

bool sup_delta_net(const ggml_tensor * n) {
    const ggml_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *g = n->src[3], *beta = n->src[4],
                      *st = n->src[5];
    if (!f32_rows(q) || !f32_rows(k) || !f32_rows(v) || !f32_rows(g) || !f32_rows(beta) || st == nullptr ||
        !is_f32(st) || !ggml_is_contiguous(st) || !is_f32(n) || !ggml_is_contiguous(n)) {
        return false;
    }
    const int64_t S = v->ne[0], H = v->ne[1], nt = v->ne[2], ns = v->ne[3];
    const int64_t K = op_i32(n, 0);
    const auto qk_ok = [&](const ggml_tensor * t) {
        return t->ne[0] == S && t->ne[1] > 0 && t->ne[2] == nt && t->ne[3] > 0 && ns % t->ne[3] == 0;
    };
    return K >= 1 && qk_ok(q) && qk_ok(k) && (g->ne[0] == 1 || g->ne[0] == S) && g->ne[1] == H && g->ne[2] == nt &&
           g->ne[3] == ns && beta->ne[0] == 1 && beta->ne[1] == H && beta->ne[2] == nt && beta->ne[3] == ns &&
           st->ne[0] == S && st->ne[1] == S && st->ne[2] == H && st->ne[3] == ns && n->ne[0] == S * H &&
           n->ne[1] == nt * ns + K * S * ns;
}

// Same shape, F32, dim-0 elements adjacent on both sides.
bool sup_f32_same(const ggml_tensor * n) {
    return f32_rows(n->src[0]) && f32_rows(n) && ggml_are_same_shape(n->src[0], n);
}

bool sup_tri(const ggml_tensor * n) {
    const int type = op_i32(n, 0);
    return sup_f32_same(n) && type >= GGML_TRI_TYPE_UPPER_DIAG && type <= GGML_TRI_TYPE_LOWER;
}

bool sup_fill(const ggml_tensor * n) { return is_f32_or_f16(n->type) && ggml_are_same_shape(n->src[0], n); }

bool sup_diag(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    return f32_rows(a) && f32_rows(n) && a->ne[1] == 1 && n->ne[0] == a->ne[0] && n->ne[1] == a->ne[0] &&
           n->ne[2] == a->ne[2] && n->ne[3] == a->ne[3];
}

bool sup_solve_tri(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    return f32_rows(a) && f32_rows(b) && f32_rows(n) && a->ne[0] == a->ne[1] && a->ne[1] == b->ne[1] &&
           a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3] && ggml_are_same_shape(b, n);
}

bool sup_diag_mask(const ggml_tensor * n) { return sup_f32_same(n) && op_i32(n, 0) >= 0; }

bool sup_l2_norm(const ggml_tensor * n) {
    return is_f32(n->src[0]) && is_f32(n) && ggml_are_same_shape(n->src[0], n);
}

bool sup_group_norm(const ggml_tensor * n) { return sup_l2_norm(n) && op_i32(n, 0) > 0; }

#ifdef STANDIN_WITH_CUDA
// The CUDA kernels keep a head's state in shared memory (S <= 128) and a scan
// block's states in registers (at most 4096 per block); heads and sequences
// index the grid's y and z.
constexpr int64_t kCudaMaxHead = cuda::limits::kLinearAttnMaxHead;
int64_t head_size(const ggml_tensor * n) { return n->ne[0] / n->src[1]->ne[1]; }
bool cuda_wkv6(const ggml_tensor * n) { return sup_wkv6(n) && head_size(n) <= kCudaMaxHead; }
bool cuda_gla(const ggml_tensor * n) { return sup_gla(n) && head_size(n) <= kCudaMaxHead; }
bool cuda_wkv7(const ggml_tensor * n) { return sup_wkv7(n) && head_size(n) <= kCudaMaxHead; }
bool cuda_delta_net(const ggml_tensor * n) { return sup_delta_net(n) && n->src[2]->ne[0] <= kCudaMaxHead; }
bool cuda_ssm_scan(const ggml_tensor * n) {
    // ssm.cu's launch: states per head, the head dim over grid x, heads and sequences over y and z.
    return sup_ssm_scan(n) && n->src[0]->ne[0] <= cuda::limits::kSsmMaxStates &&
           n->src[1]->ne[0] <= cuda::limits::kGridX && n->src[1]->ne[1] <= cuda::limits::kGridYZ &&
           n->src[1]->ne[3] <= cuda::limits::kGridYZ;
}
#endif

} // namespace

void append_ssm_rows(std::vector<OpRow> & rows) {
    rows.insert(rows.end(), {
        // op                       sub  host                                   cuda
        {GGML_OP_SSM_CONV,          -1, {sup_ssm_conv, host::ssm_conv},          SI_CUDA(sup_ssm_conv, cuda::ssm_conv), true},
        {GGML_OP_SSM_SCAN,          -1, {sup_ssm_scan, host::ssm_scan},          SI_CUDA(cuda_ssm_scan, cuda::ssm_scan), true},
        {GGML_OP_RWKV_WKV6,         -1, {sup_wkv6, host::rwkv_wkv6},             SI_CUDA(cuda_wkv6, cuda::rwkv_wkv6), true},
        {GGML_OP_GATED_LINEAR_ATTN, -1, {sup_gla, host::gated_linear_attn},      SI_CUDA(cuda_gla, cuda::gated_linear_attn), true},
        {GGML_OP_RWKV_WKV7,         -1, {sup_wkv7, host::rwkv_wkv7},             SI_CUDA(cuda_wkv7, cuda::rwkv_wkv7), true},
        {GGML_OP_GATED_DELTA_NET,   -1, {sup_delta_net, host::gated_delta_net},  SI_CUDA(cuda_delta_net, cuda::gated_delta_net), true},
        {GGML_OP_CUMSUM,            -1, {sup_f32_same, host::cumsum},            SI_CUDA(sup_f32_same, cuda::cumsum), true},
        {GGML_OP_TRI,               -1, {sup_tri, host::tri},                    SI_CUDA(sup_tri, cuda::tri), true},
        {GGML_OP_FILL,              -1, {sup_fill, host::fill},                  SI_CUDA(sup_fill, cuda::fill), true},
        {GGML_OP_DIAG,              -1, {sup_diag, host::diag},                  SI_CUDA(sup_diag, cuda::diag), true},
        {GGML_OP_DIAG_MASK_INF,     -1, {sup_diag_mask, host::diag_mask_inf},   SI_CUDA(sup_diag_mask, cuda::diag_mask_inf), true},
        {GGML_OP_SOLVE_TRI,         -1, {sup_solve_tri, host::solve_tri},        SI_CUDA(sup_solve_tri, cuda::solve_tri), true},
        {GGML_OP_L2_NORM,           -1, {sup_l2_norm, host::l2_norm},            SI_CUDA(sup_l2_norm, cuda::l2_norm), true},
        {GGML_OP_GROUP_NORM,        -1, {sup_group_norm, host::group_norm},      SI_CUDA(sup_group_norm, cuda::group_norm), true},
    });
}

} // namespace standin::kernels::rows
