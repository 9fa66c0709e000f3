// Note [CUDA weight types]
// The weight types of the CUDA device's products (MUL_MAT, MUL_MAT_ID) and
// block decoders (GET_ROWS, copies to float), stated once. The op table's
// predicate (kernels::cuda_weight_type) and each kernel's dispatch on the
// weight type (with_weight_type, with_block_type) expand these lists, so a
// type added here is claimed and dispatched alike, and one missing from a
// kernel's instantiations fails to compile instead of being claimed without
// a kernel. Kernels made for a subset state theirs beside them (the integer
// mat-vecs' and mmq's in mm_plan.h).
//
// The integer-form formats (Note [integer form], kernels/common/quants.h:
// runs of 16 small integers with a scale and a minimum) are the ones ggml-cuda
// takes beyond the Part formats: every one of them is decoded by quants.h's
// decode_run, on the device too (dequant.cuh), and multiplied by the integer
// mat-vec over those runs (mul_mat_vec_run.cu), cuBLAS over their F16 decode
// or the tiled kernel; mmq has formats for Q2_K, Q3_K, the 4-bit table ones
// and the IQ2/IQ3 grids among them (SI_CUDA_MMQ_WEIGHT_TYPES; mm_plan.h says
// when it takes them).
//
// Plain C++ (no CUDA headers): op_table.cpp reads it in every build.
#pragma once

#include <type_traits>

#include "ggml.h"

#define SI_CUDA_FLOAT_WEIGHT_TYPES(X) X(F32) X(F16) X(BF16)
// The formats with a Part decoder (dequant.cuh) and an mmq format.
#define SI_CUDA_PART_WEIGHT_TYPES(X) X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q4_K) X(Q5_K) X(Q6_K)
#define SI_CUDA_INT_FORM_WEIGHT_TYPES(X)                                                                 \
    X(Q2_K) X(Q3_K) X(IQ4_NL) X(IQ4_XS) X(MXFP4) X(NVFP4) X(Q1_0) X(Q2_0) X(IQ2_XXS) X(IQ2_XS) X(IQ2_S) \
    X(IQ3_XXS) X(IQ3_S) X(IQ1_S) X(IQ1_M)
// mmq's formats (mmq_formats.cuh); mm_plan.h's mmq_chunk gives their chunks.
#define SI_CUDA_MMQ_WEIGHT_TYPES(X)                                                                         \
    SI_CUDA_PART_WEIGHT_TYPES(X) X(Q2_K) X(Q3_K) X(IQ4_NL) X(IQ4_XS) X(MXFP4) X(IQ2_XXS) X(IQ2_XS) X(IQ2_S) \
    X(IQ3_XXS) X(IQ3_S)
#define SI_CUDA_BLOCK_WEIGHT_TYPES(X) SI_CUDA_PART_WEIGHT_TYPES(X) SI_CUDA_INT_FORM_WEIGHT_TYPES(X)
#define SI_CUDA_WEIGHT_TYPES(X) SI_CUDA_FLOAT_WEIGHT_TYPES(X) SI_CUDA_BLOCK_WEIGHT_TYPES(X)

namespace standin::kernels::cuda {

// The type as a compile-time constant: f(std::integral_constant<int, T>{}).
template <int T> using TypeTag = std::integral_constant<int, T>;

#define SI_CUDA_TYPE_CASE(name) \
    case GGML_TYPE_##name: f(TypeTag<GGML_TYPE_##name>{}); return true;

// Calls f(TypeTag<t>{}) for a type of the list; false (f not called) for
// any other type.
template <typename F> bool with_weight_type(ggml_type t, F && f) {
    switch (t) {
        SI_CUDA_WEIGHT_TYPES(SI_CUDA_TYPE_CASE)
        default: return false;
    }
}

// The same over the block formats only.
template <typename F> bool with_block_type(ggml_type t, F && f) {
    switch (t) {
        SI_CUDA_BLOCK_WEIGHT_TYPES(SI_CUDA_TYPE_CASE)
        default: return false;
    }
}

// The same over mmq's formats.
template <typename F> bool with_mmq_type(ggml_type t, F && f) {
    switch (t) {
        SI_CUDA_MMQ_WEIGHT_TYPES(SI_CUDA_TYPE_CASE)
        default: return false;
    }
}

// The same over the integer-form formats.
template <typename F> bool with_int_form_type(ggml_type t, F && f) {
    switch (t) {
        SI_CUDA_INT_FORM_WEIGHT_TYPES(SI_CUDA_TYPE_CASE)
        default: return false;
    }
}
#undef SI_CUDA_TYPE_CASE

inline bool is_int_form_weight(ggml_type t) { return with_int_form_type(t, [](auto) {}); }

} // namespace standin::kernels::cuda
