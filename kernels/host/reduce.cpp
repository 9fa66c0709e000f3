// Reductions over dim 0 or over everything:
//   SUM_ROWS: dst[0, i1, i2, i3] = sum of row (i1, i2, i3)
//   MEAN:     the same divided by ne0
//   SUM:      one value, the sum of every element
//   ARGMAX:   dst[i1] (I32) = index of the row's maximum; on ties the last
//             index wins, as in ggml's reference loop
// Float-family inputs with any strides (a permuted input is read element by
// element; SUM is claimed only for contiguous rows, see its predicate). Sums are
// accumulated in double and rounded once into dst's type.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o SUM_ROWS (MEAN, SUM, ARGMAX)
#include <cmath>
#include <vector>

#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/simd_math.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

constexpr int64_t kMinElemsPerTask = 16384;

double row_sum(const ggml_tensor * t, const char * row) {
    const int64_t n = t->ne[0];
    const size_t nb0 = t->nb[0];
    double s = 0.0;
    if (t->type == GGML_TYPE_F32 && nb0 == sizeof(float)) {
        const float * x = reinterpret_cast<const float *>(row);
        int64_t i = 0;
        while (i + 8 <= n) {
            __m256 acc = _mm256_setzero_ps();
            const int64_t end = std::min(n, i + 1024) - 7;
            for (; i < end; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
            s += double(simd::hsum(acc));
        }
        for (; i < n; ++i) s += double(x[i]);
        return s;
    }
    for (int64_t i = 0; i < n; ++i) s += double(load_f(t->type, row + i * nb0));
    return s;
}

int64_t grain_for(int64_t n) { return std::max<int64_t>(1, kMinElemsPerTask / std::max<int64_t>(1, n)); }

void sum_rows(rt::host::ThreadPool & pool, ggml_tensor * dst, bool mean) {
    const ggml_tensor * src = dst->src[0];
    const double div = mean ? double(src->ne[0]) : 1.0;
    pool.parallel_for(ggml_nrows(src), grain_for(src->ne[0]), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            store_f(dst->type, row_ptr(dst, r), float(row_sum(src, row_ptr(src, r)) / div));
        }
    });
}

void sum_all(rt::host::ThreadPool & pool, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    std::vector<double> part(size_t(ggml_nrows(src)));
    pool.parallel_for(ggml_nrows(src), grain_for(src->ne[0]), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) part[size_t(r)] = row_sum(src, row_ptr(src, r));
    });
    double s = 0.0;
    for (double p : part) s += p;
    store_f(dst->type, static_cast<char *>(dst->data), float(s));
}

void argmax(rt::host::ThreadPool & pool, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const int64_t n = src->ne[0];
    pool.parallel_for(src->ne[1], grain_for(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const char * row = static_cast<const char *>(src->data) + r * src->nb[1];
            float mx = -INFINITY;
            int32_t idx = 0;
            for (int64_t i = 0; i < n; ++i) {
                const float v = load_f(src->type, row + i * src->nb[0]);
                mx = mx > v ? mx : v;
                if (mx == v) idx = int32_t(i);
            }
            *reinterpret_cast<int32_t *>(static_cast<char *>(dst->data) + r * dst->nb[0]) = idx;
        }
    });
}

} // namespace

Status reduce(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    switch (node->op) {
        case GGML_OP_SUM_ROWS: sum_rows(pool, node, false); return true;
        case GGML_OP_MEAN:     sum_rows(pool, node, true); return true;
        case GGML_OP_SUM:      sum_all(pool, node); return true;
        case GGML_OP_ARGMAX:   argmax(pool, node); return true;
        default:               return false;
    }
}

} // namespace standin::kernels::host
