// ADD/SUB/MUL/DIV (src1 broadcast to src0's shape), SCALE (x*s + b) and
// CPY/DUP/CONT between F32/F16/BF16, on the CUDA device (copies with a block
// type go to cpy_quant.cu). Any strides; one thread per output element with a
// grid-stride loop. Same semantics and rounding as the
// host kernels (kernels/host/binary.cpp, scale.cpp, cpy.cpp), through the shared
// numerics header.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o ADD (SUB MUL DIV SCALE CPY DUP CONT)
#include <cstring>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

template <int OP> __device__ __forceinline__ float apply(float a, float b) {
    if constexpr (OP == GGML_OP_ADD) return a + b;
    if constexpr (OP == GGML_OP_SUB) return a - b;
    if constexpr (OP == GGML_OP_MUL) return a * b;
    return a / b;
}

template <int OP>
__global__ void binary_kernel(Shape d, Shape a, Shape b, char * dd, const char * ad, const char * bd, int64_t n) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
        int64_t r = k;
        const int64_t i0 = r % d.ne[0]; r /= d.ne[0];
        const int64_t i1 = r % d.ne[1]; r /= d.ne[1];
        const int64_t i2 = r % d.ne[2];
        const int64_t i3 = r / d.ne[2];
        const float x = load_f(a.type, ad + i0 * a.nb[0] + i1 * a.nb[1] + i2 * a.nb[2] + i3 * a.nb[3]);
        const float y = load_f(b.type, bd + (i0 % b.ne[0]) * b.nb[0] + (i1 % b.ne[1]) * b.nb[1] +
                                           (i2 % b.ne[2]) * b.nb[2] + (i3 % b.ne[3]) * b.nb[3]);
        store_f(d.type, dd + i0 * d.nb[0] + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3], apply<OP>(x, y));
    }
}

__global__ void scale_kernel(Shape d, Shape a, char * dd, const char * ad, float s, float bias, int64_t n) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
        const float x = *reinterpret_cast<const float *>(ad + offset_of(a, k));
        *reinterpret_cast<float *>(dd + offset_of(d, k)) = x * s + bias;
    }
}

__global__ void copy_kernel(Shape d, Shape a, char * dd, const char * ad, int64_t n) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
        store_f(d.type, dd + offset_of(d, k), load_f(a.type, ad + offset_of(a, k)));
    }
}

template <int OP> void launch_binary(cudaStream_t st, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    launch(binary_kernel<OP>, dim3(grid_for(n, kBlock)), dim3(kBlock), 0, st, shape_of(node), shape_of(node->src[0]), shape_of(node->src[1]), static_cast<char *>(node->data),
        static_cast<const char *>(node->src[0]->data), static_cast<const char *>(node->src[1]->data), n);
}

} // namespace

Status binary(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    cudaStream_t st = stream_of(stream);
    switch (node->op) {
        case GGML_OP_ADD: launch_binary<GGML_OP_ADD>(st, node); break;
        case GGML_OP_SUB: launch_binary<GGML_OP_SUB>(st, node); break;
        case GGML_OP_MUL: launch_binary<GGML_OP_MUL>(st, node); break;
        case GGML_OP_DIV: launch_binary<GGML_OP_DIV>(st, node); break;
        default:          return false;
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status scale(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    float s = 0.0f, b = 0.0f;
    std::memcpy(&s, reinterpret_cast<const float *>(node->op_params) + 0, sizeof(float));
    std::memcpy(&b, reinterpret_cast<const float *>(node->op_params) + 1, sizeof(float));
    const int64_t n = ggml_nelements(node);
    launch(scale_kernel, dim3(grid_for(n, kBlock)), dim3(kBlock), 0, stream_of(stream), shape_of(node), shape_of(node->src[0]), static_cast<char *>(node->data),
        static_cast<const char *>(node->src[0]->data), s, b, n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status copy(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const int64_t n = ggml_nelements(src);
    if (n != ggml_nelements(node)) {
        return false;
    }
    cudaStream_t st = stream_of(stream);
    const bool contiguous_same = src->type == node->type && ggml_is_contiguous(src) && ggml_is_contiguous(node);
    if (!contiguous_same && (ggml_blck_size(src->type) > 1 || ggml_blck_size(node->type) > 1)) {
        return copy_quant(stream, node);  // a block type on either side (cpy_quant.cu)
    }
    if (contiguous_same) {
        SI_CUDA_CHECK(cudaMemcpyAsync(node->data, src->data, ggml_nbytes(src), cudaMemcpyDeviceToDevice, st));
        return true;
    }
    launch(copy_kernel, dim3(grid_for(n, kBlock)), dim3(kBlock), 0, st, shape_of(node), shape_of(src), static_cast<char *>(node->data),
                                                        static_cast<const char *>(src->data), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
