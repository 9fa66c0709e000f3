// L2_NORM and GROUP_NORM on the CUDA device, as kernels/host/group_norm.cpp:
// one block per row (L2_NORM) or per (group, i3) (GROUP_NORM), sums reduced
// in double across the block. F32, any strides.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o L2_NORM (GROUP_NORM)
#include "kernels/common/op_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

__device__ __forceinline__ float & el(char * base, const Shape & s, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return *reinterpret_cast<float *>(base + i0 * s.nb[0] + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3]);
}

__global__ void l2_norm_kernel(Shape d, Shape a, char * dd, char * ad, float eps, int64_t rows) {
    __shared__ double scratch[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        split_row(a, r, i1, i2, i3);
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) {
            const float v = el(ad, a, i, i1, i2, i3);
            s += double(v * v);
        }
        s = block_sum(s, scratch);
        const float scale = 1.0f / fmaxf(sqrtf(float(s)), eps);
        for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) el(dd, d, i, i1, i2, i3) = el(ad, a, i, i1, i2, i3) * scale;
    }
}

__global__ void group_norm_kernel(Shape d, Shape a, char * dd, char * ad, int64_t groups, int64_t per_group, float eps) {
    __shared__ double scratch[32];
    const int64_t g = blockIdx.x % groups, i3 = blockIdx.x / groups;
    const int64_t c0 = g * per_group;
    const int64_t c1 = c0 + per_group < a.ne[2] ? c0 + per_group : a.ne[2];
    if (c1 <= c0) return;
    const int64_t plane = a.ne[0] * a.ne[1], n = plane * (c1 - c0);
    double s = 0.0;
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
        s += double(el(ad, a, e % a.ne[0], (e / a.ne[0]) % a.ne[1], c0 + e / plane, i3));
    }
    const float mean = float(block_sum(s, scratch) / double(n));
    double s2 = 0.0;
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
        const float v = el(ad, a, e % a.ne[0], (e / a.ne[0]) % a.ne[1], c0 + e / plane, i3) - mean;
        s2 += double(v * v);
    }
    const float scale = 1.0f / sqrtf(float(block_sum(s2, scratch) / double(n)) + eps);
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
        const int64_t i0 = e % a.ne[0], i1 = (e / a.ne[0]) % a.ne[1], c = c0 + e / plane;
        el(dd, d, i0, i1, c, i3) = (el(ad, a, i0, i1, c, i3) - mean) * scale;
    }
}

} // namespace

Status l2_norm(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t rows = ggml_nrows(node);
    if (ggml_nelements(node) == 0) return true;
    const ggml_tensor * a = node->src[0];
    l2_norm_kernel<<<row_grid(rows), kBlock, 0, stream_of(stream)>>>(shape_of(node), shape_of(a),
                                                                        static_cast<char *>(node->data),
                                                                        static_cast<char *>(a->data), op_f32(node, 0), rows);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status group_norm(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const int64_t groups = op_i32(node, 0);
    if (ggml_nelements(node) == 0) return true;
    if (groups <= 0 || groups * a->ne[3] > int64_t(0x7fffffff)) return false;
    const int64_t per_group = (a->ne[2] + groups - 1) / groups;
    group_norm_kernel<<<unsigned(groups * a->ne[3]), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(a), static_cast<char *>(node->data), static_cast<char *>(a->data), groups, per_group,
        op_f32(node, 1));
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
