// FLASH_ATTN_EXT on the CUDA device, as kernels/host/flash_attn.cpp:
//   out = softmax(score(Q K^T) + slope * mask) V   per query row and head,
// score(s) = s * scale, or c * tanh(s * scale / c) with a logit soft cap c
// (op_params: scale, max_bias, logit_softcap; kernels/common/softmax.h).
// Q F32; K and V of one type, F16, F32 or BF16, rows contiguous (views such
// as a KV-cache slice are fine); other K/V types (block-quantized caches,
// two float types) are decoded to dense F16 first (flash_attn_cvt.cu) and
// take the F16 kernels; mask optional F16 (row = query index,
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
// Decoding (few query rows) splits the keys over blocks instead, and a block
// takes the G query heads that share one K and V head (GQA: 4 in llama 3):
// each K row is loaded once for G dot products and each V row once for G
// outputs, so the cache is read once per K/V head instead of once per query
// head (at 16k keys it does not fit in L2).
//
// F16 K/V with head sizes 64 and 128 go to tensor cores instead: batches of
// queries (prefill) to flash_attn_tc.cu, up to 32 query rows (decoding,
// batched decoding) to flash_attn_dec.cu, which shares this file's split
// partials (SplitOut, flash_attn.cuh) and their combine.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o FLASH_ATTN_EXT
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "diag/check.h"

#include "kernels/common/quants.h"
#include "kernels/common/softmax.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/flash_attn.cuh"
#include "kernels/cuda/limits.h"

namespace standin::kernels::cuda {

namespace {

using fa::FaArgs;
using fa::SplitOut;

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

// Dot products of G query rows (shared memory, qs floats apart) with one K
// row: the K row is loaded once for all of them.
template <int T, int G>
__device__ __forceinline__ void qk_dots(const float * q, int64_t qs, const char * krow, int64_t D, bool vec,
                                        float (&s)[G]) {
#pragma unroll
    for (int g = 0; g < G; ++g) s[g] = 0.0f;
    if (vec) {
#pragma unroll 4
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
#pragma unroll
            for (int g = 0; g < G; ++g) {
                const float4 qa = reinterpret_cast<const float4 *>(q + g * qs + d)[0];
                const float4 qb = reinterpret_cast<const float4 *>(q + g * qs + d)[1];
                float t = s[g];
                t = fmaf(qa.x, w[0], t); t = fmaf(qa.y, w[1], t); t = fmaf(qa.z, w[2], t); t = fmaf(qa.w, w[3], t);
                t = fmaf(qb.x, w[4], t); t = fmaf(qb.y, w[5], t); t = fmaf(qb.z, w[6], t); t = fmaf(qb.w, w[7], t);
                s[g] = t;
            }
        }
    } else {
        for (int64_t d = 0; d < D; ++d) {
            const float w = ld<T>(krow, d);
#pragma unroll
            for (int g = 0; g < G; ++g) s[g] = fmaf(q[g * qs + d], w, s[g]);
        }
    }
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

// Shared memory of a block, for G query heads: q [G][Dp] (D padded to 4, so
// every row is 16-byte aligned), m and s [kWarps][G], the tile's attention
// weights w [kWarps][G][32] (used when G > 1), and o [kWarps][G][DV].
template <int kWarps, int G> __host__ __device__ inline int64_t fa_head_floats(int64_t D) {
    return (G * ((D + 3) / 4 * 4) + 2 * kWarps * G + (G > 1 ? kWarps * G * 32 : 0) + 3) / 4 * 4;
}
template <int kWarps, int G> size_t fa_smem(const FaArgs & p) {
    return size_t(fa_head_floats<kWarps, G>(p.D) + kWarps * G * p.DV) * sizeof(float);
}
template <int kWarps, int G> struct FaShared {
    float *q, *m, *s, *w, *o;
    int64_t qs, ow;  // q's row pitch; floats between two warps' o
    __device__ FaShared(float * base, int64_t D, int64_t DV)
        : q(base), m(base + G * ((D + 3) / 4 * 4)), s(m + kWarps * G), w(s + kWarps * G),
          o(base + fa_head_floats<kWarps, G>(D)), qs((D + 3) / 4 * 4), ow(G * DV) {}
};

// One query row of G heads h0 .. h0 + G - 1, which share one K and one V head
// (GQA), over the keys [kb, ke): each K and V row is loaded once for all G.
// Each warp's running maxima, sums and unnormalised outputs go to sh.m, sh.s
// and sh.o ([warp][g], [warp][g][DV]). Ends with a barrier, so the caller may
// read them.
template <int T, int NV, int kWarps, bool VEC, int G>
__device__ void fa_range(const FaArgs & p, int64_t iq, int64_t h0, int64_t i3, int64_t kb, int64_t ke,
                         const FaShared<kWarps, G> & sh) {
    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5);
    float slope[G];
#pragma unroll
    for (int g = 0; g < G; ++g) slope[g] = p.alibi.slope(uint32_t(h0 + g));
    const char * kbase = p.k + (h0 / p.rk2) * p.k_nb2 + (i3 / p.rk3) * p.k_nb3;
    const char * vbase = p.v + (h0 / p.rv2) * p.v_nb2 + (i3 / p.rv3) * p.v_nb3;
    for (int g = 0; g < G; ++g) {
        const float * qrow = reinterpret_cast<const float *>(p.q + iq * p.q_nb1 + (h0 + g) * p.q_nb2 + i3 * p.q_nb3);
        for (int64_t d = threadIdx.x; d < p.D; d += blockDim.x) sh.q[g * sh.qs + d] = qrow[d];
    }
    __syncthreads();
    // Mask rows of consecutive heads are m_nb2 apart (launch_split picks G so).
    const char * mrow = nullptr;
    int64_t mstep = 0;
    if (p.mask != nullptr) {
        mrow = p.mask + iq * p.m_nb1 + (h0 % p.m_ne2) * p.m_nb2 + (i3 % p.m_ne3) * p.m_nb3;
        mstep = p.m_ne2 > 1 ? p.m_nb2 : 0;
    }

    float m[G], s[G];  // s: this lane's share of the sum
    float o[G][NV];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        m[g] = -INFINITY;
        s[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < NV; ++i) o[g][i] = 0.0f;
    }
    float * w_s = sh.w + warp * G * 32;

    for (int64_t c0 = kb + int64_t(warp) * 32; c0 < ke; c0 += kWarps * 32) {
        const int64_t c = c0 + lane;
        float sc[G];
        bool any = false;
#pragma unroll
        for (int g = 0; g < G; ++g) {
            sc[g] = -INFINITY;
            if (c < ke) {
                sc[g] = mrow != nullptr ? slope[g] * __half2float(reinterpret_cast<const __half *>(mrow + g * mstep)[c])
                                        : 0.0f;
            }
            any |= sc[g] != -INFINITY;
        }
        if (any) {
            float dot[G];
            qk_dots<T, G>(sh.q, sh.qs, kbase + c * p.k_nb1, p.D, p.k_vec, dot);
#pragma unroll
            for (int g = 0; g < G; ++g) {
                if (sc[g] != -INFINITY) sc[g] += num::attn_score(dot[g], p.ap.scale, p.ap.logit_softcap);
            }
        }
        float w[G];
        bool nz = false;  // this lane's key has a weight for some head
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const float tmax = warp_max(sc[g]);
            w[g] = 0.0f;
            if (tmax == -INFINITY) continue;  // this head's tile is masked (uniform over the warp)
            if (tmax > m[g]) {
                const float f = m[g] == -INFINITY ? 0.0f : expf(m[g] - tmax);
                m[g] = tmax;
                s[g] *= f;
#pragma unroll
                for (int i = 0; i < NV; ++i) o[g][i] *= f;
            }
            w[g] = sc[g] == -INFINITY ? 0.0f : expf(sc[g] - m[g]);
            s[g] += w[g];
            nz |= w[g] != 0.0f;
        }
        // Keys of weight 0 for every head are neither loaded nor added
        // (masked cache rows may hold anything).
        const unsigned keys = __ballot_sync(0xffffffffu, nz);
        if (keys == 0) continue;  // the whole tile is masked for every head
        if constexpr (G > 1) {
            __syncwarp();
#pragma unroll
            for (int g = 0; g < G; ++g) w_s[g * 32 + lane] = w[g];
            __syncwarp();
        }
        // V rows of the tile, kVRows at a time: their loads are issued
        // together, then added in key order with the weights of each head
        // (shared memory: a broadcast read per row and head).
        constexpr int kVRows = v_rows<NV>();
        for (int j0 = 0; j0 < 32 && (keys >> j0) != 0; j0 += kVRows) {
            float vv[kVRows][NV];
#pragma unroll
            for (int u = 0; u < kVRows; ++u) {
                const char * vrow = vbase + (c0 + j0 + u) * p.v_nb1;
                load_v<T, NV, VEC>(vrow, lane, p.DV, (keys >> (j0 + u)) & 1u, vv[u]);
            }
#pragma unroll
            for (int u = 0; u < kVRows; ++u) {
                if (((keys >> (j0 + u)) & 1u) == 0) continue;
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    const float wg = G > 1 ? w_s[g * 32 + j0 + u] : __shfl_sync(0xffffffffu, w[0], j0 + u);
#pragma unroll
                    for (int i = 0; i < NV; ++i) o[g][i] = fmaf(wg, vv[u][i], o[g][i]);
                }
            }
        }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
        const float sg = warp_sum(s[g]);
        if (lane == 0) {
            sh.m[warp * G + g] = m[g];
            sh.s[warp * G + g] = sg;
        }
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int64_t d = v_index<VEC, NV>(lane, i);
            if (d < p.DV) sh.o[warp * sh.ow + g * p.DV + d] = o[g][i];
        }
    }
    __syncthreads();
}

// Head g's warps merged: their common maximum (with `sink`, -inf for none)
// in mx, and each warp's factor to it in f; returns the rescaled sum of
// weights (the sink's included).
template <int kWarps, int G>
__device__ __forceinline__ float merge_warps(const FaShared<kWarps, G> & sh, int g, float sink, float & mx,
                                             float (&f)[kWarps]) {
    mx = sink;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sh.m[w * G + g]);
    float total = sink != -INFINITY ? expf(sink - mx) : 0.0f;
    for (int w = 0; w < kWarps; ++w) {
        const float mw = sh.m[w * G + g];
        f[w] = mw == -INFINITY ? 0.0f : expf(mw - mx);
        total += sh.s[w * G + g] * f[w];
    }
    return total;
}

// Block (x, y, z): query rows x, x + gridDim.x, ... of heads y * G .. + G - 1
// in batch z, over all keys.
template <int T, int NV, int kWarps, int G>
__global__ void __launch_bounds__(kWarps * 32) fa_kernel(FaArgs p) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    extern __shared__ __align__(16) float smem[];
    const FaShared<kWarps, G> sh(smem, p.D, p.DV);
    const int64_t h0 = int64_t(blockIdx.y) * G, i3 = blockIdx.z;

    for (int64_t iq = blockIdx.x; iq < p.nq; iq += gridDim.x) {
        fa_range<T, NV, kWarps, false, G>(p, iq, h0, i3, 0, p.nkv, sh);
        for (int g = 0; g < G; ++g) {
            const int64_t h = h0 + g;
            float mx, f[kWarps];
            const float total = merge_warps<kWarps, G>(sh, g, p.sinks != nullptr ? p.sinks[h] : -INFINITY, mx, f);
            const float inv = total == 0.0f ? 0.0f : 1.0f / total;
            float * out = reinterpret_cast<float *>(p.d + h * p.d_nb1 + iq * p.d_nb2 + i3 * p.d_nb3);
            for (int64_t d = threadIdx.x; d < p.DV; d += blockDim.x) {
                float acc = 0.0f;
                for (int w = 0; w < kWarps; ++w) acc += sh.o[w * sh.ow + g * p.DV + d] * f[w];
                out[d] = acc * inv;
            }
        }
        __syncthreads();  // q and the merge buffers are reused by the next query row
    }
}

// Split over the keys (decoding: few query rows, so few blocks otherwise):
// block x = iq * n_split + split takes keys [split * span, +span) and leaves
// its partial result - maximum, sum and unnormalised output at that maximum -
// in `part`; fa_combine merges the splits of each row. Row r = (i3 * nh + h)
// * nq + iq, split j: part_m/part_s at [r * n_split + j], output at that
// index times DV (SplitOut).
template <int T, int NV, bool VEC, int G>
__global__ void __launch_bounds__(kSplitWarps * 32) fa_split_kernel(FaArgs p, SplitOut part) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    extern __shared__ __align__(16) float smem[];
    const FaShared<kSplitWarps, G> sh(smem, p.D, p.DV);
    const int64_t h0 = int64_t(blockIdx.y) * G, i3 = blockIdx.z;
    const int64_t iq = blockIdx.x / part.n_split, j = blockIdx.x % part.n_split;
    const int64_t kb = j * part.span, ke = kb + part.span < p.nkv ? kb + part.span : p.nkv;
    fa_range<T, NV, kSplitWarps, VEC, G>(p, iq, h0, i3, kb, ke, sh);
    for (int g = 0; g < G; ++g) {
        float mx, f[kSplitWarps];
        const float total = merge_warps<kSplitWarps, G>(sh, g, -INFINITY, mx, f);
        const int64_t slot = ((i3 * p.nh + h0 + g) * p.nq + iq) * part.n_split + j;
        if (threadIdx.x == 0) {
            part.m[slot] = mx;
            part.s[slot] = total;
        }
        for (int64_t d = threadIdx.x; d < p.DV; d += blockDim.x) {
            float acc = 0.0f;
            for (int w = 0; w < kSplitWarps; ++w) acc += sh.o[w * sh.ow + g * p.DV + d] * f[w];
            part.o[slot * p.DV + d] = acc;
        }
    }
}

// One block per (query row, head, batch): the splits' partials rescaled to
// their common maximum (the sink included) and normalised. The first warp
// finds the maximum and each split's factor (two splits per lane), then every
// thread sums its output elements over the splits with independent loads.
static_assert(kMaxSplit <= 64, "fa_combine's first warp takes two splits per lane");
__global__ void __launch_bounds__(128) fa_combine(FaArgs p, SplitOut part) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    __shared__ float f_s[kMaxSplit];
    __shared__ float inv_s;
    const int64_t iq = blockIdx.x, h = blockIdx.y, i3 = blockIdx.z;
    const int64_t row = ((i3 * p.nh + h) * p.nq + iq) * part.n_split;
    const int n = part.n_split;
    if (threadIdx.x < 32) {
        const int lane = int(threadIdx.x);
        const float sink = p.sinks != nullptr ? p.sinks[h] : -INFINITY;
        float mj[2], mx = sink;
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int j = lane + 32 * k;
            mj[k] = j < n ? part.m[row + j] : -INFINITY;
            mx = fmaxf(mx, mj[k]);
        }
        mx = warp_max(mx);
        float total = 0.0f;
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int j = lane + 32 * k;
            const float f = mj[k] == -INFINITY ? 0.0f : expf(mj[k] - mx);
            if (j < n) {
                f_s[j] = f;
                total += part.s[row + j] * f;
            }
        }
        total = warp_sum(total);
        if (lane == 0) {
            total += p.sinks != nullptr ? expf(sink - mx) : 0.0f;
            inv_s = total == 0.0f ? 0.0f : 1.0f / total;
        }
    }
    __syncthreads();
    float * out = reinterpret_cast<float *>(p.d + h * p.d_nb1 + iq * p.d_nb2 + i3 * p.d_nb3);
    const float * po = part.o + row * p.DV;
    // With q_out (DV a multiple of 32), warp w holds elements 32 w .. 32 w + 31
    // of each pass: one 32-group of the quantized output.
    const int64_t col = (i3 * p.nq + iq) * p.nh * p.DV + h * p.DV;
    for (int64_t d = threadIdx.x; d < p.DV; d += blockDim.x) {
        float acc = 0.0f;
#pragma unroll 8
        for (int j = 0; j < n; ++j) acc = fmaf(po[j * p.DV + d], f_s[j], acc);
        const float v = acc * inv_s;
        out[d] = v;
        if (p.q_out != nullptr) quantize_warp32(v, p.q_out + col + d, p.ds_out + (col + d) / 32);
    }
}

// NV: V elements per lane for DV.
template <typename F> auto with_nv(int64_t DV, F && f) {
    if (DV <= 64) return f(std::integral_constant<int, 2>{});
    if (DV <= 128) return f(std::integral_constant<int, 4>{});
    if (DV <= 256) return f(std::integral_constant<int, 8>{});
    return f(std::integral_constant<int, 16>{});
}

template <int T, int W> void launch_tw(const FaArgs & p, cudaStream_t st) {
    const dim3 grid(unsigned(p.nq < limits::kGridX ? p.nq : limits::kGridX), unsigned(p.nh), unsigned(p.nq3));
    const size_t smem = fa_smem<W, 1>(p);
    with_nv(p.DV, [&](auto nv) {
        launch(fa_kernel<T, decltype(nv)::value, W, 1>, grid, dim3(W * 32), smem, st, p);
    });
}

// Query heads per split block (GQA): each lane keeps G x NV output elements,
// so G is bounded by the registers that takes.
constexpr int kMaxHeads = 4;  // 8 measured slower: registers for 2 blocks per SM
constexpr int max_heads(int nv) { return 32 / nv < kMaxHeads ? 32 / nv : kMaxHeads; }
constexpr size_t kSplitSmemMax = 48 * 1024;  // without the opt-in to more dynamic shared memory

// The largest G <= max_heads(NV), a power of two, such that G consecutive
// heads share one K and one V head (G divides the query heads per K head and
// per V head), their mask rows are evenly spaced (mask broadcast over heads,
// or G divides its heads), and the block's shared memory fits.
template <int NV> int heads_per_block(const FaArgs & p) {
    for (int g = max_heads(NV); g > 1; g /= 2) {
        if (p.rk2 % g == 0 && p.rv2 % g == 0 && (p.mask == nullptr || p.m_ne2 == 1 || p.m_ne2 % g == 0)) {
            static_assert(kMaxHeads <= 4, "the shared memory sizes below cover 2 and 4 heads");
            const size_t smem = g == 4 ? fa_smem<kSplitWarps, 4>(p) : fa_smem<kSplitWarps, 2>(p);
            if (smem <= kSplitSmemMax) return g;
        }
    }
    return 1;
}

// Heads per split block for K/V of type T: grouped for F16 only, which keeps
// the kernels compiled for F32 and BF16 caches to one per V width.
template <int T> int heads_for(const FaArgs & p) {
    if constexpr (T != GGML_TYPE_F16) {
        return 1;
    } else {
        return with_nv(p.DV, [&](auto nv) { return heads_per_block<decltype(nv)::value>(p); });
    }
}

template <int T, int NV, bool VEC, int G>
void launch_split_g(const FaArgs & p, const SplitOut & part, cudaStream_t st) {
    if constexpr (G <= max_heads(NV)) {
        const dim3 grid(unsigned(p.nq * part.n_split), unsigned(p.nh / G), unsigned(p.nq3));
        launch(fa_split_kernel<T, NV, VEC, G>, grid, dim3(kSplitWarps * 32), fa_smem<kSplitWarps, G>(p), st, p,
               part);
    } else {
        SI_ASSERT_MSG(false, "heads_per_block picked more heads than the registers allow");
    }
}

template <int T, int NV, bool VEC> void launch_split_v(const FaArgs & p, const SplitOut & part, cudaStream_t st) {
    if constexpr (T != GGML_TYPE_F16) {
        launch_split_g<T, NV, VEC, 1>(p, part, st);  // grouped heads are F16's (heads_for), the cache type llama uses
        return;
    }
    switch (part.heads) {
        case 4:  launch_split_g<T, NV, VEC, 4>(p, part, st); break;
        case 2:  launch_split_g<T, NV, VEC, 2>(p, part, st); break;
        default: launch_split_g<T, NV, VEC, 1>(p, part, st); break;
    }
}

template <int T, int NV> void launch_split_nv(const FaArgs & p, const SplitOut & part, bool vec, cudaStream_t st) {
    if constexpr (T == GGML_TYPE_F16) {
        if (vec) {
            launch_split_v<T, NV, true>(p, part, st);
        } else {
            launch_split_v<T, NV, false>(p, part, st);
        }
    } else {
        launch_split_v<T, NV, false>(p, part, st);  // vector V loads are F16's
    }
}

void launch_combine(const FaArgs & p, const SplitOut & part, cudaStream_t st) {
    SI_CUDA_LAUNCH_CHECK();
    launch(fa_combine, dim3(unsigned(p.nq), unsigned(p.nh), unsigned(p.nq3)), dim3(128), 0, st, p, part);
}

template <int T> void launch_split(const FaArgs & p, const SplitOut & part, cudaStream_t st) {
    // Vector V loads: each lane's NV elements are one aligned piece of the row.
    const auto vec_for = [&](int nv) {
        return T == GGML_TYPE_F16 && p.DV == 32 * nv && p.v_nb1 % (2 * nv) == 0 && p.v_nb2 % (2 * nv) == 0 &&
               p.v_nb3 % (2 * nv) == 0 && reinterpret_cast<uintptr_t>(p.v) % (2 * nv) == 0;
    };
    with_nv(p.DV, [&](auto nv) {
        constexpr int NV = decltype(nv)::value;
        launch_split_nv<T, NV>(p, part, vec_for(NV), st);
    });
    launch_combine(p, part, st);
}

// How many key ranges a decode-sized problem is split into: enough blocks to
// give every SM about four (the loads of K and V rows are what a block waits
// on), with at least one 32-key tile per warp; 1 (no split) when the query
// rows alone fill the GPU or the keys are few. `heads`: query heads per block.
int split_count(const FaArgs & p, int n_sm, int heads) {
    const int64_t blocks = p.nq * (p.nh / heads) * p.nq3;
    const int64_t tiles_per_block = kSplitWarps, tiles = (p.nkv + 31) / 32;
    const int64_t want = (4 * int64_t(n_sm) + blocks - 1) / blocks;
    const int64_t most = (tiles + tiles_per_block - 1) / tiles_per_block;
    const int64_t n = want < most ? want : most;
    if (p.nq * p.nh * p.nq3 >= 2 * int64_t(n_sm) || n < 2 || p.nq * n > limits::kGridX) return 1;
    return int(n < kMaxSplit ? n : kMaxSplit);
}

// Few (query row, head) blocks - decoding - cannot fill the GPU with 4 warps
// each: split over the keys when scratch memory for the partials is there,
// otherwise 8 warps per block. True: the split kernels ran (whose combine
// writes q_out when it is set).
template <int T> bool launch_t(const FaArgs & p, rt::cuda::CudaStream & stream, int n_sm) {
    cudaStream_t st = stream.begin_launch();
    // The split partials in the stream's scratch: n_split ranges of whole
    // 32-key tiles; false when there is no memory for them.
    const auto split_out = [&](int n_split, int heads, SplitOut & part) {
        const int64_t slots = p.nq * p.nh * p.nq3 * n_split;
        auto * base = static_cast<float *>(stream.scratch(size_t(slots) * size_t(2 + p.DV) * sizeof(float)));
        if (base == nullptr) return false;
        const int64_t tiles = (p.nkv + 31) / 32, tiles_per_split = (tiles + n_split - 1) / n_split;
        part = SplitOut{base, base + slots, base + 2 * slots, n_split, tiles_per_split * 32, heads};
        return true;
    };
    SplitOut part{};
    // Decoding over an F16 cache of head size 64 or 128: tensor cores.
    if (const int dh = fa::dec_heads(p, T == GGML_TYPE_F16); dh > 0) {
        if (split_out(fa::dec_split(p, dh, n_sm, kMaxSplit), dh, part)) {
            fa::launch_dec(p, part, st);
            launch_combine(p, part, st);
            return true;
        }
    }
    const int heads = heads_for<T>(p);
    const int n_split = split_count(p, n_sm, heads);
    if (n_split > 1 && split_out(n_split, heads, part)) {
        launch_split<T>(p, part, st);
        return true;
    }
    if (p.nq * p.nh * p.nq3 < 256 && p.nkv > 4 * 32) {
        launch_tw<T, 8>(p, st);
    } else {
        launch_tw<T, 4>(p, st);
    }
    return false;
}

// True: the split kernels ran (launch_t).
bool run_kernels(const FaArgs & p, ggml_type t, rt::cuda::CudaStream & cs) {
    if (fa::tc_applies(p, t == GGML_TYPE_F16)) {
        fa::launch_tc(p, cs.begin_launch());
        SI_CUDA_LAUNCH_CHECK();
        return false;
    }
    const int n_sm = cs.sm_count();
    bool split = false;
    switch (t) {
        case GGML_TYPE_F16:  split = launch_t<GGML_TYPE_F16>(p, cs, n_sm); break;
        case GGML_TYPE_F32:  split = launch_t<GGML_TYPE_F32>(p, cs, n_sm); break;
        default:             split = launch_t<GGML_TYPE_BF16>(p, cs, n_sm); break;
    }
    SI_CUDA_LAUNCH_CHECK();
    return split;
}

bool is_float(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

void set_kv(const ggml_tensor * t, const char *& data, int64_t & nb1, int64_t & nb2, int64_t & nb3) {
    data = static_cast<const char *>(t->data);
    nb1 = int64_t(t->nb[1]); nb2 = int64_t(t->nb[2]); nb3 = int64_t(t->nb[3]);
}

// The dense F16 rows flash_attn_cvt.cu wrote for t at `out`.
void set_dense(const ggml_tensor * t, const __half * out, const char *& data, int64_t & nb1, int64_t & nb2,
               int64_t & nb3) {
    data = reinterpret_cast<const char *>(out);
    nb1 = t->ne[0] * int64_t(sizeof(__half)); nb2 = nb1 * t->ne[1]; nb3 = nb2 * t->ne[2];
}

} // namespace

Status flash_attn_ext(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    bool quantized = false;
    return flash_attn_ext_quant(stream, node, nullptr, nullptr, quantized);
}

Status flash_attn_ext_quant(rt::cuda::CudaStream & stream, ggml_tensor * node, int8_t * q_out, float2 * ds_out,
                            bool & quantized) {
    quantized = false;
    const ggml_tensor * q = node->src[0];
    const ggml_tensor * k = node->src[1];
    const ggml_tensor * v = node->src[2];
    const ggml_tensor * mask = node->src[3];
    const ggml_tensor * sinks = node->src[4];
    if (q->type != GGML_TYPE_F32 || node->type != GGML_TYPE_F32 || v->ne[0] > kMaxDV ||
        (mask != nullptr && mask->type != GGML_TYPE_F16) || q->ne[2] > limits::kGridYZ || q->ne[3] > limits::kGridYZ) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    // K and V of one float type are read in place; any other pair (block
    // types, two float types) is decoded to F16 first (flash_attn_cvt.cu).
    const bool native = k->type == v->type && is_float(k->type);
    if (!native && !(quant::can_decode(k->type) && quant::can_decode(v->type))) {
        return false;
    }
    const ggml_type t = native ? k->type : GGML_TYPE_F16;
    FaArgs p{};
    p.q = static_cast<const char *>(q->data);
    p.q_nb1 = int64_t(q->nb[1]); p.q_nb2 = int64_t(q->nb[2]); p.q_nb3 = int64_t(q->nb[3]);
    set_kv(k, p.k, p.k_nb1, p.k_nb2, p.k_nb3);
    set_kv(v, p.v, p.v_nb1, p.v_nb2, p.v_nb3);
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
    if (p.nq == 0 || p.nh == 0 || p.nq3 == 0 || p.DV == 0) {
        return true;
    }
    auto & cs = stream;
    void * cvt = nullptr;
    if (!native) {
        // Dense F16 copies of whichever of K and V is not F16 already.
        const size_t kb = k->type == GGML_TYPE_F16 ? 0 : size_t(ggml_nelements(k)) * 2;
        const size_t vb = v->type == GGML_TYPE_F16 ? 0 : size_t(ggml_nelements(v)) * 2;
        cudaStream_t st = cs.begin_launch();
        if (!scratch_alloc(&cvt, kb + vb, st)) {
            return Status::out_of_memory;
        }
        __half * out = static_cast<__half *>(cvt);
        __half * vout = out + kb / 2;
        const bool ok = (kb == 0 || fa::to_f16(k, out, st)) && (vb == 0 || fa::to_f16(v, vout, st));
        SI_CUDA_LAUNCH_CHECK();
        SI_ASSERT_MSG(ok, "FLASH_ATTN_EXT: a K/V type can_decode accepts has no F16 decoder");
        if (kb != 0) set_dense(k, out, p.k, p.k_nb1, p.k_nb2, p.k_nb3);
        if (vb != 0) set_dense(v, vout, p.v, p.v_nb1, p.v_nb2, p.v_nb3);
    }
    p.k_vec = p.D % 8 == 0 && reinterpret_cast<uintptr_t>(p.k) % 16 == 0 && p.k_nb1 % 16 == 0 && p.k_nb2 % 16 == 0 &&
              p.k_nb3 % 16 == 0;
    // The combine quantizes 32-groups of one head's row: DV a multiple of 32, rows dense.
    if (q_out != nullptr && p.DV % 32 == 0 && ggml_is_contiguous(node)) {
        p.q_out = q_out;
        p.ds_out = ds_out;
    }
    quantized = run_kernels(p, t, cs) && p.q_out != nullptr;
    if (cvt != nullptr) {
        SI_CUDA_CHECK(cudaFreeAsync(cvt, cs.begin_launch()));
    }
    return true;
}

} // namespace standin::kernels::cuda
