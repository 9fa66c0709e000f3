// Host-device kernels (one op family per file in kernels/host/). Each runs on
// the HostStream's worker pool. Entry points match kernels::HostKernelFn.
#pragma once

#include "kernels/kernel.h"

namespace standin::kernels::host {

Status binary(rt::host::HostStream & stream, ggml_tensor * node);  // ADD SUB MUL DIV, with broadcasting
Status scale(rt::host::HostStream & stream, ggml_tensor * node);   // SCALE (scale and bias)
Status copy(rt::host::HostStream & stream, ggml_tensor * node);    // CPY DUP CONT between F32/F16/BF16
Status norm(rt::host::HostStream & stream, ggml_tensor * node);            // RMS_NORM NORM
Status rope(rt::host::HostStream & stream, ggml_tensor * node);            // ROPE ROPE_BACK (all rope modes)
Status softmax(rt::host::HostStream & stream, ggml_tensor * node);         // SOFT_MAX (mask, ALiBi, sinks)
Status flash_attn_ext(rt::host::HostStream & stream, ggml_tensor * node);  // FLASH_ATTN_EXT (float and block-type K/V)
bool flash_attn_in_place(const ggml_tensor * node);  // whether flash_attn_ext_any leaves block-type K/V to it
Status flash_attn_ext_any(rt::host::HostStream & stream, ggml_tensor * node);  // FLASH_ATTN_EXT, block-type K/V decoded first when many rows share them
Status unary(rt::host::HostStream & stream, ggml_tensor * node);           // UNARY (every ggml_unary_op)
Status glu(rt::host::HostStream & stream, ggml_tensor * node);             // GLU (every ggml_glu_op, fused or split)
Status reduce(rt::host::HostStream & stream, ggml_tensor * node);          // SUM_ROWS MEAN SUM ARGMAX
Status shape(rt::host::HostStream & stream, ggml_tensor * node);           // CONCAT REPEAT ADD1 ACC
Status get_rows(rt::host::HostStream & stream, ggml_tensor * node);        // GET_ROWS (float and block types -> F32)
Status set_rows(rt::host::HostStream & stream, ggml_tensor * node);        // SET_ROWS (F32/F16 -> every type quant::can_encode takes)
Status mul_mat(rt::host::HostStream & stream, ggml_tensor * node);         // MUL_MAT (float and block-quantized weights)
Status copy_quant(rt::host::HostStream & stream, ggml_tensor * node);      // CPY DUP CONT with a block type (from copy)
// cpy_int.cpp: the copy rows' entry: integer and F32<->I32 copies, the rest to copy()
Status copy_any(rt::host::HostStream & stream, ggml_tensor * node);        // CPY DUP CONT, every claimed type pair
bool is_elem_copy(const ggml_tensor * node);                   // whether copy_any takes it itself
Status mul_mat_id(rt::host::HostStream & stream, ggml_tensor * node);      // MUL_MAT_ID (experts: MUL_MAT per expert)

// route.cpp: MoE routing
Status argsort(rt::host::HostStream & stream, ggml_tensor * node);         // ARGSORT (ascending or descending)
Status top_k(rt::host::HostStream & stream, ggml_tensor * node);           // TOP_K
Status add_id(rt::host::HostStream & stream, ggml_tensor * node);          // ADD_ID (per-expert bias rows)
// ssm.cpp, linear_attn.cpp, triangular.cpp, group_norm.cpp: state-space and linear attention
Status ssm_conv(rt::host::HostStream & stream, ggml_tensor * node);        // SSM_CONV
Status ssm_scan(rt::host::HostStream & stream, ggml_tensor * node);        // SSM_SCAN (Mamba-1 and -2, K snapshots)
Status rwkv_wkv6(rt::host::HostStream & stream, ggml_tensor * node);       // RWKV_WKV6
Status gated_linear_attn(rt::host::HostStream & stream, ggml_tensor * node);  // GATED_LINEAR_ATTN
Status rwkv_wkv7(rt::host::HostStream & stream, ggml_tensor * node);       // RWKV_WKV7
Status gated_delta_net(rt::host::HostStream & stream, ggml_tensor * node); // GATED_DELTA_NET (scalar and KDA gate)
Status cumsum(rt::host::HostStream & stream, ggml_tensor * node);          // CUMSUM
Status tri(rt::host::HostStream & stream, ggml_tensor * node);             // TRI
Status fill(rt::host::HostStream & stream, ggml_tensor * node);            // FILL
Status diag(rt::host::HostStream & stream, ggml_tensor * node);            // DIAG
Status solve_tri(rt::host::HostStream & stream, ggml_tensor * node);       // SOLVE_TRI (lower, left)
Status diag_mask_inf(rt::host::HostStream & stream, ggml_tensor * node);   // DIAG_MASK_INF
Status l2_norm(rt::host::HostStream & stream, ggml_tensor * node);         // L2_NORM
Status group_norm(rt::host::HostStream & stream, ggml_tensor * node);      // GROUP_NORM
// math.cpp: elementwise ops outside UNARY
Status math(rt::host::HostStream & stream, ggml_tensor * node);            // SQR SQRT LOG SIN COS CLAMP LEAKY_RELU
// tensor_build.cpp, dsv4.cpp
Status set(rt::host::HostStream & stream, ggml_tensor * node);             // SET
Status roll(rt::host::HostStream & stream, ggml_tensor * node);            // ROLL
Status arange(rt::host::HostStream & stream, ggml_tensor * node);          // ARANGE
Status timestep_embedding(rt::host::HostStream & stream, ggml_tensor * node);  // TIMESTEP_EMBEDDING
Status dsv4_hc_comb(rt::host::HostStream & stream, ggml_tensor * node);    // DSV4_HC_COMB
Status dsv4_hc_pre(rt::host::HostStream & stream, ggml_tensor * node);     // DSV4_HC_PRE
Status dsv4_hc_post(rt::host::HostStream & stream, ggml_tensor * node);    // DSV4_HC_POST
Status lightning_indexer(rt::host::HostStream & stream, ggml_tensor * node);  // LIGHTNING_INDEXER (indexer.cpp)
// conv.cpp, image.cpp: vision and audio encoders
Status im2col(rt::host::HostStream & stream, ggml_tensor * node);          // IM2COL (1-D and 2-D)
Status im2col_3d(rt::host::HostStream & stream, ggml_tensor * node);       // IM2COL_3D
Status conv_2d(rt::host::HostStream & stream, ggml_tensor * node);         // CONV_2D
Status conv_2d_dw(rt::host::HostStream & stream, ggml_tensor * node);      // CONV_2D_DW
Status conv_transpose_1d(rt::host::HostStream & stream, ggml_tensor * node);  // CONV_TRANSPOSE_1D
Status conv_transpose_2d(rt::host::HostStream & stream, ggml_tensor * node);  // CONV_TRANSPOSE_2D
Status conv_3d(rt::host::HostStream & stream, ggml_tensor * node);         // CONV_3D
Status col2im_1d(rt::host::HostStream & stream, ggml_tensor * node);       // COL2IM_1D
Status pool_1d(rt::host::HostStream & stream, ggml_tensor * node);         // POOL_1D
Status pool_2d(rt::host::HostStream & stream, ggml_tensor * node);         // POOL_2D
Status upscale(rt::host::HostStream & stream, ggml_tensor * node);         // UPSCALE (nearest, bilinear, bicubic)
Status pad(rt::host::HostStream & stream, ggml_tensor * node);             // PAD (zeros or circular)
Status pad_reflect_1d(rt::host::HostStream & stream, ggml_tensor * node);  // PAD_REFLECT_1D
// out_prod.cpp: training graphs
Status out_prod(rt::host::HostStream & stream, ggml_tensor * node);        // OUT_PROD (float and block-type src0)
// backward.cpp: the other training ops
Status backward(rt::host::HostStream & stream, ggml_tensor * node);  // *_BACK, CROSS_ENTROPY_LOSS(_BACK), COUNT_EQUAL, OPT_STEP_*

} // namespace standin::kernels::host
