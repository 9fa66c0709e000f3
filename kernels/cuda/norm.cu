// RMS_NORM: y = x / sqrt(mean(x^2) + eps), and NORM: y = (x - mean(x)) /
// sqrt(var(x) + eps), over dim 0 with eps the float in op_params[0], on the
// CUDA device (kernels/host/norm.cpp is the host twin). F32 in and out, any
// strides (elements are addressed through nb[0]); in place is fine, since each
// element is read and then written by the same thread. One block per row;
// partial sums are kept in double, as the host does, so long rows do not lose
// precision.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o RMS_NORM (NORM)
#include <cstring>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

template <bool RMS>
__device__ void norm_row(const char * x, int64_t xnb0, char * y, int64_t ynb0, int64_t n, float eps, double * scratch) {
    auto at = [&](int64_t i) { return *reinterpret_cast<const float *>(x + i * xnb0); };
    float mean = 0.0f;
    if constexpr (!RMS) {
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += double(at(i));
        mean = float(block_sum(s, scratch) / double(n));
    }
    double sq = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = at(i) - mean;
        sq += double(v * v);
    }
    const float var = float(block_sum(sq, scratch) / double(n));
    const float k = 1.0f / sqrtf(var + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        *reinterpret_cast<float *>(y + i * ynb0) = (at(i) - mean) * k;
    }
}

template <bool RMS>
__global__ void norm_kernel(Shape d, Shape a, char * dd, const char * ad, float eps) {
    __shared__ double scratch[32];
    const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        split_row(a, r, i1, i2, i3);
        norm_row<RMS>(row_at(ad, a, i1, i2, i3), a.nb[0], row_at(dd, d, i1, i2, i3), d.nb[0],
                      a.ne[0], eps, scratch);
    }
}

} // namespace

bool norm(rt::Stream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    if (src->type != GGML_TYPE_F32 || node->type != GGML_TYPE_F32) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    float eps = 0.0f;
    std::memcpy(&eps, node->op_params, sizeof(float));
    const int64_t rows = ggml_nrows(src);
    if (rows == 0 || src->ne[0] == 0) {
        return true;
    }
    const int threads = src->ne[0] >= 1024 ? 256 : (src->ne[0] >= 128 ? 128 : 32);
    cudaStream_t st = stream_of(stream);
    const Shape d = shape_of(node), a = shape_of(src);
    char * dd = static_cast<char *>(node->data);
    const char * ad = static_cast<const char *>(src->data);
    switch (node->op) {
        case GGML_OP_RMS_NORM: norm_kernel<true><<<row_grid(rows), threads, 0, st>>>(d, a, dd, ad, eps); break;
        case GGML_OP_NORM:     norm_kernel<false><<<row_grid(rows), threads, 0, st>>>(d, a, dd, ad, eps); break;
        default:               return false;
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
