// SET, ROLL, ARANGE and TIMESTEP_EMBEDDING on the CUDA device, as
// kernels/host/tensor_build.cpp, and ACC / ADD1 as kernels/host/shape.cpp;
// one thread per element written. SET and ACC first copy src0 into dst
// (unless in place), then write (SET, element types of 1, 2, 4 or 8 bytes) or
// add (ACC, F32) src1 through the view; ADD1 adds the scalar src1 to every
// element (float types); the others are F32.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o SET (ROLL, ARANGE, TIMESTEP_EMBEDDING, ACC)
#include "kernels/common/op_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

#define SI_GRID_STRIDE(t, n) \
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < (n); t += int64_t(gridDim.x) * blockDim.x)

template <typename E> __global__ void copy_kernel(Shape d, Shape a, char * dd, const char * ad, int64_t n) {
    SI_GRID_STRIDE(k, n) { *reinterpret_cast<E *>(dd + offset_of(d, k)) = *reinterpret_cast<const E *>(ad + offset_of(a, k)); }
}

// src1 element k into dst viewed with the op's strides and offset.
template <typename E>
__global__ void set_kernel(Shape b, char * dd, const char * bd, int64_t nb1, int64_t nb2, int64_t nb3, int64_t off,
                           int64_t n) {
    SI_GRID_STRIDE(k, n) {
        int64_t r = k;
        const int64_t i0 = r % b.ne[0];
        r /= b.ne[0];
        const int64_t i1 = r % b.ne[1];
        r /= b.ne[1];
        const int64_t i2 = r % b.ne[2], i3 = r / b.ne[2];
        *reinterpret_cast<E *>(dd + off + i0 * int64_t(sizeof(E)) + i1 * nb1 + i2 * nb2 + i3 * nb3) =
            *reinterpret_cast<const E *>(bd + offset_of(b, k));
    }
}

template <typename E> void launch_set(ggml_tensor * node, cudaStream_t st) {
    const ggml_tensor *a = node->src[0], *b = node->src[1];
    if (node->data != a->data) {
        const int64_t n = ggml_nelements(node);
        copy_kernel<E><<<grid_for(n, kBlock), kBlock, 0, st>>>(shape_of(node), shape_of(a), static_cast<char *>(node->data),
                                                              static_cast<const char *>(a->data), n);
    }
    const int64_t m = ggml_nelements(b);
    if (m > 0) {
        set_kernel<E><<<grid_for(m, kBlock), kBlock, 0, st>>>(shape_of(b), static_cast<char *>(node->data),
                                                             static_cast<const char *>(b->data), op_i32(node, 0),
                                                             op_i32(node, 1), op_i32(node, 2), op_i32(node, 3), m);
    }
}

__global__ void acc_kernel(Shape b, char * dd, const char * bd, int64_t nb1, int64_t nb2, int64_t nb3, int64_t off,
                           int64_t n) {
    SI_GRID_STRIDE(k, n) {
        int64_t r = k;
        const int64_t i0 = r % b.ne[0];
        r /= b.ne[0];
        const int64_t i1 = r % b.ne[1];
        r /= b.ne[1];
        const int64_t i2 = r % b.ne[2], i3 = r / b.ne[2];
        *reinterpret_cast<float *>(dd + off + i0 * int64_t(sizeof(float)) + i1 * nb1 + i2 * nb2 + i3 * nb3) +=
            *reinterpret_cast<const float *>(bd + offset_of(b, k));
    }
}

__global__ void add1_kernel(Shape d, Shape a, Shape b, char * dd, const char * ad, const char * bd, int64_t n) {
    const float v = load_f(b.type, bd);
    SI_GRID_STRIDE(k, n) { store_f(d.type, dd + offset_of(d, k), load_f(a.type, ad + offset_of(a, k)) + v); }
}

__device__ __forceinline__ int64_t wrap(int64_t i, int64_t n) { return ((i % n) + n) % n; }

__global__ void roll_kernel(Shape d, Shape a, char * dd, const char * ad, int s0, int s1, int s2, int s3, int64_t n) {
    SI_GRID_STRIDE(k, n) {
        int64_t r = k;
        const int64_t i0 = r % d.ne[0];
        r /= d.ne[0];
        const int64_t i1 = r % d.ne[1];
        r /= d.ne[1];
        const int64_t i2 = r % d.ne[2], i3 = r / d.ne[2];
        const char * x = ad + wrap(i0 - s0, a.ne[0]) * a.nb[0] + wrap(i1 - s1, a.ne[1]) * a.nb[1] +
                         wrap(i2 - s2, a.ne[2]) * a.nb[2] + wrap(i3 - s3, a.ne[3]) * a.nb[3];
        *reinterpret_cast<float *>(dd + offset_of(d, k)) = *reinterpret_cast<const float *>(x);
    }
}

__global__ void arange_kernel(float * y, float start, float step, int64_t n) {
    SI_GRID_STRIDE(i, n) { y[i] = start + step * float(i); }
}

__global__ void timestep_kernel(Shape d, Shape a, char * dd, const char * ad, int dim, int max_period, int64_t n) {
    const int half = dim / 2;
    SI_GRID_STRIDE(k, n) {  // k over (row, j < half + 1)
        const int64_t r = k / (half + 1), j = k % (half + 1);
        float * y = reinterpret_cast<float *>(dd + r * d.nb[1]);
        if (j == half) {
            if (dim % 2 != 0) y[2 * half] = 0.0f;
            continue;
        }
        const float t = *reinterpret_cast<const float *>(ad + r * a.nb[0]);
        const float freq = expf(-logf(float(max_period)) * float(j) / float(half));
        y[j] = cosf(t * freq);
        y[j + half] = sinf(t * freq);
    }
}

} // namespace

Status set(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    if (ggml_nelements(node) == 0) return true;
    cudaStream_t st = stream_of(stream);
    switch (ggml_type_size(node->type)) {
        case 1:  launch_set<uint8_t>(node, st); break;
        case 2:  launch_set<uint16_t>(node, st); break;
        case 4:  launch_set<uint32_t>(node, st); break;
        case 8:  launch_set<uint64_t>(node, st); break;
        default: return false;  // the CUDA predicate refuses these
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status acc_add1(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const ggml_tensor *a = node->src[0], *b = node->src[1];
    cudaStream_t st = stream_of(stream);
    if (node->op == GGML_OP_ADD1) {
        add1_kernel<<<grid_for(n, kBlock), kBlock, 0, st>>>(shape_of(node), shape_of(a), shape_of(b),
                                                           static_cast<char *>(node->data),
                                                           static_cast<const char *>(a->data),
                                                           static_cast<const char *>(b->data), n);
        SI_CUDA_LAUNCH_CHECK();
        return true;
    }
    if (node->op != GGML_OP_ACC || node->type != GGML_TYPE_F32) return false;  // the predicate refuses these
    if (node->data != a->data) {
        copy_kernel<uint32_t><<<grid_for(n, kBlock), kBlock, 0, st>>>(shape_of(node), shape_of(a),
                                                                     static_cast<char *>(node->data),
                                                                     static_cast<const char *>(a->data), n);
    }
    const int64_t m = ggml_nelements(b);
    if (m > 0) {
        acc_kernel<<<grid_for(m, kBlock), kBlock, 0, st>>>(shape_of(b), static_cast<char *>(node->data),
                                                          static_cast<const char *>(b->data), op_i32(node, 0),
                                                          op_i32(node, 1), op_i32(node, 2), op_i32(node, 3), m);
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status roll(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const ggml_tensor * a = node->src[0];
    roll_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(a), static_cast<char *>(node->data), static_cast<const char *>(a->data), op_i32(node, 0),
        op_i32(node, 1), op_i32(node, 2), op_i32(node, 3), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status arange(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t n = node->ne[0];
    if (n == 0) return true;
    arange_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(static_cast<float *>(node->data),
                                                                            op_f32(node, 0), op_f32(node, 2), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status timestep_embedding(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const int dim = op_i32(node, 0);
    const int64_t n = a->ne[0] * (dim / 2 + 1);
    if (n == 0) return true;
    timestep_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(a), static_cast<char *>(node->data), static_cast<const char *>(a->data), dim,
        op_i32(node, 1), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
