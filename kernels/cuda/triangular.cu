// The chunked-attention helpers on the CUDA device, as kernels/host/triangular.cpp:
//   CUMSUM:    one thread per row, summing in double in index order
//   TRI, FILL, DIAG, DIAG_MASK_INF: one thread per dst element
//   SOLVE_TRI: one thread per (matrix, right-hand-side column): forward
//              substitution down the rows, in the host's order
// F32 (FILL also F16), dim-0 elements adjacent, any row strides.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o CUMSUM (TRI, FILL, DIAG, DIAG_MASK_INF, SOLVE_TRI)
#include "kernels/common/op_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

#define SI_GRID_STRIDE(t, n) \
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < (n); t += int64_t(gridDim.x) * blockDim.x)

__device__ __forceinline__ char * elem(char * base, const Shape & s, int64_t i0, int64_t r) {
    int64_t i1, i2, i3;
    split_row(s, r, i1, i2, i3);
    return row_at(base, s, i1, i2, i3) + i0 * s.nb[0];
}

__global__ void cumsum_kernel(Shape d, Shape a, char * dd, const char * ad, int64_t rows) {
    SI_GRID_STRIDE(r, rows) {
        int64_t i1, i2, i3;
        split_row(a, r, i1, i2, i3);
        const float * x = reinterpret_cast<const float *>(row_at(ad, a, i1, i2, i3));
        float * y = reinterpret_cast<float *>(row_at(dd, d, i1, i2, i3));
        double s = 0.0;
        for (int64_t i = 0; i < a.ne[0]; ++i) {
            s += double(x[i]);
            y[i] = float(s);
        }
    }
}

__device__ __forceinline__ bool tri_keeps(int type, int64_t i0, int64_t i1) {
    switch (type) {
        case GGML_TRI_TYPE_LOWER:      return i0 < i1;
        case GGML_TRI_TYPE_LOWER_DIAG: return i0 <= i1;
        case GGML_TRI_TYPE_UPPER:      return i0 > i1;
        default:                       return i0 >= i1;
    }
}

__global__ void tri_kernel(Shape d, Shape a, char * dd, const char * ad, int type, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        const int64_t i0 = t % d.ne[0], r = t / d.ne[0];
        const float x = *reinterpret_cast<const float *>(elem(const_cast<char *>(ad), a, i0, r));
        *reinterpret_cast<float *>(elem(dd, d, i0, r)) = tri_keeps(type, i0, r % d.ne[1]) ? x : 0.0f;
    }
}

__global__ void fill_kernel(Shape d, char * dd, float c, int64_t n) {
    SI_GRID_STRIDE(t, n) { store_f(d.type, elem(dd, d, t % d.ne[0], t / d.ne[0]), c); }
}

__global__ void diag_kernel(Shape d, Shape a, char * dd, const char * ad, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        const int64_t i0 = t % d.ne[0], r = t / d.ne[0];
        const int64_t i1 = r % d.ne[1], m = r / d.ne[1];  // m: the matrix (dims 2, 3), src's row
        float v = 0.0f;
        if (i0 == i1) v = *reinterpret_cast<const float *>(elem(const_cast<char *>(ad), a, i0, m));
        *reinterpret_cast<float *>(elem(dd, d, i0, r)) = v;
    }
}

__global__ void diag_mask_kernel(Shape d, Shape a, char * dd, const char * ad, int64_t n_past, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        const int64_t i0 = t % d.ne[0], r = t / d.ne[0];
        const float x = *reinterpret_cast<const float *>(elem(const_cast<char *>(ad), a, i0, r));
        *reinterpret_cast<float *>(elem(dd, d, i0, r)) = i0 > n_past + r % d.ne[1] ? -INFINITY : x;
    }
}

__global__ void solve_tri_kernel(Shape x, Shape a, Shape b, char * xd, const char * ad, const char * bd, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        const int64_t k = x.ne[0], rows = x.ne[1];
        const int64_t col = t % k, m = t / k;
        const int64_t i2 = m % x.ne[2], i3 = m / x.ne[2];
        const char * A = ad + i2 * a.nb[2] + i3 * a.nb[3];
        const char * B = bd + i2 * b.nb[2] + i3 * b.nb[3];
        char * X = xd + i2 * x.nb[2] + i3 * x.nb[3];
        for (int64_t row = 0; row < rows; ++row) {
            const float * arow = reinterpret_cast<const float *>(A + row * a.nb[1]);
            float s = 0.0f;
            for (int64_t q = 0; q < row; ++q) s += arow[q] * *reinterpret_cast<const float *>(X + q * x.nb[1] + col * 4);
            const float rhs = *reinterpret_cast<const float *>(B + row * b.nb[1] + col * 4);
            *reinterpret_cast<float *>(X + row * x.nb[1] + col * 4) = (rhs - s) / arow[row];
        }
    }
}

} // namespace

Status cumsum(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t rows = ggml_nrows(node);
    if (ggml_nelements(node) == 0) return true;
    const ggml_tensor * a = node->src[0];
    cumsum_kernel<<<grid_for(rows, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(a), static_cast<char *>(node->data), static_cast<const char *>(a->data), rows);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status tri(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const ggml_tensor * a = node->src[0];
    tri_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(shape_of(node), shape_of(a),
                                                                         static_cast<char *>(node->data),
                                                                         static_cast<const char *>(a->data),
                                                                         op_i32(node, 0), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status fill(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    fill_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(shape_of(node), static_cast<char *>(node->data),
                                                                          op_f32(node, 0), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status diag(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const ggml_tensor * a = node->src[0];
    diag_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(a), static_cast<char *>(node->data), static_cast<const char *>(a->data), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status diag_mask_inf(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const ggml_tensor * a = node->src[0];
    diag_mask_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(a), static_cast<char *>(node->data), static_cast<const char *>(a->data),
        op_i32(node, 0), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status solve_tri(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t n = node->ne[0] * node->ne[2] * node->ne[3];
    if (ggml_nelements(node) == 0) return true;
    const ggml_tensor *a = node->src[0], *b = node->src[1];
    solve_tri_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(a), shape_of(b), static_cast<char *>(node->data), static_cast<const char *>(a->data),
        static_cast<const char *>(b->data), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
