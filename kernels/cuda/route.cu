// MoE routing on the CUDA device, as kernels/host/route.cpp:
//   ARGSORT: the row's indices in rising or falling value order, ties in index
//            order, NaN last (num::sort_order_key: a total order, so the
//            result is the host's, bit for bit)
//   TOP_K:   the indices of the k largest values, falling, lower index first
//            on ties (the first k of the falling argsort)
//   ADD_ID:  dst[:, i1, i2] = a[:, i1, i2] + b[:, ids[i1, i2]]
// Sorting is a bitonic network over the row padded to a power of two (padding
// sorts last): in shared memory, one block per row, for rows of at most
// kSmemSort elements; beyond that in global scratch, one launch per network
// stage. F32 values, I32 indices, dim-0 elements adjacent, any row strides.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o ARGSORT (TOP_K, ADD_ID)
#include "kernels/common/op_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int     kBlock = 256;
constexpr int64_t kSmemSort = 4096;  // 32 KiB of keys
// An entry's num::sort_order_key (its index in the low word); padding is
// above every entry's key (an index is below 2^31), so it sorts last.
using Key = uint64_t;
constexpr Key kPad = ~Key(0);

// One compare-exchange of the bitonic network: stage (k, j), pair p (j and
// k powers of two).
__device__ __forceinline__ void exchange(Key * keys, int64_t p, int64_t k, int64_t j) {
    const int64_t i = 2 * (p & ~(j - 1)) + (p & (j - 1));
    const int64_t l = i + j;
    const bool up = (i & k) == 0;
    if (up ? keys[l] < keys[i] : keys[i] < keys[l]) {
        const Key t = keys[i];
        keys[i] = keys[l];
        keys[l] = t;
    }
}

__device__ __forceinline__ Key load_key(const Shape & a, const char * ad, int64_t r, int64_t i, bool desc) {
    int64_t i1, i2, i3;
    split_row(a, r, i1, i2, i3);
    if (i >= a.ne[0]) return kPad;
    return num::sort_order_key(*reinterpret_cast<const float *>(row_at(ad, a, i1, i2, i3) + i * a.nb[0]), uint32_t(i),
                               desc);
}

__device__ __forceinline__ void store_first(const Shape & d, char * dd, int64_t r, const Key * keys, int64_t n) {
    int64_t i1, i2, i3;
    split_row(d, r, i1, i2, i3);
    char * out = row_at(dd, d, i1, i2, i3);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        *reinterpret_cast<int32_t *>(out + i * d.nb[0]) = int32_t(uint32_t(keys[i]));  // the key's low word
    }
}

// Whole network in shared memory; one block per row.
__global__ void sort_smem_kernel(Shape d, Shape a, char * dd, const char * ad, int64_t npad, int64_t n_out, bool desc) {
    extern __shared__ Key keys[];
    const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        for (int64_t i = threadIdx.x; i < npad; i += blockDim.x) keys[i] = load_key(a, ad, r, i, desc);
        __syncthreads();
        for (int64_t k = 2; k <= npad; k <<= 1) {
            for (int64_t j = k >> 1; j > 0; j >>= 1) {
                for (int64_t p = threadIdx.x; p < npad / 2; p += blockDim.x) exchange(keys, p, k, j);
                __syncthreads();
            }
        }
        store_first(d, dd, r, keys, n_out);
        __syncthreads();
    }
}

__global__ void fill_keys_kernel(Shape a, const char * ad, Key * keys, int64_t npad, int64_t total, bool desc) {
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
        keys[t] = load_key(a, ad, t / npad, t % npad, desc);
    }
}

__global__ void stage_kernel(Key * keys, int64_t npad, int64_t k, int64_t j, int64_t pairs) {
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < pairs; t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t row = t / (npad / 2);
        exchange(keys + row * npad, t % (npad / 2), k, j);
    }
}

__global__ void store_kernel(Shape d, char * dd, const Key * keys, int64_t npad, int64_t n_out, int64_t total) {
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = t / n_out, i = t % n_out;
        int64_t i1, i2, i3;
        split_row(d, r, i1, i2, i3);
        *reinterpret_cast<int32_t *>(row_at(dd, d, i1, i2, i3) + i * d.nb[0]) = int32_t(uint32_t(keys[r * npad + i]));
    }
}

// Sorts every row of node->src[0]; writes the first n_out indices of each.
Status sort_rows(rt::cuda::CudaStream & stream, ggml_tensor * node, int64_t n_out, bool desc) {
    const ggml_tensor * src = node->src[0];
    const int64_t n = src->ne[0], rows = ggml_nrows(src);
    if (n == 0 || rows == 0 || n_out == 0) return true;
    int64_t npad = 1;
    while (npad < n) npad <<= 1;
    if (npad < 2) npad = 2;
    const Shape d = shape_of(node), a = shape_of(src);
    char * dd = static_cast<char *>(node->data);
    const char * ad = static_cast<const char *>(src->data);
    cudaStream_t st = stream_of(stream);
    if (npad <= kSmemSort) {
        const int block = int(npad / 2 < 1024 ? (npad / 2 < 32 ? 32 : npad / 2) : 1024);
        sort_smem_kernel<<<row_grid(rows), block, size_t(npad) * sizeof(Key), st>>>(d, a, dd, ad, npad, n_out, desc);
        SI_CUDA_LAUNCH_CHECK();
        return true;
    }
    void * scratch = nullptr;
    if (!scratch_alloc(&scratch, size_t(rows * npad) * sizeof(Key), st)) return Status::out_of_memory;
    Key * keys = static_cast<Key *>(scratch);
    fill_keys_kernel<<<grid_for(rows * npad, kBlock), kBlock, 0, st>>>(a, ad, keys, npad, rows * npad, desc);
    const int64_t pairs = rows * npad / 2;
    for (int64_t k = 2; k <= npad; k <<= 1) {
        for (int64_t j = k >> 1; j > 0; j >>= 1) {
            stage_kernel<<<grid_for(pairs, kBlock), kBlock, 0, st>>>(keys, npad, k, j, pairs);
        }
    }
    store_kernel<<<grid_for(rows * n_out, kBlock), kBlock, 0, st>>>(d, dd, keys, npad, n_out, rows * n_out);
    SI_CUDA_LAUNCH_CHECK();
    SI_CUDA_CHECK(cudaFreeAsync(scratch, st));
    return true;
}

__global__ void add_id_kernel(Shape d, Shape a, Shape b, Shape ids, char * dd, const char * ad, const char * bd,
                              const char * idd, int64_t n) {
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i0 = t % d.ne[0];
        const int64_t r = t / d.ne[0];
        int64_t i1, i2, i3;
        split_row(d, r, i1, i2, i3);
        const int32_t e = *reinterpret_cast<const int32_t *>(idd + i1 * ids.nb[0] + i2 * ids.nb[1]);
        if (e < 0 || e >= b.ne[1]) continue;  // caller input out of range: that row is left alone
        const float x = *reinterpret_cast<const float *>(row_at(ad, a, i1, i2, i3) + i0 * a.nb[0]);
        const float y = *reinterpret_cast<const float *>(bd + e * b.nb[1] + i0 * b.nb[0]);
        *reinterpret_cast<float *>(row_at(dd, d, i1, i2, i3) + i0 * d.nb[0]) = x + y;
    }
}

} // namespace

Status argsort(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    return sort_rows(stream, node, node->ne[0], op_i32(node, 0) == GGML_SORT_ORDER_DESC);
}

Status top_k(rt::cuda::CudaStream & stream, ggml_tensor * node) { return sort_rows(stream, node, node->ne[0], true); }

Status add_id(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const ggml_tensor *a = node->src[0], *b = node->src[1], *ids = node->src[2];
    add_id_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(a), shape_of(b), shape_of(ids), static_cast<char *>(node->data),
        static_cast<const char *>(a->data), static_cast<const char *>(b->data), static_cast<const char *>(ids->data), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
