// The one-column integer mat-vec (a decoded token's products) with its
// weights brought in by bulk copies: each warp keeps D steps of its RW rows
// on their way into a ring of shared memory, where the register kernel of
// mul_mat_vec_q8.cu keeps one (its next step's words; two buffers in
// registers measured no faster there, and spilled Q8_0). Lane 0 of the warp
// asks for a step's bytes of each row (cp.async.bulk, bulk_copy.cuh) and goes
// on; the warp waits on the step's barrier, each lane reads its block's
// words from shared memory (Note [lane per block]: the same words, the same
// decoding, so the same sums bit for bit), and lane 0 then reuses the slot
// for step s + D. The first D steps are asked for before pdl_wait (weights
// are no kernel's output: Note [dependent launch]).
// Applies (q8_bulk_applies) to one column of 2-D products whose rows are
// 16-byte aligned and a whole number of 16 bytes long (the copy's unit), for
// the formats whose 32 blocks of a step are one contiguous run of a row.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT -p 'n=1,' and -o
// MUL_MAT_VEC_FUSION; time with `standin matmul --n 1`.
#include <cstdlib>

#include "diag/check.h"
#include "kernels/cuda/bulk_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/mmv_formats.cuh"
#include "kernels/cuda/mul_mat.cuh"

namespace standin::kernels::cuda::mm {

namespace {

constexpr int kWarps = 4;
constexpr int64_t kBulkMaxN = 4;  // columns: 1, 2 or 4 per launch

template <int T, int RW, int D>
constexpr uint32_t kRingBytes = uint32_t(kWarps) * D * RW * Q8Fmt<T>::kStepBytes;

template <int T, int NC, int RW, int D, int MB>
__global__ void __launch_bounds__(kWarps * 32, MB) mmv_bulk_kernel(const __grid_constant__ Q8Group g) {
    using F = Q8Fmt<T>;
    constexpr uint32_t kStep = F::kStepBytes;
    extern __shared__ __align__(128) uint8_t ring_all[];
    __shared__ uint64_t full[kWarps][D];
    __shared__ float part_sums[kWarps][RW * NC];

    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x / 32);
    const int64_t grow = (int64_t(blockIdx.x) * kWarps + warp) * RW;  // first row of this warp
    const bool live = grow < g.rows;
    const int j = group_member(g, grow);
    const Q8Args & p = g.m[j];
    const int64_t m = grow - g.row0[j];
    const int nb = int(p.K / 32), n_steps = (nb + 31) / 32, ncols = int(p.N);
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
    if (live && lane == 0) {
        for (int s = 0; s < D && s < n_steps; ++s) ask(s);
    }
    pdl_wait();
    pdl_trigger();

    const int8_t * qa = p.q + at.col0 * p.K;
    const float2 * da = p.ds + at.col0 * nb;
    float acc[RW * NC];
#pragma unroll
    for (int o = 0; o < RW * NC; ++o) acc[o] = 0.0f;
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
            if (has) step_dot<T, NC, RW>(w, a8, b, qa, da, nb, ncols, acc);
        }
    }
    RowAdd add = p.add;
    if (add.dst != nullptr) {
        add.src += m * 4;
        add.dst += m * 4;
    }
    store_row_sums<NC, 1, kWarps, RW>(acc, part_sums, live, ncols, p.d + m * 4, p.d_nb1, add);
}

template <int T, int NC, int RW, int D> void launch_bulk_k(const Q8Group & g, cudaStream_t st) {
    // Registers: no weight words held across steps, so more blocks per SM fit.
    constexpr int kMB = NC == 1 ? 8 : NC == 2 ? 6 : 5;
    auto kernel = mmv_bulk_kernel<T, NC, RW, D, kMB>;
    constexpr uint32_t smem = kRingBytes<T, RW, D>;
    if constexpr (smem > 48u * 1024u) {
        static const bool sized = [&] {
            SI_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
            return true;
        }();
        (void) sized;
    }
    const dim3 grid(unsigned((g.rows / RW + kWarps - 1) / kWarps));
    launch(kernel, grid, dim3(kWarps * 32), smem, st, g);
}

// LAB: GGML_STANDIN_LAB_BULK = "RD" (rows per warp R, steps in flight D: 14,
// 24, 18, 28); unset or 0: the register kernel.
int lab_bulk() {
    static const int v = [] {
        const char * e = std::getenv("GGML_STANDIN_LAB_BULK");
        return e ? std::atoi(e) : 0;
    }();
    return v;
}

template <int T, int NC> bool launch_bulk_nc(const Q8Group & g, cudaStream_t st) {
    for (int i = 0; i < g.n; ++i) {
        if ((g.m[i].K / 32) * int64_t(Q8Fmt<T>::kStepBytes / 32u) % 16 != 0) return false;  // a row's data
    }
    switch (lab_bulk()) {
        case 14: launch_bulk_k<T, NC, 1, 4>(g, st); return true;
        case 24: launch_bulk_k<T, NC, 2, 4>(g, st); return true;
        case 18: launch_bulk_k<T, NC, 1, 8>(g, st); return true;
        case 28: launch_bulk_k<T, NC, 2, 8>(g, st); return true;
        default: return false;
    }
}

template <int T> bool launch_bulk_t(const Q8Group & g, cudaStream_t st) {
    const int64_t n = g.m[0].N;
    return n <= 1 ? launch_bulk_nc<T, 1>(g, st) : n <= 2 ? launch_bulk_nc<T, 2>(g, st) : launch_bulk_nc<T, 4>(g, st);
}

} // namespace

bool q8_bulk_applies(ggml_type t, const Q8Group & g) {
    switch (t) {
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_0: case GGML_TYPE_IQ4_NL: case GGML_TYPE_MXFP4: case GGML_TYPE_IQ4_XS: break;
        default: return false;
    }
    for (int i = 0; i < g.n; ++i) {
        const Q8Args & p = g.m[i];
        if (p.N > kBulkMaxN || p.ids != nullptr || p.ne12 * p.ne13 != 1 || p.M % 2 != 0 ||
            reinterpret_cast<uintptr_t>(p.a) % 16 != 0 || p.a_nb1 % 16 != 0) {
            return false;
        }
    }
    return true;
}

bool launch_q8_bulk(ggml_type t, const Q8Group & g, cudaStream_t st) {
    if (lab_bulk() == 0 || !q8_bulk_applies(t, g)) return false;
    switch (t) {
        case GGML_TYPE_Q4_0: return launch_bulk_t<GGML_TYPE_Q4_0>(g, st);
        case GGML_TYPE_Q4_1: return launch_bulk_t<GGML_TYPE_Q4_1>(g, st);
        case GGML_TYPE_Q5_0: return launch_bulk_t<GGML_TYPE_Q5_0>(g, st);
        case GGML_TYPE_Q5_1: return launch_bulk_t<GGML_TYPE_Q5_1>(g, st);
        case GGML_TYPE_Q8_0: return launch_bulk_t<GGML_TYPE_Q8_0>(g, st);
        case GGML_TYPE_IQ4_NL: return launch_bulk_t<GGML_TYPE_IQ4_NL>(g, st);
        case GGML_TYPE_MXFP4: return launch_bulk_t<GGML_TYPE_MXFP4>(g, st);
        case GGML_TYPE_IQ4_XS: return launch_bulk_t<GGML_TYPE_IQ4_XS>(g, st);
        default: return false;
    }
}

} // namespace standin::kernels::cuda::mm
