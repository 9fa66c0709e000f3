// Op-table rows of the vision / audio encoder ops (Note [op table families]):
// IM2COL, IM2COL_3D, CONV_2D, CONV_3D, COL2IM_1D, CONV_2D_DW, CONV_TRANSPOSE_1D/2D, POOL_1D/2D,
// UPSCALE, PAD, PAD_REFLECT_1D.
// Kernels: kernels/host/{conv,image}.cpp, kernels/cuda/{conv,image}.cu.
#include "kernels/common/op_params.h"
#include "kernels/op_rows.h"

namespace standin::kernels::rows {

namespace {

bool is_f32_or_f16_t(const ggml_tensor * t) { return t != nullptr && is_f32_or_f16(t->type); }

// Output extent of a convolution, as ggml_calc_conv_output_size computes it.
int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

bool sup_im2col(const ggml_tensor * n) {
    const ggml_tensor * k = n->src[0];
    const ggml_tensor * a = n->src[1];
    const bool is_2d = op_i32(n, 6) == 1;
    const int64_t s0 = op_i32(n, 0), s1 = op_i32(n, 1), d0 = op_i32(n, 4), d1 = op_i32(n, 5);
    if (!is_f32(a) || !is_f32_or_f16(n->type) || !ggml_is_contiguous(n) || s0 <= 0 || d0 <= 0 ||
        (is_2d && (s1 <= 0 || d1 <= 0))) {
        return false;
    }
    const int64_t KH = is_2d ? k->ne[1] : 1, IC = is_2d ? a->ne[2] : a->ne[1];
    return n->ne[0] == IC * KH * k->ne[0] && n->ne[1] == conv_out(a->ne[0], k->ne[0], s0, op_i32(n, 2), d0) &&
           (is_2d ? n->ne[2] == conv_out(a->ne[1], KH, s1, op_i32(n, 3), d1) && n->ne[3] == a->ne[3]
                  : n->ne[2] == a->ne[2] && n->ne[3] == 1 && a->ne[3] == 1);
}

bool sup_im2col_3d(const ggml_tensor * n) {
    const ggml_tensor * k = n->src[0];
    const ggml_tensor * a = n->src[1];
    const int64_t IC = op_i32(n, 9);
    for (int i = 0; i < 3; ++i) {
        if (op_i32(n, i) <= 0 || op_i32(n, 6 + i) <= 0) return false;
    }
    // N = a->ne[3] / IC rounds down, as in ggml (a view may leave a partial image: no output for it).
    return is_f32(a) && is_f32_or_f16(n->type) && ggml_is_contiguous(n) && IC > 0 &&
           n->ne[0] == IC * k->ne[0] * k->ne[1] * k->ne[2] &&
           n->ne[1] == conv_out(a->ne[0], k->ne[0], op_i32(n, 0), op_i32(n, 3), op_i32(n, 6)) &&
           n->ne[2] == conv_out(a->ne[1], k->ne[1], op_i32(n, 1), op_i32(n, 4), op_i32(n, 7)) &&
           n->ne[3] == (a->ne[3] / IC) * conv_out(a->ne[2], k->ne[2], op_i32(n, 2), op_i32(n, 5), op_i32(n, 8));
}

bool conv2d_params_ok(const ggml_tensor * n, const ggml_tensor * k, const ggml_tensor * a) {
    const int64_t s0 = op_i32(n, 0), s1 = op_i32(n, 1), d0 = op_i32(n, 4), d1 = op_i32(n, 5);
    return s0 > 0 && s1 > 0 && d0 > 0 && d1 > 0 && n->ne[0] == conv_out(a->ne[0], k->ne[0], s0, op_i32(n, 2), d0) &&
           n->ne[1] == conv_out(a->ne[1], k->ne[1], s1, op_i32(n, 3), d1) && n->ne[0] > 0 && n->ne[1] > 0;
}

bool sup_conv_2d(const ggml_tensor * n) {
    const ggml_tensor * k = n->src[0];
    const ggml_tensor * a = n->src[1];
    return is_f32_or_f16_t(k) && is_f32(a) && is_f32(n) && k->ne[2] == a->ne[2] && n->ne[2] == k->ne[3] &&
           n->ne[3] == a->ne[3] && conv2d_params_ok(n, k, a);
}

bool sup_conv_2d_dw(const ggml_tensor * n) {
    const ggml_tensor * k = n->src[0];
    const ggml_tensor * a = n->src[1];
    return is_f32_or_f16_t(k) && is_f32(a) && is_f32(n) && k->ne[2] == 1 && k->ne[3] == a->ne[2] &&
           n->ne[2] == a->ne[2] && n->ne[3] == a->ne[3] && conv2d_params_ok(n, k, a);
}

bool sup_conv_3d(const ggml_tensor * n) {
    const ggml_tensor * k = n->src[0];  // [KW, KH, KD, C * OC]
    const ggml_tensor * a = n->src[1];  // [W, H, D, C * N]
    const int64_t C = op_i32(n, 9), N = op_i32(n, 10), OC = op_i32(n, 11);
    for (int i = 0; i < 3; ++i) {
        if (op_i32(n, i) <= 0 || op_i32(n, 6 + i) <= 0) return false;
    }
    return is_f32_or_f16_t(k) && is_f32(a) && is_f32(n) && C > 0 && N > 0 && OC > 0 && k->ne[3] == C * OC &&
           a->ne[3] == C * N && n->ne[3] == OC * N &&
           n->ne[0] == conv_out(a->ne[0], k->ne[0], op_i32(n, 0), op_i32(n, 3), op_i32(n, 6)) &&
           n->ne[1] == conv_out(a->ne[1], k->ne[1], op_i32(n, 1), op_i32(n, 4), op_i32(n, 7)) &&
           n->ne[2] == conv_out(a->ne[2], k->ne[2], op_i32(n, 2), op_i32(n, 5), op_i32(n, 8));
}

bool sup_col2im_1d(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];  // [K * OC, T_in]
    const int64_t s0 = op_i32(n, 0), OC = op_i32(n, 1), p0 = op_i32(n, 2);
    if (!rows::is_f32_or_f16(a->type) && a->type != GGML_TYPE_BF16) return false;
    if (s0 <= 0 || OC <= 0 || p0 < 0 || a->ne[0] % OC != 0 || a->ne[2] != 1 || a->ne[3] != 1) return false;
    const int64_t K = a->ne[0] / OC;
    return n->type == a->type && n->ne[0] == (a->ne[1] - 1) * s0 + K - 2 * p0 && n->ne[1] == OC && n->ne[2] == 1 &&
           n->ne[3] == 1;
}

bool sup_conv_transpose_1d(const ggml_tensor * n) {
    const ggml_tensor * k = n->src[0];  // [K, OC, IC]
    const ggml_tensor * a = n->src[1];  // [L, IC]
    const int64_t s0 = op_i32(n, 0);
    return is_f32_or_f16_t(k) && is_f32(a) && is_f32(n) && s0 > 0 && op_i32(n, 1) == 0 && op_i32(n, 2) == 1 &&
           k->ne[3] == 1 && a->ne[2] == 1 && a->ne[3] == 1 && k->ne[2] == a->ne[1] && n->ne[1] == k->ne[1] &&
           n->ne[0] == (a->ne[0] - 1) * s0 + k->ne[0] && n->ne[2] == 1 && n->ne[3] == 1;
}

bool sup_conv_transpose_2d(const ggml_tensor * n) {
    const ggml_tensor * k = n->src[0];  // [KW, KH, OC, IC]
    const ggml_tensor * a = n->src[1];  // [IW, IH, IC, N]
    const int64_t s = op_i32(n, 0);
    return is_f32_or_f16_t(k) && is_f32(a) && is_f32(n) && s > 0 && k->ne[3] == a->ne[2] && n->ne[2] == k->ne[2] &&
           n->ne[3] == a->ne[3] && n->ne[0] == (a->ne[0] - 1) * s + k->ne[0] && n->ne[1] == (a->ne[1] - 1) * s + k->ne[1];
}

bool pool_op_ok(int op) { return op == GGML_OP_POOL_MAX || op == GGML_OP_POOL_AVG; }

bool sup_pool_1d(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    return is_f32_or_f16_t(a) && is_f32(n) && pool_op_ok(op_i32(n, 0)) && op_i32(n, 1) > 0 && op_i32(n, 2) > 0 &&
           n->ne[1] == a->ne[1] && n->ne[2] == a->ne[2] && n->ne[3] == a->ne[3];
}

bool sup_pool_2d(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    return is_f32_or_f16_t(a) && is_f32(n) && pool_op_ok(op_i32(n, 0)) && op_i32(n, 1) > 0 && op_i32(n, 2) > 0 &&
           op_i32(n, 3) > 0 && op_i32(n, 4) > 0 && n->ne[2] == a->ne[2] && n->ne[3] == a->ne[3];
}

bool sup_upscale(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const int32_t flags = op_i32(n, 0);
    const int mode = flags & 0xFF;
    const bool known_flags = (flags & ~0xFF & ~(GGML_SCALE_FLAG_ALIGN_CORNERS | GGML_SCALE_FLAG_ANTIALIAS)) == 0;
    const bool mode_ok = mode == GGML_SCALE_MODE_NEAREST || mode == GGML_SCALE_MODE_BILINEAR ||
                         mode == GGML_SCALE_MODE_BICUBIC;
    const bool aa_ok = !(flags & GGML_SCALE_FLAG_ANTIALIAS) || mode == GGML_SCALE_MODE_BILINEAR;
    return is_f32(a) && is_f32(n) && known_flags && mode_ok && aa_ok && ggml_nelements(a) > 0;
}

bool sup_pad(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    for (int d = 0; d < 4; ++d) {
        const int64_t l = op_i32(n, 2 * d), r = op_i32(n, 2 * d + 1);
        if (l < 0 || r < 0 || n->ne[d] != a->ne[d] + l + r) return false;
    }
    return is_f32(a) && is_f32(n) && ggml_nelements(a) > 0;
}

bool sup_pad_reflect(const ggml_tensor * n) {
    const ggml_tensor * a = n->src[0];
    const int64_t p0 = op_i32(n, 0), p1 = op_i32(n, 1);
    return is_f32(a) && is_f32(n) && p0 >= 0 && p1 >= 0 && p0 < a->ne[0] && p1 < a->ne[0] &&
           n->ne[0] == a->ne[0] + p0 + p1 && n->ne[1] == a->ne[1] && n->ne[2] == a->ne[2] && n->ne[3] == a->ne[3];
}

} // namespace

void append_encoder_rows(std::vector<OpRow> & rows) {
    rows.insert(rows.end(), {
        // op                        sub  host                                      cuda
        {GGML_OP_IM2COL,             -1, {sup_im2col, host::im2col},                SI_CUDA(sup_im2col, cuda::im2col), true},
        {GGML_OP_IM2COL_3D,          -1, {sup_im2col_3d, host::im2col_3d},          SI_CUDA(sup_im2col_3d, cuda::im2col_3d), true},
        {GGML_OP_CONV_2D,            -1, {sup_conv_2d, host::conv_2d},              SI_CUDA(sup_conv_2d, cuda::conv_2d), true},
        {GGML_OP_CONV_3D,            -1, {sup_conv_3d, host::conv_3d},              SI_CUDA(sup_conv_3d, cuda::conv_3d), true},
        {GGML_OP_COL2IM_1D,          -1, {sup_col2im_1d, host::col2im_1d},          SI_CUDA(sup_col2im_1d, cuda::col2im_1d), true},
        {GGML_OP_CONV_2D_DW,         -1, {sup_conv_2d_dw, host::conv_2d_dw},        SI_CUDA(sup_conv_2d_dw, cuda::conv_2d_dw), true},
        {GGML_OP_CONV_TRANSPOSE_1D,  -1, {sup_conv_transpose_1d, host::conv_transpose_1d},
         SI_CUDA(sup_conv_transpose_1d, cuda::conv_transpose_1d), true},
        {GGML_OP_CONV_TRANSPOSE_2D,  -1, {sup_conv_transpose_2d, host::conv_transpose_2d},
         SI_CUDA(sup_conv_transpose_2d, cuda::conv_transpose_2d), true},
        {GGML_OP_POOL_1D,            -1, {sup_pool_1d, host::pool_1d},              SI_CUDA(sup_pool_1d, cuda::pool_1d), true},
        {GGML_OP_POOL_2D,            -1, {sup_pool_2d, host::pool_2d},              SI_CUDA(sup_pool_2d, cuda::pool_2d), true},
        {GGML_OP_UPSCALE,            -1, {sup_upscale, host::upscale},              SI_CUDA(sup_upscale, cuda::upscale), true},
        {GGML_OP_PAD,                -1, {sup_pad, host::pad},                      SI_CUDA(sup_pad, cuda::pad), true},
        {GGML_OP_PAD_REFLECT_1D,     -1, {sup_pad_reflect, host::pad_reflect_1d},   SI_CUDA(sup_pad_reflect, cuda::pad_reflect_1d), true},
    });
}

} // namespace standin::kernels::rows
