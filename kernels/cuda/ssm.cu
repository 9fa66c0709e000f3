// State-space models on the CUDA device, as kernels/host/ssm.cpp:
//   SSM_CONV: one thread per output (channel, token, sequence), the d_conv
//             taps summed in order.
//   SSM_SCAN: one block per (channel d, head h, sequence s); thread i holds
//             states i, i + blockDim, ... (at most kStatesPerThread each) in
//             registers across the tokens; y is a block sum of state * C.
//             Snapshot slots (K = op_params[0] > 1) as on the host.
// F32, dim-0 elements adjacent, any row strides.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o SSM_CONV (SSM_SCAN)
#include "kernels/common/activations.h"
#include "kernels/common/op_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/limits.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;
constexpr int kStatesPerThread = int(limits::kSsmStatesPerThread);

__device__ __forceinline__ const float * at(const char * base, const Shape & s, int64_t i1, int64_t i2 = 0,
                                            int64_t i3 = 0) {
    return reinterpret_cast<const float *>(base + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3]);
}

__global__ void ssm_conv_kernel(Shape d, Shape x, Shape w, char * dd, const char * xd, const char * wd, int64_t n) {
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t c = t % d.ne[0], tok = (t / d.ne[0]) % d.ne[1], s = t / (d.ne[0] * d.ne[1]);
        const float * xc = at(xd, x, c, s);
        const float * wc = at(wd, w, c);
        float sum = 0.0f;
        for (int64_t j = 0; j < w.ne[0]; ++j) sum += xc[tok + j] * wc[j];
        *reinterpret_cast<float *>(dd + c * d.nb[0] + tok * d.nb[1] + s * d.nb[2]) = sum;
    }
}

struct ScanArgs {
    Operand S, X, DT, A, B, C, ids;
    float * y_base;
    float * s_base;
    int64_t K;
};

__global__ void ssm_scan_kernel(ScanArgs p) {
    __shared__ float scratch[32];
    const int64_t ds = p.S.ne[0], hd = p.X.ne[0], nh = p.X.ne[1], nt = p.X.ne[2], ns = p.X.ne[3];
    const int64_t d = blockIdx.x, h = blockIdx.y, s = blockIdx.z;
    const int64_t g = h / (nh / p.B.ne[1]);
    const bool scalar_a = p.A.ne[0] == 1;
    const int32_t src_seq = *reinterpret_cast<const int32_t *>(p.ids.d + s * p.ids.nb[0]);
    if (src_seq < 0 || src_seq >= p.S.ne[3]) return;  // refused on the host before launch
    const int64_t state_elems = ds * hd;
    float * out_state = p.s_base + (s * nh + h) * state_elems + d * ds;
    const float * in_state = at(p.S.d, p.S, d, h, src_seq);
    float st[kStatesPerThread];
    for (int k = 0; k < kStatesPerThread; ++k) {
        const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
        st[k] = i < ds ? in_state[i] : 0.0f;
    }
    const float * a = at(p.A.d, p.A, h);
    for (int64_t t = 0; t < nt; ++t) {
        const float dts = act::softplus(at(p.DT.d, p.DT, t, s)[h]);
        const float dA = scalar_a ? expf(dts * a[0]) : 0.0f;
        const float xdt = at(p.X.d, p.X, h, t, s)[d] * dts;
        const float * b = at(p.B.d, p.B, g, t, s);
        const float * c = at(p.C.d, p.C, g, t, s);
        float part = 0.0f;
        for (int k = 0; k < kStatesPerThread; ++k) {
            const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
            if (i < ds) {
                st[k] = st[k] * (scalar_a ? dA : expf(dts * a[i])) + b[i] * xdt;
                part += st[k] * c[i];
            }
        }
        const float y = block_sum(part, scratch);
        if (threadIdx.x == 0) p.y_base[((s * nt + t) * nh + h) * hd + d] = y;
        const int64_t slot = nt - 1 - t;
        if (p.K > 1 && slot > 0 && slot < p.K) {
            float * snap = p.s_base + ((slot * ns + s) * nh + h) * state_elems + d * ds;
            for (int k = 0; k < kStatesPerThread; ++k) {
                const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
                if (i < ds) snap[i] = st[k];
            }
        }
    }
    for (int k = 0; k < kStatesPerThread; ++k) {
        const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
        if (i < ds) out_state[i] = st[k];
    }
}

} // namespace

Status ssm_conv(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const ggml_tensor *x = node->src[0], *w = node->src[1];
    ssm_conv_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(x), shape_of(w), static_cast<char *>(node->data), static_cast<const char *>(x->data),
        static_cast<const char *>(w->data), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status ssm_scan(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    ScanArgs p;
    const ggml_tensor * const * s = node->src;
    Operand * in[] = {&p.S, &p.X, &p.DT, &p.A, &p.B, &p.C, &p.ids};
    for (int i = 0; i < 7; ++i) *in[i] = operand_of(s[i]);
    p.y_base = static_cast<float *>(node->data);
    p.s_base = p.y_base + ggml_nelements(s[1]);
    p.K = op_i32(node, 0);
    const int64_t ds = p.S.ne[0], hd = p.X.ne[0], nh = p.X.ne[1], ns = p.X.ne[3];
    if (ds > limits::kSsmMaxStates || hd > limits::kGridX || nh > limits::kGridYZ || ns > limits::kGridYZ) {
        return false;  // the CUDA predicate (op_rows_ssm.cpp) refuses these
    }
    if (hd == 0 || nh == 0 || ns == 0) return true;
    int block = 32;
    while (block < 1024 && int64_t(block) * kStatesPerThread < ds) block *= 2;
    ssm_scan_kernel<<<dim3(unsigned(hd), unsigned(nh), unsigned(ns)), block, 0, stream_of(stream)>>>(p);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
