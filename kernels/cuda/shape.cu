// Data movement on the CUDA device, as kernels/host/shape.cpp:
//   CONCAT: dst = src0 followed by src1 along dim op_params[0] (any dim)
//   REPEAT: dst = src0 tiled to dst's shape (each dim a multiple of src0's)
// Element-sized types only (ggml_blck_size 1: F32, F16, BF16, I8..I64, F64; the
// predicate refuses block types), any strides. One thread per dst element,
// copying the element's bytes (1, 2, 4 or 8).
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o CONCAT (REPEAT)
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

template <typename E>
__global__ void concat_kernel(Shape d, Shape a, Shape b, char * dd, const char * ad, const char * bd, int dim,
                              int64_t n) {
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
        int64_t i[4];
        int64_t r = k;
        for (int j = 0; j < 4; ++j) {
            i[j] = r % d.ne[j];
            r /= d.ne[j];
        }
        char * out = dd + i[0] * d.nb[0] + i[1] * d.nb[1] + i[2] * d.nb[2] + i[3] * d.nb[3];
        const Shape * s = &a;
        const char * base = ad;
        if (i[dim] >= a.ne[dim]) {
            i[dim] -= a.ne[dim];
            s = &b;
            base = bd;
        }
        *reinterpret_cast<E *>(out) = *reinterpret_cast<const E *>(
            base + i[0] * s->nb[0] + i[1] * s->nb[1] + i[2] * s->nb[2] + i[3] * s->nb[3]);
    }
}

template <typename E>
__global__ void repeat_kernel(Shape d, Shape a, char * dd, const char * ad, int64_t n) {
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
        int64_t r = k, src = 0, dst = 0;
        for (int j = 0; j < 4; ++j) {
            const int64_t ij = r % d.ne[j];
            r /= d.ne[j];
            dst += ij * d.nb[j];
            src += (ij % a.ne[j]) * a.nb[j];
        }
        *reinterpret_cast<E *>(dd + dst) = *reinterpret_cast<const E *>(ad + src);
    }
}

template <typename E> void launch(ggml_tensor * node, cudaStream_t st) {
    const int64_t n = ggml_nelements(node);
    const ggml_tensor * a = node->src[0];
    if (node->op == GGML_OP_CONCAT) {
        const ggml_tensor * b = node->src[1];
        concat_kernel<E><<<grid_for(n, kBlock), kBlock, 0, st>>>(
            shape_of(node), shape_of(a), shape_of(b), static_cast<char *>(node->data),
            static_cast<const char *>(a->data), static_cast<const char *>(b->data), node->op_params[0], n);
    } else {
        repeat_kernel<E><<<grid_for(n, kBlock), kBlock, 0, st>>>(shape_of(node), shape_of(a),
                                                                  static_cast<char *>(node->data),
                                                                  static_cast<const char *>(a->data), n);
    }
}

} // namespace

Status shape(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    if ((node->op != GGML_OP_CONCAT && node->op != GGML_OP_REPEAT) || ggml_blck_size(node->type) != 1 ||
        node->src[0]->type != node->type) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    if (node->op == GGML_OP_CONCAT && (node->op_params[0] < 0 || node->op_params[0] > 3)) {
        return false;
    }
    if (ggml_nelements(node) == 0) {
        return true;
    }
    cudaStream_t st = stream_of(stream);
    switch (ggml_type_size(node->type)) {
        case 1:  launch<uint8_t>(node, st); break;
        case 2:  launch<uint16_t>(node, st); break;
        case 4:  launch<uint32_t>(node, st); break;
        case 8:  launch<uint64_t>(node, st); break;
        default: return false;
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
