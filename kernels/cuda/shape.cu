// Data movement on the CUDA device, as kernels/host/shape.cpp:
//   CONCAT: dst = src0 followed by src1 along dim op_params[0] (any dim)
//   REPEAT: dst = src0 tiled to dst's shape (each dim a multiple of src0's)
// Element-sized types (ggml_blck_size 1: F32, F16, BF16, I8..I64, F64), any
// strides: one thread per dst element, copying the element's bytes (1, 2, 4
// or 8). CONCAT also takes block-quantized types with contiguous rows (the
// predicate's condition, as the host's): a row of blocks is then a row of
// copy units, the widest of 8, 4, 2 or 1 bytes that divides the block size,
// and a dim-0 split falls between blocks, so the same kernel copies units.
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

// A block-type t as a tensor of `unit`-byte copy units: dim 0 counts units
// of its rows (rows contiguous: nb[0] is the block size), the other dims are
// unchanged. Element types keep their shape (any strides).
Shape in_units(const ggml_tensor * t, size_t unit) {
    Shape s = shape_of(t);
    if (ggml_blck_size(t->type) > 1) {
        s.ne[0] = t->ne[0] / ggml_blck_size(t->type) * int64_t(ggml_type_size(t->type) / unit);
        s.nb[0] = int64_t(unit);
    }
    return s;
}

// Whether every address a unit copy of t touches is `unit`-aligned.
bool unit_aligned(const ggml_tensor * t, size_t unit) {
    bool ok = reinterpret_cast<uintptr_t>(t->data) % unit == 0;
    for (int i = 1; i < GGML_MAX_DIMS; ++i) ok = ok && t->nb[i] % unit == 0;
    return ok;
}

template <typename E> void launch(ggml_tensor * node, cudaStream_t st) {
    const ggml_tensor * a = node->src[0];
    if (node->op == GGML_OP_CONCAT) {
        const ggml_tensor * b = node->src[1];
        const Shape d = in_units(node, sizeof(E));
        const int64_t n = d.ne[0] * d.ne[1] * d.ne[2] * d.ne[3];
        concat_kernel<E><<<grid_for(n, kBlock), kBlock, 0, st>>>(
            d, in_units(a, sizeof(E)), in_units(b, sizeof(E)), static_cast<char *>(node->data),
            static_cast<const char *>(a->data), static_cast<const char *>(b->data), node->op_params[0], n);
    } else {
        const int64_t n = ggml_nelements(node);
        repeat_kernel<E><<<grid_for(n, kBlock), kBlock, 0, st>>>(shape_of(node), shape_of(a),
                                                                  static_cast<char *>(node->data),
                                                                  static_cast<const char *>(a->data), n);
    }
}

} // namespace

Status shape(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const bool concat = node->op == GGML_OP_CONCAT;
    if ((!concat && node->op != GGML_OP_REPEAT) || (!concat && ggml_blck_size(node->type) != 1) ||
        node->src[0]->type != node->type) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    if (concat && (node->op_params[0] < 0 || node->op_params[0] > 3)) {
        return false;
    }
    if (ggml_nelements(node) == 0) {
        return true;
    }
    cudaStream_t st = stream_of(stream);
    // The copy unit: the element, or for blocks the widest power of two that
    // divides the block size and keeps every copy aligned (views may start
    // at any whole block).
    const size_t tsz = ggml_type_size(node->type);
    size_t unit = tsz;
    if (ggml_blck_size(node->type) > 1) {
        unit = tsz % 8 == 0 ? 8 : tsz % 4 == 0 ? 4 : tsz % 2 == 0 ? 2 : 1;
        while (unit > 1 && !(unit_aligned(node, unit) && unit_aligned(node->src[0], unit) &&
                             unit_aligned(node->src[1], unit))) {
            unit /= 2;
        }
    }
    switch (unit) {
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
