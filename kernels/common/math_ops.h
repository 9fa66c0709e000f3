// The elementwise ops ggml keeps outside UNARY (SQR SQRT LOG SIN COS CLAMP
// LEAKY_RELU), one definition for the host and CUDA kernels. A node's op and
// parameters are read once on the host into Params, which a CUDA kernel takes
// by value.
#pragma once

#include <cmath>

#include "ggml.h"
#include "kernels/common/numerics.h"  // SI_HD
#include "kernels/common/op_params.h"

namespace standin::mathop {

struct Params {
    int   op;    // ggml_op
    float a, b;  // CLAMP: min, max; LEAKY_RELU: slope
};

inline Params params_of(const ggml_tensor * n) {
    return Params{int(n->op), kernels::op_f32(n, 0), kernels::op_f32(n, 1)};
}

inline bool is_math_op(ggml_op op) {
    return op == GGML_OP_SQR || op == GGML_OP_SQRT || op == GGML_OP_LOG || op == GGML_OP_SIN || op == GGML_OP_COS ||
           op == GGML_OP_CLAMP || op == GGML_OP_LEAKY_RELU;
}

SI_HD float apply(const Params & p, float x) {
    switch (p.op) {
        case GGML_OP_SQR:        return x * x;
        case GGML_OP_SQRT:       return sqrtf(x);
        case GGML_OP_LOG:        return logf(x);
        case GGML_OP_SIN:        return sinf(x);
        case GGML_OP_COS:        return cosf(x);
        case GGML_OP_CLAMP: {  // min then max, in ggml's order (a NaN becomes the maximum)
            const float m = x < p.b ? x : p.b;
            return m > p.a ? m : p.a;
        }
        case GGML_OP_LEAKY_RELU: return (x > 0.0f ? x : 0.0f) + p.a * (x < 0.0f ? x : 0.0f);
        default:                 return NAN;
    }
}

} // namespace standin::mathop
