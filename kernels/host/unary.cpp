// UNARY: y = f(x) elementwise, f chosen by the sub-op (ggml_unary_op in
// op_params[0]): ABS SGN NEG STEP TANH ELU RELU SIGMOID GELU GELU_QUICK SILU
// HARDSWISH HARDSIGMOID EXP EXPM1 SOFTPLUS GELU_ERF XIELU FLOOR CEIL ROUND
// TRUNC, with ggml's definitions (GELU is the tanh approximation; XIELU reads
// alpha_n, alpha_p, beta, eps from op_params[1..4]). Rows are converted to f32,
// transformed, and rounded once into dst's type. F32/F16/BF16 src and dst of
// the same shape, contiguous rows, any row strides.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o SILU (any sub-op name)
// Time: test-backend-ops perf -b STANDIN_HOST0 -o SILU
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/common/activations.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/simd_math.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

constexpr int64_t kMinElemsPerTask = 16384;

struct XieluParams {
    float alpha_n, alpha_p, beta, eps;
};

float apply(ggml_unary_op op, float x, const XieluParams & xp) {
    switch (op) {
        case GGML_UNARY_OP_ABS:         return std::fabs(x);
        case GGML_UNARY_OP_SGN:         return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
        case GGML_UNARY_OP_NEG:         return -x;
        case GGML_UNARY_OP_STEP:        return x > 0.0f ? 1.0f : 0.0f;
        case GGML_UNARY_OP_TANH:        return std::tanh(x);
        case GGML_UNARY_OP_ELU:         return x > 0.0f ? x : std::expm1(x);
        case GGML_UNARY_OP_RELU:        return act::relu(x);
        case GGML_UNARY_OP_SIGMOID:     return 1.0f / (1.0f + std::exp(-x));
        case GGML_UNARY_OP_GELU:        return act::gelu(x);
        case GGML_UNARY_OP_GELU_QUICK:  return act::gelu_quick(x);
        case GGML_UNARY_OP_SILU:        return act::silu(x);
        case GGML_UNARY_OP_HARDSWISH:   return x * std::fmin(1.0f, std::fmax(0.0f, (x + 3.0f) / 6.0f));
        case GGML_UNARY_OP_HARDSIGMOID: return std::fmin(1.0f, std::fmax(0.0f, (x + 3.0f) / 6.0f));
        case GGML_UNARY_OP_EXP:         return std::exp(x);
        case GGML_UNARY_OP_EXPM1:       return std::exp(x) - 1.0f;
        case GGML_UNARY_OP_SOFTPLUS:    return x > 20.0f ? x : std::log(1.0f + std::exp(x));
        case GGML_UNARY_OP_GELU_ERF:    return act::gelu_erf(x);
        case GGML_UNARY_OP_XIELU:
            if (x > 0.0f) return xp.alpha_p * x * x + xp.beta * x;
            return (std::expm1(std::fmin(x, xp.eps)) - x) * xp.alpha_n + xp.beta * x;
        case GGML_UNARY_OP_FLOOR:       return std::floor(x);
        case GGML_UNARY_OP_CEIL:        return std::ceil(x);
        case GGML_UNARY_OP_ROUND:       return std::round(x);
        case GGML_UNARY_OP_TRUNC:       return std::trunc(x);
        default:                        return NAN;
    }
}

// 8-lane forms of the ops that dominate model graphs; false: use apply().
bool apply8(ggml_unary_op op, float * v, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 zero = _mm256_setzero_ps();
    int64_t i = 0;
    switch (op) {
        case GGML_UNARY_OP_SILU:
            for (; i + 8 <= n; i += 8) {
                const __m256 x = _mm256_loadu_ps(v + i);
                const __m256 e = simd::exp8(_mm256_sub_ps(zero, x));
                _mm256_storeu_ps(v + i, _mm256_div_ps(x, _mm256_add_ps(one, e)));
            }
            for (; i < n; ++i) v[i] = v[i] / (1.0f + simd::exp1(-v[i]));
            return true;
        case GGML_UNARY_OP_SIGMOID:
            for (; i + 8 <= n; i += 8) {
                const __m256 e = simd::exp8(_mm256_sub_ps(zero, _mm256_loadu_ps(v + i)));
                _mm256_storeu_ps(v + i, _mm256_div_ps(one, _mm256_add_ps(one, e)));
            }
            for (; i < n; ++i) v[i] = 1.0f / (1.0f + simd::exp1(-v[i]));
            return true;
        case GGML_UNARY_OP_RELU:
            // x > 0 ? x : 0 (NaN -> 0, as the reference's comparison gives).
            for (; i + 8 <= n; i += 8) {
                const __m256 x = _mm256_loadu_ps(v + i);
                _mm256_storeu_ps(v + i, _mm256_and_ps(x, _mm256_cmp_ps(x, zero, _CMP_GT_OQ)));
            }
            for (; i < n; ++i) v[i] = v[i] > 0.0f ? v[i] : 0.0f;
            return true;
        default:
            return false;
    }
}

} // namespace

Status unary(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * src = node->src[0];
    const ggml_unary_op op = ggml_get_unary_op(node);
    XieluParams xp{};
    std::memcpy(&xp, reinterpret_cast<const float *>(node->op_params) + 1, sizeof(xp));
    const int64_t n = node->ne[0];
    const int64_t grain = std::max<int64_t>(1, kMinElemsPerTask / std::max<int64_t>(1, n));

    pool.parallel_for(ggml_nrows(node), grain, [&](int64_t r0, int64_t r1) {
        std::vector<float> buf(static_cast<size_t>(n));
        for (int64_t r = r0; r < r1; ++r) {
            // An F32 destination is its own scratch row.
            float * v = node->type == GGML_TYPE_F32 ? reinterpret_cast<float *>(row_ptr(node, r)) : buf.data();
            simd::row_to_f32(src->type, row_ptr(src, r), v, n);
            if (!apply8(op, v, n)) {
                for (int64_t i = 0; i < n; ++i) v[i] = apply(op, v[i], xp);
            }
            if (v == buf.data()) {
                simd::row_from_f32(node->type, v, row_ptr(node, r), n);
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
