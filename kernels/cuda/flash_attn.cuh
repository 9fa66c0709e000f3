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

// The tensor-core kernel: whether it takes these arguments (F16 K and V,
// D == DV in {64, 128}, at least 16 query rows, 16-byte aligned rows), and
// its launch.
bool tc_applies(const FaArgs & p, bool kv_f16);
void launch_tc(const FaArgs & p, cudaStream_t st);

// flash_attn_cvt.cu: tensor t (a float type or any block type quants.h
// decodes, rows contiguous) decoded into dense F16 rows at out (nelements(t)
// halves), enqueued on st; false (nothing enqueued) for another type.
bool to_f16(const ggml_tensor * t, __half * out, cudaStream_t st);

} // namespace standin::kernels::cuda::fa
