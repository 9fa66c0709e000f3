// MUL_MAT of up to 8 src1 columns (token generation) with weights in the
// integer-form formats (Note [integer form], kernels/common/quants.h: Q2_K,
// Q3_K, the i-quants, MXFP4, NVFP4, Q1_0, Q2_0; weight_types.h lists them;
// Q2_K and Q3_K up to 4 columns go to mul_mat_vec_k.cu where their rows allow),
// in integers, as mul_mat_vec_q8.cu and mul_mat_vec_k.cu do for the other
// block formats:
//   - src1 is quantized per 32 values (Note [integer activations],
//     mul_mat.cuh: codes and {d, d * sum} per 32);
//   - lane u of a warp takes run u (16 weights) of the row: quants.h's
//     decode_run gives its int8 codes, scale and minimum (dq::run_words packs
//     the codes for dp4a), and the run adds sc * da * sum(q * qa), less
//     mn * da * sum(qa) for Q2_K (dq::run_dot). The decoder is quants.h's own,
//     so there is one definition of each format for the host and the device.
// Blocks are read in place (their own 1- or 2-byte alignment; neighbouring
// lanes take neighbouring runs, so a warp reads whole blocks), activation
// codes with one 16-byte load per run and column. A warp takes one row by NC
// columns (one decode serves them all); where rows are too few to fill the
// GPU, the 4 warps of a block share a row along K and meet in shared memory.
// Same launch groups (Q8Group), fused ADD epilogue and row sums as the other
// integer mat-vecs.
//
// Instantiated for the integer-form types only (weight_types.h), by NC = 1,
// 2, 4, 8 and R = 1, 4: 8 kernels per type.
//
// Test: GGML_STANDIN_CUDA_UNPROVEN=1 test-backend-ops -b STANDIN_CUDA0 -o
// MUL_MAT (the cases with n <= 8) and -o MUL_MAT_VEC_FUSION; the decoders and
// run_dot on the host: tests/kernels/mmq_formats_check.cu.
#include "diag/check.h"
#include "kernels/common/quants.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/mul_mat.cuh"

namespace standin::kernels::cuda::mm {

namespace {

constexpr int kWarps = 4;

// One row (of member j of the group) by NC columns per R warps; the warps of
// a row group interleave their runs along K.
template <int T, int NC, int R>
__global__ void __launch_bounds__(kWarps * 32) mmv_run_kernel(const __grid_constant__ Q8Group g) {
    using B = typename dq::IntForm<T>::B;
    constexpr int kRuns = B::kElems / 16;  // runs per block
    __shared__ float part_sums[kWarps][NC];
    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x / 32), sub = warp % R;
    const int64_t grow = int64_t(blockIdx.x) * (kWarps / R) + warp / R;
    const bool live = grow < g.rows;
    const int j = group_member(g, grow);
    const Q8Args & p = g.m[j];
    const int64_t m = grow - g.row0[j];
    const int64_t n_runs = p.K / 16;
    const int ncols = int(p.N);
    pdl_wait();  // Note [dependent launch]: the activations come from the kernel before
    pdl_trigger();
    for (uint32_t z = blockIdx.y; z < matrix_count(p); z += gridDim.y) {
        const MatrixAt at = matrix_at(p, m, z);
        const uint8_t * row = at.row;
        const int64_t col0 = at.col0;
        float acc[NC];
#pragma unroll
        for (int c = 0; c < NC; ++c) acc[c] = 0.0f;
        for (int64_t u = live ? int64_t(sub) * 32 + lane : n_runs; u < n_runs; u += int64_t(R) * 32) {
            const dq::RunWords w = dq::run_words<B>(row + (u / kRuns) * int64_t(sizeof(B)), int(u % kRuns));
#pragma unroll
            for (int c = 0; c < NC; ++c) {
                if (c < ncols) {
                    const int64_t col = col0 + c;
                    const int4 a4 = *reinterpret_cast<const int4 *>(p.q + col * p.K + 16 * u);
                    const int a[4] = {a4.x, a4.y, a4.z, a4.w};
                    acc[c] += dq::run_dot<B>(w, a, p.ds[col * (p.K / 32) + u / 2].x);
                }
            }
        }
        if (!at.live) {
#pragma unroll
            for (int c = 0; c < NC; ++c) acc[c] = 0.0f;
        }
        RowAdd add = p.add;
        if (add.dst != nullptr) {
            add.src += m * 4;
            add.dst += m * 4;
        }
        store_row_sums<NC, R, kWarps>(acc, part_sums, live, ncols, p.d + at.i12 * p.d_nb2 + at.i13 * p.d_nb3 + m * 4,
                                      p.d_nb1, add);
    }
}

// Enough warps to keep weight bytes in flight on every SM (as the other
// integer mat-vecs); K split over a block only where each warp still has two
// steps of runs.
constexpr int64_t kFillWarps = 4096;

template <int T, int NC> void launch_run_nc(const Q8Group & g, cudaStream_t st) {
    const int64_t mats = g.m[0].ne12 * g.m[0].ne13, n_runs = g.m[0].K / 16;
    const dim3 block(kWarps * 32);
    if (g.rows * mats < kFillWarps && n_runs >= 2 * 32 * kWarps) {
        launch(mmv_run_kernel<T, NC, kWarps>, dim3(unsigned(g.rows), grid_yz(mats)), block, 0, st, g);
    } else {
        launch(mmv_run_kernel<T, NC, 1>, dim3(unsigned((g.rows + kWarps - 1) / kWarps), grid_yz(mats)), block, 0,
               st, g);
    }
}

// Columns: the smallest kernel width that holds them.
template <int T> void launch_run_t(const Q8Group & g, cudaStream_t st) {
    with_col_width(g.m[0].N, [&](auto nc) { launch_run_nc<T, decltype(nc)::value>(g, st); });
}

} // namespace

void launch_qr(ggml_type t, const Q8Group & g, cudaStream_t st) {
    const bool known = with_int_form_type(t, [&](auto ty) { launch_run_t<decltype(ty)::value>(g, st); });
    SI_ASSERT_MSG(known, "the integer-form mat-vec has no kernel for this weight type");
}

} // namespace standin::kernels::cuda::mm
