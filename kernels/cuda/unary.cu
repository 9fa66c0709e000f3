// UNARY on the CUDA device: y = f(x) elementwise, f chosen by the sub-op
// (ggml_unary_op): ABS SGN NEG STEP TANH ELU RELU SIGMOID GELU GELU_QUICK SILU
// HARDSWISH HARDSIGMOID EXP EXPM1 SOFTPLUS GELU_ERF XIELU FLOOR CEIL ROUND
// TRUNC, with the definitions of kernels/host/unary.cpp (GELU is the tanh
// approximation; XIELU reads alpha_n, alpha_p, beta, eps from op_params[1..4]).
// F32/F16 src and dst of the same shape, any strides; the math is f32,
// rounded once into dst's type. One thread per element.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o SILU (any sub-op name)
#include <cstring>

#include "kernels/common/activations.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

struct XieluParams {
    float alpha_n, alpha_p, beta, eps;
};

__device__ __forceinline__ float apply(int op, float x, const XieluParams & xp) {
    switch (op) {
        case GGML_UNARY_OP_ABS:         return fabsf(x);
        case GGML_UNARY_OP_SGN:         return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
        case GGML_UNARY_OP_NEG:         return -x;
        case GGML_UNARY_OP_STEP:        return x > 0.0f ? 1.0f : 0.0f;
        case GGML_UNARY_OP_TANH:        return tanhf(x);
        case GGML_UNARY_OP_ELU:         return x > 0.0f ? x : expm1f(x);
        case GGML_UNARY_OP_RELU:        return act::relu(x);
        case GGML_UNARY_OP_SIGMOID:     return 1.0f / (1.0f + expf(-x));
        case GGML_UNARY_OP_GELU:        return act::gelu(x);
        case GGML_UNARY_OP_GELU_QUICK:  return act::gelu_quick(x);
        case GGML_UNARY_OP_SILU:        return act::silu(x);
        case GGML_UNARY_OP_HARDSWISH:   return x * fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f));
        case GGML_UNARY_OP_HARDSIGMOID: return fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f));
        case GGML_UNARY_OP_EXP:         return expf(x);
        case GGML_UNARY_OP_EXPM1:       return expf(x) - 1.0f;
        case GGML_UNARY_OP_SOFTPLUS:    return x > 20.0f ? x : logf(1.0f + expf(x));
        case GGML_UNARY_OP_GELU_ERF:    return act::gelu_erf(x);
        case GGML_UNARY_OP_XIELU:
            if (x > 0.0f) return xp.alpha_p * x * x + xp.beta * x;
            return (expm1f(fminf(x, xp.eps)) - x) * xp.alpha_n + xp.beta * x;
        case GGML_UNARY_OP_FLOOR:       return floorf(x);
        case GGML_UNARY_OP_CEIL:        return ceilf(x);
        case GGML_UNARY_OP_ROUND:       return roundf(x);
        case GGML_UNARY_OP_TRUNC:       return truncf(x);
        default:                        return NAN;
    }
}

template <int OP>
__global__ void unary_kernel(Shape d, Shape a, char * dd, const char * ad, int op, XieluParams xp, int64_t n) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
        const float x = load_f(a.type, ad + offset_of(a, k));
        // OP >= 0: the sub-op fixed at compile time (the common activations).
        store_f(d.type, dd + offset_of(d, k), apply(OP >= 0 ? OP : op, x, xp));
    }
}

} // namespace

Status unary(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const auto f_or_h = [](ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16; };
    if (!f_or_h(src->type) || !f_or_h(node->type) || !ggml_are_same_shape(src, node)) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    const int op = int(ggml_get_unary_op(node));
    XieluParams xp{};
    std::memcpy(&xp, reinterpret_cast<const float *>(node->op_params) + 1, sizeof(xp));
    const int64_t n = ggml_nelements(node);
    if (n == 0) {
        return true;
    }
    const Shape d = shape_of(node), a = shape_of(src);
    char * dd = static_cast<char *>(node->data);
    const char * ad = static_cast<const char *>(src->data);
    const unsigned grid = grid_for(n, kBlock);
    cudaStream_t st = stream_of(stream);
    switch (op) {
        case GGML_UNARY_OP_SILU:
            launch(unary_kernel<GGML_UNARY_OP_SILU>, dim3(grid), dim3(kBlock), 0, st, d, a, dd, ad, op, xp, n);
            break;
        case GGML_UNARY_OP_GELU:
            launch(unary_kernel<GGML_UNARY_OP_GELU>, dim3(grid), dim3(kBlock), 0, st, d, a, dd, ad, op, xp, n);
            break;
        default:
            launch(unary_kernel<-1>, dim3(grid), dim3(kBlock), 0, st, d, a, dd, ad, op, xp, n);
            break;
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
