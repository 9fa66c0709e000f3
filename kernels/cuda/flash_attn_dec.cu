// FLASH_ATTN_EXT for decoding on tensor cores: up to kDecMaxQueries query
// rows (one token, a batch of sequences, a draft; the prefill kernel of
// flash_attn_tc.cu takes more) over an F16 K/V cache with D == DV in {64,
// 128}, split over the keys like the f32 split kernel of flash_attn.cu,
// whose partials (SplitOut) and combine it shares.
//
// Note [decode on tensor cores]
// A decoded token's attention reads the whole cache once per K/V head and
// does little arithmetic per byte, but the f32 split kernel spent over a
// thousand instructions per lane on a 32-key tile of 4 heads (a dot product
// per key and head, then every V row times every head's weight), which kept
// it at a third of the memory bandwidth at 16k keys (46.7 us against
// ggml-cuda's 34.1, results/h200/summary-54.txt). Here the query rows of one
// K/V head - the G heads that share it (GQA) times the nq query rows - are
// the rows of mma.sync m16n8k16 tiles, 16 a block (rows past them are zeros;
// with at most 8 in all the upper half of the fragments is not computed): a
// 16-key tile of D = 128 is 16 matrix instructions for the scores and 16 for
// P V, their fragments loaded from shared memory with ldmatrix. Each of the
// 8 warps streams its own tiles (keys kb + 16 (warp + 8 i)) through a double
// buffer of cp.async copies, so one tile loads while the previous one is
// multiplied, with the mask entries loaded a tile ahead, and keeps its own
// online softmax: outputs rescaled only when a row's maximum moved, tiles
// that no row of the warp sees skipped (other sequences' cells when a batch
// shares one cache). The block merges its warps at the end and writes one
// partial per row for fa_combine. Q and P are rounded to F16, as the prefill
// kernel rounds them. The V rows of masked keys are multiplied by a weight of
// 0, so they must be finite (llama clears its cache); rows past the view are
// zero-filled instead of read.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o FLASH_ATTN_EXT (cases with up to
// 32 query rows and F16 K/V); logits decoded token by token and in batches
// (standin logits --ubatch 1 / 4).
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>

#include "diag/check.h"

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/flash_attn.cuh"
#include "kernels/cuda/limits.h"

namespace standin::kernels::cuda::fa {

namespace {

// The block's shape: KT keys a tile, W warps, S stages of tiles a warp (a
// cp.async ring). Measured at 16k keys (D 128, 4 heads a K/V head; H200,
// results/h200/summary-57.txt): 16 x 8 x 2 26.5 us, 16 x 8 x 3 27.5, 32 x 4 x 2
// 27.0, 32 x 4 x 3 28.2; one block of 4 warps an SM before (32 x 4 x 2, the
// mask loaded in the loop, expf and every rescale) 35-41 us: with one warp a
// scheduler every dependent instruction's latency showed.
constexpr int kRows = 16, KT = 16, W = 8, S = 2;

template <int D> struct Shape {
    static constexpr int kRowBytes = 2 * D + 16;  // a staged row: D halves and 16 bytes of padding (banks)
    static constexpr int kStage = 2 * KT * kRowBytes;  // KT K rows, then KT V rows
    static constexpr size_t kSmem = size_t(W) * S * kStage;
    // The merge area (per warp: row maxima, sums and outputs) reuses the stages.
    static_assert(size_t(W) * kRows * (D + 2) * sizeof(float) <= kSmem, "the merge area fits in the stages");
};

// Block (split j, y = head group * chunks + chunk, batch z): rows r = chunk *
// 16 + local row, r = qi * G + g (query row qi, head group * G + g), over keys
// [j * span, +span). HALF: at most 8 rows in all, so the rows gq + 8 of the
// fragments are all padding and are not computed.
template <int D, bool HALF>
__global__ void __launch_bounds__(W * 32, 1) fa_dec_kernel(FaArgs p, SplitOut part) {
    using Sh = Shape<D>;
    constexpr int ND = D / 8, NK = D / 16, NF = KT / 8;  // output slices; k-steps of the scores; key slices
    constexpr int R2 = HALF ? 1 : 2;                     // fragment rows (gq, gq + 8) computed
    constexpr int P = D / 8, PR = 32 / P;                // 16-byte pieces a row; rows a copy instruction covers
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5);
    const int gq = lane >> 2, tq = lane & 3;  // the fragment coordinates of mma.sync
    const int G = part.heads, chunks = (G * int(p.nq) + kRows - 1) / kRows;
    const int r0 = int(blockIdx.y) % chunks * kRows;                     // the chunk's first row
    const int R = G * int(p.nq) - r0 < kRows ? G * int(p.nq) - r0 : kRows;  // rows of this block
    const int64_t h0 = int64_t(blockIdx.y) / chunks * G, i3 = blockIdx.z, j = blockIdx.x;
    const int64_t kb = j * part.span, ke = kb + part.span < p.nkv ? kb + part.span : p.nkv;
    // This lane's pieces of a tile: row lane / P + PR i, bytes 16 (lane % P).
    const char * kl = p.k + (h0 / p.rk2) * p.k_nb2 + (i3 / p.rk3) * p.k_nb3 + (lane / P) * p.k_nb1 + (lane % P) * 16;
    const char * vl = p.v + (h0 / p.rv2) * p.v_nb2 + (i3 / p.rv3) * p.v_nb3 + (lane / P) * p.v_nb1 + (lane % P) * 16;
    char * st0 = reinterpret_cast<char *>(smem_raw) + size_t(warp) * S * Sh::kStage;
    const int sl = (lane / P) * Sh::kRowBytes + (lane % P) * 16;

    // Copies K and V rows [c, c + KT) (those below ke; the rest zero-filled)
    // into a stage as one cp.async group.
    const auto stage = [&](int64_t c, char * st) {
        const char * ks = kl + c * p.k_nb1;
        const char * vs = vl + c * p.v_nb1;
        const int64_t left = ke - c;
#pragma unroll
        for (int i = 0; i < KT / PR; ++i) {
            const bool ok = lane / P + PR * i < left;
            const int64_t row = ok ? PR * i : 0;  // an address inside the view even when nothing is read
            cp_async<16>(st + sl + PR * i * Sh::kRowBytes, ks + row * p.k_nb1, ok);
            cp_async<16>(st + sl + (KT + PR * i) * Sh::kRowBytes, vs + row * p.v_nb1, ok);
        }
        cp_commit();
    };

    pdl_wait();  // Note [dependent launch]: the cache's new rows come from the kernels before
    pdl_trigger();
    const int64_t step = int64_t(W) * KT;
    int64_t c0 = kb + int64_t(warp) * KT;
#pragma unroll
    for (int i = 0; i < S - 1; ++i) {
        if (c0 + i * step < ke) {
            stage(c0 + i * step, st0 + i * Sh::kStage);
        } else {
            cp_commit();
        }
    }

    // This thread's rows gq and gq + 8: their query, head, mask row and slope.
    const __half * mrow[2] = {nullptr, nullptr};
    bool valid[2] = {false, false};
    float slope[2] = {0.0f, 0.0f};
    uint32_t qa[NK][4];
#pragma unroll
    for (int r2 = 0; r2 < 2; ++r2) {
        const int r = gq + 8 * r2;
        valid[r2] = r2 < R2 && r < R;
        const int64_t qi = valid[r2] ? (r0 + r) / G : 0, h = h0 + (valid[r2] ? (r0 + r) % G : 0);
        slope[r2] = p.alibi.slope(uint32_t(h));
        if (valid[r2] && p.mask != nullptr) {
            mrow[r2] = reinterpret_cast<const __half *>(p.mask + qi * p.m_nb1 + (h % p.m_ne2) * p.m_nb2 +
                                                        (i3 % p.m_ne3) * p.m_nb3);
        }
        const float * q = reinterpret_cast<const float *>(p.q + qi * p.q_nb1 + h * p.q_nb2 + i3 * p.q_nb3);
#pragma unroll
        for (int kk = 0; kk < NK; ++kk) {
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {  // columns 2 tq, +1 and 2 tq + 8, +9 of k-step kk
                const int d = kk * 16 + hi * 8 + 2 * tq;
                const float2 v = valid[r2] ? make_float2(q[d], q[d + 1]) : make_float2(0.0f, 0.0f);
                qa[kk][r2 + 2 * hi] = pack_half2(v.x, v.y);
            }
        }
    }
    // Mask pairs (keys 2 tq, 2 tq + 1 of a slice) as one 4-byte load when
    // every mask row is 4-byte aligned and the tile is whole.
    const bool mask4 = p.mask == nullptr || (reinterpret_cast<uintptr_t>(p.mask) % 4 == 0 && p.m_nb1 % 4 == 0 &&
                                             p.m_nb2 % 4 == 0 && p.m_nb3 % 4 == 0);

    // The mask entries of this thread's scores in a tile (keys c + nf * 8 +
    // 2 tq + e % 2, rows e / 2), loaded a tile ahead: -inf past the keys or
    // the rows, 0 without a mask.
    const __half kNoKey = __float2half(-INFINITY);
    const auto load_mask = [&](int64_t c, __half2 (&mk)[NF][2]) {
        const bool whole = mask4 && c + KT <= ke;
#pragma unroll
        for (int nf = 0; nf < NF; ++nf) {
#pragma unroll
            for (int r2 = 0; r2 < 2; ++r2) {
                const int64_t key = c + nf * 8 + 2 * tq;
                if (!valid[r2]) {
                    mk[nf][r2] = __halves2half2(kNoKey, kNoKey);
                } else if (mrow[r2] == nullptr) {
                    mk[nf][r2] = __halves2half2(key < ke ? __half(0.0f) : kNoKey, key + 1 < ke ? __half(0.0f) : kNoKey);
                } else if (whole) {
                    mk[nf][r2] = *reinterpret_cast<const __half2 *>(mrow[r2] + key);
                } else {
                    mk[nf][r2] = __halves2half2(key < ke ? mrow[r2][key] : kNoKey, key + 1 < ke ? mrow[r2][key + 1] : kNoKey);
                }
            }
        }
    };
    __half2 mk[NF][2];
    load_mask(c0, mk);

    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float o[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
    const int mi = lane >> 3, mr = lane & 7;  // ldmatrix: the matrix and row this lane addresses

    for (int buf = 0; c0 < ke; c0 += step, buf = buf + 1 == S ? 0 : buf + 1) {
        char * st = st0 + buf * Sh::kStage;
        const int64_t next = c0 + (S - 1) * step;
        if (next < ke) {
            stage(next, st0 + (buf == 0 ? S - 1 : buf - 1) * Sh::kStage);
        } else {
            cp_commit();  // an empty group keeps the count of the wait below
        }
        // The bias of this thread's scores (slope * mask, -inf for none).
        float s[NF][4];
        bool dead = true;  // every score of this thread is -inf
#pragma unroll
        for (int nf = 0; nf < NF; ++nf) {
#pragma unroll
            for (int r2 = 0; r2 < R2; ++r2) {
                const float2 b = __half22float2(mk[nf][r2]);
                s[nf][2 * r2] = b.x == -INFINITY ? b.x : slope[r2] * b.x;
                s[nf][2 * r2 + 1] = b.y == -INFINITY ? b.y : slope[r2] * b.y;
                dead = dead && b.x == -INFINITY && b.y == -INFINITY;
            }
        }
        load_mask(c0 + step, mk);
        cp_wait<S - 1>();
        __syncwarp();  // every lane's pieces of the tile are in
        // A tile no row of the warp sees (other sequences' cells of a shared
        // cache, batched decoding) adds nothing.
        if (__all_sync(0xffffffffu, dead)) continue;

        // Scores: 16 rows x KT keys as slices of 8 keys; ldmatrix takes the
        // B fragments of two slices at once.
        float acc[NF][4];
#pragma unroll
        for (int nf = 0; nf < NF; ++nf) acc[nf][0] = acc[nf][1] = acc[nf][2] = acc[nf][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < NK; ++kk) {
#pragma unroll
            for (int np = 0; np < NF / 2; ++np) {
                uint32_t b[4];
                const int key = (2 * np + (mi >> 1)) * 8 + mr, d = kk * 16 + (mi & 1) * 8;
                ldmatrix_x4(b, st + key * Sh::kRowBytes + d * 2);
                const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
                mma16816(acc[2 * np], qa[kk], b0);
                mma16816(acc[2 * np + 1], qa[kk], b1);
            }
        }

        // Online softmax per row (the 4 threads of a row hold its keys).
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nf = 0; nf < NF; ++nf) {
#pragma unroll
            for (int e = 0; e < 2 * R2; ++e) {
                if (s[nf][e] != -INFINITY) s[nf][e] += num::attn_score(acc[nf][e], p.ap.scale, p.ap.logit_softcap);
                mx[e >> 1] = fmaxf(mx[e >> 1], s[nf][e]);
            }
        }
        float f[2] = {1.0f, 1.0f};
#pragma unroll
        for (int r2 = 0; r2 < R2; ++r2) {
            mx[r2] = fmaxf(mx[r2], __shfl_xor_sync(0xffffffffu, mx[r2], 1));
            mx[r2] = fmaxf(mx[r2], __shfl_xor_sync(0xffffffffu, mx[r2], 2));
            const float mn = fmaxf(m[r2], mx[r2]);
            f[r2] = m[r2] == mn ? 1.0f : m[r2] == -INFINITY ? 0.0f : __expf(m[r2] - mn);  // l, o are 0 while m is -inf
            m[r2] = mn;
            l[r2] *= f[r2];
        }
#pragma unroll
        for (int nf = 0; nf < NF; ++nf) {
#pragma unroll
            for (int e = 0; e < 2 * R2; ++e) {
                s[nf][e] = s[nf][e] == -INFINITY ? 0.0f : __expf(s[nf][e] - m[e >> 1]);
                l[e >> 1] += s[nf][e];
            }
            if constexpr (HALF) s[nf][2] = s[nf][3] = 0.0f;
        }
        // Rescale the outputs, unless no row of the warp has a new maximum.
        if (!__all_sync(0xffffffffu, f[0] == 1.0f && f[1] == 1.0f)) {
#pragma unroll
            for (int nd = 0; nd < ND; ++nd) {
                o[nd][0] *= f[0];
                o[nd][1] *= f[0];
                if constexpr (!HALF) {
                    o[nd][2] *= f[1];
                    o[nd][3] *= f[1];
                }
            }
        }

        // O += P V: P in the A layout (the score registers), V's B fragments
        // by transposing loads of its key-major rows.
        const char * vs = st + KT * Sh::kRowBytes;
#pragma unroll
        for (int kk = 0; kk < KT / 16; ++kk) {
            uint32_t a[4];
            scores_as_a(s, kk, a);
#pragma unroll
            for (int np = 0; np < ND / 2; ++np) {
                uint32_t b[4];
                const int key = kk * 16 + (mi & 1) * 8 + mr, d = (2 * np + (mi >> 1)) * 8;
                ldmatrix_x4_trans(b, vs + key * Sh::kRowBytes + d * 2);
                const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
                mma16816(o[2 * np], a, b0);
                mma16816(o[2 * np + 1], a, b1);
            }
        }
        __syncwarp();  // the next iteration's copies overwrite this stage
    }
    cp_wait<0>();

    // Merge the warps: each leaves its row maxima, sums and outputs in
    // shared memory (over the stages), then the block rescales them to the
    // rows' common maxima and writes one partial per row.
    __syncthreads();
    float * mw = reinterpret_cast<float *>(smem_raw);  // [W][kRows]
    float * lw = mw + W * kRows;                       // [W][kRows]
    float * ow = lw + W * kRows;                       // [W][kRows][D]
#pragma unroll
    for (int r2 = 0; r2 < R2; ++r2) {
        l[r2] += __shfl_xor_sync(0xffffffffu, l[r2], 1);
        l[r2] += __shfl_xor_sync(0xffffffffu, l[r2], 2);
        const int r = gq + 8 * r2;
        if (tq == 0) {
            mw[warp * kRows + r] = m[r2];
            lw[warp * kRows + r] = l[r2];
        }
        float * orow = ow + (warp * kRows + r) * D;
#pragma unroll
        for (int nd = 0; nd < ND; ++nd) {
            *reinterpret_cast<float2 *>(orow + nd * 8 + 2 * tq) = make_float2(o[nd][2 * r2], o[nd][2 * r2 + 1]);
        }
    }
    __syncthreads();
    for (int r = warp; r < R; r += W) {
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < W; ++w) mx = fmaxf(mx, mw[w * kRows + r]);
        float fw[W], total = 0.0f;
#pragma unroll
        for (int w = 0; w < W; ++w) {
            const float mv = mw[w * kRows + r];
            fw[w] = mv == -INFINITY ? 0.0f : expf(mv - mx);
            total += lw[w * kRows + r] * fw[w];
        }
        const int64_t qi = (r0 + r) / G, h = h0 + (r0 + r) % G;
        const int64_t slot = ((i3 * p.nh + h) * p.nq + qi) * part.n_split + j;
        if (lane == 0) {
            part.m[slot] = mx;
            part.s[slot] = total;
        }
        for (int d = lane; d < D; d += 32) {
            float acc = 0.0f;
#pragma unroll
            for (int w = 0; w < W; ++w) acc = fmaf(ow[(w * kRows + r) * D + d], fw[w], acc);
            part.o[slot * D + d] = acc;
        }
    }
}

// The kernel for D and HALF: its function, and the blocks a multiprocessor
// holds at once (asked once per device; shared memory and registers bound it).
template <int D, bool HALF> struct Variant {
    static constexpr auto kernel = fa_dec_kernel<D, HALF>;
    static constexpr size_t kSmem = Shape<D>::kSmem;
    static int blocks_per_sm() {
        constexpr int kDevices = 64;
        static std::atomic<int> cached[kDevices] = {};
        int dev = 0;
        SI_CUDA_CHECK(cudaGetDevice(&dev));
        std::atomic<int> * slot = dev < kDevices ? &cached[dev] : nullptr;
        if (slot != nullptr && slot->load() > 0) return slot->load();
        // Above 48 KiB of shared memory a kernel opts in, per device.
        SI_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
        int n = 0;
        SI_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, W * 32, kSmem));
        n = n > 0 ? n : 1;
        if (slot != nullptr) slot->store(n);
        return n;
    }
};

template <typename F> auto with_variant(const FaArgs & p, int heads, F && f) {
    const bool half = heads * p.nq <= kRows / 2;
    if (p.D == 64) return half ? f(Variant<64, true>{}) : f(Variant<64, false>{});
    return half ? f(Variant<128, true>{}) : f(Variant<128, false>{});
}

// Blocks of 16 rows the G heads times nq query rows of one K/V head take.
int64_t chunks_of(const FaArgs & p, int heads) { return (heads * p.nq + kRows - 1) / kRows; }


} // namespace

int dec_heads(const FaArgs & p, bool kv_f16) {
    if (!kv_f16 || p.D != p.DV || (p.D != 64 && p.D != 128) || p.nq < 1 || p.nq > kDecMaxQueries ||
        !rows_aligned16(p.k, p.k_nb1, p.k_nb2, p.k_nb3) || !rows_aligned16(p.v, p.v_nb1, p.v_nb2, p.v_nb3)) {
        return 0;
    }
    // The most heads (up to a tile's 16 rows) that share one K and one V head.
    int64_t g = kRows;
    while (g > 1 && (p.rk2 % g != 0 || p.rv2 % g != 0)) --g;
    return p.nh / g * chunks_of(p, int(g)) <= limits::kGridYZ ? int(g) : 0;  // grid y: head groups x row blocks
}

int dec_split(const FaArgs & p, int heads, int n_sm, int max_split) {
    return with_variant(p, heads, [&](auto v) {
        using V = decltype(v);
        const int64_t groups = (p.nh / heads) * chunks_of(p, heads) * p.nq3;
        // One wave: as many splits as fill the resident blocks without a
        // second, partly empty wave; each warp gets a tile at least.
        int64_t n = int64_t(n_sm) * V::blocks_per_sm() / groups;
        const int64_t most = (p.nkv + W * KT - 1) / (W * KT);
        n = n < most ? n : most;
        n = n < max_split ? n : max_split;
        return n > 1 ? int(n) : 1;
    });
}

void launch_dec(const FaArgs & p, const SplitOut & part, cudaStream_t st) {
    with_variant(p, part.heads, [&](auto v) {
        using V = decltype(v);
        V::blocks_per_sm();  // the shared-memory opt-in
        launch(V::kernel,
               dim3(unsigned(part.n_split), unsigned(p.nh / part.heads * chunks_of(p, part.heads)), unsigned(p.nq3)),
               dim3(W * 32), V::kSmem, st, p, part);
    });
}

} // namespace standin::kernels::cuda::fa
