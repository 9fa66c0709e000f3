// Host-device kernels (one op family per file in kernels/host/). Each runs on
// the HostStream's worker pool. Entry points match kernels::KernelFn.
#pragma once

#include "kernels/kernel.h"

namespace standin::kernels::host {

bool binary(rt::Stream & stream, ggml_tensor * node);  // ADD SUB MUL DIV, with broadcasting
bool scale(rt::Stream & stream, ggml_tensor * node);   // SCALE (scale and bias)
bool copy(rt::Stream & stream, ggml_tensor * node);    // CPY DUP CONT between F32/F16/BF16
bool norm(rt::Stream & stream, ggml_tensor * node);            // RMS_NORM NORM
bool rope(rt::Stream & stream, ggml_tensor * node);            // ROPE ROPE_BACK (all rope modes)
bool softmax(rt::Stream & stream, ggml_tensor * node);         // SOFT_MAX (mask, ALiBi, sinks)
bool flash_attn_ext(rt::Stream & stream, ggml_tensor * node);  // FLASH_ATTN_EXT
bool unary(rt::Stream & stream, ggml_tensor * node);           // UNARY (every ggml_unary_op)
bool glu(rt::Stream & stream, ggml_tensor * node);             // GLU (every ggml_glu_op, fused or split)
bool reduce(rt::Stream & stream, ggml_tensor * node);          // SUM_ROWS MEAN SUM ARGMAX
bool shape(rt::Stream & stream, ggml_tensor * node);           // CONCAT REPEAT ADD1 ACC
bool get_rows(rt::Stream & stream, ggml_tensor * node);        // GET_ROWS (float and block types -> F32)
bool set_rows(rt::Stream & stream, ggml_tensor * node);        // SET_ROWS (F32/F16 -> F32 F16 BF16 Q8_0 Q4_0)
bool mul_mat(rt::Stream & stream, ggml_tensor * node);         // MUL_MAT (float and block-quantized weights)
bool copy_quant(rt::Stream & stream, ggml_tensor * node);      // CPY DUP CONT with a block type (from copy)
// cpy_int.cpp: the copy rows' entry: integer and F32<->I32 copies, the rest to copy()
bool copy_any(rt::Stream & stream, ggml_tensor * node);        // CPY DUP CONT, every claimed type pair
bool is_elem_copy(const ggml_tensor * node);                   // whether copy_any takes it itself
bool mul_mat_id(rt::Stream & stream, ggml_tensor * node);      // MUL_MAT_ID (experts: MUL_MAT per expert)

// route.cpp: MoE routing
bool argsort(rt::Stream & stream, ggml_tensor * node);         // ARGSORT (ascending or descending)
bool top_k(rt::Stream & stream, ggml_tensor * node);           // TOP_K
bool add_id(rt::Stream & stream, ggml_tensor * node);          // ADD_ID (per-expert bias rows)
// ssm.cpp, linear_attn.cpp, triangular.cpp, group_norm.cpp: state-space and linear attention
bool ssm_conv(rt::Stream & stream, ggml_tensor * node);        // SSM_CONV
bool ssm_scan(rt::Stream & stream, ggml_tensor * node);        // SSM_SCAN (Mamba-1 and -2, K snapshots)
bool rwkv_wkv6(rt::Stream & stream, ggml_tensor * node);       // RWKV_WKV6
bool gated_linear_attn(rt::Stream & stream, ggml_tensor * node);  // GATED_LINEAR_ATTN
bool rwkv_wkv7(rt::Stream & stream, ggml_tensor * node);       // RWKV_WKV7
bool gated_delta_net(rt::Stream & stream, ggml_tensor * node); // GATED_DELTA_NET (scalar and KDA gate)
bool cumsum(rt::Stream & stream, ggml_tensor * node);          // CUMSUM
bool tri(rt::Stream & stream, ggml_tensor * node);             // TRI
bool fill(rt::Stream & stream, ggml_tensor * node);            // FILL
bool diag(rt::Stream & stream, ggml_tensor * node);            // DIAG
bool solve_tri(rt::Stream & stream, ggml_tensor * node);       // SOLVE_TRI (lower, left)
bool diag_mask_inf(rt::Stream & stream, ggml_tensor * node);   // DIAG_MASK_INF
bool l2_norm(rt::Stream & stream, ggml_tensor * node);         // L2_NORM
bool group_norm(rt::Stream & stream, ggml_tensor * node);      // GROUP_NORM
// math.cpp: elementwise ops outside UNARY
bool math(rt::Stream & stream, ggml_tensor * node);            // SQR SQRT LOG SIN COS CLAMP LEAKY_RELU
// tensor_build.cpp, dsv4.cpp
bool set(rt::Stream & stream, ggml_tensor * node);             // SET
bool roll(rt::Stream & stream, ggml_tensor * node);            // ROLL
bool arange(rt::Stream & stream, ggml_tensor * node);          // ARANGE
bool timestep_embedding(rt::Stream & stream, ggml_tensor * node);  // TIMESTEP_EMBEDDING
bool dsv4_hc_comb(rt::Stream & stream, ggml_tensor * node);    // DSV4_HC_COMB
bool dsv4_hc_pre(rt::Stream & stream, ggml_tensor * node);     // DSV4_HC_PRE
bool dsv4_hc_post(rt::Stream & stream, ggml_tensor * node);    // DSV4_HC_POST
bool lightning_indexer(rt::Stream & stream, ggml_tensor * node);  // LIGHTNING_INDEXER (indexer.cpp)
// conv.cpp, image.cpp: vision and audio encoders
bool im2col(rt::Stream & stream, ggml_tensor * node);          // IM2COL (1-D and 2-D)
bool im2col_3d(rt::Stream & stream, ggml_tensor * node);       // IM2COL_3D
bool conv_2d(rt::Stream & stream, ggml_tensor * node);         // CONV_2D
bool conv_2d_dw(rt::Stream & stream, ggml_tensor * node);      // CONV_2D_DW
bool conv_transpose_1d(rt::Stream & stream, ggml_tensor * node);  // CONV_TRANSPOSE_1D
bool conv_transpose_2d(rt::Stream & stream, ggml_tensor * node);  // CONV_TRANSPOSE_2D
bool conv_3d(rt::Stream & stream, ggml_tensor * node);         // CONV_3D
bool col2im_1d(rt::Stream & stream, ggml_tensor * node);       // COL2IM_1D
bool pool_1d(rt::Stream & stream, ggml_tensor * node);         // POOL_1D
bool pool_2d(rt::Stream & stream, ggml_tensor * node);         // POOL_2D
bool upscale(rt::Stream & stream, ggml_tensor * node);         // UPSCALE (nearest, bilinear, bicubic)
bool pad(rt::Stream & stream, ggml_tensor * node);             // PAD (zeros or circular)
bool pad_reflect_1d(rt::Stream & stream, ggml_tensor * node);  // PAD_REFLECT_1D

} // namespace standin::kernels::host
