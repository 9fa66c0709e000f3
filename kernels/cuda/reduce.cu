// Reductions on the CUDA device, as kernels/host/reduce.cpp:
//   SUM_ROWS: dst[0, i1, i2, i3] = sum of row (i1, i2, i3)   (F32, any strides)
//   MEAN:     the same divided by ne0
//   SUM:      one value, the sum of every element (F32/F16/BF16, dst of the
//             same type)
//   ARGMAX:   dst[i1] (I32) = index of the row's maximum (F32, 2-D); on ties
//             the last index wins, as in ggml's reference loop
// Sums are accumulated in double and rounded once into dst's type. SUM_ROWS,
// MEAN, ARGMAX: one block per row; SUM: one block for the whole tensor (a
// scalar result; the op is rare and small in model graphs).
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o SUM_ROWS (MEAN, SUM, ARGMAX)
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

__global__ void sum_rows_kernel(Shape d, Shape a, char * dd, const char * ad, double div) {
    __shared__ double scratch[32];
    const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        split_row(a, r, i1, i2, i3);
        const char * x = row_at(ad, a, i1, i2, i3);
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) s += double(load_f(a.type, x + i * a.nb[0]));
        s = block_sum(s, scratch);
        if (threadIdx.x == 0) store_f(d.type, row_at(dd, d, i1, i2, i3), float(s / div));
    }
}

__global__ void sum_all_kernel(Shape a, const char * ad, char * dd, int dtype, int64_t n) {
    __shared__ double scratch[32];
    double s = 0.0;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) s += double(load_f(a.type, ad + offset_of(a, k)));
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) store_f(dtype, dd, float(s));
}

// (value, index) pairs: the larger value wins, the larger index on ties.
__device__ __forceinline__ void argmax_merge(float & v, int32_t & i, float v2, int32_t i2) {
    if (v2 > v || (v2 == v && i2 > i)) {
        v = v2;
        i = i2;
    }
}

__global__ void argmax_kernel(Shape a, const char * ad, char * dd, int64_t d_nb0) {
    __shared__ float sv[32];
    __shared__ int32_t si[32];
    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5), nw = int(blockDim.x >> 5);
    for (int64_t r = blockIdx.x; r < a.ne[1]; r += gridDim.x) {
        const char * x = ad + r * a.nb[1];
        float v = -INFINITY;
        int32_t idx = -1;
        for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) {
            argmax_merge(v, idx, *reinterpret_cast<const float *>(x + i * a.nb[0]), int32_t(i));
        }
        for (int o = 16; o > 0; o >>= 1) {
            argmax_merge(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
        }
        __syncthreads();
        if (lane == 0) {
            sv[warp] = v;
            si[warp] = idx;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < nw; ++w) argmax_merge(v, idx, sv[w], si[w]);
            *reinterpret_cast<int32_t *>(dd + r * d_nb0) = idx < 0 ? 0 : idx;
        }
    }
}

int threads_for(int64_t n) { return n >= 1024 ? 256 : (n >= 128 ? 128 : 32); }

} // namespace

Status reduce(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    cudaStream_t st = stream_of(stream);
    const Shape a = shape_of(src);
    const char * ad = static_cast<const char *>(src->data);
    char * dd = static_cast<char *>(node->data);
    const int64_t rows = ggml_nrows(src);
    switch (node->op) {
        case GGML_OP_SUM_ROWS:
        case GGML_OP_MEAN:
            if (rows == 0) return true;
            sum_rows_kernel<<<row_grid(rows), threads_for(src->ne[0]), 0, st>>>(
                shape_of(node), a, dd, ad, node->op == GGML_OP_MEAN ? double(src->ne[0]) : 1.0);
            break;
        case GGML_OP_SUM:
            sum_all_kernel<<<1, 1024, 0, st>>>(a, ad, dd, int(node->type), ggml_nelements(src));
            break;
        case GGML_OP_ARGMAX:
            if (src->ne[1] == 0) return true;
            argmax_kernel<<<row_grid(src->ne[1]), threads_for(src->ne[0]), 0, st>>>(a, ad, dd, int64_t(node->nb[0]));
            break;
        default:
            return false;
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
