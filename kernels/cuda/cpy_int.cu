// CPY DUP CONT on the CUDA device for the types kernels/host/cpy_int.cpp
// takes (integers copied to their own type, F32 <-> I32 converted toward
// zero); one thread per element, any strides. Everything else goes on to
// copy().
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o CONT (CPY, DUP)
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/host/host_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

template <typename S, typename D> __global__ void elem_copy_kernel(Shape d, Shape a, char * dd, const char * ad, int64_t n) {
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
        *reinterpret_cast<D *>(dd + offset_of(d, k)) = D(*reinterpret_cast<const S *>(ad + offset_of(a, k)));
    }
}

template <typename S, typename D> void launch(ggml_tensor * node, cudaStream_t st) {
    const int64_t n = ggml_nelements(node);
    const ggml_tensor * a = node->src[0];
    elem_copy_kernel<S, D><<<grid_for(n, kBlock), kBlock, 0, st>>>(shape_of(node), shape_of(a),
                                                                     static_cast<char *>(node->data),
                                                                     static_cast<const char *>(a->data), n);
}

} // namespace

Status copy_any(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    if (!host::is_elem_copy(node)) {
        return copy(stream, node);
    }
    if (ggml_nelements(node) == 0) return true;
    cudaStream_t st = stream_of(stream);
    const ggml_type s = node->src[0]->type, d = node->type;
    if (s == GGML_TYPE_F32 && d == GGML_TYPE_I32) {
        launch<float, int32_t>(node, st);
    } else if (s == GGML_TYPE_I32 && d == GGML_TYPE_F32) {
        launch<int32_t, float>(node, st);
    } else {
        switch (ggml_type_size(d)) {
            case 1:  launch<uint8_t, uint8_t>(node, st); break;
            case 2:  launch<uint16_t, uint16_t>(node, st); break;
            case 4:  launch<uint32_t, uint32_t>(node, st); break;
            default: launch<uint64_t, uint64_t>(node, st); break;
        }
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
