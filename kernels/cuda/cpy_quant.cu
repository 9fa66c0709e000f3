// CPY/DUP/CONT with a block-quantized side on the CUDA device (cuda::copy in
// elementwise.cu routes these here), as kernels/host/cpy_quant.cpp:
//   F32/F16/BF16 -> a block type quants.h encodes (its quantizers: the host's bytes)
//   any type quants.h decodes -> F32/F16/BF16
//   a block type -> the same block type (whole blocks)
// Elements go in row-major logical order, so dst may have another shape with
// the same element count and either side may be permuted. Both ne[0] are
// multiples of the block size (the predicate checks), so a block is one run
// of one row on both sides. One thread per block.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o CPY (DUP, CONT)
#include <algorithm>

#include "kernels/common/quants.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dequant.cuh"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 128;

enum Mode { kBlocks, kEncode, kDecode };

// Byte offset of the element with row-major logical index k; for a block type
// i0 is a multiple of the block size blk and nb[0] the size of a block.
__device__ __forceinline__ int64_t offset_blk(const Shape & s, int64_t k, int64_t blk) {
    const int64_t i0 = k % s.ne[0];
    k /= s.ne[0];
    const int64_t i1 = k % s.ne[1];
    k /= s.ne[1];
    const int64_t i2 = k % s.ne[2];
    const int64_t i3 = k / s.ne[2];
    return i0 / blk * s.nb[0] + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3];
}

__global__ void copy_quant_kernel(Shape d, Shape s, char * dd, const char * sd, int mode, int64_t qk, int64_t dblk,
                                  int block_bytes, int64_t n_units) {
    const int64_t per_row = s.ne[0] / qk;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n_units; t += stride) {
        const int64_t r = t / per_row, u = t % per_row;
        int64_t i1, i2, i3;
        split_row(s, r, i1, i2, i3);
        const char * s_row = row_at(sd, s, i1, i2, i3);
        char * out = dd + offset_blk(d, t * qk, dblk);
        if (mode == kBlocks) {
            const uint16_t * in = reinterpret_cast<const uint16_t *>(s_row + u * s.nb[0]);
            for (int i = 0; i < block_bytes / 2; ++i) reinterpret_cast<uint16_t *>(out)[i] = in[i];
        } else if (mode == kEncode) {
            float x[quant::kQK];
            for (int i = 0; i < quant::kQK; ++i) x[i] = load_f(s.type, s_row + (u * quant::kQK + i) * s.nb[0]);
            quant::from_f32_row(ggml_type(d.type), x, out, quant::kQK);
        } else {
            for (int64_t i = 0; i < qk; ++i) store_f(d.type, out + i * d.nb[0], dq::elem(s.type, s_row, u * qk + i));
        }
    }
}

bool is_float(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

} // namespace

Status copy_quant(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const ggml_type st = src->type, dt = node->type;
    int mode;
    if (st == dt) {
        mode = kBlocks;
    } else if (is_float(st) && quant::can_encode(dt) && ggml_blck_size(dt) == quant::kQK) {
        mode = kEncode;
    } else if (is_float(dt) && quant::can_decode(st)) {
        mode = kDecode;
    } else {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    const int64_t qk = std::max(ggml_blck_size(st), ggml_blck_size(dt));
    if (qk <= 1 || src->ne[0] % qk != 0 || (mode == kBlocks && ggml_type_size(st) % 2 != 0)) {
        return false;
    }
    const int64_t n_units = ggml_nelements(src) / qk;
    if (n_units == 0) {
        return true;
    }
    copy_quant_kernel<<<grid_for(n_units, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(src), static_cast<char *>(node->data), static_cast<const char *>(src->data), mode, qk,
        ggml_blck_size(dt), int(ggml_type_size(st)), n_units);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
