// MUL_MAT for few src1 columns (N <= 8, token generation) with weights in the
// 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, in integers:
//   - src1 is quantized first to ggml-cpu's activation blocks (act_round.cuh,
//     quantize_act): per 32 values int8 codes q, the scale da and da times the
//     codes' sum;
//   - each weight block's codes, taken without their constant offset (Q4_0:
//     0..15 instead of -8..7), are multiplied with those q by dp4a (4 int8
//     products per instruction, summed exactly in int32); the block adds
//     dw * (da * sum - offset * da * sum(q)) (+ m * da * sum(q) for the
//     formats with a minimum). These are ggml-cpu's products, regrouped: the
//     offset costs one multiply per block instead of a subtraction per code.
// Memory: blocks are only 2-byte aligned, but 8 consecutive blocks are a
// multiple of 16 bytes for all five formats. Each warp therefore copies the
// next runs of 8 blocks of its rows with 16-byte loads into shared memory
// (coalesced), and issues the loads of the chunk after that before decoding
// this one. A lane decodes a quarter of a block (8 codes) of each of RW rows
// against one load of the activations, so with RW = 4 the activation loads
// and their addressing are shared by four rows: decode is bound by
// instructions per weight, not by bytes in flight (measured: results/h200).
// A warp takes its rows alone when there are rows enough to fill the GPU;
// otherwise the 4 warps of a block share them, split along K, and meet in
// shared memory, so short matrices still spread over all SMs.
// Applies when K % 256 == 0 (whole runs) and the weights' rows are 16-byte
// aligned; mul_mat.cu falls back to mul_mat_vec.cu otherwise.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT (-p 'type_a=q[458]_[01].*n=[1-8],')
// and -o MUL_MAT_VEC_FUSION (grouped launches); the logits ctests
// (model.logits.*.cuda); time with `perf`.
#include "diag/check.h"
#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/mmq.cuh"
#include "kernels/cuda/mul_mat.cuh"

namespace standin::kernels::cuda::mm {

namespace {

constexpr int kWarps = 4;
constexpr int kRun = 8;  // blocks per 16-byte aligned run

// One format: its block size, how many runs a warp stages per row at a time
// with one row (about 1 KiB), the constant offset of its codes (0 for the
// formats with a minimum, and Q8_0), whether it has a minimum, and the
// decoding of part p (elements 4p..4p+3 and 16+4p..16+4p+3, or 8p..8p+7 for
// Q8_0) into two words of 4 non-negative (Q8_0: signed) bytes, the scale and
// the minimum.
template <int T> struct Q8Fmt;

__device__ __forceinline__ uint32_t u32s(const uint8_t * p) {  // 2-byte aligned, from shared memory
    return dq::u32_at(p);
}

// Bit j (j = 0..3) of `bits` to bit 4 of byte j.
__device__ __forceinline__ uint32_t fifth_bits(uint32_t bits) {
    return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}

__device__ __forceinline__ float half_at(const uint8_t * b, int i) {
    return quant::half(reinterpret_cast<const uint16_t *>(b)[i]);
}

template <> struct Q8Fmt<GGML_TYPE_Q4_0> {
    static constexpr int kBytes = sizeof(quant::BlockQ4_0), kU = 8, kOff = 8;
    static constexpr bool kMin = false;
    __device__ static void get(const uint8_t * b, int p, int & lo, int & hi, float & d, float & m) {
        const uint32_t q = u32s(b + 2 + 4 * p);
        lo = int(q & 0x0f0f0f0fu);
        hi = int((q >> 4) & 0x0f0f0f0fu);
        d = half_at(b, 0);
        m = 0.0f;
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q4_1> {
    static constexpr int kBytes = sizeof(quant::BlockQ4_1), kU = 7, kOff = 0;
    static constexpr bool kMin = true;
    __device__ static void get(const uint8_t * b, int p, int & lo, int & hi, float & d, float & m) {
        const uint32_t q = u32s(b + 4 + 4 * p);
        lo = int(q & 0x0f0f0f0fu);
        hi = int((q >> 4) & 0x0f0f0f0fu);
        d = half_at(b, 0);
        m = half_at(b, 1);
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q5_0> {
    static constexpr int kBytes = sizeof(quant::BlockQ5_0), kU = 6, kOff = 16;
    static constexpr bool kMin = false;
    __device__ static void get(const uint8_t * b, int p, int & lo, int & hi, float & d, float & m) {
        const uint32_t qh = u32s(b + 2), q = u32s(b + 6 + 4 * p);
        lo = int((q & 0x0f0f0f0fu) | fifth_bits(qh >> (4 * p)));
        hi = int(((q >> 4) & 0x0f0f0f0fu) | fifth_bits(qh >> (16 + 4 * p)));
        d = half_at(b, 0);
        m = 0.0f;
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q5_1> {
    static constexpr int kBytes = sizeof(quant::BlockQ5_1), kU = 6, kOff = 0;
    static constexpr bool kMin = true;
    __device__ static void get(const uint8_t * b, int p, int & lo, int & hi, float & d, float & m) {
        const uint32_t qh = u32s(b + 4), q = u32s(b + 8 + 4 * p);
        lo = int((q & 0x0f0f0f0fu) | fifth_bits(qh >> (4 * p)));
        hi = int(((q >> 4) & 0x0f0f0f0fu) | fifth_bits(qh >> (16 + 4 * p)));
        d = half_at(b, 0);
        m = half_at(b, 1);
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q8_0> {
    static constexpr int kBytes = sizeof(quant::BlockQ8_0), kU = 4, kOff = 0;
    static constexpr bool kMin = false;
    __device__ static void get(const uint8_t * b, int p, int & lo, int & hi, float & d, float & m) {
        lo = int(u32s(b + 2 + 8 * p));
        hi = int(u32s(b + 6 + 8 * p));
        d = half_at(b, 0);
        m = 0.0f;
    }
};

// The activation codes part p of a block is multiplied with: two words of 4
// codes (adjacent for Q8_0, one load).
template <int T> __device__ __forceinline__ void act_words(const int8_t * qa, int p, int & lo, int & hi) {
    if constexpr (T == GGML_TYPE_Q8_0) {
        const int2 v = *reinterpret_cast<const int2 *>(qa + 8 * p);
        lo = v.x;
        hi = v.y;
    } else {
        lo = *reinterpret_cast<const int *>(qa + 4 * p);
        hi = *reinterpret_cast<const int *>(qa + 16 + 4 * p);
    }
}

// Blocks per SM the register budget must allow (__launch_bounds__): one-column
// launches are latency-bound, so they need the warps resident. Measured on the
// H200 (ncu, 8B Q4_0 decode): split-K launches of 1024 blocks at 71 registers
// ran as 1.1 waves (7 blocks per SM), at 64 as one; the gate/up launch lost
// 25% when the fused ADD's epilogue took it from 93 to 102 registers, which
// leaves 4 blocks per SM instead of 5.
template <int NC, int R> constexpr int kMinBlocks = NC != 1 ? 1 : R > 1 ? 8 : 5;

// RW consecutive weight rows per warp (every member's M is a multiple of RW,
// so the rows of a warp belong to one member); R warps per row group (1 or
// kWarps), kWarps / R row groups per block. Each warp streams its share of
// the rows in chunks of kURow runs per row: the next chunk's 16-byte loads
// are issued before the current one is decoded.
template <int T, int NC, int R, int RW>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks<NC, R>) mmv_q8_kernel(const __grid_constant__ Q8Group g) {
    using F = Q8Fmt<T>;
    constexpr int kURow = F::kU / RW > 0 ? F::kU / RW : 1;
    constexpr int kChunk = kURow * kRun * F::kBytes;  // bytes of one row a warp stages at once
    static_assert(kChunk % 16 == 0, "runs of 8 blocks are whole 16-byte words");
    constexpr int kWords = kChunk / 16, kLoads = (kWords + 31) / 32;
    __shared__ uint4 stage[kWarps][RW][kWords];
    __shared__ float part_sums[kWarps][RW * NC];

    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x / 32);
    const int64_t grow = (int64_t(blockIdx.x) * (kWarps / R) + warp / R) * RW;  // first row of this warp
    const bool live = grow < g.rows;
    const int j = group_member(g, grow);
    const Q8Args & p = g.m[j];
    const int64_t m = grow - g.row0[j];
    const int64_t n_runs = p.K / (32 * kRun), n_chunks = (n_runs + kURow - 1) / kURow;
    const int ncols = int(p.N), sub = warp % R;
    const int part = lane & 3, blk_in_run = lane >> 2;
    // The offset's share of one part (a quarter of the block's codes); the
    // formats with a minimum take a quarter of m * da * sum(q) per part.
    constexpr float kPartOff = -float(F::kOff) / 4.0f;

    for (int64_t z = blockIdx.y; z < p.ne12 * p.ne13; z += gridDim.y) {
        const int64_t i12 = z % p.ne12, i13 = z / p.ne12;
        const uint8_t * row = weight_row(p, m, i12, i13);
        const int64_t col0 = (i12 + i13 * p.ne12) * p.N;  // first activation column of this matrix
        float acc[RW * NC];
#pragma unroll
        for (int o = 0; o < RW * NC; ++o) acc[o] = 0.0f;

        uint4 buf[RW][kLoads];
        auto fetch = [&](int64_t chunk) {
            const int64_t r0 = chunk * kURow;
            const int words = int((n_runs - r0 < kURow ? n_runs - r0 : kURow) * kRun * F::kBytes / 16);
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                const uint4 * src = reinterpret_cast<const uint4 *>(row + r * p.a_nb1 + r0 * kRun * F::kBytes);
#pragma unroll
                for (int i = 0; i < kLoads; ++i) {
                    const int w = lane + 32 * i;
                    if (w < words) buf[r][i] = __ldg(src + w);
                }
            }
        };
        int64_t chunk = live ? sub : n_chunks;
        if (chunk < n_chunks) fetch(chunk);  // weights: before the wait (Note [dependent launch])
        pdl_wait();
        pdl_trigger();
        for (; chunk < n_chunks; chunk += R) {
            const int64_t r0 = chunk * kURow;
            const int runs = n_runs - r0 < kURow ? int(n_runs - r0) : kURow;
            __syncwarp();
#pragma unroll
            for (int r = 0; r < RW; ++r) {
#pragma unroll
                for (int i = 0; i < kLoads; ++i) {
                    if (lane + 32 * i < kWords) stage[warp][r][lane + 32 * i] = buf[r][i];
                }
            }
            __syncwarp();
            if (chunk + R < n_chunks) fetch(chunk + R);  // in flight while this chunk is decoded
            const int64_t ib0 = r0 * kRun + blk_in_run;    // block of the row this lane starts at
#pragma unroll
            for (int u = 0; u < kURow; ++u) {
                if (u < runs) {
                    // The columns' activation words first, then each row's
                    // codes decoded once against all of them.
                    int alo[NC], ahi[NC];
                    float dx[NC], off[NC];
#pragma unroll
                    for (int c = 0; c < NC; ++c) {
                        alo[c] = ahi[c] = 0;
                        dx[c] = off[c] = 0.0f;
                        if (c < ncols) {
                            const int64_t ib = (col0 + c) * (p.K / 32) + ib0 + u * kRun;  // activation block
                            act_words<T>(p.q + ib * 32, part, alo[c], ahi[c]);
                            const float2 ds = p.ds[ib];
                            dx[c] = ds.x;
                            off[c] = (F::kMin ? 0.25f : kPartOff) * ds.y;
                        }
                    }
#pragma unroll
                    for (int r = 0; r < RW; ++r) {
                        int lo, hi;
                        float d, mn;
                        F::get(reinterpret_cast<const uint8_t *>(stage[warp][r]) + (u * kRun + blk_in_run) * F::kBytes,
                               part, lo, hi, d, mn);
#pragma unroll
                        for (int c = 0; c < NC; ++c) {
                            const int s = __dp4a(lo, alo[c], __dp4a(hi, ahi[c], 0));
                            float & a = acc[r * NC + c];
                            if constexpr (F::kMin) {
                                a = fmaf(d * dx[c], float(s), fmaf(mn, off[c], a));
                            } else if constexpr (F::kOff != 0) {
                                a = fmaf(d, fmaf(dx[c], float(s), off[c]), a);
                            } else {
                                a = fmaf(d * dx[c], float(s), a);
                            }
                        }
                    }
                }
            }
        }
        RowAdd add = p.add;
        if (add.dst != nullptr) {
            add.src += m * 4;
            add.dst += m * 4;
        }
        store_row_sums<NC, R, kWarps, RW>(acc, part_sums, live, ncols,
                                          p.d + i12 * p.d_nb2 + i13 * p.d_nb3 + m * 4, p.d_nb1, add);
    }
}

template <int T, int NC, int R, int RW> void launch_q8_k(const Q8Group & g, cudaStream_t st) {
    constexpr int kGroups = kWarps / R;  // row groups per block
    const dim3 grid(unsigned((g.rows / RW + kGroups - 1) / kGroups), grid_yz(g.m[0].ne12 * g.m[0].ne13));
    launch(mmv_q8_kernel<T, NC, R, RW>, grid, dim3(kWarps * 32), 0, st, g);
}

// A warp per row group while there are enough groups to fill the GPU with
// warps (or too few chunks per row to share); otherwise every warp of a block
// on one row group.
constexpr int64_t kFillWarps = 4096;
template <int T, int NC, int RW> void launch_q8_rw(const Q8Group & g, cudaStream_t st) {
    constexpr int kURow = Q8Fmt<T>::kU / RW > 0 ? Q8Fmt<T>::kU / RW : 1;
    const Q8Args & p = g.m[0];
    const int64_t n_chunks = (p.K / (32 * kRun) + kURow - 1) / kURow;
    if (g.rows / RW * p.ne12 * p.ne13 >= kFillWarps || n_chunks < 2 * kWarps) {
        launch_q8_k<T, NC, 1, RW>(g, st);
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

// Rows per warp for NC columns: the activation loads of a lane (per column)
// are shared by that many rows, at the cost of NC x RW accumulators (at most
// 145 registers, no spills). Measured on the H200 (4096 x 14336, `standin
// matmul`, GGML_STANDIN_MMQ=off, us): 4 rows against the 2 / 1 / 1 of before
// at 2 / 4 / 8 columns, Q4_0 28.6 / 44.8 / 92.7 against 41.2 / 120 / 234, Q8_0
// 28.7 / 34.9 / 58.3 against 37.2 / 75.6 / 135; 2 rows at 8 columns: 114 and 84.
template <int NC> constexpr int kRowsPerWarp = 4;

// RW rows per warp where every member's row count allows it, else one.
template <int T, int NC> void launch_q8_nc(const Q8Group & g, cudaStream_t st) {
    constexpr int RW = kRowsPerWarp<NC>;
    if (RW > 1 && rows_multiple_of(g, RW)) {
        launch_q8_rw<T, NC, RW>(g, st);
    } else {
        launch_q8_rw<T, NC, 1>(g, st);
    }
}

// Columns: the smallest kernel width that holds them.
template <int T> void launch_q8_t(const Q8Group & g, cudaStream_t st) {
    with_col_width(g.m[0].N, [&](auto nc) { launch_q8_nc<T, decltype(nc)::value>(g, st); });
}

void launch_q8(ggml_type t, const Q8Group & g, cudaStream_t st) {
    switch (t) {
        case GGML_TYPE_Q4_0: launch_q8_t<GGML_TYPE_Q4_0>(g, st); break;
        case GGML_TYPE_Q4_1: launch_q8_t<GGML_TYPE_Q4_1>(g, st); break;
        case GGML_TYPE_Q5_0: launch_q8_t<GGML_TYPE_Q5_0>(g, st); break;
        case GGML_TYPE_Q5_1: launch_q8_t<GGML_TYPE_Q5_1>(g, st); break;
        case GGML_TYPE_Q8_0: launch_q8_t<GGML_TYPE_Q8_0>(g, st); break;
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
    p.q = q;
    p.ds = ds;
    return p;
}

} // namespace

bool q8_applies(const ggml_tensor * a, const ggml_tensor * b) {
    const ggml_type t = a->type;
    if (is_int_form_weight(t)) {
        // mul_mat_vec_run.cu reads blocks in place (their own alignment) and
        // 16 activation codes per run (K % 32: whole activation groups).
        const size_t align = size_t(dq::int_form_align(t));
        return b->ne[1] <= plan::vec_int_max_n(t) && a->ne[0] % 32 == 0 && aligned_to(a, align) &&
               a->nb[1] % align == 0 && a->nb[2] % align == 0 && a->nb[3] % align == 0 &&
               a->ne[1] <= int64_t(INT32_MAX);
    }
    // Q6_K's 210-byte blocks are read with 4-byte loads realigned in
    // registers (mul_mat_vec_k.cu); every other format with 16-byte loads.
    const size_t align = t == GGML_TYPE_Q6_K ? 2 : 16;
    // K % 256: whole runs of 8 blocks (or whole super-blocks), and 16-byte
    // aligned activation columns.
    return b->ne[1] <= plan::vec_int_max_n(t) && a->ne[0] % (32 * kRun) == 0 && aligned_to(a, align) &&
           a->nb[1] % align == 0 && a->nb[2] % align == 0 && a->nb[3] % align == 0 && a->ne[1] <= int64_t(INT32_MAX);
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
    // One rounding of src1 for all members (mul_mat_group_ok: one activation group).
    QuantizedY y = quantize_y(stream, nodes[0]->src[1], quant::act_group(nodes[0]->src[0]->type), st);
    if (!y.ok) return Status::out_of_memory;
    mul_mat_q8_group_y(stream, nodes, n, add, y.q, y.ds);
    release(y, st);
    return true;
}

void mul_mat_q8_group_y(rt::cuda::CudaStream & stream, ggml_tensor * const * nodes, int n, const ggml_tensor * add,
                        const int8_t * q, const float2 * ds) {
    const ggml_tensor * b = nodes[0]->src[1];
    cudaStream_t st = stream.begin_launch();
    // Consecutive members of one weight type share a launch, kMaxGroup at most.
    for (int i = 0; i < n;) {
        Q8Group g{};
        const ggml_type t = nodes[i]->src[0]->type;
        int64_t & rows = g.rows;
        while (i < n && g.n < kMaxGroup && nodes[i]->src[0]->type == t &&
               rows + nodes[i]->src[0]->ne[1] <= int64_t(INT32_MAX) / 2) {
            g.row0[g.n] = rows;
            g.m[g.n] = args_for(nodes[i]->src[0], b, nodes[i], q, ds);
            if (add != nullptr && n == 1) {
                const ggml_tensor * other = add->src[0] == nodes[i] ? add->src[1] : add->src[0];
                g.m[g.n].add = RowAdd{static_cast<const char *>(other->data), static_cast<char *>(add->data),
                                      int64_t(other->nb[1]), int64_t(add->nb[1])};
            }
            rows += g.m[g.n].M;
            ++g.n;
            ++i;
        }
        launch_q8(t, g, st);
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
    // One quantized src1 serves all: the members round it alike (Q4_K beside Q6_K, not beside Q8_0).
    return first->op == GGML_OP_MUL_MAT && next->op == GGML_OP_MUL_MAT && first->type == GGML_TYPE_F32 &&
           next->type == GGML_TYPE_F32 && mm::same_src1(first->src[1], next->src[1]) && vec(first) && vec(next) &&
           quant::act_group(first->src[0]->type) == quant::act_group(next->src[0]->type);
}

Status mul_mat_group(rt::cuda::CudaStream & stream, ggml_tensor * const * nodes, int n) {
    return mm::mul_mat_q8_group(stream, nodes, n);
}

bool norm_mul_mat_ok(const ggml_tensor * mul, const ggml_tensor * mm) {
    // The fused producers write 32-groups (the K formats' 256-groups are quantize_act_k's).
    return mm->op == GGML_OP_MUL_MAT && mm->type == GGML_TYPE_F32 && mm->src[1] == mul && mul->ne[0] % 32 == 0 &&
           quant::act_group(mm->src[0]->type) == 32 &&
           ggml_is_contiguous(mul) && plan::choose(mm::problem_for(mm->src[0], mul, 1)).path == plan::Path::vec_int;
}

Status norm_mul_mat(rt::cuda::CudaStream & stream, ggml_tensor * norm, ggml_tensor * mul, ggml_tensor * const * mms, int n) {
    auto & cs = stream;
    cudaStream_t st = cs.begin_launch();
    mm::QuantizedY y = mm::reserve_y(cs, mul->ne[0], ggml_nrows(mul), st);
    if (!y.ok) return Status::out_of_memory;
    const Status ok = rms_norm_mul_quant(stream, norm, mul, y.q, y.ds);
    if (ok) mm::mul_mat_q8_group_y(cs, mms, n, nullptr, y.q, y.ds);
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
