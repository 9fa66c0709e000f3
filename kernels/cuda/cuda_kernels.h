// CUDA-device kernels (one op family per .cu file in kernels/cuda/). Entry
// points match kernels::CudaKernelFn; they enqueue on the backend's CUDA stream and
// return without waiting.
#pragma once

#include <cuda_runtime.h>

#include "kernels/fusion.h"
#include "kernels/kernel.h"

namespace standin::kernels::cuda {

Status binary(rt::cuda::CudaStream & stream, ggml_tensor * node);  // ADD SUB MUL DIV, with broadcasting
Status scale(rt::cuda::CudaStream & stream, ggml_tensor * node);   // SCALE
Status copy(rt::cuda::CudaStream & stream, ggml_tensor * node);    // CPY DUP CONT (block types go to copy_quant)
Status copy_quant(rt::cuda::CudaStream & stream, ggml_tensor * node);      // CPY DUP CONT with a block type
Status copy_any(rt::cuda::CudaStream & stream, ggml_tensor * node);        // CPY DUP CONT rows: integer / F32<->I32 here, the rest to copy
Status get_rows(rt::cuda::CudaStream & stream, ggml_tensor * node);        // GET_ROWS (float and block types -> F32)
Status set_rows(rt::cuda::CudaStream & stream, ggml_tensor * node);        // SET_ROWS (F32/F16 -> F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1)
Status norm(rt::cuda::CudaStream & stream, ggml_tensor * node);            // RMS_NORM NORM
Status rope(rt::cuda::CudaStream & stream, ggml_tensor * node);            // ROPE ROPE_BACK (normal, neox, mrope, imrope)
Status softmax(rt::cuda::CudaStream & stream, ggml_tensor * node);         // SOFT_MAX (mask, ALiBi, sinks)
Status unary(rt::cuda::CudaStream & stream, ggml_tensor * node);           // UNARY
Status glu(rt::cuda::CudaStream & stream, ggml_tensor * node);             // GLU (fused and split)
// GLU also writing its F32 result quantized for the integer mat-vec (codes q,
// scales ds as quantize_act lays them out; contiguous, ne[0] % 32 == 0).
Status glu_quant(rt::cuda::CudaStream & stream, ggml_tensor * node, int8_t * q, float2 * ds);
Status mul_mat(rt::cuda::CudaStream & stream, ggml_tensor * node);         // MUL_MAT (float and block weights)
Status mul_mat_id(rt::cuda::CudaStream & stream, ggml_tensor * node);      // MUL_MAT_ID
Status flash_attn_ext(rt::cuda::CudaStream & stream, ggml_tensor * node);  // FLASH_ATTN_EXT
// FLASH_ATTN_EXT whose decode combine also writes the output quantized for the
// integer mat-vec (codes q, scales ds as quantize_act lays them out, the
// output read as rows of ne0 * ne1); `quantized` says whether it did (only
// the key-split kernels do; otherwise the caller quantizes). q and ds in the
// stream's scratch must be held there (hold_scratch), or the split kernels'
// partial results are given the same bytes.
Status flash_attn_ext_quant(rt::cuda::CudaStream & stream, ggml_tensor * node, int8_t * q, float2 * ds,
                            bool & quantized);
Status reduce(rt::cuda::CudaStream & stream, ggml_tensor * node);          // SUM_ROWS MEAN SUM ARGMAX
Status shape(rt::cuda::CudaStream & stream, ggml_tensor * node);           // CONCAT REPEAT

// route.cu: MoE routing
Status argsort(rt::cuda::CudaStream & stream, ggml_tensor * node);         // ARGSORT
Status top_k(rt::cuda::CudaStream & stream, ggml_tensor * node);           // TOP_K
Status add_id(rt::cuda::CudaStream & stream, ggml_tensor * node);          // ADD_ID
// ssm.cu, linear_attn.cu, triangular.cu, group_norm.cu: state-space and linear attention
Status ssm_conv(rt::cuda::CudaStream & stream, ggml_tensor * node);        // SSM_CONV
Status ssm_scan(rt::cuda::CudaStream & stream, ggml_tensor * node);        // SSM_SCAN
Status rwkv_wkv6(rt::cuda::CudaStream & stream, ggml_tensor * node);       // RWKV_WKV6
Status gated_linear_attn(rt::cuda::CudaStream & stream, ggml_tensor * node);  // GATED_LINEAR_ATTN
Status rwkv_wkv7(rt::cuda::CudaStream & stream, ggml_tensor * node);       // RWKV_WKV7
Status gated_delta_net(rt::cuda::CudaStream & stream, ggml_tensor * node); // GATED_DELTA_NET
Status cumsum(rt::cuda::CudaStream & stream, ggml_tensor * node);          // CUMSUM
Status tri(rt::cuda::CudaStream & stream, ggml_tensor * node);             // TRI
Status fill(rt::cuda::CudaStream & stream, ggml_tensor * node);            // FILL
Status diag(rt::cuda::CudaStream & stream, ggml_tensor * node);            // DIAG
Status solve_tri(rt::cuda::CudaStream & stream, ggml_tensor * node);       // SOLVE_TRI
Status diag_mask_inf(rt::cuda::CudaStream & stream, ggml_tensor * node);   // DIAG_MASK_INF
Status l2_norm(rt::cuda::CudaStream & stream, ggml_tensor * node);         // L2_NORM
Status group_norm(rt::cuda::CudaStream & stream, ggml_tensor * node);      // GROUP_NORM
// math.cu, tensor_build.cu, dsv4.cu
Status math(rt::cuda::CudaStream & stream, ggml_tensor * node);            // SQR SQRT LOG SIN COS CLAMP LEAKY_RELU
Status set(rt::cuda::CudaStream & stream, ggml_tensor * node);             // SET
Status acc_add1(rt::cuda::CudaStream & stream, ggml_tensor * node);        // ACC ADD1 (tensor_build.cu)
Status roll(rt::cuda::CudaStream & stream, ggml_tensor * node);            // ROLL
Status arange(rt::cuda::CudaStream & stream, ggml_tensor * node);          // ARANGE
Status timestep_embedding(rt::cuda::CudaStream & stream, ggml_tensor * node);  // TIMESTEP_EMBEDDING
Status dsv4_hc_comb(rt::cuda::CudaStream & stream, ggml_tensor * node);    // DSV4_HC_COMB
Status dsv4_hc_pre(rt::cuda::CudaStream & stream, ggml_tensor * node);     // DSV4_HC_PRE
Status dsv4_hc_post(rt::cuda::CudaStream & stream, ggml_tensor * node);    // DSV4_HC_POST
Status lightning_indexer(rt::cuda::CudaStream & stream, ggml_tensor * node);  // LIGHTNING_INDEXER (indexer.cu)
// conv.cu, image.cu: vision and audio encoders
Status im2col(rt::cuda::CudaStream & stream, ggml_tensor * node);          // IM2COL
Status im2col_3d(rt::cuda::CudaStream & stream, ggml_tensor * node);       // IM2COL_3D
Status conv_2d(rt::cuda::CudaStream & stream, ggml_tensor * node);         // CONV_2D
Status conv_2d_dw(rt::cuda::CudaStream & stream, ggml_tensor * node);      // CONV_2D_DW
Status conv_transpose_1d(rt::cuda::CudaStream & stream, ggml_tensor * node);  // CONV_TRANSPOSE_1D
Status conv_transpose_2d(rt::cuda::CudaStream & stream, ggml_tensor * node);  // CONV_TRANSPOSE_2D
Status conv_3d(rt::cuda::CudaStream & stream, ggml_tensor * node);         // CONV_3D
Status col2im_1d(rt::cuda::CudaStream & stream, ggml_tensor * node);       // COL2IM_1D
Status pool_1d(rt::cuda::CudaStream & stream, ggml_tensor * node);         // POOL_1D
Status pool_2d(rt::cuda::CudaStream & stream, ggml_tensor * node);         // POOL_2D
Status upscale(rt::cuda::CudaStream & stream, ggml_tensor * node);         // UPSCALE
Status pad(rt::cuda::CudaStream & stream, ggml_tensor * node);             // PAD
Status pad_reflect_1d(rt::cuda::CudaStream & stream, ggml_tensor * node);  // PAD_REFLECT_1D
// out_prod.cu, backward.cu: training graphs
Status out_prod(rt::cuda::CudaStream & stream, ggml_tensor * node);        // OUT_PROD (float and block-type src0)
Status backward(rt::cuda::CudaStream & stream, ggml_tensor * node);        // *_BACK, CROSS_ENTROPY_LOSS(_BACK), COUNT_EQUAL, OPT_STEP_*


// Fused launches, chosen by kernels/fusion.cpp:
// consecutive MUL_MAT nodes sharing src1 (pairs accepted by mul_mat_group_ok)
bool mul_mat_group_ok(const ggml_tensor * first, const ggml_tensor * next);
Status mul_mat_group(rt::cuda::CudaStream & stream, ggml_tensor * const * nodes, int n);
// A MUL_MAT taken by the integer mat-vec followed by an ADD of its result and
// a same-shaped F32 tensor (the residual connection): one launch writes both
// (the product is still written, so other readers of it are served).
bool mul_mat_add_ok(const ggml_tensor * mm, const ggml_tensor * add);
Status mul_mat_add(rt::cuda::CudaStream & stream, ggml_tensor * mm, const ggml_tensor * add);
// ROPE fused with the SET_ROWS that stores its rotated rows (through a 2-D
// view of the whole result) into an F32/F16 KV cache: one launch writes the
// rope's result and the cache rows (rope_set_rows_ok: the pair qualifies).
bool rope_set_rows_ok(const ggml_tensor * rope, const ggml_tensor * set_rows);
Status rope_set_rows(rt::cuda::CudaStream & stream, ggml_tensor * rope, ggml_tensor * set_rows);
// Decoding's three cache steps in one launch: ROPE of Q, ROPE of K with the
// SET_ROWS that stores it into the K cache, and the SET_ROWS of V into the V
// cache (rope_qkv_ok: all decoding-sized, nothing one writes read by another).
// k_cache_only: nothing else reads K's rotated result, so it is not written
// (only its cache rows are), and its memory may hold what the others read.
bool rope_qkv_ok(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * k_set, const ggml_tensor * v_set,
                 bool k_cache_only);
Status rope_qkv(rt::cuda::CudaStream & stream, ggml_tensor * q, ggml_tensor * k, ggml_tensor * k_set,
                ggml_tensor * v_set, bool k_cache_only);
// A mixture-of-experts router (kernels/fusion.h, MoeRoute) in one launch,
// every node's result written (moe_route_ok: the kernel's limits, up to 1024
// experts and 64 used, dense F32 steps).
bool moe_route_ok(const MoeRoute & r);
Status moe_route(rt::cuda::CudaStream & stream, const MoeRoute & r);
// The experts' weighted sum (MoeSum): the MUL and the ADDs in one launch.
bool moe_sum_ok(const MoeSum & s);
Status moe_sum(rt::cuda::CudaStream & stream, const MoeSum & s);
// RMS_NORM followed by MUL of its result with a broadcast F32 weight; both
// results are written (rms_norm_mul_ok says whether the pair qualifies)
bool rms_norm_mul_ok(const ggml_tensor * norm, const ggml_tensor * mul);
Status rms_norm_mul(rt::cuda::CudaStream & stream, ggml_tensor * norm, ggml_tensor * mul);
// The same, also writing the MUL's result quantized for the integer mat-vec
// (codes q, scales ds as quantize_act lays them out; ne[0] % 32 == 0).
Status rms_norm_mul_quant(rt::cuda::CudaStream & stream, ggml_tensor * norm, ggml_tensor * mul, int8_t * q, float2 * ds);
// RMS_NORM x MUL followed by MUL_MATs that read the MUL's result through the
// integer mat-vec (norm_mul_mat_ok: one such product): the norm writes the
// quantized activations the products read, one launch fewer (no quantize).
bool norm_mul_mat_ok(const ggml_tensor * mul, const ggml_tensor * mm);
// A GLU whose result only the integer mat-vec of the next MUL_MAT reads (and
// that product's residual ADD, when mul_mat_add_ok): the GLU writes the
// quantized input, the product follows without a quantize launch.
bool glu_mul_mat_ok(const ggml_tensor * glu, const ggml_tensor * mm);
Status glu_mul_mat(rt::cuda::CudaStream & stream, ggml_tensor * glu, ggml_tensor * mm, const ggml_tensor * add);
// A FLASH_ATTN_EXT whose result, reshaped to rows of heads x DV, is the input
// of the integer mat-vec of the next MUL_MAT (the output projection; and its
// residual ADD when mul_mat_add_ok): decoding's combine writes the quantized
// input, the product follows without a quantize launch.
bool fa_mul_mat_ok(const ggml_tensor * fa, const ggml_tensor * mm);
Status fa_mul_mat(rt::cuda::CudaStream & stream, ggml_tensor * fa, ggml_tensor * mm, const ggml_tensor * add);
// The decoding step after the Q/K/V products (rope_qkv's nodes: Q's and K's
// ROPE, the SET_ROWS of K's rotated rows and of V's product into their
// caches), done by the products' own epilogue (Note [rope epilogue] in
// mul_mat.cuh): one launch fewer. keep[i]: another node reads member i's
// own result (through views or not), so it is still written.
struct QkvRope {
    ggml_tensor * q = nullptr;
    ggml_tensor * k = nullptr;
    ggml_tensor * k_set = nullptr;
    ggml_tensor * v_set = nullptr;
    bool          k_cache_only = false;  // as rope_qkv's: nothing but k_set reads K's rotated rows
    bool          keep[3] = {true, true, true};
};
bool norm_mul_mat_rope_ok(const ggml_tensor * mul, ggml_tensor * const * mms, int n, const QkvRope & r);
Status norm_mul_mat(rt::cuda::CudaStream & stream, ggml_tensor * norm, ggml_tensor * mul, ggml_tensor * const * mms, int n,
                    const QkvRope * rope = nullptr);

} // namespace standin::kernels::cuda
