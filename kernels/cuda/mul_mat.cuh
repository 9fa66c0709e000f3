// Internal interface of the CUDA MUL_MAT / MUL_MAT_ID kernels (mul_mat.cu:
// driver, src1 staging and the tiled tensor-core path; mul_mat_vec.cu: the
// warp-per-row path for few src1 columns; mul_mat_id.cu: experts).
//
// Every path reads src1 as dense F32 ("Y"): columns of K floats, element
// stride 1, column stride y_nb1 bytes. When src1 is not already like that, or
// when the weights are F16/BF16 (whose products ggml-cpu forms after rounding
// src1 to the weight type), stage_y() writes such a copy into stream-ordered
// scratch memory first.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "ggml.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mm_plan.h"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/weight_types.h"
#include "kernels/kernel.h"

namespace standin::kernels::cuda::mm {

// The mat-vecs' column widths: f(std::integral_constant<int, NC>{}) with the
// smallest of 1, 2, 4, 8 that holds N columns (N <= 8; the kernels skip the
// columns past N).
template <typename F> void with_col_width(int64_t N, F && f) {
    if (N <= 1) {
        f(std::integral_constant<int, 1>{});
    } else if (N <= 2) {
        f(std::integral_constant<int, 2>{});
    } else if (N <= 4) {
        f(std::integral_constant<int, 4>{});
    } else {
        f(std::integral_constant<int, 8>{});
    }
}

struct Args {
    const char * a;  // weights (src0): rows of K elements or K/QK blocks
    int64_t      a_nb1, a_nb2, a_nb3;
    const char * y;  // src1 as dense f32 columns
    int64_t      y_nb1, y_nb2, y_nb3;
    char *       d;  // dst (f32, dim 0 dense)
    int64_t      d_nb1, d_nb2, d_nb3;
    int64_t      K, M, N, ne12, ne13, r2, r3;
    bool         a_vec;    // float weights: rows 16-byte aligned and K % 8 == 0 (8-wide loads)
    int64_t      n_tiles;  // tiled path: column tiles per matrix (set by its launcher)
};

// src1 (any float type and strides) -> dense columns of `ld` elements of O
// (float, __half or __nv_bfloat16). Float output is rounded through
// `round_to` (GGML_TYPE_F16 / BF16) when that is not F32, as ggml-cpu rounds
// src1 for weights of those types; the 16-bit outputs round once, to nearest.
template <typename O>
__global__ void dense_columns_kernel(Shape b, const char * bd, O * y, int64_t ld, int round_to, int64_t n) {
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
        float v = load_f(b.type, bd + offset_of(b, k));
        O out;
        if constexpr (std::is_same<O, float>::value) {
            if (round_to == GGML_TYPE_F16) {
                v = __half2float(__float2half_rn(v));
            } else if (round_to == GGML_TYPE_BF16) {
                v = __bfloat162float(__float2bfloat16_rn(v));
            }
            out = v;
        } else if constexpr (std::is_same<O, __half>::value) {
            out = __float2half_rn(v);
        } else {
            out = __float2bfloat16_rn(v);
        }
        y[(k / b.ne[0]) * ld + k % b.ne[0]] = out;
    }
}

// Y columns for the kernels: either src1 itself or a staged copy.
struct Staged {
    const char * y = nullptr;
    int64_t      nb1 = 0, nb2 = 0, nb3 = 0;
    void *       scratch = nullptr;  // to release with cudaFreeAsync after the kernels
    bool         ok = true;          // false: the scratch allocation failed (out of memory)
};

// src1 (K, N, ne12, ne13), any float type and strides -> dense f32 columns
// (16-byte aligned, so the mat-vec path may use 16-byte loads), rounded as
// ggml-cpu rounds them for `weight_type` (F16/BF16: to that type; block
// formats: act_round.cuh). An allocation failure is reported in `ok` (and
// logged), not aborted on.
Staged stage_y(const ggml_tensor * b, ggml_type weight_type, cudaStream_t st);
void   release(Staged & s, cudaStream_t st);

// Keeps freed stream-ordered scratch in the device's pool across syncs.
void keep_pool_memory();

// Note [integer activations]
// src1 quantized for the integer kernels (the mat-vecs, mmq): per 32 values
// int8 codes and {d, d * sum of the codes} (column c at q + c * K and
// ds + c * K / 32), one scale per 32 values for every weight type. ggml-cpu
// rounds the K formats' and the 256-element formats' activations per 256
// (Q8_K); 32-groups round more finely (as ggml-cuda's q8_1 does), and they
// let the producers of an activation (the fused RMS_NORM x MUL, the GLU)
// write the one quantized input that every product after them reads,
// whatever the products' weight types. In the stream's scratch, or
// stream-ordered memory while a graph is recorded (`pooled`, freed by
// release). ok false: no memory (logged).
struct QuantizedY {
    int8_t * q      = nullptr;
    float2 * ds     = nullptr;
    void *   pooled = nullptr;
    size_t   held   = 0;  // its bytes at the start of the stream's scratch (0: pooled), for hold_scratch
    bool     ok     = false;
};
QuantizedY quantize_y(rt::cuda::CudaStream & stream, const ggml_tensor * b, cudaStream_t st);
// The same memory for `cols` columns of K values, for a kernel that writes
// the codes itself (the fused RMS_NORM x MUL).
QuantizedY reserve_y(rt::cuda::CudaStream & stream, int64_t K, int64_t cols, cudaStream_t st);
void       release(QuantizedY & y, cudaStream_t st);

// The kernel table's question (Note [product plan]) for weights a and src1 b
// on a device of `sms` multiprocessors (only the K split depends on it), with
// the configured knobs, and its answer on the stream's device.
plan::Problem problem_for(const ggml_tensor * a, const ggml_tensor * b, int sms);
// The same for MUL_MAT_ID's experts `as` and ids (plan::choose_id's problem).
plan::Problem problem_for_id(const ggml_tensor * as, const ggml_tensor * b, const ggml_tensor * ids, int sms);
inline plan::Choice plan_for(const ggml_tensor * a, const ggml_tensor * b, const rt::cuda::CudaStream & stream) {
    return plan::choose(problem_for(a, b, stream.sm_count()));
}

// The fields Args and Q8Args share: weights a, dst d, the sizes, and the
// broadcast ratios r2, r3 of src1 b over a.
template <typename P> void fill_common(P & p, const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * d) {
    p.a = static_cast<const char *>(a->data);
    p.a_nb1 = int64_t(a->nb[1]);
    p.a_nb2 = int64_t(a->nb[2]);
    p.a_nb3 = int64_t(a->nb[3]);
    p.d = static_cast<char *>(d->data);
    p.d_nb1 = int64_t(d->nb[1]);
    p.d_nb2 = int64_t(d->nb[2]);
    p.d_nb3 = int64_t(d->nb[3]);
    p.K = a->ne[0];
    p.M = a->ne[1];
    p.N = b->ne[1];
    p.ne12 = b->ne[2];
    p.ne13 = b->ne[3];
    p.r2 = b->ne[2] / a->ne[2];
    p.r3 = b->ne[3] / a->ne[3];
}

// A fused ADD after a mat-vec (mul_mat_add): the row sums are also added to
// `src` and written to `dst` (column c at + c * nb1 of each, rows of 4 bytes).
struct RowAdd {
    const char * src = nullptr;
    char *       dst = nullptr;
    int64_t      src_nb1 = 0, dst_nb1 = 0;
};

// Note [rope epilogue]
// Decoding runs Q/K/V as one grouped mat-vec and then, in one launch of its
// own, Q's and K's ROPE with the cache writes of K and V (rope_qkv). The
// rotation pairs channels 2j and 2j + 1 of a head (NORMAL mode), which are two
// consecutive weight rows, and the mat-vecs hold consecutive rows in one warp
// (RW even; with R > 1 warps, in neighbouring lanes of the first) or, one row
// a warp, in neighbouring warps of a block (the K formats' few-row launches,
// through shared memory): so the
// epilogue that stores the row sums can rotate them as well, and write Q's
// rotated rows, K's rotated rows and their cache row, and V's cache row,
// where the ROPE and SET_ROWS nodes would. The angle and the rotation are
// rope.cuh's, those of the ROPE kernel, so the bits are the same. A member's
// own product is still written where another node reads it (write_dst).
// One column only (decoding: the column is the position).
struct RowRope {
    enum Kind : int { none = 0, rotate = 1, copy = 2 };
    int            kind = none;
    bool           write_dst = true;  // the product's own result too
    RopeArgs       ra{};
    int64_t        head = 0;          // channels per head (rope ne0)
    const int32_t * pos = nullptr;    // the column's position (pos[0])
    const float *  ff = nullptr;      // frequency factors; null: none
    char *         y = nullptr;       // the rotated result (F32, heads at y_nb1); null: not written
    int64_t        y_nb1 = 0;
    CacheOut       co{};              // cache row idx[0]: the member's rows in order; co.d null: none
};

// Row `row` of a RowRope member: its value v and its pair partner's (row ^ 1).
__device__ __forceinline__ void rope_store(const RowRope & e, int64_t row, float v, float partner) {
    const int64_t i1 = row / e.head, i0 = row % e.head;
    float out = v;
    if (e.kind == RowRope::rotate && i0 < 2 * rope_pairs(e.ra.rp)) {
        const float2 cs = pair_cos_sin(e.ra, e.pos, 0, 1, e.ff, int(i0 / 2));
        out = (i0 & 1) != 0 ? rope_second(partner, v, cs) : rope_first(v, partner, cs);
    }
    if (e.y != nullptr) *reinterpret_cast<float *>(e.y + i1 * e.y_nb1 + i0 * 4) = out;
    if (char * c = cache_at(e.co, i0, i1, 0, e.head)) store_f(e.co.type, c, out);
}

// End of a mat-vec row group: the lanes' partial sums of RW consecutive rows
// by NC columns (acc[r * NC + c]) -> dst (row r, column c at
// drow + r * 4 + c * d_nb1), and with a RowAdd (offset to the same first row)
// the sums plus its src to its dst. R consecutive warps share the rows (R > 1:
// through `part`, kWarps x RW*NC floats of shared memory, and a barrier every
// warp of the block reaches; the first of the R writes); `live` is false for
// warps past the last row.
// With kRope (NC == 1, RW even; rope non-null), the rows' RowRope epilogue
// too: `m` is the first row's index in its member (Note [rope epilogue]).
// One row per warp (RW == 1, R == 1) pairs warps 2i and 2i + 1 of the block
// (rows 2i, 2i + 1 of its row groups) through `part` and a barrier.
template <int NC, int R, int kWarps, int RW = 1, bool kRope = false>
__device__ __forceinline__ void store_row_sums(const float (&acc)[RW * NC], float (*part)[RW * NC], bool live,
                                               int ncols, char * drow, int64_t d_nb1, const RowAdd & add = {},
                                               const RowRope * rope = nullptr, int64_t m = 0) {
    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x / 32);
    constexpr int kOut = RW * NC;
    static_assert(kOut <= 32, "one lane per output");
    static_assert(kWarps % R == 0, "whole groups of warps");
    static_assert(!kRope || (NC == 1 && (RW % 2 == 0 || (RW == 1 && R == 1 && kWarps % 2 == 0))),
                  "rotation pairs are two rows of one column, in one warp or in neighbouring warps");
    auto put = [&](int o, float s) {
        const int r = o / NC, c = o % NC;
        if (!kRope || rope->write_dst) *reinterpret_cast<float *>(drow + r * 4 + c * d_nb1) = s;
        if (add.dst != nullptr) {
            const float x = *reinterpret_cast<const float *>(add.src + r * 4 + c * add.src_nb1);
            *reinterpret_cast<float *>(add.dst + r * 4 + c * add.dst_nb1) = s + x;
        }
    };
    // Lane l holds output l / kLanes (warp_sum_each); the first lane of each
    // kLanes stores it.
    constexpr int kLanes = 32 / kOut;
    const float s = warp_sum_each(acc);
    const int o = lane / kLanes;
    const bool first = lane % kLanes == 0;
    if constexpr (R == 1) {
        if (first && live && o % NC < ncols) put(o, s);
        if constexpr (kRope && RW == 1) {
            // The partner row is the neighbouring warp's (every warp of the block comes here).
            if (lane == 0) part[warp][0] = s;
            __syncthreads();
            if (lane == 0 && live && rope->kind != RowRope::none) rope_store(*rope, m, s, part[warp ^ 1][0]);
            __syncthreads();  // `part` is reused by the next matrix
        } else if constexpr (kRope) {
            const float partner = __shfl_xor_sync(0xffffffffu, s, kLanes);  // row o ^ 1
            if (first && live && rope->kind != RowRope::none) rope_store(*rope, m + o, s, partner);
        }
    } else {
        if (first) part[warp][o] = s;
        __syncthreads();
        if (warp % R == 0) {
            float t = 0.0f;
            if (lane < kOut) {
#pragma unroll
                for (int w = 0; w < R; ++w) t += part[warp + w][lane];
            }
            if (lane < kOut && lane % NC < ncols && live) put(lane, t);
            if constexpr (kRope) {
                const float partner = __shfl_xor_sync(0xffffffffu, t, 1);  // lane r ^ 1: row r ^ 1
                if (lane < kOut && live && rope->kind != RowRope::none) rope_store(*rope, m + lane, t, partner);
            }
        }
        __syncthreads();  // `part` is reused by the next matrix
    }
}

// Many src1 columns through cuBLAS (mul_mat_blas.cu). false: not applicable
// here, cuBLAS unavailable, or a failure (logged); dst is then for the caller.
bool launch_blas(const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * d, cudaStream_t st, int device);

// Whether the mat-vec kernels handle this weight type.
bool vec_type_ok(ggml_type t);

// dst columns [0, N) with N <= 8, one warp per weight row.
void launch_vec(ggml_type t, const Args & p, cudaStream_t st);

// The integer mat-vec of mul_mat_vec_q8.cu: weights Q4_0/Q4_1/Q5_0/Q5_1/Q8_0,
// src1 quantized to int8 codes q and, per 32 values, the scale d and d times
// the sum of the 32 codes (float2 ds); column c (linear over N, ne12, ne13)
// at q + c * K and ds + c * K / 32.
struct Q8Args {
    const char *   a;
    int64_t        a_nb1, a_nb2, a_nb3;
    const int8_t * q;
    const float2 * ds;
    char *         d;
    int64_t        d_nb1, d_nb2, d_nb3;
    int64_t        K, M, N, ne12, ne13, r2, r3;
    RowAdd         add;  // a fused ADD (dst is one matrix: ne12 = ne13 = 1); add.dst null: none
    RowRope        rope;  // Note [rope epilogue]; rope.kind none: none
    bool           early = false;  // a may be read before pdl_wait (weights_fixed)
    // MUL_MAT_ID (mul_mat_id_q8): matrix (i12, i13) is the pair (slot e, token
    // t), one column each, with the weights of expert ids[e, t] (a_nb2 per
    // expert) and src1 column (e % ne11, t); null: MUL_MAT.
    const char *   ids = nullptr;
    int64_t        ids_nb0 = 0, ids_nb1 = 0, n_as = 0, ne11 = 1;
};
// Up to kMaxGroup products sharing src1 (and so K, N, ne12, ne13) and the
// weight type, in one launch: rows [row0[j], row0[j] + m[j].M) of the
// launch's rows belong to member j; `rows` is their total. The K formats'
// one-column launch also takes members of a second K format from member
// `second` on (launch_qk2: a Q4_K_M or Q5_K_M model's Q6_K V beside its Q and K).
constexpr int kMaxGroup = 4;
struct Q8Group {
    int     n;
    bool    rope;  // a member has a RowRope epilogue (the launch takes the kernels that have it)
    int     second = kMaxGroup;
    int64_t rows;
    int64_t row0[kMaxGroup];
    Q8Args  m[kMaxGroup];
};
// The member a launch row belongs to.
__device__ __forceinline__ int group_member(const Q8Group & g, int64_t row) {
    int j = 0;
#pragma unroll
    for (int t = 1; t < kMaxGroup; ++t) {
        if (t < g.n && row >= g.row0[t]) j = t;
    }
    return j;
}
// The end of a Q8Group kernel's row group (RW rows from row m of member p):
// a fused ADD's rows offset to the group's, and the sums stored
// (store_row_sums, with the RowRope epilogue when kRope).
template <int NC, int R, int kWarps, int RW, bool kRope = false>
__device__ __forceinline__ void end_row_group(const Q8Args & p, const float (&acc)[RW * NC], float (*part)[RW * NC],
                                              bool live, int ncols, char * drow, int64_t m) {
    RowAdd add = p.add;
    if (add.dst != nullptr) {
        add.src += m * 4;
        add.dst += m * 4;
    }
    store_row_sums<NC, R, kWarps, RW, kRope>(acc, part, live, ncols, drow, p.d_nb1, add, &p.rope, m);
}

// Matrix z of a launch (z < ne12 * ne13, which q8_applies and q8_id_applies
// keep below 2^31): its indices, weight row m, first activation column, and whether its
// sums are stored as computed. 32-bit index arithmetic: a 64-bit division is a
// subroutine of some 70 instructions, and a MUL_MAT_ID pair of a few weight
// steps per warp ran about 580 instructions in all (Nsight Compute on an
// H100, results/h200/summary-96.txt: 7.1M for qwen3-30b-a3b's experts at 4
// tokens against ggml-cuda's 4.6M). With it those products at 4 / 8 tokens
// (Q4_0) took 13.46 / 24.94 us against 15.30 / 29.48 in the round before.
// MUL_MAT_ID: matrix (i12, i13) is the pair (slot e, token t) with the weights
// of expert ids[e, t] (expert 0 for an id outside [0, n_as), whose sums are
// then stored as zeros) and src1 column e % ne11 + t * ne11. The ids come from
// the kernels before: read only after pdl_wait (Note [dependent launch]).
// MUL_MAT: src1 broadcast over the weights by r2, r3 as ggml's MUL_MAT does.
struct MatrixAt {
    uint32_t        i12, i13;
    const uint8_t * row;
    int64_t         col0;
    bool            live;
};
__device__ __forceinline__ MatrixAt matrix_at(const Q8Args & p, int64_t m, uint32_t z) {
    MatrixAt a;
    const uint32_t ne12 = uint32_t(p.ne12);
    a.i12 = z % ne12;
    a.i13 = z / ne12;
    if (p.ids != nullptr) {
        pdl_wait();
        const int32_t x = *reinterpret_cast<const int32_t *>(p.ids + a.i12 * p.ids_nb0 + a.i13 * p.ids_nb1);
        a.live = x >= 0 && x < p.n_as;
        a.row = reinterpret_cast<const uint8_t *>(p.a + m * p.a_nb1 + (a.live ? x : 0) * p.a_nb2);
        a.col0 = int64_t(a.i12 % uint32_t(p.ne11)) + int64_t(a.i13) * p.ne11;
    } else {
        a.live = true;
        a.row = reinterpret_cast<const uint8_t *>(p.a + m * p.a_nb1 + int64_t(a.i12 / uint32_t(p.r2)) * p.a_nb2 +
                                                  int64_t(a.i13 / uint32_t(p.r3)) * p.a_nb3);
        a.col0 = (int64_t(a.i12) + int64_t(a.i13) * p.ne12) * p.N;
    }
    return a;
}
// The matrices of a launch, as the bound of its 32-bit z loop.
__device__ __forceinline__ uint32_t matrix_count(const Q8Args & p) { return uint32_t(p.ne12 * p.ne13); }
// The K formats' mat-vec (mul_mat_vec_k.cu): up to 4 columns.
void launch_qk(ggml_type t, const Q8Group & g, cudaStream_t st);
// Whether one launch of the K formats' mat-vec takes members of type t and
// then of type u (Q8Group::second), and that launch.
bool qk_mixes(ggml_type t, ggml_type u);
void launch_qk2(ggml_type t, ggml_type u, const Q8Group & g, cudaStream_t st);
// The integer-form formats' mat-vec (mul_mat_vec_run.cu): up to 8 columns.
void launch_qr(ggml_type t, const Q8Group & g, cudaStream_t st);
// The one-column Q4_0 mat-vec on bulk copies (mul_mat_vec_bulk.cu); false:
// these products are not its, nothing launched.
bool launch_q8_bulk(ggml_type t, const Q8Group & g, cudaStream_t st);

// Whether the integer mat-vec takes this product (plan::vec_int_max_n columns
// at most, K % 256 == 0 (integer-form formats: K % 32), the rows aligned as
// its loads need); whether two src1
// are the same tensor (or the same memory, type and shape).
bool q8_applies(const ggml_tensor * a, const ggml_tensor * b);
bool same_src1(const ggml_tensor * x, const ggml_tensor * y);
// The MUL_MAT nodes (all q8_applies, one src1) through the integer mat-vec:
// src1 quantized once into the stream's scratch, then the products (one
// launch per run of equal weight types). out_of_memory only when no scratch
// memory could be had (logged).
// With `add` (an ADD of the single node's result and a same-shaped F32
// tensor, mul_mat_add_ok), that sum is written too.
Status mul_mat_q8_group(rt::cuda::CudaStream & stream, ggml_tensor * const * nodes, int n,
                      const ggml_tensor * add = nullptr);
// The same with src1 already quantized (codes q, scales ds as quantize_y
// lays them out), e.g. by the fused RMS_NORM x MUL that produced it.
// `ropes` (null: none), one per node: the RowRope epilogue of each
// (norm_mul_mat with a QkvRope).
void mul_mat_q8_group_y(rt::cuda::CudaStream & stream, ggml_tensor * const * nodes, int n, const ggml_tensor * add,
                        const int8_t * q, const float2 * ds, const RowRope * ropes = nullptr);
// MUL_MAT_ID through the integer mat-vecs, one (slot, token) pair per matrix:
// whether they take its experts (q8_id_applies: the weight checks of
// q8_applies), and the product (out_of_memory: no scratch memory, logged).
bool q8_id_applies(const ggml_tensor * as, const ggml_tensor * b, const ggml_tensor * ids);
Status mul_mat_id_q8(rt::cuda::CudaStream & stream, ggml_tensor * node);

// MUL_MAT_ID mat-vec: pairs (e, t) of ids (n_used x n_tok); expert x = ids[e, t]
// of n_as; src1 column (e % ne11, t) of the staged Y (nb1 = column, nb2 = token);
// dst[:, e, t]. An id outside [0, n_as) gives a zero column.
struct IdArgs {
    const char * a;
    int64_t      a_nb1, a_nb2;  // row, expert
    const char * y;
    int64_t      y_nb1, y_nb2;  // column, token
    char *       d;
    int64_t      d_nb1, d_nb2;  // slot, token
    const char * ids;
    int64_t      ids_nb0, ids_nb1;
    int64_t      K, M, ne11, n_used, n_tok, n_as;
    bool         a_vec;
};
void launch_vec_id(ggml_type t, const IdArgs & p, cudaStream_t st);

} // namespace standin::kernels::cuda::mm
