// AVX2/FMA/F16C helpers for the host kernels (kernels/host is built for
// x86-64-v3): a vector expf accurate to about 1 ulp over the whole float
// range, horizontal sums, and 8-lane loads of F16/BF16/F32 rows as f32.
// Every helper has a scalar tail counterpart so row lengths need not be
// multiples of 8.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ggml.h"
#include "kernels/common/numerics.h"

namespace standin::kernels::host::simd {

// e^x for 8 lanes, within 1 ulp over the normal range. x = n*ln2 + r with
// |r| <= ln2/2, e^r by a degree-7 polynomial, then 2^n applied as two
// half-steps so that overflow lands on +inf. Results below e^-87 (1.65e-38,
// just above FLT_MIN) are flushed to 0 rather than computed as subnormals:
// an absolute error under 1.7e-38, while subnormal intermediates cost a
// microcode assist per lane (4x slower on activations of wide-ranged inputs).
// NaN stays NaN.
inline __m256 exp8(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.7228394f);  // ln(FLT_MAX)
    const __m256 lo = _mm256_set1_ps(-87.0f);       // keeps p * 2^n normal
    const __m256 x_in = x;
    // min/max return the second operand for NaN, so x goes second to keep NaN.
    x = _mm256_max_ps(lo, _mm256_min_ps(_mm256_set1_ps(89.0f), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r        = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    return _mm256_andnot_ps(_mm256_cmp_ps(x_in, lo, _CMP_LT_OQ), y);
}

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline __m256 load8_f16(const uint16_t * p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}

inline __m256 load8_bf16(const uint16_t * p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// Converts n contiguous elements of a float-family row to f32.
inline void row_to_f32(ggml_type t, const void * src, float * dst, int64_t n) {
    int64_t i = 0;
    if (t == GGML_TYPE_F32) {
        if (src != dst) std::memmove(dst, src, size_t(n) * sizeof(float));  // in-place ops pass the same row
        return;
    }
    const uint16_t * s = static_cast<const uint16_t *>(src);
    if (t == GGML_TYPE_F16) {
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8_f16(s + i));
        for (; i < n; ++i) dst[i] = num::fp16_to_f32(s[i]);
    } else {
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8_bf16(s + i));
        for (; i < n; ++i) dst[i] = num::bf16_to_f32(s[i]);
    }
}

// Stores n f32 values into a float-family row, rounding to nearest even.
inline void row_from_f32(ggml_type t, const float * src, void * dst, int64_t n) {
    int64_t i = 0;
    if (t == GGML_TYPE_F32) {
        if (src != dst) std::memmove(dst, src, size_t(n) * sizeof(float));
        return;
    }
    uint16_t * d = static_cast<uint16_t *>(dst);
    if (t == GGML_TYPE_F16) {
        for (; i + 8 <= n; i += 8) {
            _mm_storeu_si128(reinterpret_cast<__m128i *>(d + i),
                             _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
        }
        for (; i < n; ++i) d[i] = num::f32_to_fp16(src[i]);
    } else {
        for (; i < n; ++i) d[i] = num::f32_to_bf16(src[i]);
    }
}

inline float dot_f32(const float * a, const float * b, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    }
    float s = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

// y[i] = y[i] * a + x[i] * w
inline void scale_axpy(float * y, float a, const float * x, float w, int64_t n) {
    const __m256 va = _mm256_set1_ps(a), vw = _mm256_set1_ps(w);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vw, _mm256_mul_ps(_mm256_loadu_ps(y + i), va)));
    }
    for (; i < n; ++i) y[i] = y[i] * a + x[i] * w;
}

// y[i] += x[i] * w
inline void axpy(float * y, const float * x, float w, int64_t n) {
    const __m256 vw = _mm256_set1_ps(w);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vw, _mm256_loadu_ps(y + i)));
    }
    for (; i < n; ++i) y[i] += x[i] * w;
}

inline void scale(float * y, float a, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
    for (; i < n; ++i) y[i] *= a;
}

// Scalar expf with the same algorithm as exp8 (for row tails, so a row's
// values do not depend on where the 8-lane blocks end).
inline float exp1(float x) {
    alignas(32) float buf[8] = {x, 0, 0, 0, 0, 0, 0, 0};
    _mm256_store_ps(buf, exp8(_mm256_load_ps(buf)));
    return buf[0];
}

} // namespace standin::kernels::host::simd
