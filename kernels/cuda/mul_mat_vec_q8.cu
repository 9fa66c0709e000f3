// MUL_MAT for few src1 columns (N <= 8, token generation) with weights in the
// 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, and the 4-bit
// table formats IQ4_NL, MXFP4 and IQ4_XS (IQ4_XS as 8 blocks of 32 per
// super-block; their codes are quants.h's table entries), in integers:
//   - src1 is quantized first (act_round.cuh, quantize_act; Note [integer
//     activations] in mul_mat.cuh): per 32 values int8 codes q, the scale da
//     and da times the codes' sum;
//   - each weight block's codes, taken without their constant offset (Q4_0:
//     0..15 instead of -8..7), are multiplied with those q by dp4a (4 int8
//     products per instruction, summed exactly in int32); the block adds
//     dw * (da * sum - offset * da * sum(q)) (+ m * da * sum(q) for the
//     formats with a minimum). These are ggml-cpu's products, regrouped: the
//     offset costs one multiply per block instead of a subtraction per code.
// Note [lane per block]
// A lane takes whole blocks: lane l of a warp decodes block 32 s + l of each
// of its RW rows (step s), so the fixed cost of a block (its scale, the
// activation scale, the float epilogue) is paid once per 32 codes, and the
// 32 lanes of a step read one contiguous run of a row (coalesced). Blocks are
// only 2-byte aligned, so a lane loads the 4-byte words that hold its block
// straight from global memory (from the word holding its first byte) and
// realigns them in registers with funnel shifts by 0 or 16 bits (a block
// starts at byte 0 or 2 of its first word). The next step's words are in
// flight while this one is decoded. Measured on the H200 (4096 x 14336 Q4_0,
// one column, results/h200/README.md): 12.2 us per launch in a lab comparison,
// where a lane per block staged through shared memory took 18.9 and a
// repacked layout with 16-byte aligned quants 12.5 (so the weights keep
// ggml's layout); the warp-per-quarter-block kernel this replaced took 18
// (Nsight Compute), and 8B Q4_0 decode went from 307 to 338 t/s.
// What does not hold it (H100, results/h200/summary-77.txt, -78): the loads
// alone (`read_ceiling rows`, this access pattern with nothing decoded) read
// 4096 x 14336 Q4_0 in 13.7 us, and the same bytes by coalesced 16-byte loads
// in 14.2, where the kernel takes 19.7-20.1; the next step's activation
// words loaded beside its weights (19.8), the L2 bulk prefetch (slower at
// every distance) and 64 registers for 8 blocks per SM (20.0, spilling)
// measured no faster, and were not kept. Nor (summary-79 to -81): two weight
// buffers taken in turn, so that two steps are in flight while a warp waits
// (20.0-20.4; Q8_0 spilled and slowed 29.1 -> 32.9); one row per warp at 8
// blocks per SM, 50% of warps active in one wave as ggml-cuda's kernel runs
// (18.3-18.8, but 14336 x 4096 21.0-21.4 and IQ4_XS 23.5 against about 20,
// and 8B Q4_0 tg128 no faster); the L2::256B prefetch size on the weights
// (19.8-20.0). The weights must stay in L1: a lane's 5 words overlap its
// neighbours', and with L1::no_allocate the L2 reads doubled and the kernel
// took 30.7 us (Q8_0 79).
// A warp takes its rows alone when there are rows enough to fill the GPU;
// otherwise 2 or 4 warps of a block share them, split along K, and meet in
// shared memory, so short matrices still spread over all SMs.
// Applies to whole blocks (K % 32) in rows aligned as RawWords reads them
// (q8_applies; gpt-oss's 2880 columns included); mul_mat.cu falls back to
// mul_mat_vec.cu otherwise.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT (-p 'type_a=(q[458]_[01]|iq4_nl|iq4_xs|mxfp4).*n=[1-8],')
// and -o MUL_MAT_VEC_FUSION (grouped launches); the logits ctests
// (model.logits.*.cuda); time with `standin matmul`.
#include "diag/check.h"
#include "diag/config.h"
#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/mmq.cuh"
#include "kernels/cuda/mmq_formats.cuh"
#include "kernels/cuda/mmv_formats.cuh"
#include "kernels/cuda/mul_mat.cuh"

namespace standin::kernels::cuda::mm {

namespace {

constexpr int kWarps = 4;

// Blocks per SM the register budget must allow (__launch_bounds__): one-column
// launches are latency-bound, so they want warps resident; two rows per warp
// hold twice the weight words (this step's and the next one's), which 64
// registers do not hold without spilling (8 blocks per SM at two rows: 8B
// Q8_0 tg128 209 t/s against 262-265 on the H100, results/h200/summary-85.txt).
// Four rows by several columns (kRowsPerWarp) take 3 (up to 168 registers).
// Q8_0's two rows (nine words each) at one column take 5 (102 registers): at
// 6 ptxas spilled 4 bytes, and its products took longer (H100,
// results/h200/summary-104.txt, call 6, `standin matmul --n 1`, us, 6 -> 5):
// 4096 x 14336 28.8 -> 27.4, 14336 x 4096 28.4 -> 27.3, 28672 x 4096 49.0 ->
// 48.1, 4096 x 4096 11.3 -> 11.1; 8B Q8_0 tg128 275.30 -> 277.54 t/s (one run
// each; 4 blocks: 272.86).
template <int T, int NC, int RW>
constexpr int kMinBlocks = NC == 1 ? (RW == 1 ? 8 : T == GGML_TYPE_Q8_0 ? 5 : 6)
                                   : RW >= 4 ? 3 : NC == 2 ? (RW == 1 ? 6 : 5) : 4;
// MUL_MAT_ID's launches (one column, two rows per warp, a warp per row
// group): 7 (72 registers; Q8_0's nine words would spill). Expert rows are
// short (two 32-block steps at K = 2048), so more resident warps mean fewer
// waves: qwen3's experts in Q4_0 at 8 tokens 23.68 us against 25.48 with 6
// (H100, results/h200/summary-96.txt, call 7). Q8_0's experts: 6, its dense
// figure before call 6 above (5 not measured for them).
template <int T> constexpr int kIdMinBlocks = T == GGML_TYPE_Q8_0 ? 6 : 7;

// RW consecutive weight rows per warp (every member's M is a multiple of RW,
// so the rows of a warp belong to one member); R warps per row group (1, 2
// or kWarps), kWarps / R row groups per block. Step s of a row group is its
// blocks 32 s .. 32 s + 31 (Note [lane per block]); the warps of a group take
// every R-th step.
template <int T, int NC, int R, int RW, int MB = kMinBlocks<T, NC, RW>, bool kRope = false>
__global__ void __launch_bounds__(kWarps * 32, MB) mmv_q8_kernel(const __grid_constant__ Q8Group g) {
    using F = Q8Fmt<T>;
    __shared__ float part_sums[kWarps][RW * NC];

    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x / 32);
    const int64_t grow = (int64_t(blockIdx.x) * (kWarps / R) + warp / R) * RW;  // first row of this warp
    const bool live = grow < g.rows;
    const int j = group_member(g, grow);
    const Q8Args & p = g.m[j];
    const int64_t m = grow - g.row0[j];
    // 32-bit offsets inside a row and a column (q8_applies: a row under 2 GiB).
    const int nb = int(p.K / 32), n_steps = (nb + 31) / 32;
    const int ncols = int(p.N), sub = warp % R;
    const uint32_t row_bytes = uint32_t(p.a_nb1);

    for (uint32_t z = blockIdx.y; z < matrix_count(p); z += gridDim.y) {
        const MatrixAt at = matrix_at(p, m, z);
        const uint8_t * row = at.row;
        const int8_t * qa = p.q + at.col0 * p.K;
        const float2 * da = p.ds + at.col0 * nb;
        float acc[RW * NC];
#pragma unroll
        for (int o = 0; o < RW * NC; ++o) acc[o] = 0.0f;

        // The words that hold block b of each row (field() never reads past
        // them). Past the row's end a lane reads its last block again (not
        // used), so the loads are unconditional and the two buffers rotate.
        uint32_t cur[RW][F::kW], nxt[RW][F::kW];
        auto fetch = [&](int s, uint32_t (&w)[RW][F::kW]) {
            const int b = min(s * 32 + lane, nb - 1);
#pragma unroll
            for (int r = 0; r < RW; ++r) F::load(row + uint32_t(r) * row_bytes, b, w[r]);
        };
        int s = live ? sub : n_steps;
        if (!p.early) pdl_wait();
        if (live) fetch(s, cur);  // a model's weights: before the wait (Note [dependent launch])
        pdl_wait();
        pdl_trigger();
#pragma unroll 1
        for (; s < n_steps; s += R) {
            fetch(s + R, nxt);  // in flight while this step is decoded
            const int b = s * 32 + lane;
            if (b < nb) {
                uint32_t a8[RW];
#pragma unroll
                for (int r = 0; r < RW; ++r) a8[r] = F::a8(row + uint32_t(r) * row_bytes, b);
                step_dot<T, NC, RW>(cur, a8, b, qa, da, nb, ncols, acc);
            }
#pragma unroll
            for (int r = 0; r < RW; ++r) {
#pragma unroll
                for (int k = 0; k < F::kW; ++k) cur[r][k] = nxt[r][k];
            }
        }
        if (!at.live) {
#pragma unroll
            for (int o = 0; o < RW * NC; ++o) acc[o] = 0.0f;
        }
        end_row_group<NC, R, kWarps, RW, kRope>(p, acc, part_sums, live, ncols,
                                                p.d + at.i12 * p.d_nb2 + at.i13 * p.d_nb3 + m * 4, m);
    }
}

template <int T, int NC, int R, int RW, int MB = kMinBlocks<T, NC, RW>>
void launch_q8_k(const Q8Group & g, cudaStream_t st) {
    constexpr int kGroups = kWarps / R;  // row groups per block
    const dim3 grid(unsigned((g.rows / RW + kGroups - 1) / kGroups), grid_yz(g.m[0].ne12 * g.m[0].ne13));
    // The RowRope epilogue in an instance of its own: the other launches
    // keep the kernel without it (no registers spent on it).
    if constexpr (NC == 1 && RW % 2 == 0) {
        if (g.rope) return launch(mmv_q8_kernel<T, NC, R, RW, MB, true>, grid, dim3(kWarps * 32), 0, st, g);
    }
    SI_ASSERT_MSG(!g.rope, "a RowRope epilogue reached a mat-vec without it (norm_mul_mat_rope_ok admits one column, rows in pairs)");
    launch(mmv_q8_kernel<T, NC, R, RW, MB>, grid, dim3(kWarps * 32), 0, st, g);
}

// Warps per row group: the fewest (1, 2, kWarps) that give the launch
// kFillWarps warps, and no more than the row has steps. Measured on the H200
// (the lab comparison of Note [lane per block], Q4_0 / Q8_0, one column):
// 4096 x 14336 two warps per group 12.2 / 19.4 us (one: 14.4 / 22.8); 8192 x
// 2048 one warp 5.2 / 7.8 (two: 6.1 / 7.8); 14336 x 4096 one warp 12.9 / 20.3
// (four: 12.2 / 18.0). That was an earlier kernel: with today's, on the
// H100, one warp per group from 2048 groups measured faster (4096 x 14336
// Q4_0 18.6 us against 20.2, 2048 x 8192 7.7 against 9.6) and 8B Q4_0
// tg128 384-386 t/s against 363-370 in alternating builds, Q8_0 263 / 263
// against 259 / 258 (results/h200/summary-82.txt, -83.txt; not yet
// measured on an H200).
constexpr int64_t kFillWarps = 2048;
template <int T, int NC, int RW> void launch_q8_rw(const Q8Group & g, cudaStream_t st) {
    const Q8Args & p = g.m[0];
    const int64_t groups = g.rows / RW * p.ne12 * p.ne13;
    const int64_t n_steps = (p.K / 32 + 31) / 32;
    switch (diag::config().mmv_split) {
        case diag::Config::MmvSplit::one:
            if (NC == 1 && launch_q8_bulk(ggml_type(T), g, st)) return;  // Note [bulk mat-vec]
            return launch_q8_k<T, NC, 1, RW>(g, st);
        case diag::Config::MmvSplit::two: return launch_q8_k<T, NC, 2, RW>(g, st);
        case diag::Config::MmvSplit::four: return launch_q8_k<T, NC, kWarps, RW>(g, st);
        case diag::Config::MmvSplit::auto_: break;
    }
    if (groups >= kFillWarps || n_steps < 2) {
        if constexpr (NC == 1 && RW == 2) {
            if (p.ids != nullptr) return launch_q8_k<T, NC, 1, RW, kIdMinBlocks<T>>(g, st);
        }
        if constexpr (NC == 1) {
            if (launch_q8_bulk(ggml_type(T), g, st)) return;  // Note [bulk mat-vec]
        }
        launch_q8_k<T, NC, 1, RW>(g, st);
    } else if (groups * 2 >= kFillWarps || n_steps < kWarps) {
        launch_q8_k<T, NC, 2, RW>(g, st);
    } else {
        launch_q8_k<T, NC, kWarps, RW>(g, st);
    }
}

bool rows_multiple_of(const Q8Group & g, int64_t rw) {
    for (int i = 0; i < g.n; ++i) {
        if (g.m[i].M % rw != 0) return false;
    }
    return true;
}

// Rows per warp: the activation loads of a lane (per column) are shared by
// that many rows, at the cost of RW x (kW + 1) words of weights held twice
// (this step's and the next one's). Q4_0 at 2 to 4 columns takes four: its
// five words a row leave the registers for it, and a column's activation
// loads then serve four rows. Measured on the H100 (4096 x 14336, `standin
// matmul --rotate 4 --reps 30`, results/h200/summary-101.txt), us, two rows ->
// four: Q4_0 at 2 / 3 / 4 columns 19.2 / 23.2 / 27.9 -> 17.6 / 19.1 / 21.8
// (ggml-cuda 18.6 / 21.0 / 23.8); 8B Q4_0 batched decoding S_TG at 2 / 3 / 4
// sequences 651.6 / 867.0 / 1033.9 -> 686.7 / 909.6 / 1112.3 t/s. Not at 5
// to 8 columns (Q4_0 at 5: 34.2 -> 35.8, 8B at 5 sequences 1049.9 -> 996.9),
// nor for Q8_0 (28.3 / 33.5 / 38.5 -> 31.0 / 35.6 / 40.5) or IQ4_XS (19.9 /
// 23.8 / 28.2 -> 22.9 / 28.3 / 31.9), whose wider rows then hold fewer warps.
template <int T, int NC> constexpr int kRowsPerWarp = T == GGML_TYPE_Q4_0 && (NC == 2 || NC == 4) ? 4 : 2;

// RW rows per warp where every member's row count allows it, else two, else one.
template <int T, int NC> void launch_q8_nc(const Q8Group & g, cudaStream_t st) {
    constexpr int RW = kRowsPerWarp<T, NC>;
    if (rows_multiple_of(g, RW)) {
        launch_q8_rw<T, NC, RW>(g, st);
    } else if (RW > 2 && rows_multiple_of(g, 2)) {
        launch_q8_rw<T, NC, 2>(g, st);
    } else {
        launch_q8_rw<T, NC, 1>(g, st);
    }
}

// Columns: the smallest kernel width that holds them.
template <int T> void launch_q8_t(const Q8Group & g, cudaStream_t st) {
    with_col_width(g.m[0].N, [&](auto nc) { launch_q8_nc<T, decltype(nc)::value>(g, st); });
}

// Whether the table formats' rows suit the lane-per-block kernel: IQ4_XS
// whole super-blocks (K % 256) in 8-byte aligned rows (its 8-byte loads);
// IQ4_NL 2-byte aligned rows, MXFP4 any (RawWords). Else the run kernel.
bool lane_block_rows(ggml_type t, const Q8Group & g) {
    const int64_t align = t == GGML_TYPE_IQ4_XS ? 8 : t == GGML_TYPE_IQ4_NL ? 2 : 1;
    for (int i = 0; i < g.n; ++i) {
        const Q8Args & p = g.m[i];
        if (p.K % ggml_blck_size(t) != 0 || int64_t(reinterpret_cast<uintptr_t>(p.a) % align) != 0 ||
            p.a_nb1 % align != 0 || p.a_nb2 % align != 0 || p.a_nb3 % align != 0) {
            return false;
        }
    }
    return true;
}

// Whether Q2_K, Q3_K or IQ2/IQ3 grid products suit the K formats' mat-vec
// (mul_mat_vec_k.cu): at most its 4 columns, a 4-byte aligned first block (its
// 4-byte loads may reach 2 bytes before a Q3_K block, never before the tensor)
// and rows of whole words (Q2_K's 4-byte loads) or half words (the others).
bool k_block_rows(ggml_type t, const Q8Group & g) {
    const uintptr_t nb_align = t == GGML_TYPE_Q2_K ? 4 : 2;
    for (int i = 0; i < g.n; ++i) {
        const Q8Args & p = g.m[i];
        if (p.N > 4 || reinterpret_cast<uintptr_t>(p.a) % 4 != 0 || p.a_nb1 % nb_align != 0 ||
            p.a_nb2 % nb_align != 0 || p.a_nb3 % nb_align != 0) {
            return false;
        }
    }
    return true;
}

// The weight types whose one-column launches take the RowRope epilogue: the
// 32-element formats (launch_q8_t: two rows per warp) and Q4_K, Q5_K and
// Q6_K (launch_qk: rows in pairs in one warp, or with one row per warp in
// two neighbouring warps, Note [rope epilogue]). 1B Q4_K_M tg128 on the H100
// (results/h200/summary-102.txt, call 2, two runs each): 1066.87 / 1088.47
// t/s with it against 1049.49 / 1092.73 without, 1094.11 / 1111.07 with the
// Q6_K V in Q's and K's launch too (qk_mixes).
bool rope_type(ggml_type t) {
    return t == GGML_TYPE_Q4_0 || t == GGML_TYPE_Q4_1 || t == GGML_TYPE_Q5_0 || t == GGML_TYPE_Q5_1 ||
           t == GGML_TYPE_Q8_0 || t == GGML_TYPE_Q4_K || t == GGML_TYPE_Q5_K || t == GGML_TYPE_Q6_K;
}

void launch_q8(ggml_type t, const Q8Group & g, cudaStream_t st) {
    switch (t) {
        case GGML_TYPE_Q4_0: launch_q8_t<GGML_TYPE_Q4_0>(g, st); break;
        case GGML_TYPE_Q4_1: launch_q8_t<GGML_TYPE_Q4_1>(g, st); break;
        case GGML_TYPE_Q5_0: launch_q8_t<GGML_TYPE_Q5_0>(g, st); break;
        case GGML_TYPE_Q5_1: launch_q8_t<GGML_TYPE_Q5_1>(g, st); break;
        case GGML_TYPE_Q8_0: launch_q8_t<GGML_TYPE_Q8_0>(g, st); break;
        // The table formats by lane per block where their rows allow it,
        // else the integer-form run kernel (mul_mat_vec_run.cu).
        case GGML_TYPE_IQ4_NL:
            lane_block_rows(t, g) ? launch_q8_t<GGML_TYPE_IQ4_NL>(g, st) : launch_qr(t, g, st);
            break;
        case GGML_TYPE_IQ4_XS:
            lane_block_rows(t, g) ? launch_q8_t<GGML_TYPE_IQ4_XS>(g, st) : launch_qr(t, g, st);
            break;
        case GGML_TYPE_MXFP4:
            lane_block_rows(t, g) ? launch_q8_t<GGML_TYPE_MXFP4>(g, st) : launch_qr(t, g, st);
            break;
        // Q2_K, Q3_K and the IQ2/IQ3 grids by the K formats' kernel where it
        // takes them, else by runs.
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K:
        case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS:
        case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ3_S:
            k_block_rows(t, g) ? launch_qk(t, g, st) : launch_qr(t, g, st);
            break;
        default:
            if (is_int_form_weight(t)) {
                launch_qr(t, g, st);  // mul_mat_vec_run.cu
            } else {
                launch_qk(t, g, st);  // the K formats
            }
            break;
    }
}

Q8Args args_for(const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * d, const int8_t * q, const float2 * ds) {
    Q8Args p;
    fill_common(p, a, b, d);
    p.early = weights_fixed(a);
    p.q = q;
    p.ds = ds;
    return p;
}

} // namespace

// Whether the integer mat-vecs read these weights: a type they have, K and
// the rows as their loads need.
bool q8_weights_ok(const ggml_tensor * a) {
    const ggml_type t = a->type;
    if (plan::vec_int_max_n(t) == 0) return false;
    // mul_mat_vec_run.cu reads integer-form blocks in place (their own
    // alignment) and 16 activation codes per run (K % 32: whole activation
    // groups); the 32-element formats go block by block from the word that
    // holds a block's first byte (RawWords: 2-byte aligned rows, 4 for
    // Q4_1's and Q5_1's 20- and 24-byte blocks); Q6_K's 210-byte blocks are
    // read with 4-byte loads realigned in registers (mul_mat_vec_k.cu); the
    // other K formats whole super-blocks with 16-byte loads.
    const bool int_form = is_int_form_weight(t);
    size_t align = 16;
    if (int_form) {
        align = size_t(dq::int_form_align(t));
    } else if (t == GGML_TYPE_Q6_K || t == GGML_TYPE_Q4_0 || t == GGML_TYPE_Q5_0 || t == GGML_TYPE_Q8_0) {
        align = 2;
    } else if (t == GGML_TYPE_Q4_1 || t == GGML_TYPE_Q5_1) {
        align = 4;
    }
    return a->ne[0] % (int_form ? 32 : ggml_blck_size(t)) == 0 && aligned_to(a, align) && a->nb[1] % align == 0 &&
           a->nb[2] % align == 0 && a->nb[3] % align == 0 && a->ne[1] <= int64_t(INT32_MAX);
}

// The kernels count matrices (MUL_MAT_ID: pairs) in 32 bits (matrix_at).
bool q8_applies(const ggml_tensor * a, const ggml_tensor * b) {
    return b->ne[1] <= plan::vec_int_max_n(a->type) && q8_weights_ok(a) && b->ne[2] * b->ne[3] <= int64_t(INT32_MAX);
}

bool q8_id_applies(const ggml_tensor * as, const ggml_tensor * b, const ggml_tensor * ids) {
    return q8_weights_ok(as) && b->type == GGML_TYPE_F32 && b->ne[3] == 1 &&
           ids->ne[0] * ids->ne[1] <= int64_t(INT32_MAX);
}

Status mul_mat_id_q8(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * as = node->src[0];
    const ggml_tensor * b = node->src[1];
    const ggml_tensor * ids = node->src[2];
    cudaStream_t st = stream.begin_launch();
    // b's rows (e, t) in order: the column of pair (e, t) is e % ne11 + t * ne11 (matrix_at).
    QuantizedY y = quantize_y(stream, b, st);
    if (!y.ok) return Status::out_of_memory;
    Q8Group g{};
    g.n = 1;
    g.rows = as->ne[1];
    Q8Args & p = g.m[0];
    p.a = static_cast<const char *>(as->data);
    p.a_nb1 = int64_t(as->nb[1]);
    p.a_nb2 = int64_t(as->nb[2]);
    p.a_nb3 = 0;
    p.q = y.q;
    p.ds = y.ds;
    p.d = static_cast<char *>(node->data);
    p.d_nb1 = int64_t(node->nb[1]);
    p.d_nb2 = int64_t(node->nb[1]);  // matrix (e, t) at e * nb1 + t * nb2 of dst
    p.d_nb3 = int64_t(node->nb[2]);
    p.K = as->ne[0];
    p.M = as->ne[1];
    p.N = 1;
    p.ne12 = ids->ne[0];
    p.ne13 = ids->ne[1];
    p.r2 = p.r3 = 1;
    p.ids = static_cast<const char *>(ids->data);
    p.ids_nb0 = int64_t(ids->nb[0]);
    p.ids_nb1 = int64_t(ids->nb[1]);
    p.n_as = as->ne[2];
    p.ne11 = b->ne[1];
    launch_q8(as->type, g, st);
    SI_CUDA_LAUNCH_CHECK();
    release(y, st);
    return true;
}

bool same_src1(const ggml_tensor * x, const ggml_tensor * y) {
    if (x == y) return true;
    if (x->data != y->data || x->type != y->type) return false;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (x->ne[i] != y->ne[i] || x->nb[i] != y->nb[i]) return false;
    }
    return true;
}

Status mul_mat_q8_group(rt::cuda::CudaStream & stream, ggml_tensor * const * nodes, int n, const ggml_tensor * add) {
    cudaStream_t st = stream.begin_launch();
    // One rounding of src1 for all members (mul_mat_group_ok: one src1).
    QuantizedY y = quantize_y(stream, nodes[0]->src[1], st);
    if (!y.ok) return Status::out_of_memory;
    mul_mat_q8_group_y(stream, nodes, n, add, y.q, y.ds);
    release(y, st);
    return true;
}

void mul_mat_q8_group_y(rt::cuda::CudaStream & stream, ggml_tensor * const * nodes, int n, const ggml_tensor * add,
                        const int8_t * q, const float2 * ds, const RowRope * ropes) {
    const ggml_tensor * b = nodes[0]->src[1];
    cudaStream_t st = stream.begin_launch();
    // Consecutive members of one weight type share a launch, kMaxGroup at
    // most; at one column, a K format's may be followed by another's (qk_mixes).
    for (int i = 0; i < n;) {
        Q8Group g{};
        const ggml_type t = nodes[i]->src[0]->type;
        ggml_type u = t;
        int64_t & rows = g.rows;
        while (i < n && g.n < kMaxGroup && rows + nodes[i]->src[0]->ne[1] <= int64_t(INT32_MAX) / 2) {
            const ggml_type ti = nodes[i]->src[0]->type;
            if (ti != u) {
                if (u != t || b->ne[1] != 1 || !qk_mixes(t, ti)) break;
                u = ti;
                g.second = g.n;
            }
            g.row0[g.n] = rows;
            g.m[g.n] = args_for(nodes[i]->src[0], b, nodes[i], q, ds);
            if (add != nullptr && n == 1) {
                const ggml_tensor * other = add->src[0] == nodes[i] ? add->src[1] : add->src[0];
                g.m[g.n].add = RowAdd{static_cast<const char *>(other->data), static_cast<char *>(add->data),
                                      int64_t(other->nb[1]), int64_t(add->nb[1])};
            }
            if (ropes != nullptr && ropes[i].kind != RowRope::none) {
                g.m[g.n].rope = ropes[i];
                g.rope = true;
            }
            rows += g.m[g.n].M;
            ++g.n;
            ++i;
        }
        SI_ASSERT_MSG(!g.rope || (rope_type(t) && rope_type(u)), "a RowRope epilogue for a weight type whose mat-vec has none");
        if (u == t) {
            launch_q8(t, g, st);
        } else {
            launch_qk2(t, u, g, st);
        }
        SI_CUDA_LAUNCH_CHECK();
    }
}

} // namespace standin::kernels::cuda::mm

namespace standin::kernels::cuda {

bool mul_mat_group_ok(const ggml_tensor * first, const ggml_tensor * next) {
    // The grouped launch is the integer mat-vec's: only where the kernel
    // table would pick it for each product alone.
    const auto vec = [](const ggml_tensor * t) {
        return plan::choose(mm::problem_for(t->src[0], t->src[1], 1)).path == plan::Path::vec_int;
    };
    // One quantized src1 serves all, whatever their weight types (Note [integer activations]).
    return first->op == GGML_OP_MUL_MAT && next->op == GGML_OP_MUL_MAT && first->type == GGML_TYPE_F32 &&
           next->type == GGML_TYPE_F32 && mm::same_src1(first->src[1], next->src[1]) && vec(first) && vec(next);
}

Status mul_mat_group(rt::cuda::CudaStream & stream, ggml_tensor * const * nodes, int n) {
    return mm::mul_mat_q8_group(stream, nodes, n);
}

bool norm_mul_mat_ok(const ggml_tensor * mul, const ggml_tensor * mm) {
    // The fused producers write the products' quantized input (Note [integer activations]).
    return mm->op == GGML_OP_MUL_MAT && mm->type == GGML_TYPE_F32 && mm->src[1] == mul && mul->ne[0] % 32 == 0 &&
           ggml_is_contiguous(mul) && plan::choose(mm::problem_for(mm->src[0], mul, 1)).path == plan::Path::vec_int;
}

namespace {

// The member of mms whose result `t` is, or is a view of; -1: none.
int member_of(ggml_tensor * const * mms, int n, const ggml_tensor * t) {
    const ggml_tensor * base = t->view_src != nullptr ? t->view_src : t;
    for (int i = 0; i < n; ++i) {
        if (mms[i] == base && (t == base || t->view_offs == 0)) return i;
    }
    return -1;
}

// A ROPE the epilogue can do: NORMAL pairs from channel 0, one position, F32
// rows of whole heads over the product's rows in order.
bool epilogue_rope(const ggml_tensor * rope, const ggml_tensor * mm) {
    RopeArgs ra;
    return rope_args_of(rope, ra) && rope->op == GGML_OP_ROPE && ra.rp.mode == num::kRopeNormal &&
           ra.rp.n_offs == 0 && rope->type == GGML_TYPE_F32 && ggml_is_contiguous(rope) && rope->ne[2] == 1 &&
           rope->ne[3] == 1 && rope->ne[0] * rope->ne[1] == mm->ne[0] && ggml_nelements(mm) == mm->ne[0] &&
           ggml_is_contiguous(rope->src[0]) && rope->src[1]->type == GGML_TYPE_I32 &&
           (rope->src[2] == nullptr || rope->src[2]->type == GGML_TYPE_F32);
}

} // namespace

bool norm_mul_mat_rope_ok(const ggml_tensor * mul, ggml_tensor * const * mms, int n, const QkvRope & r) {
    if (n != 3 || mul->ne[1] != 1 || ggml_nrows(mul) != 1 ||
        !rope_qkv_ok(r.q, r.k, r.k_set, r.v_set, r.k_cache_only)) {
        return false;
    }
    const int iq = member_of(mms, n, r.q->src[0]), ik = member_of(mms, n, r.k->src[0]);
    const int iv = member_of(mms, n, r.v_set->src[0]);
    if (iq < 0 || ik < 0 || iv < 0 || iq == ik || iq == iv || ik == iv) return false;
    for (int i = 0; i < n; ++i) {
        const ggml_tensor * w = mms[i]->src[0];
        if (!mm::rope_type(w->type) || w->ne[1] % 2 != 0 || mms[i]->ne[1] != 1) return false;
    }
    const ggml_tensor * v = r.v_set->src[0];
    if (!epilogue_rope(r.q, mms[iq]) || !epilogue_rope(r.k, mms[ik]) || v->ne[0] != mms[iv]->ne[0] ||
        v->ne[1] != 1 || ggml_nelements(mms[iv]) != mms[iv]->ne[0]) {
        return false;
    }
    // rope_qkv_ok checked what the rotations and cache writes write against
    // each other and what they read; the products' own results that are
    // still written must not meet any of those either.
    const ggml_tensor * writes[] = {r.q, r.k_set, r.v_set, r.k_cache_only ? nullptr : r.k};
    const ggml_tensor * reads[] = {r.q->src[1], r.q->src[2], r.k->src[1], r.k->src[2], r.k_set->src[1],
                                   r.v_set->src[1]};
    for (int i = 0; i < n; ++i) {
        if (!r.keep[i]) continue;
        for (const ggml_tensor * w : writes) {
            if (w != nullptr && overlaps(mms[i], w)) return false;
        }
        for (const ggml_tensor * x : reads) {
            if (x != nullptr && overlaps(mms[i], x)) return false;
        }
    }
    return true;
}

Status norm_mul_mat(rt::cuda::CudaStream & stream, ggml_tensor * norm, ggml_tensor * mul, ggml_tensor * const * mms, int n,
                    const QkvRope * rope) {
    auto & cs = stream;
    mm::RowRope ropes[3];
    if (rope != nullptr) {
        SI_ASSERT_MSG(n == 3, "norm_mul_mat_rope_ok admits Q, K and V");
        const int iq = member_of(mms, n, rope->q->src[0]), ik = member_of(mms, n, rope->k->src[0]);
        const int iv = member_of(mms, n, rope->v_set->src[0]);
        const auto rotation = [&](const ggml_tensor * r, int i, mm::RowRope & e) {
            e.kind = mm::RowRope::rotate;
            const bool ok = rope_args_of(r, e.ra);
            SI_ASSERT_MSG(ok, "norm_mul_mat_rope_ok admits this ROPE");
            e.head = r->ne[0];
            e.pos = static_cast<const int32_t *>(r->src[1]->data);
            e.ff = r->src[2] != nullptr ? static_cast<const float *>(r->src[2]->data) : nullptr;
            e.y = static_cast<char *>(r->data);
            e.y_nb1 = int64_t(r->nb[1]);
            e.write_dst = rope->keep[i];
        };
        rotation(rope->q, iq, ropes[iq]);
        rotation(rope->k, ik, ropes[ik]);
        if (rope->k_cache_only) ropes[ik].y = nullptr;
        ropes[ik].co = cache_out_of(rope->k_set);
        ropes[iv].kind = mm::RowRope::copy;
        ropes[iv].head = mms[iv]->ne[0];  // the whole row, one "head"
        ropes[iv].co = cache_out_of(rope->v_set);
        ropes[iv].write_dst = rope->keep[iv];
    }
    cudaStream_t st = cs.begin_launch();
    mm::QuantizedY y = mm::reserve_y(cs, mul->ne[0], ggml_nrows(mul), st);
    if (!y.ok) return Status::out_of_memory;
    const Status ok = rms_norm_mul_quant(stream, norm, mul, y.q, y.ds);
    if (ok) mm::mul_mat_q8_group_y(cs, mms, n, nullptr, y.q, y.ds, rope != nullptr ? ropes : nullptr);
    mm::release(y, st);
    return ok;
}

bool glu_mul_mat_ok(const ggml_tensor * glu, const ggml_tensor * mm) {
    return glu->op == GGML_OP_GLU && glu->type == GGML_TYPE_F32 && ggml_is_contiguous(glu) && glu->ne[0] % 32 == 0 &&
           norm_mul_mat_ok(glu, mm);
}

Status glu_mul_mat(rt::cuda::CudaStream & stream, ggml_tensor * glu, ggml_tensor * mm, const ggml_tensor * add) {
    auto & cs = stream;
    cudaStream_t st = cs.begin_launch();
    mm::QuantizedY y = mm::reserve_y(cs, glu->ne[0], ggml_nrows(glu), st);
    if (!y.ok) return Status::out_of_memory;
    const Status ok = glu_quant(stream, glu, y.q, y.ds);
    if (ok) mm::mul_mat_q8_group_y(cs, &mm, 1, add, y.q, y.ds);
    mm::release(y, st);
    return ok;
}

bool fa_mul_mat_ok(const ggml_tensor * fa, const ggml_tensor * mm) {
    const ggml_tensor * in = mm->src[1];
    // The product reads all of the attention's output as rows of heads x DV (llama's reshape).
    return fa->op == GGML_OP_FLASH_ATTN_EXT && fa->type == GGML_TYPE_F32 && ggml_is_contiguous(fa) &&
           fa->ne[0] % 32 == 0 && in != nullptr && in->view_src == fa && in->view_offs == 0 &&
           ggml_is_contiguous(in) && in->ne[0] == fa->ne[0] * fa->ne[1] && ggml_nelements(in) == ggml_nelements(fa) &&
           norm_mul_mat_ok(in, mm);
}

Status fa_mul_mat(rt::cuda::CudaStream & stream, ggml_tensor * fa, ggml_tensor * mm, const ggml_tensor * add) {
    auto & cs = stream;
    const ggml_tensor * in = mm->src[1];
    cudaStream_t st = cs.begin_launch();
    mm::QuantizedY y = mm::reserve_y(cs, in->ne[0], ggml_nrows(in), st);
    if (!y.ok) return Status::out_of_memory;
    bool quantized = false;
    cs.hold_scratch(y.held);  // the combine writes y while the split kernels use scratch too
    const Status ok = flash_attn_ext_quant(stream, fa, y.q, y.ds, quantized);
    cs.release_scratch();
    if (ok) {
        if (!quantized) mm::quantize_act(in, y.q, y.ds, cs.begin_launch());  // not the split kernels: a prompt
        mm::mul_mat_q8_group_y(cs, &mm, 1, add, y.q, y.ds);
    }
    mm::release(y, st);
    return ok;
}

bool mul_mat_add_ok(const ggml_tensor * mm, const ggml_tensor * add) {
    if (mm->op != GGML_OP_MUL_MAT || add->op != GGML_OP_ADD || mm->type != GGML_TYPE_F32 ||
        add->type != GGML_TYPE_F32) {
        return false;
    }
    // Only the kernels with the fused epilogue (the sms do not change the path).
    const plan::Path path = plan::choose(mm::problem_for(mm->src[0], mm->src[1], 1)).path;
    if (path != plan::Path::vec_int && path != plan::Path::mmq) {
        return false;
    }
    const bool first = add->src[0] == mm, second = add->src[1] == mm;
    if (first == second) return false;  // mm must be exactly one of the operands (not both: mm + mm)
    const ggml_tensor * other = first ? add->src[1] : add->src[0];
    // One matrix of rows with 4-byte elements on every side (the epilogue's layout).
    const auto rows_ok = [](const ggml_tensor * t) {
        return t->nb[0] == sizeof(float) && t->ne[2] == 1 && t->ne[3] == 1;
    };
    return other->type == GGML_TYPE_F32 && ggml_are_same_shape(mm, add) && ggml_are_same_shape(other, add) &&
           rows_ok(mm) && rows_ok(other) && rows_ok(add);
}

Status mul_mat_add(rt::cuda::CudaStream & stream, ggml_tensor * mm, const ggml_tensor * add) {
    auto & cs = stream;
    const plan::Choice c = mm::plan_for(mm->src[0], mm->src[1], cs);
    if (c.path == plan::Path::mmq) return mm::mul_mat_mmq(cs, mm, c, add);
    SI_ASSERT_MSG(c.path == plan::Path::vec_int, "mul_mat_add_ok admitted a product with no fused-ADD kernel");
    return mm::mul_mat_q8_group(cs, &mm, 1, add);
}

} // namespace standin::kernels::cuda
