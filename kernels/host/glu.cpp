// GLU: gated activations y = act(x) * g, act chosen by the sub-op
// (ggml_glu_op in op_params[0]): REGLU (relu), GEGLU (tanh-approximated gelu),
// SWIGLU (silu), GEGLU_ERF, GEGLU_QUICK, SWIGLU_OAI (x clamped above at
// `limit`, g clamped to [-limit, limit], y = x * sigmoid(alpha x) * (g + 1)),
// SWIGLU_CLAMP (same clamps, y = silu(x) * g); alpha / limit are the floats in
// op_params[2] / [3].
// Fused form (src1 == null): each src0 row holds x then g (g then x when
// op_params[1], "swapped", is set); split form: x = src0, g = src1.
// F32/F16/BF16 rows of one type, contiguous in dim 0, any row strides; the
// math is f32, rounded once into dst's type.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o SWIGLU (GEGLU, REGLU, ...)
// Time: test-backend-ops perf -b STANDIN_HOST0 -o SWIGLU
#include <algorithm>
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

struct GluParams {
    ggml_glu_op op;
    float alpha;
    float limit;
};

float gate(const GluParams & p, float x, float g) {
    switch (p.op) {
        case GGML_GLU_OP_REGLU:       return act::relu(x) * g;
        case GGML_GLU_OP_GEGLU:       return act::gelu(x) * g;
        case GGML_GLU_OP_SWIGLU:      return act::silu(x) * g;
        case GGML_GLU_OP_GEGLU_ERF:   return act::gelu_erf(x) * g;
        case GGML_GLU_OP_GEGLU_QUICK: return act::gelu_quick(x) * g;
        case GGML_GLU_OP_SWIGLU_OAI: {
            const float xc = std::min(x, p.limit);
            const float gc = std::clamp(g, -p.limit, p.limit);
            return xc / (1.0f + std::exp(p.alpha * (-xc))) * (gc + 1.0f);
        }
        case GGML_GLU_OP_SWIGLU_CLAMP: {
            const float xc = std::min(x, p.limit);
            const float gc = std::clamp(g, -p.limit, p.limit);
            return xc / (1.0f + std::exp(-xc)) * gc;
        }
        default: return NAN;
    }
}

// y = silu(x) * g, 8 lanes at a time (the activation of most llama models).
void swiglu_row(float * y, const float * x, const float * g, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 vx = _mm256_loadu_ps(x + i);
        const __m256 e = simd::exp8(_mm256_sub_ps(zero, vx));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(vx, _mm256_add_ps(one, e)), _mm256_loadu_ps(g + i)));
    }
    for (; i < n; ++i) y[i] = x[i] / (1.0f + simd::exp1(-x[i])) * g[i];
}

} // namespace

Status glu(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    GluParams p{ggml_get_glu_op(node), 0.0f, 0.0f};
    std::memcpy(&p.alpha, reinterpret_cast<const float *>(node->op_params) + 2, sizeof(float));
    std::memcpy(&p.limit, reinterpret_cast<const float *>(node->op_params) + 3, sizeof(float));
    const bool swapped = reinterpret_cast<const int32_t *>(node->op_params)[1] != 0;
    const int64_t n = node->ne[0];
    const size_t esz = ggml_type_size(a->type);
    // Element offsets of x and g inside their rows (fused form only).
    const int64_t xo = (b == nullptr && swapped) ? n : 0;
    const int64_t go = b != nullptr ? 0 : (swapped ? 0 : n);
    const int64_t grain = std::max<int64_t>(1, kMinElemsPerTask / std::max<int64_t>(1, n));

    pool.parallel_for(ggml_nrows(node), grain, [&](int64_t r0, int64_t r1) {
        std::vector<float> x(static_cast<size_t>(n)), g(static_cast<size_t>(n)), y(static_cast<size_t>(n));
        for (int64_t r = r0; r < r1; ++r) {
            const char * xs = row_ptr(a, r) + xo * esz;
            const char * gs = row_ptr(b != nullptr ? b : a, r) + go * esz;
            char * ys = row_ptr(node, r);
            // F32 rows are used in place; other types go through f32 buffers.
            const bool direct = node->type == GGML_TYPE_F32;
            const float * xf = direct ? reinterpret_cast<const float *>(xs) : x.data();
            const float * gf = direct ? reinterpret_cast<const float *>(gs) : g.data();
            float * yf = direct ? reinterpret_cast<float *>(ys) : y.data();
            if (!direct) {
                simd::row_to_f32(a->type, xs, x.data(), n);
                simd::row_to_f32(a->type, gs, g.data(), n);
            }
            if (p.op == GGML_GLU_OP_SWIGLU) {
                swiglu_row(yf, xf, gf, n);
            } else {
                for (int64_t i = 0; i < n; ++i) yf[i] = gate(p, xf[i], gf[i]);
            }
            if (!direct) {
                simd::row_from_f32(node->type, y.data(), ys, n);
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
