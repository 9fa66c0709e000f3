// MUL_MAT for many src1 columns through cuBLAS (runtime/cuda/cublas_lib.h),
// the prompt-processing path: tensor-core GEMMs at the library's speed.
//   F16 / BF16 weights: used in place; src1 rounded to the weight type (as
//     ggml-cpu does) into dense columns; FP32 accumulation.
//   F32 weights: used in place, computed in f32 (no TF32: an F32 router's
//     expert picks must not move; mul_mat_tile.cuh).
//   Block-quantized 2-D weights: decoded to F16 in chunks of rows (at most
//     kChunkBytes of scratch at a time) with the same Part decoder as the
//     mat-vec path (integer-form formats: quants.h's run_to_f32), then an F16 GEMM against src1 rounded to ggml-cpu's
//     activation blocks (act_round.cuh), then to F16.
// Batches (dims 2, 3) become strided-batched GEMMs; broadcast weights (r2 > 1)
// are one GEMM over r2 neighbouring src1 matrices when they are contiguous.
// Anything else, or a failure (scratch memory, a cuBLAS error, each logged),
// answers false and the caller runs the tiled kernel over the whole dst.
//
// ggml's layout maps onto column-major GEMM as C(MxN) = A^T(MxK) * B(KxN):
// a weight row is a column of A (lda = row stride), a src1 row is a column of
// B, and dst rows are columns of C.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT (cases with n > 32);
// GGML_STANDIN_CUBLAS=0 runs the same cases on the tiled kernel.
#include <algorithm>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "diag/check.h"
#include "diag/config.h"
#include "diag/log.h"
#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/mul_mat.cuh"
#include "runtime/cuda/cublas_lib.h"

namespace standin::kernels::cuda::mm {

namespace {

constexpr size_t kChunkBytes = size_t(128) << 20;
constexpr int    kBlock = 256;

// Rows [0, rows) of a block-quantized matrix (row stride a_nb1 bytes) -> F16,
// K per row, dense. Each block of threads takes one span of one row (grid y:
// the rows, looped past the grid's limit), so a thread finds its place
// without dividing 64-bit indices (a subroutine of some 70 instructions,
// once per 8 or 16 values before). One thread per Part (8 values).
template <int T>
__global__ void dequant_f16_kernel(const char * a, int64_t a_nb1, __half * out, int64_t K, int64_t rows) {
    using P = dq::Part<T>;
    const uint32_t parts_per_row = uint32_t(K / P::kQKb) * uint32_t(P::kParts);  // dequant_launch: < 2^32
    const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= parts_per_row) return;
    const uint32_t ib = q / uint32_t(P::kParts);
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        float v[8];
        int pa, pb;
        P::get(reinterpret_cast<const uint8_t *>(a + r * a_nb1) + int64_t(ib) * P::kBytes, int(q % P::kParts), v, pa,
               pb);
        __half * o = out + r * K + int64_t(ib) * P::kQKb;
        __half2 * oa = reinterpret_cast<__half2 *>(o + pa);
        __half2 * ob = reinterpret_cast<__half2 *>(o + pb);
        oa[0] = __floats2half2_rn(v[0], v[1]);
        oa[1] = __floats2half2_rn(v[2], v[3]);
        ob[0] = __floats2half2_rn(v[4], v[5]);
        ob[1] = __floats2half2_rn(v[6], v[7]);
    }
}

// Integer-form formats: one thread per run of 16 (quants.h's run_to_f32).
// decode_run reads its block byte by byte, which from global memory was a
// load instruction per byte per thread, the lanes of a warp in different
// blocks: the block of threads first copies its span's blocks into shared
// memory with coalesced words, and the runs are decoded from there. 4096 x
// 14336 IQ4_XS decoded and multiplied at 128 / 512 columns: 187.7 / 227.2 us
// before, 144.0 / 186.0 after (Q4_0, decoded by Parts: 120.4 / 186.1; H100,
// results/h200/summary-96.txt).
template <class B> constexpr int kSpanBlocks = kBlock / (B::kElems / 16);  // quant blocks per block of threads
template <int T>
__global__ void __launch_bounds__(kBlock) dequant_run_f16_kernel(const char * a, int64_t a_nb1, __half * out,
                                                                int64_t K, int64_t rows) {
    using B = typename dq::IntForm<T>::B;
    constexpr int kRuns = B::kElems / 16;  // runs per block
    static_assert(kBlock % kRuns == 0, "a block of threads covers whole quant blocks");
    constexpr int kSpan = kSpanBlocks<B>;
    constexpr int kSpanBytes = kSpan * int(sizeof(B));
    __shared__ __align__(16) uint8_t span[kSpanBytes];
    const uint32_t blocks_per_row = uint32_t(K / B::kElems);  // dequant_launch: K / 16 < 2^32
    const uint32_t b0 = blockIdx.x * uint32_t(kSpan);
    const int nbytes = int(min(uint32_t(kSpan), blocks_per_row - b0)) * int(sizeof(B));
    const int t = int(threadIdx.x);
    const uint32_t q = b0 * uint32_t(kRuns) + uint32_t(t);  // this thread's run in the row
    const bool live = t < nbytes / int(sizeof(B)) * kRuns;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const uint8_t * src = reinterpret_cast<const uint8_t *>(a + r * a_nb1) + int64_t(b0) * int64_t(sizeof(B));
        // The widest words the span's start and length allow (uniform per block).
        const unsigned align = unsigned(reinterpret_cast<uintptr_t>(src)) | unsigned(nbytes);
        if (align % 4 == 0) {
            for (int i = t; i < nbytes / 4; i += kBlock) {
                reinterpret_cast<uint32_t *>(span)[i] = reinterpret_cast<const uint32_t *>(src)[i];
            }
        } else if (align % 2 == 0) {
            for (int i = t; i < nbytes / 2; i += kBlock) {
                reinterpret_cast<uint16_t *>(span)[i] = reinterpret_cast<const uint16_t *>(src)[i];
            }
        } else {
            for (int i = t; i < nbytes; i += kBlock) span[i] = src[i];
        }
        __syncthreads();
        if (live) {
            float v[16];
            quant::run_to_f32(reinterpret_cast<const B *>(span)[t / kRuns], t % kRuns, v);
            uint4 h[2];
            uint32_t * hw = reinterpret_cast<uint32_t *>(h);
#pragma unroll
            for (int l = 0; l < 8; ++l) {
                const __half2 x = __floats2half2_rn(v[2 * l], v[2 * l + 1]);
                hw[l] = *reinterpret_cast<const uint32_t *>(&x);
            }
            // 32 bytes at a multiple of 32 (K % 32 == 0, cudaMallocAsync's alignment).
            uint4 * o = reinterpret_cast<uint4 *>(out + r * K + 16 * int64_t(q));
            o[0] = h[0];
            o[1] = h[1];
        }
        __syncthreads();  // `span` is refilled for the next row
    }
}

bool dequant_launch(ggml_type t, const char * a, int64_t a_nb1, __half * out, int64_t K, int64_t rows,
                    cudaStream_t st) {
    // The kernels index within a row in 32 bits (K / 8 parts, K / 16 runs).
    SI_ASSERT_MSG(K / 8 < (int64_t(1) << 32), "a weight row too long for the F16 decode");
    return with_block_type(t, [&](auto ty) {
        constexpr int T = decltype(ty)::value;
        if constexpr (dq::kIntForm<T>) {
            using B = typename dq::IntForm<T>::B;
            const int64_t spans = (K / B::kElems + kSpanBlocks<B> - 1) / kSpanBlocks<B>;
            dequant_run_f16_kernel<T><<<dim3(unsigned(spans), grid_yz(rows)), kBlock, 0, st>>>(a, a_nb1, out, K, rows);
        } else {
            using P = dq::Part<T>;
            const int64_t parts = K / P::kQKb * P::kParts;
            dequant_f16_kernel<T><<<dim3(unsigned((parts + kBlock - 1) / kBlock), grid_yz(rows)), kBlock, 0, st>>>(
                a, a_nb1, out, K, rows);
        }
    });
}

bool is_float_type(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

// One GEMM call's operands (element strides; pointers to the first matrix).
struct Gemm {
    const void * A; cudaDataType at; int64_t lda, sa;
    const void * B; cudaDataType bt; int64_t ldb, sb;
    float *      C; int64_t ldc, sc;
    int64_t      M, N, K, batch;
    cublasComputeType_t compute;
};

bool run_gemm(cublasHandle_t h, const Gemm & g) {
    const float one = 1.0f, zero = 0.0f;
    const cublasStatus_t s = rt::cuda::blas::api()->gemm_strided_batched(
        h, CUBLAS_OP_T, CUBLAS_OP_N, int(g.M), int(g.N), int(g.K), &one, g.A, g.at, int(g.lda), g.sa, g.B, g.bt,
        int(g.ldb), g.sb, &zero, g.C, CUDA_R_32F, int(g.ldc), g.sc, int(g.batch), g.compute, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) {
        SI_LOG_WARN("cublasGemmStridedBatchedEx failed (status %d, M=%lld N=%lld K=%lld batch=%lld)", int(s),
                    (long long) g.M, (long long) g.N, (long long) g.K, (long long) g.batch);
        return false;
    }
    return true;
}

bool fits_int(int64_t v) { return v > 0 && v < (int64_t(1) << 31); }

} // namespace

bool launch_blas(const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * d, cudaStream_t st, int device) {
    if (!diag::config().cublas) {
        return false;
    }
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const bool quant = !is_float_type(a->type);
    const size_t es = ggml_type_size(a->type);
    // Layout conditions (else the tiled kernel, which takes any strides).
    if (!fits_int(K) || !fits_int(M) || !fits_int(N) || d->type != GGML_TYPE_F32 || d->nb[0] != 4 ||
        d->nb[1] % 4 != 0 || d->nb[2] % 4 != 0 || d->nb[3] % 4 != 0 || int64_t(d->nb[1] / 4) < M) {
        return false;
    }
    if (quant) {
        // Block types with a mat-vec decoder (mul_mat checked) all have a dequant_launch case.
        if (a->ne[2] != 1 || a->ne[3] != 1 || b->ne[2] != 1 || b->ne[3] != 1) {
            return false;
        }
    } else if (a->nb[0] != es || a->nb[1] % es != 0 || a->nb[2] % es != 0 || a->nb[3] % es != 0 ||
               int64_t(a->nb[1] / es) < K) {
        return false;
    }
    cublasHandle_t h = rt::cuda::blas::handle_for(device, st);
    if (h == nullptr) {
        return false;
    }
    keep_pool_memory();

    // src1 as dense columns of the GEMM's input type.
    const ggml_type bt = quant ? GGML_TYPE_F16 : a->type;
    const size_t bes = ggml_type_size(bt);
    const int64_t ldb = (K + 7) / 8 * 8;  // 16-byte aligned columns for the tensor-core kernels
    const int64_t cols = b->ne[1] * b->ne[2] * b->ne[3];
    void * yb = nullptr;
    if (!scratch_alloc(&yb, size_t(ldb * cols) * bes + 16, st)) {
        return false;  // logged; the tiled kernel needs less scratch
    }
    const int64_t n = ggml_nelements(b);
    const Shape bs = shape_of(b);
    const char * bd = static_cast<const char *>(b->data);
    const int group = quant::act_group(a->type);
    if (group != 0 && K % group == 0) {
        act_round<__half>(b, group, static_cast<__half *>(yb), ldb, st);
    } else if (bt == GGML_TYPE_F32) {
        dense_columns_kernel<float>
            <<<grid_for(n, kBlock), kBlock, 0, st>>>(bs, bd, static_cast<float *>(yb), ldb, GGML_TYPE_F32, n);
    } else if (bt == GGML_TYPE_F16) {
        dense_columns_kernel<__half>
            <<<grid_for(n, kBlock), kBlock, 0, st>>>(bs, bd, static_cast<__half *>(yb), ldb, GGML_TYPE_F32, n);
    } else {
        dense_columns_kernel<__nv_bfloat16>
            <<<grid_for(n, kBlock), kBlock, 0, st>>>(bs, bd, static_cast<__nv_bfloat16 *>(yb), ldb, GGML_TYPE_F32, n);
    }
    SI_CUDA_LAUNCH_CHECK();

    const cudaDataType ct = bt == GGML_TYPE_F32 ? CUDA_R_32F : bt == GGML_TYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
    const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    float * C = static_cast<float *>(d->data);
    const int64_t ldc = int64_t(d->nb[1] / 4);
    bool ok = true;

    if (quant) {
        // Chunks of rows, so the decoded copy stays within kChunkBytes.
        int64_t mc = std::max<int64_t>(256, int64_t(kChunkBytes / (size_t(K) * 2)) / 256 * 256);
        mc = std::min(mc, M);
        void * af = nullptr;
        if (!scratch_alloc(&af, size_t(mc * K) * 2, st)) {
            SI_CUDA_CHECK(cudaFreeAsync(yb, st));
            return false;
        }
        for (int64_t m0 = 0; m0 < M && ok; m0 += mc) {
            const int64_t rows = std::min(mc, M - m0);
            dequant_launch(a->type, static_cast<const char *>(a->data) + m0 * int64_t(a->nb[1]), int64_t(a->nb[1]),
                           static_cast<__half *>(af), K, rows, st);
            SI_CUDA_LAUNCH_CHECK();
            ok = run_gemm(h, Gemm{af, CUDA_R_16F, K, 0, yb, ct, ldb, 0, C + m0, ldc, 0, rows, N, K, 1, compute});
        }
        SI_CUDA_CHECK(cudaFreeAsync(af, st));
    } else {
        const int64_t lda = int64_t(a->nb[1] / es), sa = int64_t(a->nb[2] / es);
        const int64_t ne12 = b->ne[2], ne13 = b->ne[3], r2 = ne12 / a->ne[2], r3 = ne13 / a->ne[3];
        const int64_t sb = ldb * N, sc = int64_t(d->nb[2] / 4);
        for (int64_t i13 = 0; i13 < ne13 && ok; ++i13) {
            const char * A3 = static_cast<const char *>(a->data) + (i13 / r3) * int64_t(a->nb[3]);
            const char * B3 = static_cast<const char *>(yb) + size_t(i13 * ne12 * sb) * bes;
            float * C3 = C + i13 * int64_t(d->nb[3] / 4);
            if (r2 == 1) {
                ok = run_gemm(h, Gemm{A3, ct, lda, sa, B3, ct, ldb, sb, C3, ldc, sc, M, N, K, ne12, compute});
            } else if (sc == ldc * N) {
                // r2 src1 matrices share one weight matrix and sit side by side:
                // one GEMM with r2 * N columns per weight matrix.
                ok = run_gemm(h, Gemm{A3, ct, lda, sa, B3, ct, ldb, sb * r2, C3, ldc, sc * r2, M, N * r2, K,
                                      a->ne[2], compute});
            } else {
                for (int64_t i12 = 0; i12 < ne12 && ok; ++i12) {
                    ok = run_gemm(h, Gemm{A3 + (i12 / r2) * int64_t(a->nb[2]), ct, lda, 0,
                                          static_cast<const char *>(B3) + size_t(i12 * sb) * bes, ct, ldb, 0,
                                          C3 + i12 * sc, ldc, 0, M, N, K, 1, compute});
                }
            }
        }
    }
    SI_CUDA_CHECK(cudaFreeAsync(yb, st));
    return ok;
}

} // namespace standin::kernels::cuda::mm
