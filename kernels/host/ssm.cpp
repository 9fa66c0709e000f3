// State-space models (Mamba, Mamba-2, Jamba, Falcon-H1, Granite and Nemotron
// hybrids):
//   SSM_CONV: the causal depthwise conv of a sequence window,
//             dst[c, t, s] = sum_{j < d_conv} sx[t + j, c, s] * w[j, c]
//             (sx {d_conv - 1 + n_t, d_inner, n_s}, w {d_conv, d_inner})
//   SSM_SCAN: the selective scan. Per sequence s, head h and channel d, from
//             state0 = states[:, d, h, ids[s]], for each token t:
//               dts   = softplus(dt[h, t, s])
//               state = state * exp(dts * A) + B[:, g, t, s] * (x[d, h, t, s] * dts)
//               y[d, h, t, s] = dot(state, C[:, g, t, s])
//             with g = h / (n_head / n_group), A a scalar per head (Mamba-2) or a
//             vector per state (Mamba-1). dst is y followed by the final states
//             {d_state, head_dim, n_head, n_seqs}; with K = op_params[0] > 1 the
//             states after the last K-1 tokens but one follow as slots 1..K-1
//             (slot j: the state j tokens before the end).
// F32 throughout, dim-0 elements adjacent, any row strides.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o SSM_CONV (SSM_SCAN)
#include <atomic>
#include <cmath>
#include <cstring>

#include "kernels/common/activations.h"
#include "kernels/common/op_params.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

template <typename T = float> const T * at(const ggml_tensor * t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    return reinterpret_cast<const T *>(static_cast<const char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] +
                                       i3 * t->nb[3]);
}

} // namespace

Status ssm_conv(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * sx = node->src[0];
    const ggml_tensor * w  = node->src[1];
    const int64_t d_conv = w->ne[0], d_inner = node->ne[0], n_t = node->ne[1], n_s = node->ne[2];
    // One task: one channel over every token of every sequence (its weights stay in registers).
    stream.pool().parallel_for(d_inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n_t * n_s * d_conv)),
                                 [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
            const float * wc = at(w, c);
            for (int64_t s = 0; s < n_s; ++s) {
                const float * xc = at(sx, c, s);
                for (int64_t t = 0; t < n_t; ++t) {
                    float sum = 0.0f;
                    for (int64_t j = 0; j < d_conv; ++j) sum += xc[t + j] * wc[j];
                    *reinterpret_cast<float *>(static_cast<char *>(node->data) + c * node->nb[0] +
                                               t * node->nb[1] + s * node->nb[2]) = sum;
                }
            }
        }
    });
    return true;
}

Status ssm_scan(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * S  = node->src[0];  // {d_state, head_dim, n_head, n_states}
    const ggml_tensor * X  = node->src[1];  // {head_dim, n_head, n_t, n_s}
    const ggml_tensor * DT = node->src[2];  // {n_head, n_t, n_s}
    const ggml_tensor * A  = node->src[3];  // {1 or d_state, n_head}
    const ggml_tensor * B  = node->src[4];  // {d_state, n_group, n_t, n_s}
    const ggml_tensor * C  = node->src[5];
    const ggml_tensor * ids = node->src[6];
    const int64_t ds = S->ne[0], hd = X->ne[0], nh = X->ne[1], nt = X->ne[2], ns = X->ne[3];
    const int64_t heads_per_group = nh / B->ne[1];
    const int64_t K = op_i32(node, 0);
    const bool scalar_a = A->ne[0] == 1;
    float * y_base = static_cast<float *>(node->data);
    float * s_base = y_base + hd * nh * nt * ns;
    const int64_t state_elems = ds * hd;  // one head of one sequence
    std::atomic<bool> ok{true};

    stream.pool().parallel_for(ns * nh, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
            const int64_t s = p / nh, h = p % nh, g = h / heads_per_group;
            const int32_t src_seq = *reinterpret_cast<const int32_t *>(static_cast<const char *>(ids->data) +
                                                                       s * ids->nb[0]);
            if (src_seq < 0 || src_seq >= S->ne[3]) {
                ok.store(false, std::memory_order_relaxed);
                continue;
            }
            float * state = s_base + (s * nh + h) * state_elems;  // final state, updated in place
            std::memcpy(state, at(S, 0, h, src_seq), size_t(state_elems) * sizeof(float));
            const float * a = at(A, h);
            for (int64_t t = 0; t < nt; ++t) {
                const float dts = act::softplus(at(DT, t, s)[h]);
                const float dA = scalar_a ? std::exp(dts * a[0]) : 0.0f;
                const float * x = at(X, h, t, s);
                const float * b = at(B, g, t, s);
                const float * c = at(C, g, t, s);
                float * y = y_base + ((s * nt + t) * nh + h) * hd;
                for (int64_t d = 0; d < hd; ++d) {
                    float * st = state + d * ds;
                    const float xdt = x[d] * dts;
                    float sum = 0.0f;
                    if (scalar_a) {
                        for (int64_t i = 0; i < ds; ++i) {
                            st[i] = st[i] * dA + b[i] * xdt;
                            sum += st[i] * c[i];
                        }
                    } else {
                        for (int64_t i = 0; i < ds; ++i) {
                            st[i] = st[i] * std::exp(dts * a[i]) + b[i] * xdt;
                            sum += st[i] * c[i];
                        }
                    }
                    y[d] = sum;
                }
                const int64_t slot = nt - 1 - t;
                if (K > 1 && slot > 0 && slot < K) {
                    std::memcpy(s_base + ((slot * ns + s) * nh + h) * state_elems, state,
                                size_t(state_elems) * sizeof(float));
                }
            }
        }
    });
    return ok.load();
}

} // namespace standin::kernels::host
