// SET_ROWS on the CUDA device (KV-cache writes), as kernels/host/set_rows.cpp:
// the rows of src0 (F32 or F16) are encoded to the destination type (F32, F16,
// BF16 with round-to-nearest-even; the block types of quants.h's encode list,
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, with its quantizers, so the bytes equal the
// host's) and stored at the row
// numbers in src1 (I64 or I32), which broadcast over dims 2 and 3:
//   dst[:, idx[i01, i02 % ne11, i03 % ne12], i02, i03] = src[:, i01, i02, i03].
// Rows of src and dst contiguous in dim 0 (the predicate checks it). An index
// outside the destination's rows is skipped. Float destinations: one thread per
// element; block destinations: one thread per 32-element block.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o SET_ROWS
#include "kernels/common/quants.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

__device__ __forceinline__ int64_t dest_row(const Shape & ix, const char * id, int64_t i01, int64_t i02, int64_t i03) {
    const char * p = id + i01 * ix.nb[0] + (i02 % ix.ne[1]) * ix.nb[1] + (i03 % ix.ne[2]) * ix.nb[2];
    return ix.type == GGML_TYPE_I64 ? *reinterpret_cast<const int64_t *>(p)
                                    : int64_t(*reinterpret_cast<const int32_t *>(p));
}

// Units per row: elements (float dst) or blocks of 32 (QK > 1).
template <int QK>
__global__ void set_rows_kernel(Shape d, Shape s, Shape ix, char * dd, const char * sd, const char * id) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    const int64_t n_rows = s.ne[1] * s.ne[2] * s.ne[3], units = s.ne[0] / QK;
    for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
        int64_t i01, i02, i03;
        split_row(s, r, i01, i02, i03);
        const int64_t row = dest_row(ix, id, i01, i02, i03);
        if (row < 0 || row >= d.ne[1]) {
            continue;  // uniform over the block: every thread skips
        }
        const char * in = row_at(sd, s, i01, i02, i03);
        char * out = row_at(dd, d, row, i02, i03);
        const int64_t stride = int64_t(gridDim.x) * blockDim.x;
        for (int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; u < units; u += stride) {
            if constexpr (QK == 1) {
                store_f(d.type, out + u * d.nb[0], load_f(s.type, in + u * s.nb[0]));
            } else {
                float x[QK];
                for (int j = 0; j < QK; ++j) x[j] = load_f(s.type, in + (u * QK + j) * s.nb[0]);
                quant::from_f32_row(ggml_type(d.type), x, out + u * d.nb[0], QK);
            }
        }
    }
}

} // namespace

Status set_rows(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const ggml_tensor * idx = node->src[1];
    const ggml_type dt = node->type;
    const bool block = ggml_blck_size(dt) > 1;  // every encoded block type has 32 elements (quants.h)
    if ((src->type != GGML_TYPE_F32 && src->type != GGML_TYPE_F16) || !quant::can_encode(dt) ||
        (block && ggml_blck_size(dt) != quant::kQK)) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    const int64_t n_rows = ggml_nrows(src);
    const int64_t units = block ? src->ne[0] / quant::kQK : src->ne[0];
    if (n_rows == 0 || units == 0) {
        return true;
    }
    const unsigned gx = grid_for(units, kBlock) < 64 ? grid_for(units, kBlock) : 64;
    const dim3 grid(gx, grid_yz(n_rows));
    const Shape d = shape_of(node), s = shape_of(src), ix = shape_of(idx);
    char * dd = static_cast<char *>(node->data);
    const char * sd = static_cast<const char *>(src->data);
    const char * id = static_cast<const char *>(idx->data);
    cudaStream_t st = stream_of(stream);
    if (block) {
        launch(set_rows_kernel<quant::kQK>, dim3(grid), dim3(kBlock), 0, st, d, s, ix, dd, sd, id);
    } else {
        launch(set_rows_kernel<1>, dim3(grid), dim3(kBlock), 0, st, d, s, ix, dd, sd, id);
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
