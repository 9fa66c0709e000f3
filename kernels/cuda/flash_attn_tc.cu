// FLASH_ATTN_EXT on tensor cores, for batches of queries (prompt processing)
// over F16 K and V with D == DV in {64, 128}; every other case stays on the
// f32 kernel of flash_attn.cu, which this one matches in what it computes:
//   out = softmax(bias + score(Q K^T)) V,  bias = slope * mask (or -inf),
// with the logit soft cap, ALiBi slopes, sinks and GQA of that kernel.
//
// Layout: one block of 4 warps per 64 query rows of one head; warp w owns
// rows 16w..16w+15. Keys go in tiles of 64: the block copies the K tile
// (rows) and the V tile (transposed, d-major) to shared memory as F16, then
// each warp forms its 16 x 64 scores with mma.sync m16n8k16 (F16 inputs, F32
// accumulation; Q rounded to F16 once, as ggml-cpu rounds it for F16 keys),
// folds them into its online softmax in registers (the accumulator layout of
// the instruction is fixed: thread (g = lane / 4, t = lane % 4) holds rows g
// and g + 8, columns 2t and 2t + 1 of each 8-column slice), and multiplies
// the probabilities - the score registers reused as the A operand - with V
// into its 16 x D output, also in registers. A warp skips a tile in which its
// rows see only -inf (causal masks), except for the shared copies.
// Padding: rows of Q/K beyond the tensor are zeros, and their scores -inf;
// shared rows are padded by 8 halves so the fragment reads hit distinct banks.
// The whole tile of V is multiplied, including rows whose weight is 0, so V
// rows under masked keys must be finite (llama clears its cache).
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o FLASH_ATTN_EXT (cases with
// nb >= 16 and F16 K/V take this path); logits of 1B models with -fa on.
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/flash_attn.cuh"
#include "kernels/cuda/limits.h"

namespace standin::kernels::cuda::fa {

namespace {

constexpr int kBr = 64, kBc = 64, kWarps = 4;

__device__ __forceinline__ uint32_t smem_u32(const __half * p) { return *reinterpret_cast<const uint32_t *>(p); }

template <int D>
__global__ void __launch_bounds__(kWarps * 32) fa_tc_kernel(FaArgs p) {
    constexpr int QS = D + 8;    // row stride (halves) of Q and K in shared memory
    constexpr int VS = kBc + 8;  // row stride of the transposed V
    constexpr int ND = D / 8;    // 8-column slices of the output
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __half * Qs = reinterpret_cast<__half *>(smem_raw);  // [kBr][QS]
    __half * Ks = Qs + kBr * QS;                         // [kBc][QS]
    __half * Vt = Ks + kBc * QS;                         // [D][VS]

    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5);
    const int g = lane >> 2, t = lane & 3;
    const int64_t h = blockIdx.y, i3 = blockIdx.z, q0 = int64_t(blockIdx.x) * kBr;
    const float slope = p.alibi.slope(uint32_t(h));
    const char * kbase = p.k + (h / p.rk2) * p.k_nb2 + (i3 / p.rk3) * p.k_nb3;
    const char * vbase = p.v + (h / p.rv2) * p.v_nb2 + (i3 / p.rv3) * p.v_nb3;

    for (int idx = threadIdx.x; idx < kBr * D; idx += kWarps * 32) {
        const int r = idx / D, c = idx % D;
        const int64_t iq = q0 + r;
        float v = 0.0f;
        if (iq < p.nq) v = reinterpret_cast<const float *>(p.q + iq * p.q_nb1 + h * p.q_nb2 + i3 * p.q_nb3)[c];
        Qs[r * QS + c] = __float2half_rn(v);
    }

    // This thread's two rows (g and g + 8 of the warp's 16) and their masks.
    const int64_t row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const __half * mrow[2] = {nullptr, nullptr};
    for (int r = 0; r < 2; ++r) {
        if (p.mask != nullptr && row[r] < p.nq) {
            mrow[r] = reinterpret_cast<const __half *>(p.mask + row[r] * p.m_nb1 + (h % p.m_ne2) * p.m_nb2 +
                                                       (i3 % p.m_ne3) * p.m_nb3);
        }
    }
    auto bias = [&](int r, int64_t key) -> float {  // slope * mask, or -inf outside the tensors
        if (row[r] >= p.nq || key >= p.nkv) return -INFINITY;
        return mrow[r] != nullptr ? slope * __half2float(mrow[r][key]) : 0.0f;
    };

    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float o[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;

    for (int64_t kv0 = 0; kv0 < p.nkv; kv0 += kBc) {
        __syncthreads();  // Q is written; the previous tile is no longer read
        for (int c = threadIdx.x; c < kBc * D / 8; c += kWarps * 32) {
            // Neighbouring threads take neighbouring keys: the transposed V
            // stores then land in distinct banks.
            const int r = c % kBc, cc = c / kBc;
            const int64_t key = kv0 + r;
            uint4 kw = make_uint4(0, 0, 0, 0), vw = make_uint4(0, 0, 0, 0);
            if (key < p.nkv) {
                kw = *reinterpret_cast<const uint4 *>(kbase + key * p.k_nb1 + cc * 16);
                vw = *reinterpret_cast<const uint4 *>(vbase + key * p.v_nb1 + cc * 16);
            }
            *reinterpret_cast<uint4 *>(Ks + r * QS + cc * 8) = kw;
            const __half * vh = reinterpret_cast<const __half *>(&vw);
#pragma unroll
            for (int i = 0; i < 8; ++i) Vt[(cc * 8 + i) * VS + r] = vh[i];
        }
        __syncthreads();

        bool any = false;
#pragma unroll
        for (int nf = 0; nf < kBc / 8; ++nf) {
            const int64_t key = kv0 + nf * 8 + 2 * t;
            any |= bias(0, key) != -INFINITY || bias(0, key + 1) != -INFINITY || bias(1, key) != -INFINITY ||
                   bias(1, key + 1) != -INFINITY;
        }
        if (!__any_sync(0xffffffffu, any)) continue;  // every score of this warp's rows is -inf

        // Scores: 16 rows x 64 keys, as 8 slices of 8 keys.
        float s[kBc / 8][4];
#pragma unroll
        for (int nf = 0; nf < kBc / 8; ++nf) s[nf][0] = s[nf][1] = s[nf][2] = s[nf][3] = 0.0f;
        const __half * qa = Qs + (warp * 16 + g) * QS + 2 * t;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const uint32_t a[4] = {smem_u32(qa + kk * 16), smem_u32(qa + 8 * QS + kk * 16),
                                   smem_u32(qa + kk * 16 + 8), smem_u32(qa + 8 * QS + kk * 16 + 8)};
#pragma unroll
            for (int nf = 0; nf < kBc / 8; ++nf) {
                const __half * kb = Ks + (nf * 8 + g) * QS + kk * 16 + 2 * t;
                const uint32_t b[2] = {smem_u32(kb), smem_u32(kb + 8)};
                mma16816(s[nf], a, b);
            }
        }

        // Online softmax, per row: scores, new maximum, rescale, probabilities.
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nf = 0; nf < kBc / 8; ++nf) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = e >> 1;
                const float b = bias(r, kv0 + nf * 8 + 2 * t + (e & 1));
                s[nf][e] = b == -INFINITY ? -INFINITY : b + num::attn_score(s[nf][e], p.ap.scale, p.ap.logit_softcap);
                mx[r] = fmaxf(mx[r], s[nf][e]);
            }
        }
        float f[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float mn = fmaxf(m[r], mx[r]);
            f[r] = m[r] == -INFINITY ? 0.0f : expf(m[r] - mn);
            m[r] = mn;
            l[r] *= f[r];
        }
#pragma unroll
        for (int nf = 0; nf < kBc / 8; ++nf) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = e >> 1;
                s[nf][e] = s[nf][e] == -INFINITY ? 0.0f : expf(s[nf][e] - m[r]);
                l[r] += s[nf][e];
            }
        }
#pragma unroll
        for (int nd = 0; nd < ND; ++nd) {
            o[nd][0] *= f[0];
            o[nd][1] *= f[0];
            o[nd][2] *= f[1];
            o[nd][3] *= f[1];
        }

        // O += P V, the probabilities in the A layout (keys 16kk..16kk+15).
#pragma unroll
        for (int kk = 0; kk < kBc / 16; ++kk) {
            uint32_t a[4];
            scores_as_a(s, kk, a);
#pragma unroll
            for (int nd = 0; nd < ND; ++nd) {
                const __half * vb = Vt + (nd * 8 + g) * VS + kk * 16 + 2 * t;
                const uint32_t b[2] = {smem_u32(vb), smem_u32(vb + 8)};
                mma16816(o[nd], a, b);
            }
        }
    }

    // Row sums are spread over the 4 threads of a row; then sinks and output.
    const float sink = p.sinks != nullptr ? p.sinks[h] : -INFINITY;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        if (row[r] >= p.nq) continue;
        const float mx = fmaxf(m[r], sink);
        const float fo = m[r] == -INFINITY ? 0.0f : expf(m[r] - mx);
        const float total = l[r] * fo + (p.sinks != nullptr ? expf(sink - mx) : 0.0f);
        const float k = total == 0.0f ? 0.0f : fo / total;
        float * out = reinterpret_cast<float *>(p.d + h * p.d_nb1 + row[r] * p.d_nb2 + i3 * p.d_nb3);
#pragma unroll
        for (int nd = 0; nd < ND; ++nd) {
            out[nd * 8 + 2 * t] = o[nd][2 * r] * k;
            out[nd * 8 + 2 * t + 1] = o[nd][2 * r + 1] * k;
        }
    }
}

template <int D> size_t smem_bytes() { return size_t(kBr * (D + 8) + kBc * (D + 8) + D * (kBc + 8)) * 2; }

// The shared memory above the 48 KiB default needs an opt-in, a per-device
// function attribute.
template <int D> void opt_in_smem() {
    static std::atomic<uint64_t> done{0};
    once_per_device(done, [](int) {
        SI_CUDA_CHECK(cudaFuncSetAttribute(fa_tc_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(smem_bytes<D>())));
    });
}

template <int D> void launch_d(const FaArgs & p, cudaStream_t st) {
    opt_in_smem<D>();
    const dim3 grid(unsigned((p.nq + kBr - 1) / kBr), unsigned(p.nh), unsigned(p.nq3));
    fa_tc_kernel<D><<<grid, kWarps * 32, smem_bytes<D>(), st>>>(p);
}

} // namespace

bool tc_applies(const FaArgs & p, bool kv_f16) {
    return kv_f16 && p.D == p.DV && (p.D == 64 || p.D == 128) && p.nq > kDecMaxQueries &&
           (p.nq + kBr - 1) / kBr <= int64_t(INT32_MAX) && p.nh <= limits::kGridYZ && p.nq3 <= limits::kGridYZ &&
           rows_aligned16(p.k, p.k_nb1, p.k_nb2, p.k_nb3) && rows_aligned16(p.v, p.v_nb1, p.v_nb2, p.v_nb3);
}

void launch_tc(const FaArgs & p, cudaStream_t st) {
    if (p.D == 64) {
        launch_d<64>(p, st);
    } else {
        launch_d<128>(p, st);
    }
}

} // namespace standin::kernels::cuda::fa
