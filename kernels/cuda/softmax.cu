// SOFT_MAX on the CUDA device, as kernels/host/softmax.cpp: per row of src0,
// y = softmax(x * scale + slope * mask), (scale, max_bias) from op_params
// (kernels/common/softmax.h), the optional mask src1 (F32 or F16, row i1,
// broadcast over dims 2 and 3 by modulo), slope the ALiBi slope of head i2,
// and optional sinks src2 (F32, one logit per head) that join the normaliser
// only. F32 src0/dst; elements addressed through nb[0]; in place is fine (each
// element is read, then written, by one thread).
//
// One block per row, three passes: the maximum, exp(w - max) into dst with its
// sum (kept in double, like the host), then the scaling. w is recomputed in
// the second pass rather than stored, so any row length works without scratch.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o SOFT_MAX
#include "kernels/common/softmax.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

struct SoftmaxArgs {
    num::SoftmaxParams p;
    num::Alibi alibi;
    bool has_mask;
    bool has_sink;
};

__global__ void softmax_kernel(Shape d, Shape a, Shape m, char * dd, const char * ad, const char * md,
                               const float * sink, SoftmaxArgs sa) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    __shared__ float  fscratch[32];
    __shared__ double dscratch[32];
    const int64_t n = a.ne[0], rows = a.ne[1] * a.ne[2] * a.ne[3];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        split_row(a, r, i1, i2, i3);
        const char * x = row_at(ad, a, i1, i2, i3);
        char * y = row_at(dd, d, i1, i2, i3);
        const char * mrow = sa.has_mask ? row_at(md, m, i1, i2 % m.ne[2], i3 % m.ne[3]) : nullptr;
        const float slope = sa.alibi.slope(uint32_t(i2));
        auto logit = [&](int64_t i) {
            const float v = *reinterpret_cast<const float *>(x + i * a.nb[0]) * sa.p.scale;
            return mrow != nullptr ? fmaf(load_f(m.type, mrow + i * m.nb[0]), slope, v) : v;
        };

        float mx = -INFINITY;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, logit(i));
        mx = block_max(mx, fscratch);
        const float sk = sa.has_sink ? sink[i2] : -INFINITY;
        mx = fmaxf(mx, sk);

        double sum = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float e = expf(logit(i) - mx);
            *reinterpret_cast<float *>(y + i * d.nb[0]) = e;
            sum += double(e);
        }
        sum = block_sum(sum, dscratch);
        if (sa.has_sink) {
            sum += double(expf(sk - mx));
        }
        const float inv = float(1.0 / sum);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            *reinterpret_cast<float *>(y + i * d.nb[0]) *= inv;
        }
    }
}

} // namespace

Status softmax(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * src  = node->src[0];
    const ggml_tensor * mask = node->src[1];
    const ggml_tensor * sink = node->src[2];
    if (src->type != GGML_TYPE_F32 || node->type != GGML_TYPE_F32) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    SoftmaxArgs sa;
    sa.p = num::softmax_params_from(reinterpret_cast<const int32_t *>(node->op_params));
    sa.alibi = num::make_alibi(sa.p.max_bias, uint32_t(src->ne[2]));
    sa.has_mask = mask != nullptr;
    sa.has_sink = sink != nullptr;
    const int64_t rows = ggml_nrows(src);
    if (rows == 0 || src->ne[0] == 0) {
        return true;
    }
    const int threads = src->ne[0] >= 1024 ? 256 : (src->ne[0] >= 128 ? 128 : 32);
    const Shape ms = mask != nullptr ? shape_of(mask) : Shape{};
    launch(softmax_kernel, dim3(row_grid(rows)), dim3(threads), 0, stream_of(stream), shape_of(node), shape_of(src), ms, static_cast<char *>(node->data), static_cast<const char *>(src->data),
        mask != nullptr ? static_cast<const char *>(mask->data) : nullptr,
        sink != nullptr ? static_cast<const float *>(sink->data) : nullptr, sa);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
