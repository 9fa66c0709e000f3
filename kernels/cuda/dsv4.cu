// DeepSeek-V4 hyper-connections on the CUDA device, as kernels/host/dsv4.cpp:
// DSV4_HC_COMB one thread per token (kernels/common/dsv4.h), DSV4_HC_PRE and
// DSV4_HC_POST one thread per dst element. F32, any strides.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o DSV4_HC_COMB (DSV4_HC_PRE, DSV4_HC_POST)
#include "kernels/common/dsv4.h"
#include "kernels/common/op_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 128;

#define SI_GRID_STRIDE(t, n) \
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < (n); t += int64_t(gridDim.x) * blockDim.x)

__device__ __forceinline__ float & el(const char * base, const Shape & s, int64_t i0, int64_t i1 = 0, int64_t i2 = 0) {
    return *reinterpret_cast<float *>(const_cast<char *>(base) + i0 * s.nb[0] + i1 * s.nb[1] + i2 * s.nb[2]);
}

__global__ void comb_kernel(Shape d, Shape m, Shape sc, Shape b, char * dd, const char * md, const char * sd,
                            const char * bd, float eps, int n_iter, int64_t n_tok) {
    SI_GRID_STRIDE(t, n_tok) {
        const float scale = el(sd, sc, 2);
        float c[dsv4::kHc * dsv4::kHc];
        for (int i = 0; i < dsv4::kHc * dsv4::kHc; ++i) {
            c[i] = el(md, m, dsv4::kCombOffset + i, t) * scale + el(bd, b, dsv4::kCombOffset + i);
        }
        dsv4::hc_comb(c, eps, n_iter);
        for (int s = 0; s < dsv4::kHc; ++s)
            for (int dst = 0; dst < dsv4::kHc; ++dst) el(dd, d, dst, s, t) = c[dst + dsv4::kHc * s];
    }
}

__global__ void pre_kernel(Shape d, Shape x, Shape w, char * dd, const char * xd, const char * wd, int64_t n) {
    SI_GRID_STRIDE(k, n) {
        const int64_t i = k % x.ne[0], t = k / x.ne[0];
        float sum = 0.0f;
        for (int64_t h = 0; h < x.ne[1]; ++h) sum += el(xd, x, i, h, t) * el(wd, w, h, t);
        el(dd, d, i, t) = sum;
    }
}

__global__ void post_kernel(Shape d, Shape x, Shape r, Shape p, Shape c, char * dd, const char * xd, const char * rd,
                            const char * pd, const char * cd, int64_t n) {
    SI_GRID_STRIDE(k, n) {
        const int64_t hc = r.ne[1];
        const int64_t i = k % x.ne[0], dst = (k / x.ne[0]) % hc, t = k / (x.ne[0] * hc);
        float sum = el(xd, x, i, t) * el(pd, p, dst, t);
        for (int64_t s = 0; s < hc; ++s) sum += el(rd, r, i, s, t) * el(cd, c, dst, s, t);
        el(dd, d, i, dst, t) = sum;
    }
}

const char * cd(const ggml_tensor * t) { return static_cast<const char *>(t->data); }

} // namespace

Status dsv4_hc_comb(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor *m = node->src[0], *s = node->src[1], *b = node->src[2];
    const int64_t n = m->ne[1];
    if (n == 0) return true;
    comb_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(m), shape_of(s), shape_of(b), static_cast<char *>(node->data), cd(m), cd(s), cd(b),
        op_f32(node, 0), op_i32(node, 1), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status dsv4_hc_pre(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor *x = node->src[0], *w = node->src[1];
    const int64_t n = x->ne[0] * x->ne[2];
    if (n == 0) return true;
    pre_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(shape_of(node), shape_of(x), shape_of(w),
                                                                         static_cast<char *>(node->data), cd(x), cd(w), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status dsv4_hc_post(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor *x = node->src[0], *r = node->src[1], *p = node->src[2], *c = node->src[3];
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    post_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(x), shape_of(r), shape_of(p), shape_of(c), static_cast<char *>(node->data), cd(x), cd(r),
        cd(p), cd(c), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
