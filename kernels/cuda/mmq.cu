// MUL_MAT with block-quantized weights on the int8 tensor cores, for any
// number of src1 columns (Note [product plan] in mm_plan.h says when):
//   dst[m, n] = sum_k w[k, m] * x[k, n],  w = s * q + mn per sub-block,
//   x quantized to int8 per 32 values first (quantize_act / quantize_act_k),
// the integer sums of every 32-element sub-block by mma.m16n8k32.s8 (Q3_K,
// Q6_K, IQ2_XS, IQ2_S: two m16n8k16, one per 16-element scale), then, in
// float,
//   acc += s * da * sum(q * qa) + mn * da * sum(qa)     (mmq_formats.cuh)
// (Q2_K, whose minimum changes every 16 elements: a second m16n8k32 of the
// minimum codes, acc += da * (d * sum(sc q * qa) - dmin * sum(m * qa))).
//
// Block tile: 64 * mw weight rows by 8 * nt columns; 4 warps, each 16 * mw
// rows by all the tile's columns. K advances one chunk at a time (256
// elements; 512 where a super-block is not whole 4-byte words) through a
// cp.async pipeline of kStages stages holding the chunk's raw weight bytes,
// as stored (no repacking: any ggml buffer works), and its activation codes
// and scales. A lane builds its A fragments
// straight from the raw bytes (mmq_formats.cuh) and reads B fragments from
// the staged codes with ldmatrix, two n-tiles at a time; row strides are
// padded so the 8 rows of a fragment fall in distinct bank groups.
//
// Split K: when the tiles alone would leave the GPU idle, a cluster of
// `split` blocks shares one tile, each taking a contiguous range of chunks;
// they meet in distributed shared memory and each block sums a slice of rows
// over all of them, in rank order (deterministic), and writes it.
//
// Epilogue: dst, and for a fused residual ADD (RowAdd) also dst + src.
//
// MUL_MAT_ID (MmqRoute): grid z walks a tile list the device made from the
// expert ids (mul_mat_id.cu); a tile's weights are its expert's, its
// activation columns a run of the list-ordered quantized src1, and each
// column's dst is its pair's. Only the block's start and the epilogue differ.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT (every type, n up to
// 512), the fusion cases, the logits ctests; time with `perf -o MUL_MAT`.
#include <cooperative_groups.h>

#include <atomic>

#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mmq.cuh"
#include "kernels/cuda/mmq_formats.cuh"
#include "kernels/cuda/weight_types.h"

namespace standin::kernels::cuda::mm {

namespace {

namespace cg = cooperative_groups;
using namespace mmq;

constexpr int kWarps = 4, kThreads = 32 * kWarps;

__device__ __forceinline__ void mma_k32(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_k16(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(b0));
}

// c += a * b on the TF32 tensor cores (m16n8k8, float accumulators in the
// layout of the integer products' sums).
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

// The B fragments (activation codes, k32 x n8) of NT n-tiles of one
// sub-block: `q` is this lane's ldmatrix row (column 8 * (lane / 16 % 2) +
// lane % 8 of the tile, bytes 16 * (lane / 8 % 2) on of the sub-block), so
// one ldmatrix of four 8x8 matrices gives b0 and b1 of two n-tiles.
template <int NT> __device__ __forceinline__ void b_fragments(const uint8_t * q, int stride, uint32_t (&b)[NT][2]) {
    if constexpr (NT == 1) {
        uint32_t r[2];
        ldmatrix_x2(r, q);
        b[0][0] = r[0];
        b[0][1] = r[1];
    } else {
#pragma unroll
        for (int p = 0; p < NT / 2; ++p) {
            uint32_t r[4];
            ldmatrix_x4(r, q + p * 16 * stride);
            b[2 * p][0] = r[0];
            b[2 * p][1] = r[1];
            b[2 * p + 1][0] = r[2];
            b[2 * p + 1][1] = r[3];
        }
    }
}

// Shared-memory layout of one pipeline stage of a configuration.
template <int T, int NT, int MW> struct Stage {
    static constexpr int BM = kWarps * 16 * MW, BN = 8 * NT;
    static constexpr int kCE = chunk_elems<T>(), kCB = chunk_bytes<T>(), kSubs = kCE / 32;
    static constexpr int kPiece = kCB % 16 == 0 ? 16 : 4;  // Q6_K, IQ4_XS, MXFP4 chunks: whole words only
    static constexpr int kWStride = padded_stride(kCB);
    static constexpr int kQStride = padded_stride(kCE);
    // ds is stored by sub-block, then column: one 16-byte load gives a lane
    // the scales of its two columns, 4 lanes of a quad read 4 distinct words.
    static constexpr int kStageW = BM * kWStride, kStageQ = BN * kQStride, kStageDs = BN * kSubs * 8;
    static constexpr int kStage = kStageW + kStageQ + kStageDs;
    static_assert(kCB % kPiece == 0 && kStageW % 16 == 0 && kStageQ % 16 == 0, "16-byte aligned stage parts");
};

// ... and of the whole pipeline, whose memory the cluster's reduction reuses.
template <int T, int NT, int MW, int kStages> struct Tile : Stage<T, NT, MW> {
    using S = Stage<T, NT, MW>;
    static constexpr int kPipe = kStages * S::kStage, kReduce = S::BM * S::BN * 4;
    static constexpr int kSmem = kPipe > kReduce ? kPipe : kReduce;
};

// Blocks per SM each shape is built for (registers and shared memory): ncu
// on the H200 showed narrow tiles latency-bound at 3 blocks per SM (168
// registers, 16% occupancy, 20% of DRAM bandwidth at 2 columns). Tiles of 32
// columns run 2 blocks of 5 stages (Q4_0) better than 4 of 2: 54.9 against
// 61.0 us at 32 columns, 51.9 against 56.2 at 24 (4096 x 14336, with the
// sub-block loop unrolled twice; results/h200/summary-63.txt).
template <int NT> constexpr int kMinBlocks = NT <= 2 ? 6 : 2;

// One tile: weight rows [m0, m0 + BM) of matrix (i12, i13), columns
// [n0, n0 + BN), chunks [c0, c1).
template <int T, int NT, int MW, int kStages>
__global__ void __launch_bounds__(kThreads, kMinBlocks<NT>) mmq_kernel(const __grid_constant__ MmqArgs p) {
    using F = Fmt<T>;
    using L = Tile<T, NT, MW, kStages>;
    // The chunk mm_plan.h's mmq_chunk gives the plan (K % chunk).
    static_assert(F::kQK == 32 ? F::kChunkBlocks == 8 : F::kChunkBlocks == (F::kBytes % 4 == 0 ? 1 : 2), "chunk");
    // The minimum term on TF32 tensor cores (below, at the chunk's start).
    constexpr bool kMinByTf32 = F::kMin && !F::kSplit16 && L::kSubs == 8;
    extern __shared__ __align__(16) uint8_t smem[];

    const int tid = int(threadIdx.x), lane = tid & 31, warp = tid / 32;
    const int g = lane >> 2, t = lane & 3;
    // The tile column and 16-byte half of a sub-block this lane addresses for ldmatrix (b_fragments).
    const int b_row = (NT == 1 ? 0 : (lane >> 4) & 1) * 8 + (lane & 7), b_half = 16 * ((lane >> 3) & 1);
    const int split = int(p.split);
    // MUL_MAT_ID: z walks the device's tile list, one column tile each (MmqRoute).
    const bool routed = p.route.tile_x != nullptr;
    const int64_t n_ct = routed ? 1 : (p.N + L::BN - 1) / L::BN;
    const int64_t bx = blockIdx.x;
    const int rank = int(bx % split);
    const int64_t ct = (bx / split) % n_ct, rt = bx / split / n_ct;
    const int64_t m0 = rt * L::BM;
    const int n_chunks = int(p.K / L::kCE);
    const int c0 = n_chunks * rank / split, c1 = n_chunks * (rank + 1) / split;
    int64_t n_z = p.ne12 * p.ne13;
    if (routed) {
        pdl_wait();  // the list is the grouping kernels' output: no weight fetched before it
        n_z = *p.route.n_tiles < p.route.max_tiles ? *p.route.n_tiles : p.route.max_tiles;
    }

    for (int64_t z = blockIdx.z; z < n_z; z += gridDim.z) {
        // The tile's weights, its first activation column, its columns (N
        // of the matrix or the expert, from n0) and, for MUL_MAT, where
        // column 0 of its dst is.
        const uint8_t * wbase;
        int64_t col0, N = p.N, n0 = ct * L::BN;
        char * dst = nullptr;
        if (routed) {
            const int x = p.route.tile_x[z];
            wbase = reinterpret_cast<const uint8_t *>(p.a + int64_t(x) * p.a_nb2);
            col0 = p.route.offs[x];
            N = p.route.counts[x];
            n0 = p.route.tile_n0[z];
        } else {
            const int64_t i12 = z % p.ne12, i13 = z / p.ne12;
            wbase = reinterpret_cast<const uint8_t *>(p.a + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3);
            col0 = (i12 + i13 * p.ne12) * p.N;
            dst = p.d + i12 * p.d_nb2 + i13 * p.d_nb3;
        }

        // Each thread copies the same pieces of every chunk: weight rows
        // tid / kTpr + j * kWRows (rows past M zero-filled, never stored),
        // pieces tid % kTpr, + kTpr, ...; activation column tid / kQPieces + j *
        // kQCols, piece tid % kQPieces; and the scales (sub-block, column) of
        // index i = tid + 128 j, staged at i (sub-block-major). Where they
        // come from is worked out once here, as offsets from the tile's
        // first row and column, so a chunk costs one add per copy (the
        // addresses had been over a third of the kernel's instructions).
        // At least 32 bytes of a row per group of lanes: neighbouring lanes'
        // pieces then fill whole 32-byte sectors of L2 (with 128-row tiles
        // each lane had copied a row of its own, one piece per row and
        // request). With the minimum on TF32 and the 48-column tiles
        // (mm_plan.h), 4096 x 14336 on the H100, us, before -> after
        // (results/h200/summary-88.txt): Q4_0 96 columns 123.3 -> 104.0, 512
        // 323.3 -> 314.0; Q8_0 96 142.9 -> 123.4; Q4_K 96 163.8 -> 119.9, 512
        // 442.1 -> 371.4; Q6_K 512 634.6 -> 491.8 (ggml-cuda 85.2, 310.3,
        // 91.6, 93.4, 348.1, 425.7).
        constexpr int kTprMin = 32 / L::kPiece;
        constexpr int kTpr = kThreads / L::BM > kTprMin ? kThreads / L::BM : kTprMin;
        constexpr int kWRows = kThreads / kTpr, kWPasses = L::BM / kWRows;
        constexpr int kWPieces = L::kCB / L::kPiece, kWIters = (kWPieces + kTpr - 1) / kTpr;
        constexpr int kQPieces = L::kCE / 16, kQCols = kThreads / kQPieces, kQIters = L::BN / kQCols;
        constexpr int kDIters = (L::BN * L::kSubs + kThreads - 1) / kThreads;
        static_assert(kThreads % kQPieces == 0 && L::BN % kQCols == 0, "whole columns per pass");
        static_assert(kWPasses * kWRows == L::BM, "whole row passes");
        const int w_row = tid / kTpr;
        const int64_t w_pass = kWRows * p.a_nb1;
        const uint8_t * w_src = wbase + (m0 + w_row < p.M ? m0 + w_row : 0) * p.a_nb1 + (tid % kTpr) * L::kPiece;
        uint32_t w_in = 0;
#pragma unroll
        for (int j = 0; j < kWPasses; ++j) w_in |= uint32_t(m0 + w_row + j * kWRows < p.M) << j;
        // Activation column tid / kQPieces + j * kQCols of the tile starts
        // j * kQCols * K bytes after column tid / kQPieces. The scales of
        // index i = tid + 128 j are those of column i % BN, sub-block i / BN:
        // where 128 is a multiple of BN, column tid % BN and sub-block
        // tid / BN + j * 128 / BN (constant offsets); else offsets per j.
        constexpr bool kDOneCol = kThreads % L::BN == 0;
        const int8_t * q_src = p.q + (col0 + n0 + tid / kQPieces) * p.K + (tid % kQPieces) * 16;
        const float2 * d_src =
            p.ds + (col0 + n0 + (kDOneCol ? tid % L::BN : 0)) * (p.K / 32) + (kDOneCol ? tid / L::BN : 0);
        const bool d_one_in = n0 + tid % L::BN < N;
        int d_off[kDOneCol ? 1 : kDIters];
        uint32_t d_in = 0;
        if constexpr (!kDOneCol) {
#pragma unroll
            for (int j = 0; j < kDIters; ++j) {
                const int i = tid + j * kThreads;
                d_off[j] = (i % L::BN) * int(p.K / 32) + i / L::BN;
                d_in |= uint32_t(n0 + i % L::BN < N) << j;
            }
        }
        uint32_t q_in = 0;
#pragma unroll
        for (int j = 0; j < kQIters; ++j) q_in |= uint32_t(n0 + tid / kQPieces + j * kQCols < N) << j;
        // Weights (never written by a kernel) may be fetched before the
        // previous kernel is done; activations only after (Note [dependent launch]).
        auto load_w = [&](int c, int stage) {
            const uint8_t * src = w_src + size_t(c) * L::kCB;
            uint8_t * dst = smem + stage * L::kStage + w_row * L::kWStride + (tid % kTpr) * L::kPiece;
#pragma unroll
            for (int r = 0; r < kWPasses; ++r) {
#pragma unroll
                for (int j = 0; j < kWIters; ++j) {
                    if (kWIters * kTpr == kWPieces || tid % kTpr + j * kTpr < kWPieces) {
                        cp_async<L::kPiece>(dst + r * kWRows * L::kWStride + j * kTpr * L::kPiece,
                                            src + r * w_pass + j * kTpr * L::kPiece, (w_in >> r) & 1u);
                    }
                }
            }
        };
        auto load_a = [&](int c, int stage) {
            uint8_t * Q = smem + stage * L::kStage + L::kStageW + (tid / kQPieces) * L::kQStride + (tid % kQPieces) * 16;
            uint8_t * D = smem + stage * L::kStage + L::kStageW + L::kStageQ + tid * 8;
            const int8_t * qc = q_src + size_t(c) * L::kCE;
            const float2 * dc = d_src + size_t(c) * L::kSubs;
#pragma unroll
            for (int j = 0; j < kQIters; ++j) {
                // Columns past N are zero-filled (no bytes read from their address).
                cp_async<16>(Q + j * kQCols * L::kQStride, qc + size_t(j) * kQCols * p.K, (q_in >> j) & 1u);
            }
#pragma unroll
            for (int j = 0; j < kDIters; ++j) {
                if (j * kThreads + kThreads <= L::BN * L::kSubs || tid + j * kThreads < L::BN * L::kSubs) {
                    if constexpr (kDOneCol) {
                        cp_async<8>(D + j * kThreads * 8, dc + j * (kThreads / L::BN), d_one_in);
                    } else {
                        cp_async<8>(D + j * kThreads * 8, dc + d_off[j], (d_in >> j) & 1u);
                    }
                }
            }
        };

        float acc[MW][NT][4];
#pragma unroll
        for (int mt = 0; mt < MW; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

        // The first group holds the prologue's weights and the first
        // activations; each later group one stage's activations (and weights
        // from the main loop on).
        if (!p.early) pdl_wait();
#pragma unroll
        for (int s = 0; s < kStages - 1; ++s) {
            if (c0 + s < c1) load_w(c0 + s, s);
        }
        pdl_wait();
#pragma unroll
        for (int s = 0; s < kStages - 1; ++s) {
            if (c0 + s < c1) load_a(c0 + s, s);
            cp_commit();
        }
        pdl_trigger();
        for (int c = c0; c < c1; ++c) {
            cp_wait<kStages - 2>();
            __syncthreads();  // the stage is in, and every warp is done with the one refilled next
            const int stage = (c - c0) % kStages;
            if (c + kStages - 1 < c1) {
                const int next = (c - c0 + kStages - 1) % kStages;
                load_w(c + kStages - 1, next);
                load_a(c + kStages - 1, next);
            }
            cp_commit();

            const uint8_t * W = smem + stage * L::kStage;
            const uint8_t * Q = W + L::kStageW;
            const float4 * D = reinterpret_cast<const float4 *>(Q + L::kStageQ);
            const uint8_t * qb = Q + b_row * L::kQStride + b_half;
            // The formats' minimum: sum over the chunk's 8 sub-blocks of
            // mn[row, s] * ds.y[s, col], a product of 16 x 8 and 8 x 8 per
            // fragment, on the TF32 tensor cores instead of 32 FMAs per lane.
            // TF32 keeps 10 mantissa bits of each factor, so each term is off
            // by at most about 1e-3 of itself: well below the int8 rounding
            // of the activations that ds.y sums (MUL_MAT and MUL_MAT_ID with
            // cuBLAS off and with mmq everywhere pass, summary-88.txt).
            if constexpr (kMinByTf32) {
                const float2 * D2 = reinterpret_cast<const float2 *>(Q + L::kStageQ);
                uint32_t am[MW][4];
#pragma unroll
                for (int mt = 0; mt < MW; ++mt) {
                    const uint8_t * r0 = W + (warp * 16 * MW + mt * 16 + g) * L::kWStride;
                    const uint8_t * r8 = r0 + 8 * L::kWStride;
                    float sc_unused, m[4];
                    F::scale(r0, t, sc_unused, m[0]);
                    F::scale(r8, t, sc_unused, m[1]);
                    F::scale(r0, t + 4, sc_unused, m[2]);
                    F::scale(r8, t + 4, sc_unused, m[3]);
#pragma unroll
                    for (int i = 0; i < 4; ++i) am[mt][i] = to_tf32(m[i]);
                }
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    const uint32_t b0 = to_tf32(D2[t * L::BN + nt * 8 + g].y);
                    const uint32_t b1 = to_tf32(D2[(t + 4) * L::BN + nt * 8 + g].y);
#pragma unroll
                    for (int mt = 0; mt < MW; ++mt) mma_tf32(acc[mt][nt], am[mt], b0, b1);
                }
            }
            // Two sub-blocks per iteration: the second's shared-memory reads
            // issue while the first's products run (24 to 64 columns of Q4_0
            // 3-6% faster, summary-63.txt).
#pragma unroll 2
            for (int s = 0; s < L::kSubs; ++s) {
                uint32_t a[MW][4], am[MW][4];
                float sc[MW][2], mn[MW][2];
#pragma unroll
                for (int mt = 0; mt < MW; ++mt) {
                    const uint8_t * r0 = W + (warp * 16 * MW + mt * 16 + g) * L::kWStride;
                    const uint8_t * r8 = r0 + 8 * L::kWStride;
                    F::codes(r0, s, t, a[mt][0], a[mt][2]);
                    F::codes(r8, s, t, a[mt][1], a[mt][3]);
                    F::scale(r0, s, sc[mt][0], mn[mt][0]);
                    F::scale(r8, s, sc[mt][1], mn[mt][1]);
                    if constexpr (kMinCodes<T>) {
                        F::min_codes(r0, s, am[mt][0], am[mt][2]);
                        F::min_codes(r8, s, am[mt][1], am[mt][3]);
                    }
                }
                uint32_t b[NT][2];
                b_fragments<NT>(qb + 32 * s, L::kQStride, b);
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    // {da, da * sum} of columns 2t and 2t + 1 of the n-tile.
                    const float4 ds = D[(s * L::BN + nt * 8 + 2 * t) / 2];
#pragma unroll
                    for (int mt = 0; mt < MW; ++mt) {
                        float * o = acc[mt][nt];
                        if constexpr (F::kSplit16) {
                            int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
                            mma_k16(lo, a[mt][0], a[mt][1], b[nt][0]);
                            mma_k16(hi, a[mt][2], a[mt][3], b[nt][1]);
                            // sc: scale of elements 0..15, mn: of 16..31 (Fmt<Q6_K>)
                            o[0] = fmaf(ds.x, fmaf(sc[mt][0], float(lo[0]), mn[mt][0] * float(hi[0])), o[0]);
                            o[1] = fmaf(ds.z, fmaf(sc[mt][0], float(lo[1]), mn[mt][0] * float(hi[1])), o[1]);
                            o[2] = fmaf(ds.x, fmaf(sc[mt][1], float(lo[2]), mn[mt][1] * float(hi[2])), o[2]);
                            o[3] = fmaf(ds.z, fmaf(sc[mt][1], float(lo[3]), mn[mt][1] * float(hi[3])), o[3]);
                        } else if constexpr (kMinCodes<T>) {
                            // sc: the codes' factor, mn: the minimum codes' (Fmt<Q2_K>).
                            int ci[4] = {0, 0, 0, 0}, cm[4] = {0, 0, 0, 0};
                            mma_k32(ci, a[mt], b[nt][0], b[nt][1]);
                            mma_k32(cm, am[mt], b[nt][0], b[nt][1]);
                            o[0] = fmaf(ds.x, fmaf(sc[mt][0], float(ci[0]), mn[mt][0] * float(cm[0])), o[0]);
                            o[1] = fmaf(ds.z, fmaf(sc[mt][0], float(ci[1]), mn[mt][0] * float(cm[1])), o[1]);
                            o[2] = fmaf(ds.x, fmaf(sc[mt][1], float(ci[2]), mn[mt][1] * float(cm[2])), o[2]);
                            o[3] = fmaf(ds.z, fmaf(sc[mt][1], float(ci[3]), mn[mt][1] * float(cm[3])), o[3]);
                        } else {
                            int ci[4] = {0, 0, 0, 0};
                            mma_k32(ci, a[mt], b[nt][0], b[nt][1]);
                            o[0] = fmaf(sc[mt][0] * ds.x, float(ci[0]), o[0]);
                            o[1] = fmaf(sc[mt][0] * ds.z, float(ci[1]), o[1]);
                            o[2] = fmaf(sc[mt][1] * ds.x, float(ci[2]), o[2]);
                            o[3] = fmaf(sc[mt][1] * ds.z, float(ci[3]), o[3]);
                            if constexpr (F::kMin && !kMinByTf32) {
                                o[0] = fmaf(mn[mt][0], ds.y, o[0]);
                                o[1] = fmaf(mn[mt][0], ds.w, o[1]);
                                o[2] = fmaf(mn[mt][1], ds.y, o[2]);
                                o[3] = fmaf(mn[mt][1], ds.w, o[3]);
                            }
                        }
                    }
                }
            }
        }
        cp_wait<0>();
        __syncthreads();  // the pipeline's shared memory is free from here on

        // MUL_MAT_ID: each tile column's dst, from its pair (the split-K
        // reduction, which would share this memory, never runs routed).
        int64_t * route_col = reinterpret_cast<int64_t *>(smem);
        if (routed) {
            if (tid < L::BN) {
                const int64_t q = n0 + tid < N ? p.route.pairs[col0 + n0 + tid] : 0;
                route_col[tid] = (q % p.route.n_used) * p.d_nb1 + (q / p.route.n_used) * p.d_nb2;
            }
            __syncthreads();
        }
        auto put = [&](int64_t m, int64_t n, float v) {
            char * col = routed ? p.d + route_col[n - n0] : dst + n * p.d_nb1;
            *reinterpret_cast<float *>(col + m * 4) = v;
            if (p.add.dst != nullptr) {
                const float x = *reinterpret_cast<const float *>(p.add.src + n * p.add.src_nb1 + m * 4);
                *reinterpret_cast<float *>(p.add.dst + n * p.add.dst_nb1 + m * 4) = v + x;
            }
        };
        if (split == 1) {
#pragma unroll
            for (int mt = 0; mt < MW; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const int64_t m = m0 + warp * 16 * MW + mt * 16 + g + 8 * (i / 2);
                        const int64_t n = n0 + nt * 8 + 2 * t + (i % 2);
                        if (m < p.M && n < N) put(m, n, acc[mt][nt][i]);
                    }
        } else {
            // The block's partial tile, column-major, for the cluster.
            float * red = reinterpret_cast<float *>(smem);
#pragma unroll
            for (int mt = 0; mt < MW; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const int r = warp * 16 * MW + mt * 16 + g + 8 * (i / 2), col = nt * 8 + 2 * t + (i % 2);
                        red[col * L::BM + r] = acc[mt][nt][i];
                    }
            cg::cluster_group cluster = cg::this_cluster();
            cluster.sync();
            const int rows = (L::BM + split - 1) / split, r_begin = rank * rows;
            const int r_end = r_begin + rows < L::BM ? r_begin + rows : L::BM;
            for (int i = tid; i < (r_end - r_begin) * L::BN; i += kThreads) {
                const int r = r_begin + i % (r_end - r_begin), col = i / (r_end - r_begin);
                float v = 0.0f;
                for (int q = 0; q < split; ++q) v += cluster.map_shared_rank(red, q)[col * L::BM + r];
                if (m0 + r < p.M && n0 + col < N) put(m0 + r, n0 + col, v);
            }
            cluster.sync();  // no block leaves while another still reads its tile
        }
        __syncthreads();
    }
}

// Stages of the pipeline: as many as the shared memory of kMinBlocks blocks
// per SM allows (228 KiB per SM, 1 KiB per block reserved), 2 to 8.
template <int T, int NT, int MW> constexpr int stages_for() {
    constexpr int stage = Stage<T, NT, MW>::kStage;
    constexpr int s = (227 * 1024 / kMinBlocks<NT> - 1024) / stage;
    return s < 2 ? 2 : s > 8 ? 8 : s;
}

// The launch attribute of clusters of `split` blocks along x.
cudaLaunchAttribute cluster_of(int split) {
    cudaLaunchAttribute cluster;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = unsigned(split);
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    return cluster;
}

// Clusters of `split` blocks of `kernel` the GPU holds at once; 0: unknown.
template <typename K> int resident_clusters(K kernel, int split, size_t smem) {
    cudaLaunchAttribute cluster = cluster_of(split);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(split));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = &cluster;
    cfg.numAttrs = 1;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
        (void) cudaGetLastError();  // the launch then keeps the plan's split
        return 0;
    }
    return n;
}

// The blocks of a cluster are resident together, and a GPU holds whole
// clusters per GPC, so fewer blocks in clusters than its SMs have slots for: a
// split whose clusters do not all fit at once runs the few left over as a
// second wave, doubling the product's time. The largest split up to the
// plan's whose clusters (tiles x matrices) all fit. Measured on the H200
// (results/h200/summary-46.txt, -47.txt): 4096 x 14336, 128-row tiles, split
// 8 held 30 of 32 clusters; split 7 took Q4_0 at 48 columns from 96.5 to 82.1
// us and Q8_0 at 48 / 64 from 117.3 / 123.9 to 94.9 / 106.9.
constexpr int kClusterCacheDevices = 16;
using ResidentClusters = int[kClusterCacheDevices][9];  // [device][split]: resident_clusters, filled once per device
template <typename K>
int fitting_split(K kernel, size_t smem, int64_t clusters, int split, const ResidentClusters & cache) {
    int dev = 0;
    SI_CUDA_CHECK(cudaGetDevice(&dev));
    for (int s = split; s > 1; --s) {
        const int fit = dev < kClusterCacheDevices ? cache[dev][s] : resident_clusters(kernel, s, smem);
        if (fit == 0 || clusters <= fit) return s;
    }
    return 1;
}

template <int T, int NT, int MW> bool launch_t(const MmqArgs & p, int split, cudaStream_t st) {
    constexpr int kStages = stages_for<T, NT, MW>();
    using L = Tile<T, NT, MW, kStages>;
    auto kernel = mmq_kernel<T, NT, MW, kStages>;
    static std::atomic<uint64_t> configured{0};
    static ResidentClusters resident;
    // The shared-memory size first: the cluster occupancy depends on it.
    once_per_device(configured, [&](int d) {
        SI_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kSmem));
        if (d < kClusterCacheDevices) {
            for (int s = 2; s <= 8; ++s) resident[d][s] = resident_clusters(kernel, s, L::kSmem);
        }
    });
    // MUL_MAT_ID: row tiles by the most column tiles its list may hold.
    const bool routed = p.route.tile_x != nullptr;
    const int64_t tiles = (p.M + L::BM - 1) / L::BM * (routed ? 1 : (p.N + L::BN - 1) / L::BN);
    const int64_t zs = routed ? p.route.max_tiles : p.ne12 * p.ne13;
    if (routed) split = 1;
    if (split > 1) split = fitting_split(kernel, L::kSmem, tiles * grid_yz(zs), split, resident);
    MmqArgs q = p;
    q.split = split;
    const cudaLaunchAttribute cluster = cluster_of(split);
    launch_ex(kernel, dim3(unsigned(tiles * split), 1, grid_yz(zs)), dim3(kThreads), L::kSmem, st, &cluster,
              split > 1 ? 1 : 0, q);
    return true;
}

template <int T> bool launch_shape(const plan::Choice & c, const MmqArgs & p, cudaStream_t st) {
#define SI_X(kNt, kMw)                                                \
    if constexpr (plan::mmq_shape_built(ggml_type(T), kNt, kMw)) {   \
        if (c.nt == kNt && c.mw == kMw) return launch_t<T, kNt, kMw>(p, c.split, st); \
    }
    SI_MMQ_SHAPES(SI_X)
#undef SI_X
    return false;
}

} // namespace

bool mmq_launch(ggml_type t, const plan::Choice & c, const MmqArgs & p, cudaStream_t st) {
    // mmq has a format for every type of its list (weight_types.h; mm_plan.h: mmq_chunk).
    bool launched = false;
    const bool known = with_mmq_type(t, [&](auto ty) { launched = launch_shape<decltype(ty)::value>(c, p, st); });
    return known && launched;
}

} // namespace standin::kernels::cuda::mm
