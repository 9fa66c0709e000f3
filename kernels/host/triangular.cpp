// The matrix-structure ops that chunked linear attention (Qwen3-Next, Kimi
// linear) builds its chunks from:
//   CUMSUM:    dst row = running sum of the src row (summed in double)
//   TRI:       dst[i0, i1] = src[i0, i1] where the (column, row) pair is in
//              the kept triangle (op_params[0]: ggml_tri_type), else 0
//   FILL:      every element of dst = op_params[0] (F32 or F16 dst)
//   DIAG:      dst[i0, i1, i2, i3] = i0 == i1 ? src[i0, 0, i2, i3] : 0
//   DIAG_MASK_INF: dst = src with dst[i0, i1] = -inf where i0 > n_past + i1
//              (n_past: op_params[0]), the causal mask of older graphs
//   SOLVE_TRI: X with A X = B for A lower triangular (square, dims 0/1),
//              per matrix of the batch dims 2/3, by forward substitution;
//              X and B are [k columns, n rows]
// F32 (FILL also F16), dim-0 elements adjacent, any row strides.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o CUMSUM (TRI, FILL, DIAG, DIAG_MASK_INF, SOLVE_TRI)
#include <cmath>
#include <vector>

#include "kernels/common/op_params.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

constexpr int64_t kMinElemsPerTask = 16384;

int64_t grain_for(int64_t n) { return std::max<int64_t>(1, kMinElemsPerTask / std::max<int64_t>(1, n)); }

// Whether column i0 of row i1 is kept by a ggml_tri_type.
bool tri_keeps(int type, int64_t i0, int64_t i1) {
    switch (type) {
        case GGML_TRI_TYPE_LOWER:      return i0 < i1;
        case GGML_TRI_TYPE_LOWER_DIAG: return i0 <= i1;
        case GGML_TRI_TYPE_UPPER:      return i0 > i1;
        default:                       return i0 >= i1;  // GGML_TRI_TYPE_UPPER_DIAG
    }
}

} // namespace

Status cumsum(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const int64_t n = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), grain_for(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float * x = reinterpret_cast<const float *>(row_ptr(src, r));
            float * y = reinterpret_cast<float *>(row_ptr(node, r));
            double s = 0.0;
            for (int64_t i = 0; i < n; ++i) {
                s += double(x[i]);
                y[i] = float(s);
            }
        }
    });
    return true;
}

Status tri(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const int type = op_i32(node, 0);
    const int64_t n = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), grain_for(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % node->ne[1];
            const float * x = reinterpret_cast<const float *>(row_ptr(src, r));
            float * y = reinterpret_cast<float *>(row_ptr(node, r));
            for (int64_t i = 0; i < n; ++i) y[i] = tri_keeps(type, i, i1) ? x[i] : 0.0f;
        }
    });
    return true;
}

Status fill(rt::host::HostStream & stream, ggml_tensor * node) {
    const float c = op_f32(node, 0);
    const int64_t n = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), grain_for(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            char * y = row_ptr(node, r);
            for (int64_t i = 0; i < n; ++i) store_f(node->type, y + i * node->nb[0], c);
        }
    });
    return true;
}

Status diag(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const int64_t n = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), grain_for(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % node->ne[1];
            const int64_t i23 = r / node->ne[1];  // the matrix: dims 2 and 3 of src and dst agree
            const float * x = reinterpret_cast<const float *>(row_ptr(src, i23));
            float * y = reinterpret_cast<float *>(row_ptr(node, r));
            for (int64_t i = 0; i < n; ++i) y[i] = 0.0f;
            y[i1] = x[i1];
        }
    });
    return true;
}

Status solve_tri(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    const int64_t k = node->ne[0];  // right-hand sides
    const int64_t n = node->ne[1];  // unknowns per right-hand side
    const int64_t nmat = node->ne[2] * node->ne[3];
    // One task is one right-hand-side column of one matrix: columns are
    // independent, and each substitution is sequential in its rows.
    stream.pool().parallel_for(nmat * k, std::max<int64_t>(1, kMinElemsPerTask / std::max<int64_t>(1, n * n)),
                                 [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
            const int64_t m = c / k, col = c % k;
            const int64_t i2 = m % node->ne[2], i3 = m / node->ne[2];
            const char * A = static_cast<const char *>(a->data) + i2 * a->nb[2] + i3 * a->nb[3];
            const char * B = static_cast<const char *>(b->data) + i2 * b->nb[2] + i3 * b->nb[3];
            char * X = static_cast<char *>(node->data) + i2 * node->nb[2] + i3 * node->nb[3];
            const auto x_at = [&](int64_t row) -> float & {
                return *reinterpret_cast<float *>(X + row * node->nb[1] + col * sizeof(float));
            };
            for (int64_t row = 0; row < n; ++row) {
                const float * arow = reinterpret_cast<const float *>(A + row * a->nb[1]);
                float s = 0.0f;
                for (int64_t t = 0; t < row; ++t) s += arow[t] * x_at(t);
                const float rhs = *reinterpret_cast<const float *>(B + row * b->nb[1] + col * sizeof(float));
                x_at(row) = (rhs - s) / arow[row];
            }
        }
    });
    return true;
}

Status diag_mask_inf(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const int64_t n_past = op_i32(node, 0);
    const int64_t n = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), grain_for(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % node->ne[1];
            const float * x = reinterpret_cast<const float *>(row_ptr(src, r));
            float * y = reinterpret_cast<float *>(row_ptr(node, r));
            for (int64_t i = 0; i < n; ++i) y[i] = i > n_past + i1 ? -INFINITY : x[i];
        }
    });
    return true;
}

} // namespace standin::kernels::host
