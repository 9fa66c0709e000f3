// Note [product plan]
// The one table that picks the CUDA kernel of a MUL_MAT for a weight type and
// a number of src1 columns (mul_mat.cu asks it, and nothing else decides):
//
//   weights            columns       kernel
//   Q4_0..Q5_1, Q8_0   1..8          integer mat-vec (mul_mat_vec_q8.cu)
//   Q4_K, Q5_K, Q6_K   1..2          integer mat-vec (mul_mat_vec_k.cu)
//   Q2_K / Q3_K        1 / 1..2      the same
//   IQ2_XXS, IQ2_XS,   1..4          the same (mmq.cu's formats read in place)
//   IQ2_S, IQ3_XXS,
//   IQ3_S
//   IQ4_NL, IQ4_XS,    1..8          integer mat-vec, a lane per block
//   MXFP4                            (mul_mat_vec_q8.cu)
//   the formats above  2(3, 5, 9)..127  integer tensor-core product
//                                    (mmq.cu), 8..64 columns per tile
//                      128..         cuBLAS over weights decoded to F16
//                                    (mul_mat_blas.cu) when it is loaded,
//                                    else mmq.cu
//   F32, F16, BF16     1..8          warp-per-row mat-vec (mul_mat_vec.cu)
//                      9..           cuBLAS, else the tiled TF32 kernel
//   other integer-     1..8          integer mat-vec over decode_run's runs
//   form (IQ1_S,                     (mul_mat_vec_run.cu)
//   IQ1_M, NVFP4,      9..           cuBLAS over weights decoded to F16,
//   Q1_0, Q2_0)                      else the tiled TF32 kernel (weight_types.h
//                                    lists them)
// MUL_MAT_ID's experts: choose_id at the end (mat-vecs to 32 pairs, then
// mmq over the pairs grouped by expert).
// Rows the mmq formats' kernels cannot read (mmq: 16-byte aligned rows;
// the K formats' mat-vec: a 4-byte aligned first block) take the run
// mat-vec up to 8 columns and the decoding paths beyond, as the last row.
// Measured on the H200 (4096 x 14336, `standin matmul`, results/h200): the
// mat-vecs beat mmq up to the counts of vec_int below; mmq is ahead of
// ggml-cuda at 8 to 16 columns (Q4_0 1.23-1.26), level at 24, 32 and 64
// (0.98-1.00), behind at 48 and 96 (0.80, 0.68; Q8_0 and the K formats
// 0.6-0.9 from 24: summary-64.txt), and from 128 the F16 GEMM is faster. On
// the H100 with the 48-column tiles, the sector-wide copies and the TF32
// minimum (summary-88.txt) Q4_0 at 48 / 96 columns takes 0.93 / 0.82 of
// ggml-cuda's speed, Q4_K 0.81-0.95 / 0.78. The 4-bit table formats joined mmq's counts when the F16 decode and
// cuBLAS they had taken from 9 columns measured far slower (IQ4_XS 4096 x
// 14336 at 16 / 64 / 128 columns 177 / 181 / 188 us against mmq's 43 / 77 /
// 126 and ggml-cuda's 40 / 66 / 97; 1B IQ4_XS batched decode at 16 / 32 / 64
// sequences 0.58 / 0.58 / 0.74 of ggml-cuda, with mmq 1.13 / 1.03 / 0.99:
// summary-89.txt). So did Q2_K, Q3_K and the IQ2/IQ3 grids (on the H100,
// summary-90.txt, -91.txt; 4096 x 14336 at 16 columns, us, F16 decode and
// cuBLAS / mmq / ggml-cuda): Q2_K 175.2 / 43.1 / 48.4, Q3_K 136.1 / 54.1 /
// 47.7, IQ2_XXS 201.8 / 53.0 / 46.7, IQ3_S 165.0 / 49.8 / 54.2; at 128
// columns mmq was still ahead of that path for them (IQ2_XXS 138.8 against
// 212.1 us, Q2_K 143.2 against 184.9), not measured beyond.
//
// Tile shape: columns per tile 8 * nt (nt = 1, 2, 4, 6, 8), weight rows per block
// 64 * mw (mw = 1, 2); SI_MMQ_SHAPES lists the pairs mmq.cu builds (those
// mmq_shape_built allows for the type). When the
// tiles alone would not fill the GPU twice over,
// K is split across a thread-block cluster of `splits` blocks that meet in
// distributed shared memory (no second pass, fixed order: deterministic).
//
// Plain C++ (no CUDA headers): tests/kernels/test_mm_plan.cpp checks, without a
// GPU, that every weight type MUL_MAT claims gets a kernel made for its column
// count at every count from 1 to 4096.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ggml.h"
#include "kernels/cuda/weight_types.h"

namespace standin::kernels::cuda::plan {

enum class Path { vec_int, vec_float, mmq, blas, tile };

inline const char * path_name(Path p) {
    switch (p) {
        case Path::vec_int:   return "vec_int";
        case Path::vec_float: return "vec_float";
        case Path::mmq:       return "mmq";
        case Path::blas:      return "blas";
        case Path::tile:      return "tile";
    }
    return "?";
}

struct Problem {
    ggml_type type;           // weights
    int64_t   K, M, N;        // N: src1 columns per matrix
    int64_t   matrices;       // ne12 * ne13
    bool      rows_aligned;   // weight rows and base 16-byte aligned
    bool      vec_int_ok;     // the integer mat-vec takes it (mm::q8_applies)
    bool      blas_ok;        // cuBLAS is loaded and enabled
    int       sms;            // multiprocessors of the device
    int       mmq_mode;       // 0: table, 1: never mmq, 2: mmq wherever it can run
};

struct Choice {
    Path path  = Path::tile;
    int  nt    = 0;  // mmq: n-tiles of 8 columns per tile
    int  mw    = 0;  // mmq: 16-row m-tiles per warp (block rows 64 * mw)
    int  split = 1;  // mmq: blocks of a cluster sharing K
};

// The mmq tile shapes (nt, mw) there are kernels for: mmq_choice picks among
// them, mmq.cu instantiates each, the plan's test checks the one against the
// other. Tiles of 128 x 128 (nt 16, one block per SM at 255 registers) measured
// slower in a model on the H100 (results/h200/summary-84.txt: 8B Q4_0 pp512
// with cuBLAS off 9461-9591 t/s against 10077-10115; Q4_K / Q5_K products
// slower at every count from 64 columns, spilling), so there are none.
#define SI_MMQ_SHAPES(X) X(1, 1) X(2, 1) X(4, 1) X(8, 1) X(4, 2) X(6, 2) X(8, 2)

// 32-column tiles of 128 rows (nt 4, mw 2) split 8 ways along K, for the
// weight types where they measured faster than 64 rows (17-32 columns; mmq.cu
// builds that shape for them alone). On the H100 (`standin matmul --devices
// CUDA0,STANDIN_CUDA0 --rotate 4 --reps 20`, results/h200/summary-106.txt,
// call 2; us at 24 / 32 columns, 64 rows with the fitted split -> 128 rows
// split 8, ggml-cuda beside): Q4_0 4096 x 14336 52.5 / 54.3 -> 44.5 / 45.6
// (50.5 / 53.3), 14336 x 4096 43.6 / 45.2 -> 41.8 / 42.6 (48.3 / 52.0); Q8_0
// 4096 x 14336 64.7 / 66.8 -> 52.1 / 57.4 (55.9 / 60.5). At 16 columns 128
// rows gained at most 7% (two n-tiles; ptxas spills 8 bytes there) and at
// 48-64 columns the forced split 8 was slower than the fitted one, so those
// keep their tiles. The split is fitted to the clusters resident at launch
// (mmq.cu) as every split is.
constexpr bool mmq_quarter_wide(ggml_type t) { return t == GGML_TYPE_Q4_0 || t == GGML_TYPE_Q8_0; }
// Whether mmq.cu builds tile shape (nt, mw) for type t.
constexpr bool mmq_shape_built(ggml_type t, int nt, int mw) { return !(nt == 4 && mw == 2) || mmq_quarter_wide(t); }

constexpr int kVecMaxN = 8;      // float weights: the mat-vec up to here
constexpr int kBlasOverMmqN = 128;  // block weights: cuBLAS (when loaded) from here
constexpr int kMmqMaxCols = 64;     // the widest mmq tile

// Elements per mmq pipeline step (K must be a multiple), 0 for a type mmq
// has no format for (weight_types.h's SI_CUDA_MMQ_WEIGHT_TYPES lists them):
// 256, one super-block or 8 blocks of 32; two super-blocks where one is not a
// whole number of 4-byte words (Q3_K, Q6_K, the IQ2/IQ3 grids). mmq.cu
// asserts that its formats' chunks are these.
inline int mmq_chunk(ggml_type t) {
    switch (t) {
#define SI_X(name) case GGML_TYPE_##name:
        SI_CUDA_MMQ_WEIGHT_TYPES(SI_X)
#undef SI_X
            return ggml_blck_size(t) == 32 || ggml_type_size(t) % 4 == 0 ? 256 : 512;
        default:
            return 0;
    }
}

// The integer mat-vec's weight types: the most src1 columns it takes
// (mm::q8_applies adds the shape checks), and up to how many the table picks
// it over mmq, measured on the H200 (4096 x 14336, `standin matmul`,
// results/h200/summary-39.txt): the 32-element formats' lane-per-block
// mat-vec (mul_mat_vec_q8.cu) takes 8 and won up to five columns there (Q4_0
// at 3 / 4 / 5: 23.0 / 27.4 / 30.9 us against mmq's 34.5 / 34.7; at 8 41.5
// against 35.5; Q8_0 at 3 / 4 / 5: 27.0 / 31.1 / 37.4, at 8 49.4 against mmq's
// 41.7). Since its several-column steps ask for four columns' activation
// words at once (mmv_formats.cuh, step_dot) and reduce their row sums in one
// many-value warp sum, it wins to 8 on the H100 (results/h200/summary-104.txt,
// call 3; `standin matmul`, us, mat-vec at 6 / 8 columns against mmq's of the
// round before, summary-103.txt): 4096 x 14336 Q4_0 26.4 / 29.6 against 34.0 /
// 34.4, Q8_0 33.3 / 35.5 against 46.0 / 46.1; 14336 x 4096 Q4_0 28.8 / 32.7
// against 31.5 / 32.4, Q8_0 36.8 / 40.4 against 46.2 / 46.7. 8B Q4_0 batched
// decoding, S_TG over ggml-cuda's at 6 / 8 sequences: 0.96 / 1.10 with mmq
// from 6 columns (call 1), 1.26-1.29 / 1.36-1.41 now (call 5). The K formats
// (mul_mat_vec_k.cu) take 4 and win at two (Q4_K 30 against 42 us, Q6_K 44
// against 64), not at three or four (Q4_K 48 against 42). The integer-form
// formats take 8, with no mmq to weigh against. {0, 0}: none.
struct VecInt {
    int max_n;
    int pick_n;
};
inline VecInt vec_int(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0:
            return {8, 8};
        case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
            return {4, 2};
        // The K formats' kernel to 4 columns, runs (mul_mat_vec_run.cu) to 8.
        // 4096 x 14336 on the H100 (summary-90.txt, -91.txt), us, mat-vec /
        // mmq: Q2_K 17.0 / 27.7 at one column, 35.1 / 30.6 at two; Q3_K 26.0 /
        // 49.6 at one, 40.8 / 49.7 at two, 55.3 / 49.9 at four; the grids at
        // four 44.2 / 52.6 (IQ2_XXS), 49.4 / 50.5 (IQ3_S), at six 80.2 / 53.0
        // (the runs against mmq).
        case GGML_TYPE_Q2_K:
            return {8, 1};
        case GGML_TYPE_Q3_K:
            return {8, 2};
        case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ3_S:
            return {8, 4};
        default:
            return is_int_form_weight(t) ? VecInt{8, 8} : VecInt{0, 0};
    }
}
inline int vec_int_max_n(ggml_type t) { return vec_int(t).max_n; }

// The K formats' mat-vec launch (mul_mat_vec_k.cu): rw consecutive weight rows
// per warp (1, 2, 4: they share the activation loads) and r warps per row
// group (1, or kKSplitWarps splitting K over a block's warps, which meet in
// shared memory). A launch of `rows` rows of K = 256 n_sb over `mats`
// matrices and N columns; max_rw: what the formats' registers allow; rows_rw:
// the largest of 4, 2, 1 that divides every member's rows; rope: the launch
// has the RowRope epilogue, whose rotation pairs sit in one warp or, one row a
// warp, in neighbouring warps of a block (so never rw 1 with a split).
//   - K is split where the warps are too few to keep weight bytes in flight
//     and each warp still gets a super-block per lane group, or where a row
//     alone is a long chain of dependent steps (measured: 2 columns of 4096 x
//     14336 Q4_K took 54 us with a warp per row, 14 steps each).
//   - One column: rows per warp as many as max_rw, fewer where that would
//     leave fewer than kKFillOne warps even with the split. Several columns:
//     one row per warp, the weight loads shared by the columns instead.
//   - The fill: several columns 4096 (not measured at 2048); one column 2048
//     (4096 before; the 32-element mat-vec's is 2048 too). `standin matmul
//     --type q4_k --n 1 --rotate 4` on the H100 (results/h200/summary-102.txt,
//     call 3, by forced configuration), us, 4096 -> 2048: 8192 x 2048 9.7 ->
//     8.8 (four rows, no split), 2048 x 8192 10.0 -> 8.8 (four rows, split),
//     14336 x 4096 23.3 -> 21.2 (no split); Q6_K 2048 x 8192 13.3 -> 14.1. 1B
//     Q4_K_M tg128 1124.35 / 1121.99 t/s against 1096.07 / 1109.98, 8B Q4_K_M
//     level (304.00 / 301.52 against 303.87 / 303.99; call 4).
// tests/kernels/test_mm_plan.cpp holds the shapes of 1B and 8B models.
constexpr int kKSplitWarps = 4;              // mul_mat_vec_k.cu's warps per block
constexpr int64_t kKSplitStep = 16;          // super-blocks a block's warps take at once
constexpr int64_t kKFill = 4096, kKFillOne = 2048;
struct KVecShape {
    int rw;
    int r;
};
inline bool k_split(int64_t warps, int64_t n_sb, int64_t fill) {
    return (warps < fill && n_sb >= kKSplitStep) || n_sb >= 2 * kKSplitStep;
}
inline KVecShape k_vec_shape(int64_t rows, int64_t n_sb, int64_t mats, int64_t N, int max_rw, int rows_rw, bool rope) {
    if (N > 1) return {1, k_split(rows * mats, n_sb, kKFill) ? kKSplitWarps : 1};
    const int64_t split = n_sb >= kKSplitStep ? kKSplitWarps : 1;
    int rw = max_rw;
    while (rw > 1 && (rw > rows_rw || rows / rw * mats * split < kKFillOne)) rw /= 2;
    if (rope && rw == 1 && k_split(rows * mats, n_sb, kKFillOne)) rw = 2;
    return {rw, k_split(rows / rw * mats, n_sb, kKFillOne) ? kKSplitWarps : 1};
}

inline bool is_float(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

inline bool mmq_can(const Problem & p) {
    const int chunk = mmq_chunk(p.type);
    return chunk > 0 && p.K % chunk == 0 && p.rows_aligned && p.M > 0 && p.N > 0;
}

// Whether mmq may take the product: a kernel for it, and the knob allows it.
inline bool mmq_allowed(const Problem & p) { return mmq_can(p) && p.mmq_mode != 1; }

// Tile shape and K split for mmq; split_ok: the launch may split K (MUL_MAT_ID's may not).
inline Choice mmq_choice(const Problem & p, bool split_ok = true) {
    Choice c;
    c.path = Path::mmq;
    const int64_t n8 = (p.N + 7) / 8;
    c.nt = n8 <= 1 ? 1 : n8 <= 2 ? 2 : n8 <= 4 ? 4 : kMmqMaxCols / 8;
    // 48-column tiles where they cover the columns with fewer computed
    // columns than 64-column ones (33-48, 65-96, 129-144, ...). Measured
    // together with mmq.cu's sector-wide copies and TF32 minimum (4096 x
    // 14336 on the H100 at 48 / 96 columns, us; summary-88.txt): Q4_0 64.7 /
    // 104.0 against 66.7-73.3 / 123.3 before the three, Q4_K 67.2-78.7 /
    // 119.9 against 96.3-97.4 / 162.8-163.8.
    if (c.nt == 8 && p.M >= 128 && (n8 + 5) / 6 * 6 < (n8 + 7) / 8 * 8) c.nt = 6;
    // Wide tiles: 128 rows per block, each warp's B fragments serving two
    // m-tiles (half the shared-memory reads per product). Measured on the
    // H200 (4096 x 14336, `standin matmul`, results/h200/summary-43.txt): 48
    // / 64 columns of Q4_0 91.7 / 96.5 us against 108.7 / 114.4 with 64 rows
    // (the rows alone no longer fill the GPU; the K split does). Narrow tiles
    // are bound by weight bytes and keep 64 rows, for more blocks.
    c.mw = c.nt >= 6 && p.M >= 128 ? 2 : 1;
    // 32 columns of 128 rows: the K split, as measured, is what fills the GPU (mmq_quarter_wide).
    if (c.nt == 4 && p.M >= 128 && split_ok && mmq_quarter_wide(p.type)) {
        c.mw = 2;
        c.split = int(std::min<int64_t>(8, p.K / mmq_chunk(p.type)));
        return c;
    }
    const int64_t rows = 64 * c.mw;
    const int64_t blocks = (p.M + rows - 1) / rows * ((p.N + 8 * c.nt - 1) / (8 * c.nt)) * p.matrices;
    // Narrow tiles are latency-bound: four blocks per SM keep enough weight
    // bytes in flight (measured: two per SM reach half the bandwidth).
    const int64_t want = (c.nt <= 2 ? 4 : 2) * int64_t(p.sms);
    if (blocks < want) {
        const int64_t chunks = p.K / mmq_chunk(p.type);
        c.split = int(std::min<int64_t>({8, (want + blocks - 1) / blocks, chunks}));
    }
    return c;
}

inline Choice choose(const Problem & p) {
    Choice c;
    if (is_float(p.type)) {
        c.path = p.N <= kVecMaxN ? Path::vec_float : p.blas_ok ? Path::blas : Path::tile;
        return c;
    }
    const bool mmq = mmq_allowed(p);
    if (is_int_form_weight(p.type) && !mmq) {
        // The mat-vec wherever it takes the product (q8_applies: 2-byte aligned
        // rows); beyond, or for rows it cannot read, the F16 decode and cuBLAS,
        // else the tiled kernel (both decode whole runs).
        c.path = p.vec_int_ok ? Path::vec_int : p.N > kVecMaxN && p.blas_ok ? Path::blas : Path::tile;
        return c;
    }
    if (p.vec_int_ok && (p.N <= vec_int(p.type).pick_n || !mmq) && p.mmq_mode != 2) {
        c.path = Path::vec_int;
        return c;
    }
    if (mmq && (p.N < kBlasOverMmqN || !p.blas_ok || p.mmq_mode == 2)) {
        return mmq_choice(p);
    }
    if (mmq) {
        c.path = Path::blas;  // the launcher falls back to mmq if cuBLAS refuses
        return c;
    }
    // Types or shapes mmq has no kernel for: the decoding mat-vec for few
    // columns, cuBLAS (decoded to F16) or the tiled kernel beyond.
    c.path = p.N <= kVecMaxN ? Path::vec_float : p.blas_ok ? Path::blas : Path::tile;
    return c;
}

// MUL_MAT_ID (mul_mat_id.cu) of `pairs` (slot, token) pairs: `p` is one
// expert's product, N the mean columns per expert (pairs / n_as, rounded up),
// matrices the experts, vec_int_ok whether the integer mat-vec takes the
// experts (mm::q8_id_applies). Up to kIdVecPairs pairs a mat-vec, one pair
// per matrix (float weights: the float mat-vec to kIdVecFloatPairs); beyond, mmq over the pairs
// grouped by expert on the device (tiles from a device-side list, no K
// split: the list is not known when the grid is sized) for the formats it
// has; the integer mat-vec, whose reach is any number of pairs, for the
// other integer formats and with mmq off; the tiled float kernel over the
// grouped pairs for float weights and the rest. The tiled kernel decodes
// every weight it reads: on the H100 it took 0.9-3.4 ms at 64-2048 pairs of
// the qwen3-30b-a3b and 32-expert shapes, 6-35x mmq (results/h200/
// summary-92.txt, -93.txt); the integer mat-vec at 2048 pairs 2.0-2.9 ms
// against mmq's 0.16-0.18. The integer mat-vec's reach over mmq, measured
// one process at a time on the H100 (summary-94.txt; us, mat-vec / mmq /
// ggml-cuda): at qwen3's shape 64 pairs Q4_0 28.3 / 37.6 / 20.4, Q4_K 31.7 /
// 42.3 / 25.8; 256 pairs Q4_0 100.8 / 63.5 / 135.7, Q4_K 111.7 / 67.7 / 138.0.
// (summary-92/-93's perf lists, the figures above included, ran their three
// processes on the GPU at once: indications, not side-by-side timings.)
constexpr int64_t kIdVecPairs = 64;
constexpr int64_t kIdVecFloatPairs = 32;  // float experts, or rows the integer mat-vec cannot read: the float mat-vec to here
inline Choice choose_id(const Problem & p, int64_t pairs) {
    Choice c;
    const bool mmq = !is_float(p.type) && mmq_allowed(p);
    const int64_t vec_reach = p.vec_int_ok ? kIdVecPairs : kIdVecFloatPairs;
    if (mmq && (pairs > vec_reach || p.mmq_mode == 2)) {
        c = mmq_choice(p, false);
        c.split = 1;
        return c;
    }
    c.path = p.vec_int_ok ? Path::vec_int : pairs <= kIdVecFloatPairs ? Path::vec_float : Path::tile;
    return c;
}

} // namespace standin::kernels::cuda::plan
