// MUL_MAT on the CUDA device, as kernels/host/mul_mat.cpp:
//   dst[m, n, i2, i3] = sum_k src0[k, m, i2 / r2, i3 / r3] * src1[k, n, i2, i3]
// with r2 = ne12 / ne02, r3 = ne13 / ne03. src0: the types of weight_types.h
// (Note [CUDA weight types]) with rows dense in dim 0; src1: any float
// type and strides (staged to dense f32 columns when needed, mul_mat.cuh);
// dst: F32, dim 0 dense.
//
// The kernel comes from the table of mm_plan.h (Note [product plan]): the
// integer mat-vec (mul_mat_vec_q8.cu, _k.cu, _run.cu) or the integer
// tensor-core product (mmq.cu) for block-quantized weights, the warp-per-row mat-vec
// (mul_mat_vec.cu) for float weights and few columns, cuBLAS (mul_mat_blas.cu)
// for float weights and many, and where cuBLAS is absent or refuses, the
// tiled tensor-core product of mul_mat_tile.cuh (64 x 64 dst tiles, TF32
// WMMA), one block per (row tile, column tile, matrix).
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT; time with `perf`.
#include <atomic>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "diag/check.h"
#include "diag/config.h"
#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/mmq.cuh"
#include "kernels/cuda/mul_mat.cuh"
#include "kernels/cuda/mul_mat_tile.cuh"

namespace standin::kernels::cuda {

namespace mm {

namespace {

template <int T>
__global__ void __launch_bounds__(kTileThreads) mm_tile_kernel(Args p) {
    __shared__ TileSmem sm;
    const int64_t m0 = int64_t(blockIdx.x) * kBM;
    // z: the (i12, i13) matrix; y: the column tile. Both loop when the grid
    // is capped at its y/z limit.
    for (int64_t zn = blockIdx.z * int64_t(gridDim.y) + blockIdx.y; zn < p.ne12 * p.ne13 * p.n_tiles;
         zn += int64_t(gridDim.z) * gridDim.y) {
        const int64_t z = zn / p.n_tiles, n0 = (zn % p.n_tiles) * kBN;
        const int64_t i12 = z % p.ne12, i13 = z / p.ne12;
        if (threadIdx.x < kBN) {
            const int64_t n = n0 + threadIdx.x;
            const bool in = n < p.N;
            sm.y[threadIdx.x] = in ? reinterpret_cast<const float *>(p.y + n * p.y_nb1 + i12 * p.y_nb2 + i13 * p.y_nb3)
                                   : nullptr;
            sm.d[threadIdx.x] = in ? reinterpret_cast<float *>(p.d + n * p.d_nb1 + i12 * p.d_nb2 + i13 * p.d_nb3)
                                   : nullptr;
        }
        __syncthreads();
        tile_product<T>(sm, p.a + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3, p.a_nb1, p.M, p.K, m0);
    }
}

template <int T> void launch_tile_t(const Args & p, cudaStream_t st) {
    Args q = p;
    q.n_tiles = (p.N + kBN - 1) / kBN;
    const dim3 grid(unsigned((p.M + kBM - 1) / kBM), grid_yz(q.n_tiles), grid_yz(p.ne12 * p.ne13));
    mm_tile_kernel<T><<<grid, kTileThreads, 0, st>>>(q);
}

bool launch_tile(ggml_type t, const Args & p, cudaStream_t st) {
    return with_weight_type(t, [&](auto ty) { launch_tile_t<decltype(ty)::value>(p, st); });
}

// --- src1 staging ------------------------------------------------------------------

constexpr int kStageBlock = 256;

bool y_usable(const ggml_tensor * b) {
    return b->type == GGML_TYPE_F32 && b->nb[0] == sizeof(float) && aligned_to(b, 16);
}

} // namespace

// Stream-ordered scratch comes from the device's default memory pool. By
// default the pool hands freed memory back to the driver at every stream
// synchronisation, so each graph would map it again; keep up to this much
// cached instead (once per device).
constexpr uint64_t kPoolKeepBytes = uint64_t(1) << 30;

void keep_pool_memory() {
    static std::atomic<uint64_t> done{0};
    once_per_device(done, [](int dev) {
        cudaMemPool_t pool;
        SI_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
        uint64_t keep = kPoolKeepBytes;
        SI_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    });
}

Staged stage_y(const ggml_tensor * b, ggml_type weight_type, cudaStream_t st) {
    // Under F16/BF16 weights src1 is rounded to the weight type, and under
    // block-quantized weights to ggml-cpu's activation blocks (act_round.cuh),
    // as ggml-cpu forms its products.
    const ggml_type round_to =
        (weight_type == GGML_TYPE_F16 || weight_type == GGML_TYPE_BF16) ? weight_type : GGML_TYPE_F32;
    const int group = quant::act_group(weight_type);
    Staged s;
    if (round_to == GGML_TYPE_F32 && group == 0 && y_usable(b)) {
        s.y = static_cast<const char *>(b->data);
        s.nb1 = int64_t(b->nb[1]);
        s.nb2 = int64_t(b->nb[2]);
        s.nb3 = int64_t(b->nb[3]);
        return s;
    }
    const int64_t kp = (b->ne[0] + 3) / 4 * 4;  // 16-byte aligned columns
    const int64_t cols = b->ne[1] * b->ne[2] * b->ne[3];
    keep_pool_memory();
    if (!scratch_alloc(&s.scratch, size_t(kp * cols) * sizeof(float) + 16, st)) {
        s.ok = false;
        return s;
    }
    const int64_t n = ggml_nelements(b);
    if (group != 0 && b->ne[0] % group == 0) {
        act_round<float>(b, group, static_cast<float *>(s.scratch), kp, st);
        SI_CUDA_LAUNCH_CHECK();
    } else if (n > 0) {
        dense_columns_kernel<float><<<grid_for(n, kStageBlock), kStageBlock, 0, st>>>(
            shape_of(b), static_cast<const char *>(b->data), static_cast<float *>(s.scratch), kp, int(round_to), n);
        SI_CUDA_LAUNCH_CHECK();
    }
    s.y = static_cast<const char *>(s.scratch);
    s.nb1 = kp * int64_t(sizeof(float));
    s.nb2 = s.nb1 * b->ne[1];
    s.nb3 = s.nb2 * b->ne[2];
    return s;
}

void release(Staged & s, cudaStream_t st) {
    if (s.scratch != nullptr) {
        SI_CUDA_CHECK(cudaFreeAsync(s.scratch, st));
        s.scratch = nullptr;
    }
}

QuantizedY reserve_y(rt::cuda::CudaStream & stream, int64_t K, int64_t cols, cudaStream_t st) {
    // q_bytes is a multiple of 32 (K % 32 == 0 on every integer path), so ds is 16-byte aligned.
    const size_t q_bytes = size_t(K * cols), bytes = q_bytes + size_t(cols * (K / 32)) * sizeof(float2);
    QuantizedY y;
    void * mem = stream.scratch(bytes);
    if (mem == nullptr) {
        keep_pool_memory();
        if (!scratch_alloc(&mem, bytes, st)) return y;
        y.pooled = mem;
    } else {
        y.held = bytes;
    }
    y.q = static_cast<int8_t *>(mem);
    y.ds = reinterpret_cast<float2 *>(y.q + q_bytes);
    y.ok = true;
    return y;
}

QuantizedY quantize_y(rt::cuda::CudaStream & stream, const ggml_tensor * b, cudaStream_t st) {
    QuantizedY y = reserve_y(stream, b->ne[0], ggml_nrows(b), st);
    if (!y.ok) return y;
    quantize_act(b, y.q, y.ds, st);
    SI_CUDA_LAUNCH_CHECK();
    return y;
}

void release(QuantizedY & y, cudaStream_t st) {
    if (y.pooled != nullptr) {
        SI_CUDA_CHECK(cudaFreeAsync(y.pooled, st));
        y.pooled = nullptr;
    }
}

namespace {

// mmq copies chunks of rows with 16-byte cp.async (Q6_K: 4-byte).
bool mmq_rows_aligned(const ggml_tensor * a) {
    return aligned_to(a, a->type == GGML_TYPE_Q6_K ? 4 : 16) && a->ne[1] <= int64_t(INT32_MAX);
}

} // namespace

plan::Problem problem_for(const ggml_tensor * a, const ggml_tensor * b, int sms) {
    const diag::Config & cfg = diag::config();
    plan::Problem p;
    p.type = a->type;
    p.K = a->ne[0];
    p.M = a->ne[1];
    p.N = b->ne[1];
    p.matrices = b->ne[2] * b->ne[3];
    p.rows_aligned = mmq_rows_aligned(a);
    p.vec_int_ok = q8_applies(a, b);
    p.blas_ok = cfg.cublas;
    p.sms = sms;
    p.mmq_mode = cfg.mmq == diag::Config::Mmq::off ? 1 : cfg.mmq == diag::Config::Mmq::all ? 2 : 0;
    return p;
}

plan::Problem problem_for_id(const ggml_tensor * as, const ggml_tensor * b, const ggml_tensor * ids, int sms) {
    plan::Problem p = problem_for(as, b, sms);
    const int64_t pairs = ids->ne[0] * ids->ne[1];
    p.N = (pairs + as->ne[2] - 1) / as->ne[2];
    p.matrices = as->ne[2];
    p.vec_int_ok = q8_id_applies(as, b, ids);
    return p;
}

Status mul_mat_mmq(rt::cuda::CudaStream & stream, ggml_tensor * node, const plan::Choice & c, const ggml_tensor * add) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    cudaStream_t st = stream.begin_launch();
    QuantizedY y = quantize_y(stream, b, st);
    if (!y.ok) return Status::out_of_memory;
    MmqArgs p;
    fill_common(p, a, b, node);
    p.early = weights_fixed(a);
    p.q = y.q;
    p.ds = y.ds;
    if (add != nullptr) {
        const ggml_tensor * other = add->src[0] == node ? add->src[1] : add->src[0];
        p.add = RowAdd{static_cast<const char *>(other->data), static_cast<char *>(add->data), int64_t(other->nb[1]),
                       int64_t(add->nb[1])};
    }
    const bool launched = mmq_launch(a->type, c, p, st);
    SI_CUDA_LAUNCH_CHECK();
    release(y, st);
    SI_ASSERT_MSG(launched, "the product plan chose mmq for a type or shape it has no kernel for");
    return true;
}

} // namespace mm

Status mul_mat(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    if (!mm::vec_type_ok(a->type) || node->type != GGML_TYPE_F32 || a->ne[2] <= 0 || a->ne[3] <= 0) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    if (ggml_nelements(node) == 0) {
        return true;
    }
    auto & cs = stream;
    const plan::Problem problem = mm::problem_for(a, b, cs.sm_count());
    const plan::Choice c = plan::choose(problem);
    cudaStream_t st = cs.begin_launch();
    switch (c.path) {
        case plan::Path::vec_int: return mm::mul_mat_q8_group(cs, &node, 1);
        case plan::Path::mmq:     return mm::mul_mat_mmq(cs, node, c);
        case plan::Path::blas:
            if (mm::launch_blas(a, b, node, st, cs.device())) return true;
            // cuBLAS refused (logged where it matters): mmq where it can, else the tiled kernel.
            if (plan::mmq_allowed(problem)) {
                return mm::mul_mat_mmq(cs, node, plan::mmq_choice(problem));
            }
            break;
        case plan::Path::vec_float:
        case plan::Path::tile:
            break;
    }
    mm::Staged y = mm::stage_y(b, a->type, st);
    if (!y.ok) {
        return Status::out_of_memory;
    }

    mm::Args p;
    mm::fill_common(p, a, b, node);
    p.y = y.y;
    p.y_nb1 = y.nb1;
    p.y_nb2 = y.nb2;
    p.y_nb3 = y.nb3;
    p.a_vec = p.K % 8 == 0 && aligned_to(a, 16);

    if (c.path == plan::Path::vec_float) {  // else the tiled kernel: any count, any weight type
        mm::launch_vec(a->type, p, st);
    } else {
        mm::launch_tile(a->type, p, st);
    }
    SI_CUDA_LAUNCH_CHECK();
    mm::release(y, st);
    return true;
}

} // namespace standin::kernels::cuda
