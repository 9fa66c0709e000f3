// GET_ROWS on the CUDA device: gather rows of src0 selected by the I32 indices
// of src1, decoded to F32 (the embedding lookup), as kernels/host/get_rows.cpp:
//   dst[:, i10, i11, i12] = src0[:, src1[i10, i11, i12], i11, i12]
// src0 F32/F16/BF16 or any block type of kernels/common/quants.h (decoded per
// element by kernels/cuda/dequant.cuh), or I32 into an I32 dst. src0 and dst
// rows contiguous in dim 0 (the predicate's dim0_dense); every other stride,
// and all of src1's, free. An index outside [0, ne01) gives a row of zeros.
// Grid: y walks the output rows, x (with threads) the elements of a row, so
// neighbouring threads write neighbouring floats.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o GET_ROWS
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dequant.cuh"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

__global__ void get_rows_kernel(Shape d, Shape a, Shape ix, char * dd, const char * ad, const char * id) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    const int64_t ne00 = a.ne[0], n_rows = ix.ne[0] * ix.ne[1] * ix.ne[2];
    for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
        const int64_t i10 = r % ix.ne[0], i11 = (r / ix.ne[0]) % ix.ne[1], i12 = r / (ix.ne[0] * ix.ne[1]);
        const int32_t row = *reinterpret_cast<const int32_t *>(id + i10 * ix.nb[0] + i11 * ix.nb[1] + i12 * ix.nb[2]);
        char * out = dd + i10 * d.nb[1] + i11 * d.nb[2] + i12 * d.nb[3];
        const bool valid = row >= 0 && row < a.ne[1];
        const char * in = ad + int64_t(row) * a.nb[1] + i11 * a.nb[2] + i12 * a.nb[3];
        const int64_t stride = int64_t(gridDim.x) * blockDim.x;
        for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < ne00; i += stride) {
            if (a.type == GGML_TYPE_I32) {
                reinterpret_cast<int32_t *>(out)[i] = valid ? reinterpret_cast<const int32_t *>(in)[i] : 0;
            } else {
                reinterpret_cast<float *>(out)[i] = valid ? dq::elem(a.type, in, i) : 0.0f;
            }
        }
    }
}

} // namespace

Status get_rows(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const ggml_tensor * idx = node->src[1];
    if (idx->type != GGML_TYPE_I32 || !(src->type == GGML_TYPE_I32 || quant::can_decode(src->type))) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    const int64_t n_rows = idx->ne[0] * idx->ne[1] * idx->ne[2];
    if (n_rows == 0 || src->ne[0] == 0) {
        return true;
    }
    const dim3 grid(grid_for(src->ne[0], kBlock) < 64 ? grid_for(src->ne[0], kBlock) : 64, grid_yz(n_rows));
    launch(get_rows_kernel, dim3(grid), dim3(kBlock), 0, stream_of(stream), shape_of(node), shape_of(src), shape_of(idx),
                                                           static_cast<char *>(node->data),
                                                           static_cast<const char *>(src->data),
                                                           static_cast<const char *>(idx->data));
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
