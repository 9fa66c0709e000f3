// Element access helpers for the host kernels: load any float-family element as
// f32, store an f32 with the destination type's rounding.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ggml.h"
#include "kernels/common/numerics.h"

namespace standin::kernels::host {

inline bool is_float_type(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
}

inline float load_f(ggml_type t, const char * p) {
    switch (t) {
        case GGML_TYPE_F32: return *reinterpret_cast<const float *>(p);
        case GGML_TYPE_F16: return num::fp16_to_f32(*reinterpret_cast<const uint16_t *>(p));
        default:            return num::bf16_to_f32(*reinterpret_cast<const uint16_t *>(p));
    }
}

inline void store_f(ggml_type t, char * p, float v) {
    switch (t) {
        case GGML_TYPE_F32: *reinterpret_cast<float *>(p) = v; break;
        case GGML_TYPE_F16: *reinterpret_cast<uint16_t *>(p) = num::f32_to_fp16(v); break;
        default:            *reinterpret_cast<uint16_t *>(p) = num::f32_to_bf16(v); break;
    }
}

// Row r of a tensor (r counts over dims 1..3) as a byte pointer.
// Byte offset in t of the element with row-major logical index k (any
// strides). For a block type, k's dim-0 part is a multiple of the block size
// and nb[0] is the size of one block.
inline size_t elem_offset(const ggml_tensor * t, int64_t k) {
    const int64_t i0 = k % t->ne[0];
    k /= t->ne[0];
    const int64_t i1 = k % t->ne[1];
    k /= t->ne[1];
    const int64_t i2 = k % t->ne[2];
    const int64_t i3 = k / t->ne[2];
    return size_t(i0 / ggml_blck_size(t->type) * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

inline char * row_ptr(const ggml_tensor * t, int64_t r) {
    const int64_t i1 = r % t->ne[1];
    const int64_t i2 = (r / t->ne[1]) % t->ne[2];
    const int64_t i3 = r / (t->ne[1] * t->ne[2]);
    return static_cast<char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

} // namespace standin::kernels::host
