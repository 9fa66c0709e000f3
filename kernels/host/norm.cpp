// RMS_NORM: y = x / sqrt(mean(x^2) + eps), and NORM: y = (x - mean(x)) /
// sqrt(var(x) + eps), each over dim 0, eps the float in op_params[0].
// F32 in and out, any strides (rows that are not contiguous, e.g. a permuted
// input, are gathered into a scratch row first). Sums are reduced in double,
// as ggml's reference does, so long rows do not lose precision.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o RMS_NORM (NORM)
// Time: test-backend-ops perf -b STANDIN_HOST0 -o RMS_NORM
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/simd_math.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

constexpr int64_t kMinElemsPerTask = 16384;

double sum_f32(const float * x, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    double s = 0.0;
    int64_t i = 0;
    // 8-lane f32 partial sums, flushed to double every 1024 elements.
    while (i + 16 <= n) {
        const int64_t end = std::min(n, i + 1024) - 15;
        for (; i < end; i += 16) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
        }
        s += double(simd::hsum(_mm256_add_ps(a0, a1)));
        a0 = a1 = _mm256_setzero_ps();
    }
    for (; i < n; ++i) s += double(x[i]);
    return s;
}

// Sum of (x - c)^2.
double sum_sq_f32(const float * x, float c, int64_t n) {
    const __m256 vc = _mm256_set1_ps(c);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    double s = 0.0;
    int64_t i = 0;
    while (i + 16 <= n) {
        const int64_t end = std::min(n, i + 1024) - 15;
        for (; i < end; i += 16) {
            const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vc);
            const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vc);
            a0 = _mm256_fmadd_ps(d0, d0, a0);
            a1 = _mm256_fmadd_ps(d1, d1, a1);
        }
        s += double(simd::hsum(_mm256_add_ps(a0, a1)));
        a0 = a1 = _mm256_setzero_ps();
    }
    for (; i < n; ++i) {
        const float d = x[i] - c;
        s += double(d * d);
    }
    return s;
}

// y = (x - c) * k
void shift_scale(float * y, const float * x, float c, float k, int64_t n) {
    const __m256 vc = _mm256_set1_ps(c), vk = _mm256_set1_ps(k);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vc), vk));
    }
    for (; i < n; ++i) y[i] = (x[i] - c) * k;
}

template <bool RMS> void norm_rows(rt::host::ThreadPool & pool, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    float eps = 0.0f;
    std::memcpy(&eps, dst->op_params, sizeof(float));
    const int64_t n = src->ne[0];
    const bool contiguous = src->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
    const int64_t grain = std::max<int64_t>(1, kMinElemsPerTask / std::max<int64_t>(1, n));

    pool.parallel_for(ggml_nrows(dst), grain, [&](int64_t r0, int64_t r1) {
        std::vector<float> xbuf, ybuf;
        if (!contiguous) {
            xbuf.resize(size_t(n));
            ybuf.resize(size_t(n));
        }
        for (int64_t r = r0; r < r1; ++r) {
            const char * xs = row_ptr(src, r);
            char * ys = row_ptr(dst, r);
            const float * x = reinterpret_cast<const float *>(xs);
            float * y = reinterpret_cast<float *>(ys);
            if (!contiguous) {
                for (int64_t i = 0; i < n; ++i) xbuf[i] = *reinterpret_cast<const float *>(xs + i * src->nb[0]);
                x = xbuf.data();
                y = ybuf.data();
            }
            if constexpr (RMS) {
                const float mean = float(sum_sq_f32(x, 0.0f, n) / double(n));
                shift_scale(y, x, 0.0f, 1.0f / std::sqrt(mean + eps), n);
            } else {
                const float mean = float(sum_f32(x, n) / double(n));
                const float var  = float(sum_sq_f32(x, mean, n) / double(n));
                shift_scale(y, x, mean, 1.0f / std::sqrt(var + eps), n);
            }
            if (!contiguous) {
                for (int64_t i = 0; i < n; ++i) *reinterpret_cast<float *>(ys + i * dst->nb[0]) = ybuf[i];
            }
        }
    });
}

} // namespace

Status norm(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    switch (node->op) {
        case GGML_OP_RMS_NORM: norm_rows<true>(pool, node); return true;
        case GGML_OP_NORM:     norm_rows<false>(pool, node); return true;
        default:               return false;
    }
}

} // namespace standin::kernels::host
