// CUDA-device kernels (one op family per .cu file in kernels/cuda/). Entry
// points match kernels::KernelFn; they enqueue on the backend's CUDA stream and
// return without waiting.
#pragma once

#include "kernels/kernel.h"

namespace standin::kernels::cuda {

bool binary(rt::Stream & stream, ggml_tensor * node);  // ADD SUB MUL DIV, with broadcasting
bool scale(rt::Stream & stream, ggml_tensor * node);   // SCALE
bool copy(rt::Stream & stream, ggml_tensor * node);    // CPY DUP CONT (block types go to copy_quant)
bool copy_quant(rt::Stream & stream, ggml_tensor * node);      // CPY DUP CONT with a block type
bool get_rows(rt::Stream & stream, ggml_tensor * node);        // GET_ROWS (float and block types -> F32)
bool set_rows(rt::Stream & stream, ggml_tensor * node);        // SET_ROWS (F32/F16 -> F32 F16 BF16 Q8_0 Q4_0)
bool norm(rt::Stream & stream, ggml_tensor * node);            // RMS_NORM NORM
bool rope(rt::Stream & stream, ggml_tensor * node);            // ROPE ROPE_BACK (normal, neox, mrope, imrope)
bool softmax(rt::Stream & stream, ggml_tensor * node);         // SOFT_MAX (mask, ALiBi, sinks)
bool unary(rt::Stream & stream, ggml_tensor * node);           // UNARY
bool glu(rt::Stream & stream, ggml_tensor * node);             // GLU (fused and split)
bool mul_mat(rt::Stream & stream, ggml_tensor * node);         // MUL_MAT (float and block weights)
bool mul_mat_id(rt::Stream & stream, ggml_tensor * node);      // MUL_MAT_ID
bool flash_attn_ext(rt::Stream & stream, ggml_tensor * node);  // FLASH_ATTN_EXT
bool reduce(rt::Stream & stream, ggml_tensor * node);          // SUM_ROWS MEAN SUM ARGMAX
bool shape(rt::Stream & stream, ggml_tensor * node);           // CONCAT REPEAT


// Fused launches, chosen by kernels/fusion.cpp:
// consecutive MUL_MAT nodes sharing src1 (pairs accepted by mul_mat_group_ok)
bool mul_mat_group_ok(const ggml_tensor * first, const ggml_tensor * next);
bool mul_mat_group(rt::Stream & stream, ggml_tensor * const * nodes, int n);
// A MUL_MAT taken by the integer mat-vec followed by an ADD of its result and
// a same-shaped F32 tensor (the residual connection): one launch writes both
// (the product is still written, so other readers of it are served).
bool mul_mat_add_ok(const ggml_tensor * mm, const ggml_tensor * add);
bool mul_mat_add(rt::Stream & stream, ggml_tensor * mm, const ggml_tensor * add);
// RMS_NORM followed by MUL of its result with a broadcast F32 weight; both
// results are written (rms_norm_mul_ok says whether the pair qualifies)
bool rms_norm_mul_ok(const ggml_tensor * norm, const ggml_tensor * mul);
bool rms_norm_mul(rt::Stream & stream, ggml_tensor * norm, ggml_tensor * mul);

} // namespace standin::kernels::cuda
