// Internal interface of the CUDA FLASH_ATTN_EXT kernels: flash_attn.cu (the
// f32 kernel for every supported case, and the driver) and flash_attn_tc.cu
// (tensor cores, F16 K/V, batches of queries).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

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
};

// The tensor-core kernel: whether it takes these arguments (F16 K and V,
// D == DV in {64, 128}, at least 16 query rows, 16-byte aligned rows), and
// its launch.
bool tc_applies(const FaArgs & p, bool kv_f16);
void launch_tc(const FaArgs & p, cudaStream_t st);

} // namespace standin::kernels::cuda::fa
