// K and V caches the FLASH_ATTN_EXT kernels do not read natively (block
// types such as Q8_0 and Q4_0 from -ctk/-ctv, and K and V of two different
// float types), decoded into dense F16 scratch first, so the attention runs
// on the tuned F16 kernels (flash_attn.cu, flash_attn_tc.cu) unchanged.
// Block types are decoded by quant::dequant (kernels/common/quants.h, the one
// definition of every format), one thread per block, instantiated per block
// type so a block's values stay in registers; float types one thread per
// element. Values are rounded to F16.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o FLASH_ATTN_EXT (the quantized
//       and mixed K/V cases)
#include <cuda_fp16.h>

#include "kernels/common/quants.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/flash_attn.cuh"

namespace standin::kernels::cuda::fa {

namespace {

constexpr int kBlock = 256;

template <typename Block>
__global__ void blocks_to_f16(Shape s, const char * src, __half * out, int64_t n_units) {
    constexpr int qk = Block::kElems;
    const int64_t per_row = s.ne[0] / qk;
    for (int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; u < n_units; u += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = u / per_row, ib = u % per_row;
        int64_t i1, i2, i3;
        split_row(s, r, i1, i2, i3);
        float v[qk];
        quant::dequant(reinterpret_cast<const Block *>(row_at(src, s, i1, i2, i3))[ib], v);
        __half * o = out + r * s.ne[0] + ib * qk;
#pragma unroll
        for (int i = 0; i < qk; ++i) o[i] = __float2half_rn(v[i]);
    }
}

__global__ void floats_to_f16(Shape s, const char * src, __half * out, int64_t n) {
    for (int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; u < n; u += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i0 = u % s.ne[0];
        int64_t i1, i2, i3;
        split_row(s, u / s.ne[0], i1, i2, i3);
        out[u] = __float2half_rn(load_f(s.type, row_at(src, s, i1, i2, i3) + i0 * s.nb[0]));
    }
}

} // namespace

bool to_f16(const ggml_tensor * t, __half * out, cudaStream_t st) {
    const Shape s = shape_of(t);
    const char * src = static_cast<const char *>(t->data);
    const int64_t n = ggml_nelements(t);
    if (n == 0) return true;
    switch (t->type) {
        case GGML_TYPE_F32:
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16:
            floats_to_f16<<<grid_for(n, kBlock), kBlock, 0, st>>>(s, src, out, n);
            return true;
#define SI_X(type, Block, group)                                                                 \
        case type:                                                                               \
            blocks_to_f16<quant::Block><<<grid_for(n / quant::Block::kElems, kBlock), kBlock, 0, st>>>( \
                s, src, out, n / quant::Block::kElems);                                          \
            return true;
        SI_QUANT_BLOCK_TYPES(SI_X)
#undef SI_X
        default:
            return false;
    }
}

} // namespace standin::kernels::cuda::fa
