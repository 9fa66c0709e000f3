// Reading a node's op_params as ggml's builders wrote them (int32 or float
// slots), for kernels and predicates on either device. ggml's own accessors
// live in its private ggml-impl.h, which kernels do not include.
#pragma once

#include <cstdint>
#include <cstring>

#include "ggml.h"

namespace standin::kernels {

inline int32_t op_i32(const ggml_tensor * t, int i) {
    int32_t v;
    std::memcpy(&v, reinterpret_cast<const char *>(t->op_params) + i * sizeof(int32_t), sizeof(v));
    return v;
}

inline float op_f32(const ggml_tensor * t, int i) {
    float v;
    std::memcpy(&v, reinterpret_cast<const char *>(t->op_params) + i * sizeof(float), sizeof(v));
    return v;
}

} // namespace standin::kernels
