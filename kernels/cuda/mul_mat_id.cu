// MUL_MAT_ID (mixture-of-experts matmul) on the CUDA device: with experts as
// (K, M, n_as), inputs b (K, ne11, n_tok) and I32 expert ids (n_used, n_tok),
//   dst[:, e, t] = as[:, :, ids[e, t]] times b[:, e % ne11, t]
// (kernels/host/mul_mat_id.cpp is the host twin). Weight, input and output
// types are those of MUL_MAT; an id outside [0, n_as) gives a zero column.
//
// The ids live on the device, so the host cannot group pairs by expert
// without waiting for the stream. Two paths:
//   few pairs (token generation): every (e, t) pair is a grid row of the
//     mat-vec kernel, which reads its expert id itself: the integer
//     mat-vecs for the block formats they take (src1 quantized per 32, as
//     for MUL_MAT; mul_mat_vec_q8.cu), the float one (mul_mat_vec.cu) else;
//   otherwise the pairs are grouped by expert on the device (count, a
//     one-thread scan that also lists the 64-column tiles of every expert,
//     scatter) and the tiled tensor-core product (mul_mat_tile.cuh) runs once
//     per (row tile, expert tile), gathering its src1 and dst columns through
//     the pair list; each expert's weights are then read once per row tile.
// The order of pairs inside an expert's list depends on atomics, but every
// dst column is computed by the same operations wherever it lands in a tile.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT_ID
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/mul_mat.cuh"
#include "kernels/cuda/mul_mat_tile.cuh"

namespace standin::kernels::cuda {

namespace {

constexpr int64_t kMaxVecPairs = 32;  // up to this many (slot, token) pairs: the mat-vec path
constexpr int kBlock = 256;

// Device scratch of the grouping, all int32.
struct Route {
    int * counts;   // [n_as] pairs per expert
    int * cursor;   // [n_as] fill positions
    int * offs;     // [n_as] first pair of each expert in `pairs`
    int * pairs;    // [P] pair q = t * n_used + e, grouped by expert
    int * tile_x;   // [max_tiles] expert of tile i
    int * tile_n0;  // [max_tiles] first column of tile i inside its expert
    int * n_tiles;  // [1] tiles in use
};

__device__ __forceinline__ int32_t expert_of(const mm::IdArgs & p, int64_t q) {
    return *reinterpret_cast<const int32_t *>(p.ids + (q % p.n_used) * p.ids_nb0 + (q / p.n_used) * p.ids_nb1);
}

__global__ void count_kernel(mm::IdArgs p, Route r) {
    for (int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; q < p.n_used * p.n_tok;
         q += int64_t(gridDim.x) * blockDim.x) {
        const int32_t x = expert_of(p, q);
        if (x >= 0 && x < p.n_as) {
            atomicAdd(&r.counts[x], 1);
        } else {
            float * d = reinterpret_cast<float *>(p.d + (q % p.n_used) * p.d_nb1 + (q / p.n_used) * p.d_nb2);
            for (int64_t m = 0; m < p.M; ++m) d[m] = 0.0f;
        }
    }
}

// One thread: prefix sums and the tile list (n_as is small).
__global__ void scan_kernel(int64_t n_as, Route r) {
    int off = 0, nt = 0;
    for (int64_t x = 0; x < n_as; ++x) {
        r.offs[x] = off;
        off += r.counts[x];
        for (int n0 = 0; n0 < r.counts[x]; n0 += mm::kBN) {
            r.tile_x[nt] = int(x);
            r.tile_n0[nt] = n0;
            ++nt;
        }
    }
    *r.n_tiles = nt;
}

__global__ void fill_kernel(mm::IdArgs p, Route r) {
    for (int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; q < p.n_used * p.n_tok;
         q += int64_t(gridDim.x) * blockDim.x) {
        const int32_t x = expert_of(p, q);
        if (x >= 0 && x < p.n_as) {
            r.pairs[r.offs[x] + atomicAdd(&r.cursor[x], 1)] = int(q);
        }
    }
}

template <int T>
__global__ void __launch_bounds__(mm::kTileThreads) id_tile_kernel(mm::IdArgs p, Route r, int64_t max_tiles) {
    __shared__ mm::TileSmem sm;
    const int64_t m0 = int64_t(blockIdx.x) * mm::kBM;
    const int64_t n_tiles = *r.n_tiles;
    for (int64_t i = blockIdx.y; i < max_tiles && i < n_tiles; i += gridDim.y) {
        const int x = r.tile_x[i], n0 = r.tile_n0[i], cnt = r.counts[x];
        if (threadIdx.x < mm::kBN) {
            const int j = n0 + int(threadIdx.x);
            const float * y = nullptr;
            float * d = nullptr;
            if (j < cnt) {
                const int64_t q = r.pairs[r.offs[x] + j];
                const int64_t e = q % p.n_used, t = q / p.n_used;
                y = reinterpret_cast<const float *>(p.y + (e % p.ne11) * p.y_nb1 + t * p.y_nb2);
                d = reinterpret_cast<float *>(p.d + e * p.d_nb1 + t * p.d_nb2);
            }
            sm.y[threadIdx.x] = y;
            sm.d[threadIdx.x] = d;
        }
        __syncthreads();
        mm::tile_product<T>(sm, p.a + int64_t(x) * p.a_nb2, p.a_nb1, p.M, p.K, m0);
    }
}

template <int T> void launch_tiles_t(const mm::IdArgs & p, const Route & r, int64_t max_tiles, cudaStream_t st) {
    const dim3 grid(unsigned((p.M + mm::kBM - 1) / mm::kBM), grid_yz(max_tiles));
    id_tile_kernel<T><<<grid, mm::kTileThreads, 0, st>>>(p, r, max_tiles);
}

void launch_tiles(ggml_type t, const mm::IdArgs & p, const Route & r, int64_t max_tiles, cudaStream_t st) {
    with_weight_type(t, [&](auto ty) { launch_tiles_t<decltype(ty)::value>(p, r, max_tiles, st); });
}

// Groups the pairs by expert and runs the tiles (the batched path).
bool run_grouped(ggml_type t, const mm::IdArgs & p, cudaStream_t st) {
    const int64_t n_pairs = p.n_used * p.n_tok;
    const int64_t max_tiles = (n_pairs + mm::kBN - 1) / mm::kBN + p.n_as;  // >= sum of ceil(count / 64)
    const int64_t n_ints = 3 * p.n_as + n_pairs + 2 * max_tiles + 1;
    void * mem = nullptr;
    if (!scratch_alloc(&mem, size_t(n_ints) * sizeof(int), st)) {
        return false;
    }
    Route r;
    r.counts = static_cast<int *>(mem);
    r.cursor = r.counts + p.n_as;
    r.offs = r.cursor + p.n_as;
    r.pairs = r.offs + p.n_as;
    r.tile_x = r.pairs + n_pairs;
    r.tile_n0 = r.tile_x + max_tiles;
    r.n_tiles = r.tile_n0 + max_tiles;
    SI_CUDA_CHECK(cudaMemsetAsync(r.counts, 0, size_t(2 * p.n_as) * sizeof(int), st));
    const unsigned grid = grid_for(n_pairs, kBlock);
    count_kernel<<<grid, kBlock, 0, st>>>(p, r);
    scan_kernel<<<1, 1, 0, st>>>(p.n_as, r);
    fill_kernel<<<grid, kBlock, 0, st>>>(p, r);
    SI_CUDA_LAUNCH_CHECK();
    launch_tiles(t, p, r, max_tiles, st);
    SI_CUDA_LAUNCH_CHECK();
    SI_CUDA_CHECK(cudaFreeAsync(mem, st));
    return true;
}

} // namespace

Status mul_mat_id(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * as  = node->src[0];
    const ggml_tensor * b   = node->src[1];
    const ggml_tensor * ids = node->src[2];
    if (!mm::vec_type_ok(as->type) || node->type != GGML_TYPE_F32 || ids->type != GGML_TYPE_I32 || b->ne[3] != 1) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    if (ggml_nelements(node) == 0) {
        return true;
    }
    // Few pairs of block-quantized experts: the integer mat-vecs, a pair per
    // matrix (mul_mat_vec_q8.cu), which read each expert's weights as stored.
    if (ids->ne[0] * ids->ne[1] <= kMaxVecPairs && mm::q8_id_applies(as, b)) {
        return mm::mul_mat_id_q8(stream, node);
    }
    cudaStream_t st = stream_of(stream);
    mm::Staged y = mm::stage_y(b, as->type, st);
    if (!y.ok) {
        return Status::out_of_memory;
    }

    mm::IdArgs p;
    p.a = static_cast<const char *>(as->data);
    p.a_nb1 = int64_t(as->nb[1]);
    p.a_nb2 = int64_t(as->nb[2]);
    p.y = y.y;
    p.y_nb1 = y.nb1;
    p.y_nb2 = y.nb2;
    p.d = static_cast<char *>(node->data);
    p.d_nb1 = int64_t(node->nb[1]);
    p.d_nb2 = int64_t(node->nb[2]);
    p.ids = static_cast<const char *>(ids->data);
    p.ids_nb0 = int64_t(ids->nb[0]);
    p.ids_nb1 = int64_t(ids->nb[1]);
    p.K = as->ne[0];
    p.M = as->ne[1];
    p.ne11 = b->ne[1];
    p.n_used = ids->ne[0];
    p.n_tok = ids->ne[1];
    p.n_as = as->ne[2];
    p.a_vec = p.K % 8 == 0 && aligned_to(as, 16);
    if (p.n_used * p.n_tok <= kMaxVecPairs) {
        mm::launch_vec_id(as->type, p, st);
        SI_CUDA_LAUNCH_CHECK();
    } else if (!run_grouped(as->type, p, st)) {  // false: its scratch could not be had
        mm::release(y, st);
        return Status::out_of_memory;
    }
    mm::release(y, st);
    return true;
}

} // namespace standin::kernels::cuda
