// OUT_PROD on the CUDA device, as kernels/host/out_prod.cpp:
//   dst[i0, i1, i2, i3] = sum_k src0[i0, k, i2 / (ne2/ne02), i3 / (ne3/ne03)] * src1[i1, k, i2, i3]
// src0 F32 is read in place; any other type quants.h decodes (F16, BF16,
// block types) is first decoded into dense F32 scratch, one thread per block
// (through quant::to_f32_row, the one definition of every format). src1 F32
// with any strides, dst F32 with rows contiguous.
//
// The product is a tiled GEMM per slice (i2, i3): a block of 256 threads
// computes a 64 x 64 tile of dst (thread: 4 x 4 elements, i0 fastest so the
// stores coalesce), staging 16 k-steps of src0 and src1 in shared memory.
// Each element is summed over k in order, in f32 (K == 0 leaves zeros).
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o OUT_PROD
#include "diag/check.h"

#include "kernels/common/quants.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kTile = 64;   // dst tile edge (i0 and i1)
constexpr int kStep = 16;   // k per shared-memory stage
constexpr int kThreads = 256;
constexpr int kPer = kTile / 16;  // elements per thread along each tile edge

struct OpArgs {
    const char * a; int64_t a_nb1, a_nb2, a_nb3;  // F32 rows
    const char * b; int64_t b_nb0, b_nb1, b_nb2, b_nb3;
    char * d; int64_t d_nb1, d_nb2, d_nb3;
    int64_t M, N, K, ne2, ne3, dps2, dps3;
};

__global__ void __launch_bounds__(kThreads) out_prod_kernel(OpArgs p) {
    __shared__ float as[kStep][kTile];
    __shared__ float bs[kStep][kTile];
    const int tx = int(threadIdx.x % 16), ty = int(threadIdx.x / 16);
    const int64_t n_slices = p.ne2 * p.ne3, tiles_n = (p.N + kTile - 1) / kTile;
    for (int64_t yz = blockIdx.y + int64_t(gridDim.y) * blockIdx.z; yz < n_slices * tiles_n;
         yz += int64_t(gridDim.y) * gridDim.z) {
        const int64_t slice = yz / tiles_n, n0 = (yz % tiles_n) * kTile;
        const int64_t i2 = slice % p.ne2, i3 = slice / p.ne2;
        const char * abase = p.a + (i2 / p.dps2) * p.a_nb2 + (i3 / p.dps3) * p.a_nb3;
        const char * bbase = p.b + i2 * p.b_nb2 + i3 * p.b_nb3;
        for (int64_t m0 = int64_t(blockIdx.x) * kTile; m0 < p.M; m0 += int64_t(gridDim.x) * kTile) {
            float acc[kPer][kPer] = {};
            for (int64_t k0 = 0; k0 < p.K; k0 += kStep) {
                for (int e = int(threadIdx.x); e < kStep * kTile; e += kThreads) {
                    const int kk = e / kTile, j = e % kTile;
                    const int64_t k = k0 + kk, m = m0 + j, n = n0 + j;
                    as[kk][j] = k < p.K && m < p.M ? reinterpret_cast<const float *>(abase + k * p.a_nb1)[m] : 0.0f;
                    bs[kk][j] = k < p.K && n < p.N
                                    ? *reinterpret_cast<const float *>(bbase + n * p.b_nb0 + k * p.b_nb1)
                                    : 0.0f;
                }
                __syncthreads();
#pragma unroll
                for (int kk = 0; kk < kStep; ++kk) {
                    float av[kPer], bv[kPer];
#pragma unroll
                    for (int r = 0; r < kPer; ++r) {
                        av[r] = as[kk][tx + 16 * r];
                        bv[r] = bs[kk][ty + 16 * r];
                    }
#pragma unroll
                    for (int c = 0; c < kPer; ++c) {
#pragma unroll
                        for (int r = 0; r < kPer; ++r) acc[c][r] = fmaf(av[r], bv[c], acc[c][r]);
                    }
                }
                __syncthreads();
            }
            char * dbase = p.d + i2 * p.d_nb2 + i3 * p.d_nb3;
#pragma unroll
            for (int c = 0; c < kPer; ++c) {
                const int64_t n = n0 + ty + 16 * c;
                if (n >= p.N) continue;
                float * drow = reinterpret_cast<float *>(dbase + n * p.d_nb1);
#pragma unroll
                for (int r = 0; r < kPer; ++r) {
                    const int64_t m = m0 + tx + 16 * r;
                    if (m < p.M) drow[m] = acc[c][r];
                }
            }
        }
    }
}

// src0 (any type quants.h decodes, rows contiguous) -> dense F32, one thread
// per block of a row.
__global__ void decode_kernel(Shape s, const char * src, float * out, int64_t qk, int64_t n_units) {
    const int64_t per_row = s.ne[0] / qk;
    const size_t  bsz = size_t(quant::block_bytes(ggml_type(s.type)));
    for (int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; u < n_units; u += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = u / per_row, ib = u % per_row;
        int64_t i1, i2, i3;
        split_row(s, r, i1, i2, i3);
        const char * blk = row_at(src, s, i1, i2, i3) + ib * int64_t(bsz);
        quant::to_f32_row(ggml_type(s.type), blk, out + r * s.ne[0] + ib * qk, qk);
    }
}

} // namespace

Status out_prod(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    if (b->type != GGML_TYPE_F32 || node->type != GGML_TYPE_F32 || !quant::can_decode(a->type)) {
        return false;  // the support predicate (op_rows_train.cpp) refuses these
    }
    OpArgs p{};
    p.M = node->ne[0]; p.N = node->ne[1]; p.K = a->ne[1]; p.ne2 = node->ne[2]; p.ne3 = node->ne[3];
    p.dps2 = p.ne2 / a->ne[2]; p.dps3 = p.ne3 / a->ne[3];
    p.b = static_cast<const char *>(b->data);
    p.b_nb0 = int64_t(b->nb[0]); p.b_nb1 = int64_t(b->nb[1]); p.b_nb2 = int64_t(b->nb[2]); p.b_nb3 = int64_t(b->nb[3]);
    p.d = static_cast<char *>(node->data);
    p.d_nb1 = int64_t(node->nb[1]); p.d_nb2 = int64_t(node->nb[2]); p.d_nb3 = int64_t(node->nb[3]);
    if (ggml_nelements(node) == 0) {
        return true;
    }
    cudaStream_t st = stream_of(stream);
    void * scratch = nullptr;
    if (a->type == GGML_TYPE_F32) {
        p.a = static_cast<const char *>(a->data);
        p.a_nb1 = int64_t(a->nb[1]); p.a_nb2 = int64_t(a->nb[2]); p.a_nb3 = int64_t(a->nb[3]);
    } else {
        const int64_t qk = quant::block_elems(a->type);
        const int64_t n = ggml_nelements(a);
        if (!scratch_alloc(&scratch, size_t(n) * sizeof(float), st)) {
            return Status::out_of_memory;
        }
        decode_kernel<<<grid_for(n / qk, kThreads), kThreads, 0, st>>>(shape_of(a), static_cast<const char *>(a->data),
                                                                       static_cast<float *>(scratch), qk, n / qk);
        SI_CUDA_LAUNCH_CHECK();
        p.a = static_cast<const char *>(scratch);
        p.a_nb1 = p.M * int64_t(sizeof(float)); p.a_nb2 = p.a_nb1 * p.K; p.a_nb3 = p.a_nb2 * a->ne[2];
    }
    const int64_t tiles_m = (p.M + kTile - 1) / kTile;
    const int64_t yz = p.ne2 * p.ne3 * ((p.N + kTile - 1) / kTile);
    const dim3 grid(unsigned(tiles_m < limits::kGridX ? tiles_m : limits::kGridX), grid_yz(yz),
                    grid_yz((yz + kMaxGridYZ - 1) / kMaxGridYZ));
    out_prod_kernel<<<grid, kThreads, 0, st>>>(p);
    SI_CUDA_LAUNCH_CHECK();
    if (scratch != nullptr) {
        SI_CUDA_CHECK(cudaFreeAsync(scratch, st));
    }
    return true;
}

} // namespace standin::kernels::cuda
