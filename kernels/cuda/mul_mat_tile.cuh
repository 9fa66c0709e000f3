// The tiled tensor-core product shared by the CUDA MUL_MAT (mul_mat.cu) and
// MUL_MAT_ID (mul_mat_id.cu) kernels: a block of 4 warps computes a 64 x 64
// tile of dst, walking K in steps of 32. Each step dequantizes (or converts) a
// 64 x 32 tile of weights (kernels/cuda/dequant.cuh, elem()) and a 32 x 64
// tile of src1 into shared memory as TF32 (integer-form weights: a run of 16
// per thread, quants.h's run_to_f32) and multiplies them on the tensor
// cores (WMMA m16n16k8, f32 accumulation); each warp owns a 32 x 32 quarter.
// TF32 keeps f32's range (no overflow for large activations, unlike F16) and
// represents F16 and BF16 weights, and src1 rounded to them, exactly; the
// rounding of dequantized block weights and of src1 (about 2^-11 relative)
// is far inside test-backend-ops' MUL_MAT tolerance (NMSE 5e-4). F32 weights
// keep f32 precision: each operand is split into a TF32 head and a TF32 tail
// and three products are summed (head x head, head x tail, tail x head; the
// tail x tail term is below f32's rounding). A mixture-of-experts router in
// F32 picks its experts from these sums, and a pick that a 2^-11 rounding
// flips changes the whole token (tiny-moe's logits, model_tests.cmake).
// Accumulators go through shared memory so the stores to dst are
// bounds-checked and coalesced.
//
// The caller names the tile's columns: cols.y[c] (src1 column, dense f32) and
// cols.d[c] (dst column) for c < 64, nullptr for a column outside the matrix.
// That indirection is what lets MUL_MAT_ID gather one expert's columns.
#pragma once

#include <mma.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dequant.cuh"

namespace standin::kernels::cuda::mm {

constexpr int kBM = 64, kBN = 64, kBK = 32;
constexpr int kTileThreads = 128;
constexpr int kLdAB = kBK + 4;  // padded rows: fewer bank conflicts, 16-byte multiple for WMMA
constexpr int kLdC = kBM + 4;
constexpr int kTileSmemFloats = (2 * kBM * kLdAB > kBN * kLdC) ? 2 * kBM * kLdAB : kBN * kLdC;
static_assert(kBM == kBN, "A and B tiles share the layout");

struct TileSmem {
    __align__(32) float f[kTileSmemFloats];
    const float * y[kBN];  // src1 column of tile column c, or nullptr
    float *       d[kBN];  // dst column of tile column c, or nullptr
};

// An unrounded f32 fragment `f` becomes its TF32 head, `tail` the TF32 of
// the rest (the element order of two fragments of one type is the same).
template <typename Frag>
__device__ __forceinline__ void split_tf32(Frag & f, Frag & tail) {
#pragma unroll
    for (int e = 0; e < f.num_elements; ++e) {
        const float head = nvcuda::wmma::__float_to_tf32(f.x[e]);
        tail.x[e] = nvcuda::wmma::__float_to_tf32(f.x[e] - head);
        f.x[e] = head;
    }
}

// dst rows [m0, m0 + 64) of the columns in sm.y / sm.d (filled, and followed
// by a barrier, by the caller). `a` points at weight row 0 of the matrix; rows
// are a_nb1 bytes apart. Ends with a barrier, so sm may be refilled at once.
template <int T>
__device__ __forceinline__ void tile_product(TileSmem & sm, const char * a, int64_t a_nb1, int64_t M, int64_t K,
                                             int64_t m0) {
    using namespace nvcuda;
    float * As = sm.f;                // [kBM][kLdAB]: weight row m, k
    float * Bs = sm.f + kBM * kLdAB;  // [kBN][kLdAB]: src1 column n, k
    float * Cs = sm.f;                // [kBN][kLdC] after the K loop: column n, row m
    // F32 weights: As and Bs hold the operands unrounded, split at the product.
    constexpr bool kSplit = T == GGML_TYPE_F32;
    const auto to_smem = [](float v) { return kSplit ? v : wmma::__float_to_tf32(v); };
    const int tid = int(threadIdx.x), warp = tid / 32;
    const int wm = warp / 2, wn = warp % 2;

    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int64_t k0 = 0; k0 < K; k0 += kBK) {
        if constexpr (dq::kIntForm<T>) {
            // Integer-form weights: thread t decodes run t % 2 of the step's
            // 32 values of row t / 2 (K is a multiple of 32).
            using B = typename dq::IntForm<T>::B;
            static_assert(kBM * kBK / 16 == kTileThreads, "one run per thread");
            const int r = tid / 2, kk = 16 * (tid % 2);
            const int64_t m = m0 + r, k = k0 + kk;
            float v[16];
            if (m < M && k < K) {
                const B & blk = reinterpret_cast<const B *>(a + m * a_nb1)[k / B::kElems];
                quant::run_to_f32(blk, int(k % B::kElems) / 16, v);
            } else {
#pragma unroll
                for (int l = 0; l < 16; ++l) v[l] = 0.0f;
            }
#pragma unroll
            for (int l = 0; l < 16; ++l) As[r * kLdAB + kk + l] = wmma::__float_to_tf32(v[l]);
        } else {
            // Thread t loads elements t, t + 128, ...: 32 consecutive threads
            // cover one row's 32 k values (coalesced; one block per row for the
            // 32-element formats).
#pragma unroll 4
            for (int e = tid; e < kBM * kBK; e += kTileThreads) {
                const int r = e / kBK, kk = e % kBK;
                const int64_t m = m0 + r, k = k0 + kk;
                float v = 0.0f;
                if (m < M && k < K) v = dq::elem(T, a + m * a_nb1, k);
                As[r * kLdAB + kk] = to_smem(v);
            }
        }
#pragma unroll 4
        for (int e = tid; e < kBN * kBK; e += kTileThreads) {
            const int c = e / kBK, kk = e % kBK;
            const int64_t k = k0 + kk;
            const float * y = sm.y[c];
            Bs[c * kLdAB + kk] = to_smem(y != nullptr && k < K ? y[k] : 0.0f);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kBK; kk += 8) {
            wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], As + (wm * 32 + i * 16) * kLdAB + kk, kLdAB);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], Bs + (wn * 32 + j * 16) * kLdAB + kk, kLdAB);
            if constexpr (kSplit) {
                decltype(fa) ta;
                decltype(fb) tb;
#pragma unroll
                for (int i = 0; i < 2; ++i) split_tf32(fa[i], ta[i]);
#pragma unroll
                for (int j = 0; j < 2; ++j) split_tf32(fb[j], tb[j]);
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int j = 0; j < 2; ++j) {
                        wmma::mma_sync(acc[i][j], ta[i], fb[j], acc[i][j]);
                        wmma::mma_sync(acc[i][j], fa[i], tb[j], acc[i][j]);
                    }
            }
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            wmma::store_matrix_sync(Cs + (wn * 32 + j * 16) * kLdC + wm * 32 + i * 16, acc[i][j], kLdC,
                                    wmma::mem_col_major);
        }
    __syncthreads();
    for (int e = tid; e < kBM * kBN; e += kTileThreads) {
        const int c = e / kBM, r = e % kBM;
        float * d = sm.d[c];
        if (d != nullptr && m0 + r < M) d[m0 + r] = Cs[c * kLdC + r];
    }
    __syncthreads();  // Cs aliases As/Bs, and the caller refills sm.y / sm.d next
}

} // namespace standin::kernels::cuda::mm
