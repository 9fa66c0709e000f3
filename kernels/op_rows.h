// Note [op table families]
// The one op table (Note [op table], kernels/op_table.h) is assembled from
// families: kernels/op_table.cpp holds the core rows (elementwise, copies,
// matmul, norms, rope, softmax, attention, activations, reductions) and each
// kernels/op_rows_<family>.cpp appends the rows of one family together with
// its support predicates. Every op belongs to exactly one family file, so the
// rows of one op stay adjacent (checked by tests/kernels/test_op_table.cpp).
// This header holds what the family files share: the per-device entry macro
// and the small tensor-shape questions the predicates ask.
#pragma once

#include <vector>

#include "kernels/common/quants.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/op_table.h"
#ifdef STANDIN_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#define SI_CUDA(pred, fn) CudaImpl{pred, fn}
#define SI_CUDA_UNPROVEN(pred, fn) CudaImpl{pred, fn, false}
#else
#define SI_CUDA(pred, fn) CudaImpl{}
#define SI_CUDA_UNPROVEN(pred, fn) CudaImpl{}
#endif

namespace standin::kernels::rows {

// Elements of dim 0 are adjacent (rows themselves may be strided).
inline bool rows_contiguous(const ggml_tensor * t) { return t->nb[0] == ggml_type_size(t->type); }

inline bool is_f32(const ggml_tensor * t) { return t->type == GGML_TYPE_F32; }
inline bool is_f32_or_f16(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16; }

// F32 with dim-0 elements adjacent: what most of the family kernels read.
inline bool f32_rows(const ggml_tensor * t) { return t != nullptr && is_f32(t) && rows_contiguous(t); }

// Family row lists, appended in this order after the core rows.
void append_moe_rows(std::vector<OpRow> & rows);      // op_rows_moe.cpp: ARGSORT TOP_K ADD_ID
void append_ssm_rows(std::vector<OpRow> & rows);      // op_rows_ssm.cpp: SSM_*, linear attention, TRI ...
void append_math_rows(std::vector<OpRow> & rows);     // op_rows_math.cpp: SQR SQRT ... CLAMP, SET, ARANGE ...
void append_encoder_rows(std::vector<OpRow> & rows);  // op_rows_encoder.cpp: IM2COL, CONV_*, POOL_*, PAD ...
void append_train_rows(std::vector<OpRow> & rows);    // op_rows_train.cpp: OUT_PROD, *_BACK, OPT_STEP_* ...

} // namespace standin::kernels::rows
