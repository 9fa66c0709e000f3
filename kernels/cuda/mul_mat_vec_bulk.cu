// The one-column integer mat-vec (a decoded token's products) with its
// weights brought in by bulk copies: each warp keeps kSteps steps of its two
// rows on their way into a ring of shared memory, where the register kernel
// of mul_mat_vec_q8.cu keeps one (its next step's words). Lane 0 of the warp
// asks for a step's bytes of each row (cp.async.bulk, bulk_copy.cuh) and goes
// on; the warp waits on the step's barrier, each lane reads its block's
// words from shared memory (Note [lane per block]: the same words, the same
// decoding, so the same sums bit for bit), and lane 0 then reuses the slot
// for step s + kSteps. The first kSteps steps of a model's weights
// (weights_fixed) are asked for before pdl_wait (Note [dependent launch]), so a product
// of 4096-element rows (4 steps) has all its first wave's weights on their
// way while the kernel before it drains.
// Note [bulk mat-vec]
// Measured on the H100 (results/h200/summary-97.txt, a lab switch of one
// call), llama-bench tg128 8B Q4_0 in alternating runs: 402.7 / 404.4 / 402.5
// / 396.1 t/s against 391.8 / 392.6 / 392.5 / 385.9 with the register kernel
// (ggml-cuda 332.9 / 331.5). Alone, one product is no faster (standin
// matmul --n 1, 4096 x 14336 20.5 us against 18.5, 14336 x 4096 19.4 against
// 19.6): the gain is the prefetch ahead of the wait. Not kept: the other
// formats (8B Q8_0 270.9 / 270.3 against 273.4 / 272.4; IQ4_XS 4096 x 14336
// 27.5 us against 19.4), one row per warp (8B Q4_0 387.4), 8 steps in flight
// (397.4 / 392.8), 2 and 4 columns (Q4_0 4096 x 14336 24.9 / 32.7 us against
// 19.6 / 28.5).
// Applies (launch_q8_bulk) to one column of 2-D Q4_0 products of an even
// number of rows that are 16-byte aligned and a whole number of 16 bytes
// long (the copy's unit: K % 256 == 0). GGML_STANDIN_MMV_SPLIT=1 sends every
// such product here whatever its size (test-backend-ops' small cases).
//
// Test: GGML_STANDIN_MMV_SPLIT=1 test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT
// -p 'type_a=q4_0,.*n=1,' and -o MUL_MAT_VEC_FUSION; time with `standin
// matmul --n 1` and llama-bench.
#include "diag/check.h"
#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/mmv_formats.cuh"
#include "kernels/cuda/mul_mat.cuh"

namespace standin::kernels::cuda::mm {

namespace {

constexpr int kWarps = 4;
constexpr int kRows = 2;   // rows per warp (the activation words serve both)
constexpr int kSteps = 4;  // steps of 32 blocks in flight per warp
// No weight words are held across steps, so 8 blocks per SM fit (64 registers).
constexpr int kMinBlocks = 8;

template <int T> constexpr uint32_t kRingBytes = uint32_t(kWarps) * kSteps * kRows * Q8Fmt<T>::kStepBytes;

template <int T, bool kRope>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks) mmv_bulk_kernel(const __grid_constant__ Q8Group g) {
    constexpr int RW = kRows, D = kSteps;
    using F = Q8Fmt<T>;
    constexpr uint32_t kStep = F::kStepBytes;
    extern __shared__ __align__(128) uint8_t ring_all[];
    __shared__ uint64_t full[kWarps][D];
    __shared__ float part_sums[kWarps][RW];

    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x / 32);
    const int64_t grow = (int64_t(blockIdx.x) * kWarps + warp) * RW;  // first row of this warp
    const bool live = grow < g.rows;
    const int j = group_member(g, grow);
    const Q8Args & p = g.m[j];
    const int64_t m = grow - g.row0[j];
    const int nb = int(p.K / 32), n_steps = (nb + 31) / 32;
    const uint32_t row_bytes = uint32_t(p.a_nb1);
    // The bytes of a row's data (the last step's run ends there; a multiple of 16).
    const uint32_t data_bytes = uint32_t(nb) * (kStep / 32u);
    const MatrixAt at = matrix_at(p, m, 0);
    uint8_t * ring = ring_all + uint32_t(warp) * (D * RW * kStep);

    if (lane == 0) {
#pragma unroll
        for (int d = 0; d < D; ++d) bulk::barrier_init(&full[warp][d]);
        bulk::barrier_init_fence();
    }
    __syncwarp();
    // Step s of the warp's rows into slot s % D (lane 0).
    auto ask = [&](int s) {
        const uint32_t off = uint32_t(s) * kStep;
        const uint32_t bytes = min(kStep, data_bytes - off);
        uint64_t * bar = &full[warp][s % D];
        bulk::expect_bytes(bar, bytes * RW);
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            bulk::copy(ring + uint32_t((s % D) * RW + r) * kStep, at.row + uint32_t(r) * row_bytes + off, bytes, bar);
        }
    };
    if (!p.early) pdl_wait();
    if (live && lane == 0) {
        for (int s = 0; s < D && s < n_steps; ++s) ask(s);
    }
    pdl_wait();
    pdl_trigger();

    const int8_t * qa = p.q + at.col0 * p.K;
    const float2 * da = p.ds + at.col0 * nb;
    float acc[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r) acc[r] = 0.0f;
    if (live) {
#pragma unroll 1
        for (int s = 0; s < n_steps; ++s) {
            const int slot = s % D;
            bulk::wait(&full[warp][slot], uint32_t(s / D) & 1u);
            const int b = s * 32 + lane;
            const bool has = b < nb;
            uint32_t w[RW][F::kW];
            uint32_t a8[RW];
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                const uint8_t * run = ring + uint32_t(slot * RW + r) * kStep;
                if (has) F::template load<FromShared>(run, lane, w[r]);
                a8[r] = F::a8(run, lane);  // the run starts 16-byte aligned: as in the row
            }
            __syncwarp();  // every lane has its words: the slot may be refilled
            if (lane == 0 && s + D < n_steps) {
                bulk::reuse_fence();
                ask(s + D);
            }
            if (has) step_dot<T, 1, RW>(w, a8, b, qa, da, nb, 1, acc);
        }
    }
    end_row_group<1, 1, kWarps, RW, kRope>(p, acc, part_sums, live, 1, p.d + m * 4, m);
}

// The copies and their barriers exist from sm_90 on (bulk_copy.cuh compiles
// them out below it); a build that also targets older devices never takes
// this kernel, which would run there without its weights.
constexpr bool every_target_copies() {
#if defined(__CUDA_ARCH_LIST__)
    constexpr int archs[] = {__CUDA_ARCH_LIST__};
    for (const int a : archs) {
        if (a < 900) return false;
    }
    return true;
#else
    return false;
#endif
}

template <int T> void launch_bulk(const Q8Group & g, cudaStream_t st) {
    static_assert(kRingBytes<T> <= 48u * 1024u, "the ring fits the default dynamic shared memory");
    const dim3 grid(unsigned((g.rows / kRows + kWarps - 1) / kWarps));
    // The RowRope epilogue in an instance of its own (Note [rope epilogue]).
    if (g.rope) {
        launch(mmv_bulk_kernel<T, true>, grid, dim3(kWarps * 32), kRingBytes<T>, st, g);
    } else {
        launch(mmv_bulk_kernel<T, false>, grid, dim3(kWarps * 32), kRingBytes<T>, st, g);
    }
}

} // namespace

bool launch_q8_bulk(ggml_type t, const Q8Group & g, cudaStream_t st) {
    if (!every_target_copies() || t != GGML_TYPE_Q4_0) return false;
    using F = Q8Fmt<GGML_TYPE_Q4_0>;
    for (int i = 0; i < g.n; ++i) {
        const Q8Args & p = g.m[i];
        if (p.N != 1 || p.ids != nullptr || p.ne12 * p.ne13 != 1 || p.M % kRows != 0 ||
            reinterpret_cast<uintptr_t>(p.a) % 16 != 0 || p.a_nb1 % 16 != 0 ||
            (p.K / 32) * int64_t(F::kStepBytes / 32u) % 16 != 0) {  // a row's data: whole 16-byte units
            return false;
        }
    }
    launch_bulk<GGML_TYPE_Q4_0>(g, st);
    return true;
}

} // namespace standin::kernels::cuda::mm
