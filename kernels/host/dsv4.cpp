// DeepSeek-V4 hyper-connections (hc residual streams per token):
//   DSV4_HC_COMB: per token, the 4 x 4 stream-mixing matrix from the comb part
//                 of its mix row (kernels/common/dsv4.h): dst[d, s, t]
//   DSV4_HC_PRE:  dst[i, t] = sum_h x[i, h, t] w[h, t]   (streams -> one)
//   DSV4_HC_POST: dst[i, d, t] = x[i, t] post[d, t] + sum_s res[i, s, t] comb[d, s, t]
// F32, any strides (every element is addressed through nb[]).
//
// Test: test-backend-ops -b STANDIN_HOST0 -o DSV4_HC_COMB (DSV4_HC_PRE, DSV4_HC_POST)
#include "kernels/common/dsv4.h"
#include "kernels/common/op_params.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

float & el(const ggml_tensor * t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0) {
    return *reinterpret_cast<float *>(static_cast<char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2]);
}

} // namespace

Status dsv4_hc_comb(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * mix = node->src[0];
    const ggml_tensor * scale = node->src[1];
    const ggml_tensor * base = node->src[2];
    const float eps = op_f32(node, 0);
    const int n_iter = op_i32(node, 1);
    const float sc = el(scale, 2);
    stream.pool().parallel_for(mix->ne[1], 64, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            float m[dsv4::kHc * dsv4::kHc];
            for (int i = 0; i < dsv4::kHc * dsv4::kHc; ++i) {
                m[i] = el(mix, dsv4::kCombOffset + i, t) * sc + el(base, dsv4::kCombOffset + i);
            }
            dsv4::hc_comb(m, eps, n_iter);
            for (int s = 0; s < dsv4::kHc; ++s)
                for (int d = 0; d < dsv4::kHc; ++d) el(node, d, s, t) = m[d + dsv4::kHc * s];
        }
    });
    return true;
}

Status dsv4_hc_pre(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * x = node->src[0];
    const ggml_tensor * w = node->src[1];
    const int64_t n = x->ne[0], hc = x->ne[1];
    stream.pool().parallel_for(x->ne[2], std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * hc)),
                                 [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            for (int64_t i = 0; i < n; ++i) {
                float sum = 0.0f;
                for (int64_t h = 0; h < hc; ++h) sum += el(x, i, h, t) * el(w, h, t);
                el(node, i, t) = sum;
            }
    });
    return true;
}

Status dsv4_hc_post(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * x = node->src[0];
    const ggml_tensor * res = node->src[1];
    const ggml_tensor * post = node->src[2];
    const ggml_tensor * comb = node->src[3];
    const int64_t n = x->ne[0], hc = res->ne[1];
    stream.pool().parallel_for(x->ne[1], std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * hc * hc)),
                                 [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            for (int64_t d = 0; d < hc; ++d)
                for (int64_t i = 0; i < n; ++i) {
                    float sum = el(x, i, t) * el(post, d, t);
                    for (int64_t s = 0; s < hc; ++s) sum += el(res, i, s, t) * el(comb, d, s, t);
                    el(node, i, d, t) = sum;
                }
    });
    return true;
}

} // namespace standin::kernels::host
