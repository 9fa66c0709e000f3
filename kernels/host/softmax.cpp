// SOFT_MAX: per row of src0 (dim 0), y = softmax(x * scale + slope * mask),
// with (scale, max_bias) in op_params, the mask src1 optional (F32 or F16,
// row i1 of the same dim-1 index, broadcast over dims 2 and 3 by modulo),
// slope the ALiBi slope of head i2 (1 without max_bias), and optional sinks
// src2 (F32, one logit per head) that join the normaliser only.
// F32 src0/dst with contiguous rows, any row strides; in place is fine.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o SOFT_MAX
// Time: test-backend-ops perf -b STANDIN_HOST0 -o SOFT_MAX
#include <cmath>
#include <vector>

#include "kernels/common/softmax.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/simd_math.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

constexpr int64_t kMinElemsPerTask = 8192;

// w = x * scale + slope * mask; returns max(w).
float scaled_logits(float * w, const float * x, int64_t n, float scale, float slope, ggml_type mt, const void * m) {
    const __m256 vs = _mm256_set1_ps(scale), vk = _mm256_set1_ps(slope);
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
        if (m != nullptr) {
            const __m256 mv = mt == GGML_TYPE_F16 ? simd::load8_f16(static_cast<const uint16_t *>(m) + i)
                                                  : _mm256_loadu_ps(static_cast<const float *>(m) + i);
            v = _mm256_fmadd_ps(mv, vk, v);
        }
        _mm256_storeu_ps(w + i, v);
        vmax = _mm256_max_ps(vmax, v);
    }
    float mx = simd::hmax(vmax);
    for (; i < n; ++i) {
        float v = x[i] * scale;
        if (m != nullptr) {
            const float mv = mt == GGML_TYPE_F16 ? num::fp16_to_f32(static_cast<const uint16_t *>(m)[i])
                                                 : static_cast<const float *>(m)[i];
            v = std::fma(mv, slope, v);
        }
        w[i] = v;
        mx = std::max(mx, v);
    }
    return mx;
}

// y = exp(w - mx); returns the sum (reduced in double).
double exp_shifted(float * y, const float * w, int64_t n, float mx) {
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 acc = _mm256_setzero_ps();
    double sum = 0.0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(w + i), vm));
        _mm256_storeu_ps(y + i, e);
        acc = _mm256_add_ps(acc, e);
        if ((i & 1023) == 1016) {
            sum += double(simd::hsum(acc));
            acc = _mm256_setzero_ps();
        }
    }
    sum += double(simd::hsum(acc));
    for (; i < n; ++i) {
        y[i] = simd::exp1(w[i] - mx);
        sum += double(y[i]);
    }
    return sum;
}

} // namespace

Status softmax(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * src  = node->src[0];
    const ggml_tensor * mask = node->src[1];
    const ggml_tensor * sink = node->src[2];
    const num::SoftmaxParams p = num::softmax_params_from(reinterpret_cast<const int32_t *>(node->op_params));
    const num::Alibi alibi = num::make_alibi(p.max_bias, uint32_t(src->ne[2]));

    const int64_t n = src->ne[0], ne1 = src->ne[1], ne2 = src->ne[2];
    const int64_t grain = std::max<int64_t>(1, kMinElemsPerTask / std::max<int64_t>(1, n));

    pool.parallel_for(ggml_nrows(node), grain, [&](int64_t r0, int64_t r1) {
        std::vector<float> w(static_cast<size_t>(n));
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
            const float * x = reinterpret_cast<const float *>(row_ptr(src, r));
            float * y = reinterpret_cast<float *>(row_ptr(node, r));
            const void * m = nullptr;
            if (mask != nullptr) {
                m = static_cast<const char *>(mask->data) + i1 * mask->nb[1] + (i2 % mask->ne[2]) * mask->nb[2] +
                    (i3 % mask->ne[3]) * mask->nb[3];
            }
            const float slope = alibi.slope(uint32_t(i2));
            float mx = scaled_logits(w.data(), x, n, p.scale, slope, mask ? mask->type : GGML_TYPE_F32, m);
            const float sk = sink != nullptr ? static_cast<const float *>(sink->data)[i2] : -INFINITY;
            mx = std::max(mx, sk);
            double sum = exp_shifted(y, w.data(), n, mx);
            if (sink != nullptr) {
                sum += double(simd::exp1(sk - mx));
            }
            simd::scale(y, float(1.0 / sum), n);
        }
    });
    return true;
}

} // namespace standin::kernels::host
