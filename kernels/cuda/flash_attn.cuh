// Internal interface of the CUDA FLASH_ATTN_EXT kernels: flash_attn.cu (the
// f32 kernel for every supported case, and the driver), flash_attn_tc.cu
// (tensor cores, F16 K/V, batches of queries), and flash_attn_cvt.cu (other
// K/V types decoded to F16 for them).
#pragma once

#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ggml.h"

#include "kernels/common/softmax.h"

namespace standin::kernels::cuda::fa {

struct FaArgs {
    const char * q; int64_t q_nb1, q_nb2, q_nb3;
    const char * k; int64_t k_nb1, k_nb2, k_nb3;
    const char * v; int64_t v_nb1, v_nb2, v_nb3;
    const char * mask; int64_t m_nb1, m_nb2, m_nb3, m_ne2, m_ne3;
    const float * sinks;
    char * d; int64_t d_nb1, d_nb2, d_nb3;
    int64_t D, DV, nq, nh, nq3, nkv;
    int64_t rk2, rk3, rv2, rv3;  // query heads / batches per K (V) head / batch
    num::AttnParams ap;
    num::Alibi alibi;
    bool k_vec;  // K rows 16-byte aligned and D % 8 == 0
    // The output also quantized for the integer mat-vec that reads it (the
    // output projection, fusion.cpp): codes of column iq + nq * i3 at
    // q + col * nh * DV + h * DV, its 32-groups' {d, d * sum} at ds; null: none.
    int8_t * q_out;
    float2 * ds_out;
};

// The key-split kernels' partial results (flash_attn.cu's f32 kernel and
// flash_attn_dec.cu's): the keys are split into n_split ranges of `span`
// (whole 32-key tiles); a query row r = (i3 * nh + h) * nq + iq has, for range
// j, its maximum and sum of weights at m/s[r * n_split + j] and its
// unnormalised output at o + (r * n_split + j) * DV; fa_combine merges them.
struct SplitOut {
    float * m;
    float * s;
    float * o;
    int     n_split;
    int64_t span;
    int     heads;  // query heads per block, sharing one K and V head (GQA)
};

// mma.sync m16n8k16 with F16 inputs and F32 accumulation: c += a b, in the
// instruction's fragment layouts.
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

// Whether a K or V view's rows all start on 16 bytes (the tensor-core
// kernels copy them in 16-byte pieces).
inline bool rows_aligned16(const void * ptr, int64_t nb1, int64_t nb2, int64_t nb3) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && nb1 % 16 == 0 && nb2 % 16 == 0 && nb3 % 16 == 0;
}

// The probabilities of keys 16 kk .. 16 kk + 15 as the A operand of the next
// m16n8k16 (P V): the score accumulators of key slices 2 kk and 2 kk + 1 are
// already in that layout, rounded to F16 pairs.
template <int NF> __device__ __forceinline__ void scores_as_a(const float (&s)[NF][4], int kk, uint32_t (&a)[4]) {
    a[0] = pack_half2(s[2 * kk][0], s[2 * kk][1]);
    a[1] = pack_half2(s[2 * kk][2], s[2 * kk][3]);
    a[2] = pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[3] = pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// The prefill kernel on tensor cores: whether it takes these arguments (F16 K
// and V, D == DV in {64, 128}, more than kDecMaxQueries query rows, 16-byte
// aligned rows), and its launch.
bool tc_applies(const FaArgs & p, bool kv_f16);
void launch_tc(const FaArgs & p, cudaStream_t st);

// The decode kernel on tensor cores (flash_attn_dec.cu, Note [decode on
// tensor cores]) takes up to kDecMaxQueries query rows (batched decoding,
// drafts); the prefill kernel more. The heads sharing a K/V head it groups
// for these arguments (F16 K and V, D == DV in {64, 128}, 16-byte aligned
// rows), 0 when it does not apply; the key ranges to split into for n_sm
// multiprocessors (at most max_split); its launch, which leaves the partials
// for fa_combine.
constexpr int64_t kDecMaxQueries = 32;
int dec_heads(const FaArgs & p, bool kv_f16);
int dec_split(const FaArgs & p, int heads, int n_sm, int max_split);
void launch_dec(const FaArgs & p, const SplitOut & part, cudaStream_t st);

// flash_attn_cvt.cu: tensor t (a float type or any block type quants.h
// decodes, rows contiguous) decoded into dense F16 rows at out (nelements(t)
// halves), enqueued on st; false (nothing enqueued) for another type.
bool to_f16(const ggml_tensor * t, __half * out, cudaStream_t st);

} // namespace standin::kernels::cuda::fa
