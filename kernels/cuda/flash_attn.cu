// FLASH_ATTN_EXT on the CUDA device, as kernels/host/flash_attn.cpp:
//   out = softmax(score(Q K^T) + slope * mask) V   per query row and head,
// score(s) = s * scale, or c * tanh(s * scale / c) with a logit soft cap c
// (op_params: scale, max_bias, logit_softcap; kernels/common/softmax.h).
// Q F32; K and V of one type, F16, F32 or BF16, rows contiguous (views such
// as a KV-cache slice are fine); mask optional F16 (row = query index,
// broadcast over heads and dim 3 by modulo); sinks optional F32 (one logit per
// query head). K/V heads are shared by groups of query heads (GQA). Output F32
// in ggml's permuted layout dst[:, head, query, batch]. V rows up to 512
// elements (the predicate checks); Q/K rows any length.
//
// One block of 4 warps (8 when there are few blocks: decoding) per (query
// row, head, batch). The keys are dealt out in tiles of 32, tile t to warp
// t % warps: lane j computes the score of key j of the
// tile (its own dot product over the head dimension, Q from shared memory),
// the warp folds the tile into its online softmax (running max and sum), and
// the tile's value rows are accumulated with lane l owning output elements
// l, l + 32, ... (coalesced V reads). Tiles masked entirely to -inf are
// skipped. At the end the 4 warps' partial results are merged in shared
// memory, rescaled to the common maximum (and the sink), and normalised.
// Arithmetic is f32 throughout.
//
// Batches of queries over F16 K/V with head sizes 64 and 128 (prefill) go to
// the tensor-core kernel of flash_attn_tc.cu instead.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o FLASH_ATTN_EXT
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/softmax.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/flash_attn.cuh"
#include "kernels/cuda/limits.h"

namespace standin::kernels::cuda {

namespace {

using fa::FaArgs;

constexpr int kMaxDV = int(limits::kFlashAttnMaxDV);
constexpr int kSplitWarps = 4;  // warps of a key-split block
constexpr int kMaxSplit = 64;
// V rows loaded together: more in flight for short rows, fewer registers for long ones.
template <int NV> __host__ __device__ constexpr int v_rows() { return NV <= 4 ? 8 : NV <= 8 ? 4 : 2; }

template <int T> __device__ __forceinline__ float ld(const char * row, int64_t i) {
    if constexpr (T == GGML_TYPE_F32) return reinterpret_cast<const float *>(row)[i];
    if constexpr (T == GGML_TYPE_F16) return __half2float(reinterpret_cast<const __half *>(row)[i]);
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(row)[i]);
}

// Dot product of the Q row (shared memory) with the K row.
template <int T> __device__ __forceinline__ float qk_dot(const float * q, const char * krow, int64_t D, bool vec) {
    float s = 0.0f;
    if (vec) {
#pragma unroll 8
        for (int64_t d = 0; d < D; d += 8) {
            float w[8];
            if constexpr (T == GGML_TYPE_F32) {
                const float4 a = reinterpret_cast<const float4 *>(krow + d * 4)[0];
                const float4 b = reinterpret_cast<const float4 *>(krow + d * 4)[1];
                w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w; w[4] = b.x; w[5] = b.y; w[6] = b.z; w[7] = b.w;
            } else {
                const uint4 u = *reinterpret_cast<const uint4 *>(krow + d * 2);
                const uint32_t x[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    if constexpr (T == GGML_TYPE_F16) {
                        const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&x[i]));
                        w[2 * i] = f.x;
                        w[2 * i + 1] = f.y;
                    } else {
                        w[2 * i] = __uint_as_float(x[i] << 16);
                        w[2 * i + 1] = __uint_as_float(x[i] & 0xffff0000u);
                    }
                }
            }
            const float4 qa = reinterpret_cast<const float4 *>(q + d)[0];
            const float4 qb = reinterpret_cast<const float4 *>(q + d)[1];
            s = fmaf(qa.x, w[0], s); s = fmaf(qa.y, w[1], s); s = fmaf(qa.z, w[2], s); s = fmaf(qa.w, w[3], s);
            s = fmaf(qb.x, w[4], s); s = fmaf(qb.y, w[5], s); s = fmaf(qb.z, w[6], s); s = fmaf(qb.w, w[7], s);
        }
    } else {
        for (int64_t d = 0; d < D; ++d) s = fmaf(q[d], ld<T>(krow, d), s);
    }
    return s;
}

// V elements lane `lane` owns: lane + 32 i (any DV), or, with VEC, the NV
// consecutive elements from lane * NV (DV == 32 NV and aligned rows: one
// vector load per V row instead of NV scalar ones).
template <bool VEC, int NV> __device__ __forceinline__ int64_t v_index(int lane, int i) {
    return VEC ? int64_t(lane) * NV + i : lane + 32 * int64_t(i);
}

template <int T, int NV, bool VEC>
__device__ __forceinline__ void load_v(const char * vrow, int lane, int64_t DV, bool use, float (&out)[NV]) {
    if constexpr (VEC && T == GGML_TYPE_F16 && NV % 2 == 0) {
        if (use) {
            const __half2 * h = reinterpret_cast<const __half2 *>(vrow) + lane * (NV / 2);
#pragma unroll
            for (int i = 0; i < NV / 2; ++i) {
                const float2 f = __half22float2(h[i]);
                out[2 * i] = f.x;
                out[2 * i + 1] = f.y;
            }
        } else {
#pragma unroll
            for (int i = 0; i < NV; ++i) out[i] = 0.0f;
        }
    } else {
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int64_t d = v_index<VEC, NV>(lane, i);
            out[i] = use && d < DV ? ld<T>(vrow, d) : 0.0f;
        }
    }
}

// One query row of one head over the keys [kb, ke): each warp's running
// maximum, sum and unnormalised output go to m_s, s_s and o_s (kWarps x DV).
// Ends with a barrier, so the caller may read them.
template <int T, int NV, int kWarps, bool VEC>
__device__ void fa_range(const FaArgs & p, int64_t iq, int64_t h, int64_t i3, int64_t kb, int64_t ke, float * q_s,
                         float * m_s, float * s_s, float * o_s) {
    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5);
    const float slope = p.alibi.slope(uint32_t(h));
    const char * kbase = p.k + (h / p.rk2) * p.k_nb2 + (i3 / p.rk3) * p.k_nb3;
    const char * vbase = p.v + (h / p.rv2) * p.v_nb2 + (i3 / p.rv3) * p.v_nb3;
    const float * qrow = reinterpret_cast<const float *>(p.q + iq * p.q_nb1 + h * p.q_nb2 + i3 * p.q_nb3);
    for (int64_t d = threadIdx.x; d < p.D; d += blockDim.x) q_s[d] = qrow[d];
    __syncthreads();
    const __half * mrow = nullptr;
    if (p.mask != nullptr) {
        mrow = reinterpret_cast<const __half *>(p.mask + iq * p.m_nb1 + (h % p.m_ne2) * p.m_nb2 +
                                                (i3 % p.m_ne3) * p.m_nb3);
    }

    float m = -INFINITY, s = 0.0f;  // s: this lane's share of the sum
    float o[NV];
#pragma unroll
    for (int i = 0; i < NV; ++i) o[i] = 0.0f;

    for (int64_t c0 = kb + int64_t(warp) * 32; c0 < ke; c0 += kWarps * 32) {
        const int64_t c = c0 + lane;
        float sc = -INFINITY;
        if (c < ke) {
            sc = mrow != nullptr ? slope * __half2float(mrow[c]) : 0.0f;
            if (sc != -INFINITY) {
                sc += num::attn_score(qk_dot<T>(q_s, kbase + c * p.k_nb1, p.D, p.k_vec), p.ap.scale,
                                      p.ap.logit_softcap);
            }
        }
        const float tmax = warp_max(sc);
        if (tmax == -INFINITY) {
            continue;  // the whole tile is masked (uniform over the warp)
        }
        if (tmax > m) {
            const float f = m == -INFINITY ? 0.0f : expf(m - tmax);
            m = tmax;
            s *= f;
#pragma unroll
            for (int i = 0; i < NV; ++i) o[i] *= f;
        }
        const float w = sc == -INFINITY ? 0.0f : expf(sc - m);
        s += w;
        // V rows of the tile, kVRows at a time: their loads are issued
        // together, then added in key order. Masked keys (weight 0) are
        // neither loaded nor added (their cache rows may hold anything).
        const int nc = int(ke - c0 < 32 ? ke - c0 : 32);
        constexpr int kVRows = v_rows<NV>();
        for (int j0 = 0; j0 < nc; j0 += kVRows) {
            float wj[kVRows], vv[kVRows][NV];
#pragma unroll
            for (int u = 0; u < kVRows; ++u) {
                const int j = j0 + u;
                const float wu = __shfl_sync(0xffffffffu, w, j & 31);
                const bool use = j < nc && wu != 0.0f;
                wj[u] = use ? wu : 0.0f;
                load_v<T, NV, VEC>(vbase + (c0 + j) * p.v_nb1, lane, p.DV, use, vv[u]);
            }
#pragma unroll
            for (int u = 0; u < kVRows; ++u) {
                if (wj[u] == 0.0f) continue;
#pragma unroll
                for (int i = 0; i < NV; ++i) o[i] = fmaf(wj[u], vv[u][i], o[i]);
            }
        }
    }
    s = warp_sum(s);
    if (lane == 0) {
        m_s[warp] = m;
        s_s[warp] = s;
    }
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const int64_t d = v_index<VEC, NV>(lane, i);
        if (d < p.DV) o_s[warp * p.DV + d] = o[i];
    }
    __syncthreads();
}

// Shared memory of a block: q [D, padded to 4], m and s [kWarps], o [kWarps][DV].
template <int kWarps> size_t fa_smem(const FaArgs & p) {
    return size_t((p.D + 3) / 4 * 4 + 2 * kWarps + kWarps * p.DV) * sizeof(float);
}
template <int kWarps> struct FaShared {
    float *q, *m, *s, *o;
    __device__ FaShared(float * base, int64_t D)
        : q(base), m(base + (D + 3) / 4 * 4), s(m + kWarps), o(s + kWarps) {}
};

template <int T, int NV, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) fa_kernel(FaArgs p) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    extern __shared__ float smem[];
    const FaShared<kWarps> sh(smem, p.D);
    float *q_s = sh.q, *m_s = sh.m, *s_s = sh.s, *o_s = sh.o;
    const int64_t h = blockIdx.y, i3 = blockIdx.z;

    for (int64_t iq = blockIdx.x; iq < p.nq; iq += gridDim.x) {
        fa_range<T, NV, kWarps, false>(p, iq, h, i3, 0, p.nkv, q_s, m_s, s_s, o_s);
        // Merge: common maximum (the sink included), rescaled sums and values.
        float mx = -INFINITY;
        for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w]);
        const float sink = p.sinks != nullptr ? p.sinks[h] : -INFINITY;
        mx = fmaxf(mx, sink);
        float f[kWarps];
        float total = p.sinks != nullptr ? expf(sink - mx) : 0.0f;
        for (int w = 0; w < kWarps; ++w) {
            f[w] = m_s[w] == -INFINITY ? 0.0f : expf(m_s[w] - mx);
            total += s_s[w] * f[w];
        }
        const float inv = total == 0.0f ? 0.0f : 1.0f / total;
        float * out = reinterpret_cast<float *>(p.d + h * p.d_nb1 + iq * p.d_nb2 + i3 * p.d_nb3);
        for (int64_t d = threadIdx.x; d < p.DV; d += blockDim.x) {
            float acc = 0.0f;
            for (int w = 0; w < kWarps; ++w) acc += o_s[w * p.DV + d] * f[w];
            out[d] = acc * inv;
        }
        __syncthreads();  // q_s and the merge buffers are reused by the next query row
    }
}

// Split over the keys (decoding: few query rows, so few blocks otherwise):
// block x = iq * n_split + split takes keys [split * span, +span) and leaves
// its partial result - maximum, sum and unnormalised output at that maximum -
// in `part`; fa_combine merges the splits of each row. Row r = (i3 * nh + h)
// * nq + iq, split j: part_m/part_s at [r * n_split + j], output at that
// index times DV.
struct SplitOut {
    float * m;
    float * s;
    float * o;
    int     n_split;
    int64_t span;
};

template <int T, int NV, bool VEC>
__global__ void __launch_bounds__(kSplitWarps * 32) fa_split_kernel(FaArgs p, SplitOut part) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    extern __shared__ float smem[];
    const FaShared<kSplitWarps> sh(smem, p.D);
    float *q_s = sh.q, *m_s = sh.m, *s_s = sh.s, *o_s = sh.o;
    const int64_t h = blockIdx.y, i3 = blockIdx.z;
    const int64_t iq = blockIdx.x / part.n_split, j = blockIdx.x % part.n_split;
    const int64_t kb = j * part.span, ke = kb + part.span < p.nkv ? kb + part.span : p.nkv;
    fa_range<T, NV, kSplitWarps, VEC>(p, iq, h, i3, kb, ke, q_s, m_s, s_s, o_s);
    float mx = -INFINITY;
    for (int w = 0; w < kSplitWarps; ++w) mx = fmaxf(mx, m_s[w]);
    float f[kSplitWarps];
    float total = 0.0f;
    for (int w = 0; w < kSplitWarps; ++w) {
        f[w] = m_s[w] == -INFINITY ? 0.0f : expf(m_s[w] - mx);
        total += s_s[w] * f[w];
    }
    const int64_t slot = ((i3 * p.nh + h) * p.nq + iq) * part.n_split + j;
    if (threadIdx.x == 0) {
        part.m[slot] = mx;
        part.s[slot] = total;
    }
    for (int64_t d = threadIdx.x; d < p.DV; d += blockDim.x) {
        float acc = 0.0f;
        for (int w = 0; w < kSplitWarps; ++w) acc += o_s[w * p.DV + d] * f[w];
        part.o[slot * p.DV + d] = acc;
    }
}

// One block per (query row, head, batch): the splits' partials rescaled to
// their common maximum (the sink included) and normalised.
__global__ void fa_combine(FaArgs p, SplitOut part) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    const int64_t iq = blockIdx.x, h = blockIdx.y, i3 = blockIdx.z;
    const int64_t row = ((i3 * p.nh + h) * p.nq + iq) * part.n_split;
    const float sink = p.sinks != nullptr ? p.sinks[h] : -INFINITY;
    float mx = sink;
    for (int j = 0; j < part.n_split; ++j) mx = fmaxf(mx, part.m[row + j]);
    float total = p.sinks != nullptr ? expf(sink - mx) : 0.0f;
    for (int j = 0; j < part.n_split; ++j) {
        const float mj = part.m[row + j];
        total += mj == -INFINITY ? 0.0f : part.s[row + j] * expf(mj - mx);
    }
    const float inv = total == 0.0f ? 0.0f : 1.0f / total;
    float * out = reinterpret_cast<float *>(p.d + h * p.d_nb1 + iq * p.d_nb2 + i3 * p.d_nb3);
    for (int64_t d = threadIdx.x; d < p.DV; d += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < part.n_split; ++j) {
            const float mj = part.m[row + j];
            if (mj != -INFINITY) acc += part.o[(row + j) * p.DV + d] * expf(mj - mx);
        }
        out[d] = acc * inv;
    }
}

template <int T, int W> void launch_tw(const FaArgs & p, cudaStream_t st) {
    const dim3 grid(unsigned(p.nq < limits::kGridX ? p.nq : limits::kGridX), unsigned(p.nh), unsigned(p.nq3));
    const size_t smem = fa_smem<W>(p);
    if (p.DV <= 64) {
        launch(fa_kernel<T, 2, W>, dim3(grid), dim3(W * 32), smem, st, p);
    } else if (p.DV <= 128) {
        launch(fa_kernel<T, 4, W>, dim3(grid), dim3(W * 32), smem, st, p);
    } else if (p.DV <= 256) {
        launch(fa_kernel<T, 8, W>, dim3(grid), dim3(W * 32), smem, st, p);
    } else {
        launch(fa_kernel<T, 16, W>, dim3(grid), dim3(W * 32), smem, st, p);
    }
}

template <int T, int NV> void launch_split_nv(const FaArgs & p, const SplitOut & part, bool vec, cudaStream_t st) {
    const dim3 grid(unsigned(p.nq * part.n_split), unsigned(p.nh), unsigned(p.nq3));
    const size_t smem = fa_smem<kSplitWarps>(p);
    if (vec) {
        launch(fa_split_kernel<T, NV, true>, dim3(grid), dim3(kSplitWarps * 32), smem, st, p, part);
    } else {
        launch(fa_split_kernel<T, NV, false>, dim3(grid), dim3(kSplitWarps * 32), smem, st, p, part);
    }
    SI_CUDA_LAUNCH_CHECK();
    launch(fa_combine, dim3(unsigned(p.nq), unsigned(p.nh), unsigned(p.nq3)), dim3(128), 0, st, p, part);
}

template <int T> void launch_split(const FaArgs & p, const SplitOut & part, cudaStream_t st) {
    // Vector V loads: each lane's NV elements are one aligned piece of the row.
    const auto vec_for = [&](int nv) {
        return T == GGML_TYPE_F16 && p.DV == 32 * nv && p.v_nb1 % (2 * nv) == 0 && p.v_nb2 % (2 * nv) == 0 &&
               p.v_nb3 % (2 * nv) == 0 && reinterpret_cast<uintptr_t>(p.v) % (2 * nv) == 0;
    };
    if (p.DV <= 64) {
        launch_split_nv<T, 2>(p, part, vec_for(2), st);
    } else if (p.DV <= 128) {
        launch_split_nv<T, 4>(p, part, vec_for(4), st);
    } else if (p.DV <= 256) {
        launch_split_nv<T, 8>(p, part, vec_for(8), st);
    } else {
        launch_split_nv<T, 16>(p, part, vec_for(16), st);
    }
}

// How many key ranges a decode-sized problem is split into: enough blocks to
// give every SM about two, with at least one 32-key tile per warp; 1 (no
// split) when the query rows alone fill the GPU or the keys are few.
int split_count(const FaArgs & p, int n_sm) {
    const int64_t rows = p.nq * p.nh * p.nq3;
    const int64_t tiles_per_block = kSplitWarps, tiles = (p.nkv + 31) / 32;
    const int64_t want = (2 * int64_t(n_sm) + rows - 1) / rows;
    const int64_t most = (tiles + tiles_per_block - 1) / tiles_per_block;
    const int64_t n = want < most ? want : most;
    if (rows >= 2 * int64_t(n_sm) || n < 2 || p.nq * n > limits::kGridX) return 1;
    return int(n < kMaxSplit ? n : kMaxSplit);
}

// Few (query row, head) blocks - decoding - cannot fill the GPU with 4 warps
// each: split over the keys when scratch memory for the partials is there,
// otherwise 8 warps per block.
template <int T> void launch_t(const FaArgs & p, rt::cuda::CudaStream & stream, int n_sm) {
    cudaStream_t st = stream.begin_launch();
    const int n_split = split_count(p, n_sm);
    if (n_split > 1) {
        const int64_t slots = p.nq * p.nh * p.nq3 * n_split;
        const size_t bytes = size_t(slots) * size_t(2 + p.DV) * sizeof(float);
        if (auto * base = static_cast<float *>(stream.scratch(bytes))) {
            const int64_t tiles = (p.nkv + 31) / 32, tiles_per_split = (tiles + n_split - 1) / n_split;
            const SplitOut part{base, base + slots, base + 2 * slots, n_split, tiles_per_split * 32};
            launch_split<T>(p, part, st);
            return;
        }
    }
    if (p.nq * p.nh * p.nq3 < 256 && p.nkv > 4 * 32) {
        launch_tw<T, 8>(p, st);
    } else {
        launch_tw<T, 4>(p, st);
    }
}

} // namespace

Status flash_attn_ext(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * q = node->src[0];
    const ggml_tensor * k = node->src[1];
    const ggml_tensor * v = node->src[2];
    const ggml_tensor * mask = node->src[3];
    const ggml_tensor * sinks = node->src[4];
    const ggml_type t = k->type;
    if (q->type != GGML_TYPE_F32 || v->type != t || node->type != GGML_TYPE_F32 || v->ne[0] > kMaxDV ||
        (t != GGML_TYPE_F16 && t != GGML_TYPE_F32 && t != GGML_TYPE_BF16) ||
        (mask != nullptr && mask->type != GGML_TYPE_F16) || q->ne[2] > limits::kGridYZ || q->ne[3] > limits::kGridYZ) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    FaArgs p{};
    p.q = static_cast<const char *>(q->data);
    p.q_nb1 = int64_t(q->nb[1]); p.q_nb2 = int64_t(q->nb[2]); p.q_nb3 = int64_t(q->nb[3]);
    p.k = static_cast<const char *>(k->data);
    p.k_nb1 = int64_t(k->nb[1]); p.k_nb2 = int64_t(k->nb[2]); p.k_nb3 = int64_t(k->nb[3]);
    p.v = static_cast<const char *>(v->data);
    p.v_nb1 = int64_t(v->nb[1]); p.v_nb2 = int64_t(v->nb[2]); p.v_nb3 = int64_t(v->nb[3]);
    if (mask != nullptr) {
        p.mask = static_cast<const char *>(mask->data);
        p.m_nb1 = int64_t(mask->nb[1]); p.m_nb2 = int64_t(mask->nb[2]); p.m_nb3 = int64_t(mask->nb[3]);
        p.m_ne2 = mask->ne[2]; p.m_ne3 = mask->ne[3];
    }
    p.sinks = sinks != nullptr ? static_cast<const float *>(sinks->data) : nullptr;
    p.d = static_cast<char *>(node->data);
    p.d_nb1 = int64_t(node->nb[1]); p.d_nb2 = int64_t(node->nb[2]); p.d_nb3 = int64_t(node->nb[3]);
    p.D = q->ne[0];
    p.DV = v->ne[0];
    p.nq = q->ne[1];
    p.nh = q->ne[2];
    p.nq3 = q->ne[3];
    p.nkv = k->ne[1];
    p.rk2 = q->ne[2] / k->ne[2];
    p.rk3 = q->ne[3] / k->ne[3];
    p.rv2 = q->ne[2] / v->ne[2];
    p.rv3 = q->ne[3] / v->ne[3];
    p.ap = num::attn_params_from(reinterpret_cast<const int32_t *>(node->op_params));
    p.alibi = num::make_alibi(p.ap.max_bias, uint32_t(p.nh));
    p.k_vec = p.D % 8 == 0 && aligned_to(k, 16);
    if (p.nq == 0 || p.nh == 0 || p.nq3 == 0 || p.DV == 0) {
        return true;
    }
    auto & cs = stream;
    if (fa::tc_applies(p, t == GGML_TYPE_F16)) {
        fa::launch_tc(p, cs.begin_launch());
        SI_CUDA_LAUNCH_CHECK();
        return true;
    }
    const int n_sm = cs.sm_count();
    switch (t) {
        case GGML_TYPE_F16:  launch_t<GGML_TYPE_F16>(p, cs, n_sm); break;
        case GGML_TYPE_F32:  launch_t<GGML_TYPE_F32>(p, cs, n_sm); break;
        default:             launch_t<GGML_TYPE_BF16>(p, cs, n_sm); break;
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
