// MUL_MAT_ID (mixture-of-experts matmul) on the CUDA device: with experts as
// (K, M, n_as), inputs b (K, ne11, n_tok) and I32 expert ids (n_used, n_tok),
//   dst[:, e, t] = as[:, :, ids[e, t]] times b[:, e % ne11, t]
// (kernels/host/mul_mat_id.cpp is the host twin). Weight, input and output
// types are those of MUL_MAT; an id outside [0, n_as) gives a zero column.
//
// The ids live on the device, so the host cannot group pairs by expert
// without waiting for the stream. The kernel table (plan::choose_id in
// mm_plan.h) picks one of three paths:
//   few pairs (token generation), and any number for the integer formats
//     without mmq or with GGML_STANDIN_MMQ=off: every (e, t) pair is a grid
//     row of the mat-vec kernel, which reads its expert id itself: the
//     integer mat-vecs for the block formats they take (src1 quantized per
//     32, as for MUL_MAT; mul_mat_vec_q8.cu), the float one (mul_mat_vec.cu)
//     for a few pairs else;
//   otherwise the pairs are grouped by expert on the device (one block
//     counts them, scans the counts, lists the column tiles of every expert
//     and places the pairs: route_kernel), and then
//   - block formats mmq has: src1's columns are quantized in the order of
//     the grouped list (quantize_pairs_kernel) and mmq (mmq.cu) runs once per
//     (row tile, list tile), its tiles read from the list (MmqRoute);
//   - else the tiled tensor-core product (mul_mat_tile.cuh) runs once per
//     (row tile, list tile) of 64 columns, gathering its src1 and dst columns
//     through the pair list.
//   Each expert's weights are read once per row tile.
// The order of pairs inside an expert's list depends on atomics, but every
// dst column is computed by the same operations wherever it lands in a tile.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT_ID (with GGML_STANDIN_MMQ
// unset, all and off), the ctests model.logits.tiny_moe_f32.cuda_*; time with
// `perf -o MUL_MAT_ID` (scripts/gpu-check moe).
#include <cub/block/block_scan.cuh>

#include "diag/check.h"
#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/mmq.cuh"
#include "kernels/cuda/mul_mat.cuh"
#include "kernels/cuda/mul_mat_tile.cuh"

namespace standin::kernels::cuda {

namespace {

// Device scratch of the grouping, all int32.
struct Route {
    int * counts;   // [n_as] pairs per expert
    int * cursor;   // [n_as] fill positions
    int * offs;     // [n_as] first pair of each expert in `pairs`
    int * pairs;    // [P] pair q = t * n_used + e, grouped by expert
    int * tile_x;   // [max_tiles] expert of tile i
    int * tile_n0;  // [max_tiles] first column of tile i inside its expert
    int * n_tiles;  // [1] tiles in use
    int * n_live;   // [1] pairs with an id in range (listed in `pairs`)
};

__device__ __forceinline__ int32_t expert_of(const mm::IdArgs & p, int64_t q) {
    return *reinterpret_cast<const int32_t *>(p.ids + (q % p.n_used) * p.ids_nb0 + (q / p.n_used) * p.ids_nb1);
}

// The grouping, one block: the pairs counted per expert, the counts' prefix
// sums (an expert's first place in `pairs`) and the tile list, then the pairs
// placed. A column of a pair whose id is outside [0, n_as) is zeroed here
// and listed nowhere. The counters are global (any n_as), touched by this
// block alone (its barriers order them). As three kernels and a memset, with
// the scan on one thread, 2048 pairs over 32 experts (Q4_0, 1792 x 2048)
// took 482.7 us against 159.0 now (H100, results/h200/summary-92.txt, -93.txt).
constexpr int kRouteThreads = 1024;
__global__ void __launch_bounds__(kRouteThreads) route_kernel(mm::IdArgs p, int bn, Route r) {
    using Scan = cub::BlockScan<int, kRouteThreads>;
    __shared__ typename Scan::TempStorage scan_tmp;
    const int tid = int(threadIdx.x);
    const int64_t n_pairs = p.n_used * p.n_tok;
    for (int64_t x = tid; x < p.n_as; x += kRouteThreads) r.counts[x] = 0;
    __syncthreads();
    for (int64_t q = tid; q < n_pairs; q += kRouteThreads) {
        const int32_t x = expert_of(p, q);
        if (x >= 0 && x < p.n_as) {
            atomicAdd(&r.counts[x], 1);
        } else {
            float * d = reinterpret_cast<float *>(p.d + (q % p.n_used) * p.d_nb1 + (q / p.n_used) * p.d_nb2);
            for (int64_t m = 0; m < p.M; ++m) d[m] = 0.0f;
        }
    }
    __syncthreads();
    int pairs_before = 0, tiles_before = 0;
    for (int64_t x0 = 0; x0 < p.n_as; x0 += kRouteThreads) {
        const int64_t x = x0 + tid;
        const int cnt = x < p.n_as ? r.counts[x] : 0, tiles = (cnt + bn - 1) / bn;
        int off = 0, toff = 0, all_pairs = 0, all_tiles = 0;
        Scan(scan_tmp).ExclusiveSum(cnt, off, all_pairs);
        __syncthreads();  // scan_tmp is reused
        Scan(scan_tmp).ExclusiveSum(tiles, toff, all_tiles);
        __syncthreads();
        if (x < p.n_as) {
            r.offs[x] = r.cursor[x] = pairs_before + off;
            for (int i = 0; i < tiles; ++i) {
                r.tile_x[tiles_before + toff + i] = int(x);
                r.tile_n0[tiles_before + toff + i] = i * bn;
            }
        }
        pairs_before += all_pairs;
        tiles_before += all_tiles;
    }
    if (tid == 0) {
        *r.n_tiles = tiles_before;
        *r.n_live = pairs_before;
    }
    __syncthreads();
    for (int64_t q = tid; q < n_pairs; q += kRouteThreads) {
        const int32_t x = expert_of(p, q);
        if (x >= 0 && x < p.n_as) r.pairs[atomicAdd(&r.cursor[x], 1)] = int(q);
    }
}

// Where quantize_pairs_kernel reads src1 (K, ne11, n_tok), any float type.
struct PairCols {
    const char * b;
    int64_t      nb0, nb1, nb2, n_used, ne11;
    int          type;
    bool         f4;  // F32 with 16-byte aligned columns of dense values: 16-byte loads
};

// src1's columns in the order of the grouped list, quantized for mmq as
// quantize_act does (quantize_group8, bit for bit): column c is pair
// pairs[c]'s, src1 column (slot % ne11, token). 8 lanes per 32-group; the
// columns past the pairs with an id in range are not written (no tile reads
// them).
__global__ void quantize_pairs_kernel(PairCols s, Route r, mm::QuantOut out, uint32_t per_col) {
    pdl_wait();
    pdl_trigger();
    const uint32_t n_groups = uint32_t(*r.n_live) * per_col;
    const uint32_t sub = threadIdx.x & 7u, step = gridDim.x * blockDim.x / 8;
    // Whole warps iterate alike (the group's shuffles need all its lanes).
    for (uint32_t g0 = (blockIdx.x * blockDim.x + (threadIdx.x & ~31u)) / 8; g0 < n_groups; g0 += step) {
        const uint32_t g = g0 + (threadIdx.x & 31u) / 8;
        const bool live = g < n_groups;
        const uint32_t col = live ? g / per_col : 0u, k = live ? (g % per_col) * 32 + sub * 4 : 0u;
        float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (live) {
            const int64_t q = r.pairs[col];
            const char * src = s.b + (q % s.n_used % s.ne11) * s.nb1 + (q / s.n_used) * s.nb2 + int64_t(k) * s.nb0;
            if (s.f4) {
                const float4 v = *reinterpret_cast<const float4 *>(src);
                x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) x[j] = load_f(s.type, src + j * s.nb0);
            }
        }
        const size_t lin = size_t(col) * size_t(out.K) + k;
        mm::quantize_group8(x, live, sub, out.q + lin, out.ds + lin / 32);
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

// Groups the pairs by expert into `bn`-column tiles: the list and its
// counts in stream-ordered scratch (`mem`, for the caller to free after the
// kernels that read it). false: no scratch memory (logged).
bool group_pairs(const mm::IdArgs & p, int bn, Route & r, int64_t & max_tiles, void *& mem, cudaStream_t st) {
    const int64_t n_pairs = p.n_used * p.n_tok;
    max_tiles = (n_pairs + bn - 1) / bn + p.n_as;  // >= the sum of ceil(count / bn)
    const int64_t n_ints = 3 * p.n_as + n_pairs + 2 * max_tiles + 2;
    if (!scratch_alloc(&mem, size_t(n_ints) * sizeof(int), st)) {
        return false;
    }
    r.counts = static_cast<int *>(mem);
    r.cursor = r.counts + p.n_as;
    r.offs = r.cursor + p.n_as;
    r.pairs = r.offs + p.n_as;
    r.tile_x = r.pairs + n_pairs;
    r.tile_n0 = r.tile_x + max_tiles;
    r.n_tiles = r.tile_n0 + max_tiles;
    r.n_live = r.n_tiles + 1;
    route_kernel<<<1, kRouteThreads, 0, st>>>(p, bn, r);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

// The tiled float product over the grouped pairs (p.y: src1 staged by stage_y).
bool run_grouped(ggml_type t, const mm::IdArgs & p, cudaStream_t st) {
    Route r;
    int64_t max_tiles = 0;
    void * mem = nullptr;
    if (!group_pairs(p, mm::kBN, r, max_tiles, mem, st)) {
        return false;
    }
    launch_tiles(t, p, r, max_tiles, st);
    SI_CUDA_LAUNCH_CHECK();
    SI_CUDA_CHECK(cudaFreeAsync(mem, st));
    return true;
}

// mmq over the grouped pairs (the tile shape `c`): src1 quantized in the
// list's order into the stream's scratch, then one launch whose tiles read
// the list. out_of_memory: no scratch memory (logged).
Status run_mmq(rt::cuda::CudaStream & stream, ggml_type t, const plan::Choice & c, const mm::IdArgs & p,
               const ggml_tensor * b, cudaStream_t st) {
    Route r;
    int64_t max_tiles = 0;
    void * mem = nullptr;
    if (!group_pairs(p, 8 * c.nt, r, max_tiles, mem, st)) {
        return Status::out_of_memory;
    }
    const int64_t n_pairs = p.n_used * p.n_tok;
    mm::QuantizedY y = mm::reserve_y(stream, p.K, n_pairs, st);
    if (!y.ok) {
        SI_CUDA_CHECK(cudaFreeAsync(mem, st));
        return Status::out_of_memory;
    }
    PairCols s;
    s.b = static_cast<const char *>(b->data);
    s.nb0 = int64_t(b->nb[0]);
    s.nb1 = int64_t(b->nb[1]);
    s.nb2 = int64_t(b->nb[2]);
    s.n_used = p.n_used;
    s.ne11 = p.ne11;
    s.type = int(b->type);
    s.f4 = b->type == GGML_TYPE_F32 && b->nb[0] == 4 && uintptr_t(b->data) % 16 == 0 && b->nb[1] % 16 == 0 &&
           b->nb[2] % 16 == 0;
    const uint32_t per_col = uint32_t(p.K / 32);
    constexpr int kThreads = 256;
    launch(quantize_pairs_kernel, dim3(grid_for(n_pairs * int64_t(per_col) * 8, kThreads)), dim3(kThreads), 0, st,
           s, r, mm::QuantOut{y.q, y.ds, p.K}, per_col);
    SI_CUDA_LAUNCH_CHECK();

    mm::MmqArgs a{};
    a.a = p.a;
    a.a_nb1 = p.a_nb1;
    a.a_nb2 = p.a_nb2;
    a.q = y.q;
    a.ds = y.ds;
    a.d = p.d;
    a.d_nb1 = p.d_nb1;
    a.d_nb2 = p.d_nb2;
    a.K = p.K;
    a.M = p.M;
    a.N = 8 * c.nt;  // per tile; the list gives each expert's count
    a.ne12 = a.ne13 = a.r2 = a.r3 = 1;
    a.route = mm::MmqRoute{r.tile_x, r.tile_n0, r.n_tiles, r.counts, r.offs, r.pairs, p.n_used, max_tiles};
    const bool launched = mm::mmq_launch(t, c, a, st);
    SI_CUDA_LAUNCH_CHECK();
    mm::release(y, st);
    SI_CUDA_CHECK(cudaFreeAsync(mem, st));
    SI_ASSERT_MSG(launched, "the product plan chose mmq for experts of a type or shape it has no kernel for");
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
    const int64_t n_pairs = ids->ne[0] * ids->ne[1];
    const plan::Choice c = plan::choose_id(mm::problem_for_id(as, b, ids, stream.sm_count()), n_pairs);
    // Block-quantized experts on the integer mat-vecs, a pair per matrix
    // (mul_mat_vec_q8.cu), which read each expert's weights as stored.
    if (c.path == plan::Path::vec_int) {
        return mm::mul_mat_id_q8(stream, node);
    }
    cudaStream_t st = stream_of(stream);
    mm::IdArgs p;
    p.a = static_cast<const char *>(as->data);
    p.a_nb1 = int64_t(as->nb[1]);
    p.a_nb2 = int64_t(as->nb[2]);
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
    // (The quantizer's group indices are 32-bit: 2^31 groups, 64 GiB of
    // codes, is beyond any device; the tiled kernel would take it.)
    if (c.path == plan::Path::mmq && n_pairs * (p.K / 32) < (int64_t(1) << 31)) {
        return run_mmq(stream, as->type, c, p, b, st);
    }
    mm::Staged y = mm::stage_y(b, as->type, st);
    if (!y.ok) {
        return Status::out_of_memory;
    }
    p.y = y.y;
    p.y_nb1 = y.nb1;
    p.y_nb2 = y.nb2;
    if (c.path == plan::Path::vec_float) {
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
