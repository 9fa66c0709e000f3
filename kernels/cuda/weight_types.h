// Note [CUDA weight types]
// The weight types of the CUDA device's products (MUL_MAT, MUL_MAT_ID) and
// block decoders (GET_ROWS, copies to float), stated once. The op table's
// predicate (kernels::cuda_weight_type) and each kernel's dispatch on the
// weight type (with_weight_type, with_block_type) expand these lists, so a
// type added here is claimed and dispatched alike, and one missing from a
// kernel's instantiations fails to compile instead of being claimed without
// a kernel. Kernels made for a subset state theirs beside them (the integer
// mat-vec's and mmq's in mm_plan.h).
//
// Plain C++ (no CUDA headers): op_table.cpp reads it in every build.
#pragma once

#include <type_traits>

#include "ggml.h"

#define SI_CUDA_FLOAT_WEIGHT_TYPES(X) X(F32) X(F16) X(BF16)
#define SI_CUDA_BLOCK_WEIGHT_TYPES(X) X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q4_K) X(Q5_K) X(Q6_K)
#define SI_CUDA_WEIGHT_TYPES(X) SI_CUDA_FLOAT_WEIGHT_TYPES(X) SI_CUDA_BLOCK_WEIGHT_TYPES(X)

namespace standin::kernels::cuda {

// The type as a compile-time constant: f(std::integral_constant<int, T>{}).
template <int T> using TypeTag = std::integral_constant<int, T>;

// Calls f(TypeTag<t>{}) for a type of the list; false (f not called) for
// any other type.
template <typename F> bool with_weight_type(ggml_type t, F && f) {
    switch (t) {
#define SI_CUDA_TYPE_CASE(name) \
        case GGML_TYPE_##name: f(TypeTag<GGML_TYPE_##name>{}); return true;
        SI_CUDA_WEIGHT_TYPES(SI_CUDA_TYPE_CASE)
        default: return false;
    }
}

// The same over the block formats only.
template <typename F> bool with_block_type(ggml_type t, F && f) {
    switch (t) {
        SI_CUDA_BLOCK_WEIGHT_TYPES(SI_CUDA_TYPE_CASE)
#undef SI_CUDA_TYPE_CASE
        default: return false;
    }
}

} // namespace standin::kernels::cuda
