// Linear attention with a per-head S x S state (RWKV-6/7, GLA, Qwen3-Next and
// Kimi linear). dst is the per-token output {S * H, n_tokens} followed by the
// final states {S * S * H, n_seqs}; tokens split evenly over the sequences,
// and a sequence starts from its row of the state input. Per head, with k, v,
// r, q, ... the token's S-vectors of that head:
//   RWKV_WKV6:         out[j] = sum_i r[i] (tf[i] k[i] v[j] + St[i][j]);
//                      St[i][j] = St[i][j] td[i] + k[i] v[j]
//   GATED_LINEAR_ATTN: St[i][j] = St[i][j] g[i] + k[i] v[j];
//                      out[j] = sum_i St[i][j] q[i] scale   (scale: op_params[0])
//   RWKV_WKV7:         sa = sum_j a[j] St[i][j];
//                      St[i][j] = St[i][j] w[j] + v[i] k[j] + sa b[j];
//                      out[i] = sum_j St[i][j] r[j]
//   GATED_DELTA_NET:   St *= exp(g) (g a scalar, or per row i for KDA);
//                      d[j] = (v[j] - sum_i St[i][j] k[i]) beta;
//                      St[i][j] += k[i] d[j];  out[j] = sum_i St[i][j] q[i] / sqrt(S)
//                      q and k may have fewer heads (head h reads h % H_qk) and
//                      fewer sequences; with K = op_params[0] > 1 the states of
//                      the last K tokens follow as K slots (slot j: j tokens back).
//                      The state is stored transposed (row j holds column j).
// The WKV/GLA sums run in the order of ggml's reference loops (over i, then j),
// so the f32 rounding matches it. F32, contiguous (delta net: contiguous rows).
//
// Test: test-backend-ops -b STANDIN_HOST0 -o RWKV_WKV6 (RWKV_WKV7, GATED_LINEAR_ATTN, GATED_DELTA_NET)
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/common/op_params.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

const float * f(const ggml_tensor * t) { return static_cast<const float *>(t->data); }

// The geometry shared by WKV6, GLA and WKV7.
struct Wkv {
    int64_t S, H, C, T, n_seqs, per_seq;
};

Wkv wkv_of(const ggml_tensor * node, const ggml_tensor * state) {
    Wkv w;
    w.C = node->ne[0];
    w.H = node->src[1]->ne[1];
    w.S = w.C / w.H;
    w.T = node->src[1]->ne[2];
    w.n_seqs = state->ne[1];
    w.per_seq = w.T / w.n_seqs;
    return w;
}

// Runs body(seq, head, state_in, state_out, out_base) for every (sequence,
// head) pair, in parallel; out_base is dst's output rows.
template <typename Body> void each_seq_head(rt::host::HostStream & stream, ggml_tensor * node, const Wkv & w, const ggml_tensor * st,
                                            Body && body) {
    float * out = static_cast<float *>(node->data);
    float * st_out = out + w.C * w.T;
    stream.pool().parallel_for(w.n_seqs * w.H, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
            const int64_t s = p / w.H, h = p % w.H;
            const int64_t off = s * w.S * w.C + h * w.S * w.S;
            float * state = st_out + off;
            std::memcpy(state, f(st) + off, size_t(w.S * w.S) * sizeof(float));
            body(s, h, state, out);
        }
    });
}

} // namespace

Status rwkv_wkv6(rt::host::HostStream & stream, ggml_tensor * node) {
    const Wkv w = wkv_of(node, node->src[5]);
    const float *k = f(node->src[0]), *v = f(node->src[1]), *r = f(node->src[2]), *tf = f(node->src[3]),
                *td = f(node->src[4]);
    each_seq_head(stream, node, w, node->src[5], [&](int64_t s, int64_t h, float * St, float * out) {
        const int64_t S = w.S;
        for (int64_t t = s * w.per_seq; t < (s + 1) * w.per_seq; ++t) {
            const int64_t o = t * w.C + h * S;
            float * y = out + o;
            for (int64_t j = 0; j < S; ++j) y[j] = 0.0f;
            for (int64_t i = 0; i < S; ++i) {
                const float ki = k[o + i], ri = r[o + i], tfi = tf[h * S + i], tdi = td[o + i];
                float * row = St + i * S;
                for (int64_t j = 0; j < S; ++j) {
                    const float kv = v[o + j] * ki;
                    y[j] += (kv * tfi + row[j]) * ri;
                    row[j] = row[j] * tdi + kv;
                }
            }
        }
    });
    return true;
}

Status gated_linear_attn(rt::host::HostStream & stream, ggml_tensor * node) {
    const Wkv w = wkv_of(node, node->src[4]);
    const float scale = op_f32(node, 0);
    const float *k = f(node->src[0]), *v = f(node->src[1]), *q = f(node->src[2]), *g = f(node->src[3]);
    each_seq_head(stream, node, w, node->src[4], [&](int64_t s, int64_t h, float * St, float * out) {
        const int64_t S = w.S;
        for (int64_t t = s * w.per_seq; t < (s + 1) * w.per_seq; ++t) {
            const int64_t o = t * w.C + h * S;
            float * y = out + o;
            for (int64_t j = 0; j < S; ++j) y[j] = 0.0f;
            for (int64_t i = 0; i < S; ++i) {
                const float ki = k[o + i], qi = q[o + i] * scale, gi = g[o + i];
                float * row = St + i * S;
                for (int64_t j = 0; j < S; ++j) {
                    row[j] = row[j] * gi + v[o + j] * ki;
                    y[j] += row[j] * qi;
                }
            }
        }
    });
    return true;
}

Status rwkv_wkv7(rt::host::HostStream & stream, ggml_tensor * node) {
    const Wkv w = wkv_of(node, node->src[6]);
    const float *r = f(node->src[0]), *wd = f(node->src[1]), *k = f(node->src[2]), *v = f(node->src[3]),
                *a = f(node->src[4]), *b = f(node->src[5]);
    each_seq_head(stream, node, w, node->src[6], [&](int64_t s, int64_t h, float * St, float * out) {
        const int64_t S = w.S;
        for (int64_t t = s * w.per_seq; t < (s + 1) * w.per_seq; ++t) {
            const int64_t o = t * w.C + h * S;
            for (int64_t i = 0; i < S; ++i) {
                float * row = St + i * S;
                float sa = 0.0f;
                for (int64_t j = 0; j < S; ++j) sa += a[o + j] * row[j];
                const float vi = v[o + i];
                float acc = 0.0f;
                for (int64_t j = 0; j < S; ++j) {
                    row[j] = row[j] * wd[o + j] + vi * k[o + j] + sa * b[o + j];
                    acc += row[j] * r[o + j];
                }
                out[o + i] = acc;
            }
        }
    });
    return true;
}

Status gated_delta_net(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *g = node->src[3],
                      *beta = node->src[4], *st = node->src[5];
    const int64_t S = v->ne[0], H = v->ne[1], nt = v->ne[2], ns = v->ne[3];
    const int64_t K = op_i32(node, 0);
    const bool kda = g->ne[0] == S;
    const float scale = 1.0f / std::sqrt(float(S));
    float * attn = static_cast<float *>(node->data);
    float * st_out = attn + S * H * nt * ns;
    const int64_t snap = S * S * H * ns;  // one slot
    const auto row = [](const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
        return reinterpret_cast<const float *>(static_cast<const char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] +
                                               i3 * t->nb[3]);
    };
    stream.pool().parallel_for(H * ns, 1, [&](int64_t p0, int64_t p1) {
        std::vector<float> delta(static_cast<size_t>(S)), work(K > 1 ? static_cast<size_t>(S * S) : 0);
        for (int64_t p = p0; p < p1; ++p) {
            const int64_t h = p % H, s = p / H;
            const int64_t hq = h % q->ne[1], sq = s / (ns / q->ne[3]);
            const int64_t hk = h % k->ne[1], sk = s / (ns / k->ne[3]);
            float * M = K > 1 ? work.data() : st_out + (s * H + h) * S * S;  // M[j*S + i] = St[i][j]
            std::memcpy(M, row(st, 0, h, s), size_t(S * S) * sizeof(float));
            for (int64_t t = 0; t < nt; ++t) {
                const float * qd = row(q, hq, t, sq);
                const float * kd = row(k, hk, t, sk);
                const float * vd = row(v, h, t, s);
                const float * gd = row(g, h, t, s);
                const float b = *row(beta, h, t, s);
                if (kda) {
                    for (int64_t i = 0; i < S; ++i) delta[size_t(i)] = std::exp(gd[i]);
                    for (int64_t j = 0; j < S; ++j)
                        for (int64_t i = 0; i < S; ++i) M[j * S + i] *= delta[size_t(i)];
                } else {
                    const float e = std::exp(gd[0]);
                    for (int64_t i = 0; i < S * S; ++i) M[i] *= e;
                }
                for (int64_t j = 0; j < S; ++j) {
                    float sum = 0.0f;
                    for (int64_t i = 0; i < S; ++i) sum += M[j * S + i] * kd[i];
                    delta[size_t(j)] = (vd[j] - sum) * b;
                }
                float * y = attn + ((s * nt + t) * H + h) * S;
                for (int64_t j = 0; j < S; ++j) {
                    float * mj = M + j * S;
                    float sum = 0.0f;
                    for (int64_t i = 0; i < S; ++i) {
                        mj[i] += kd[i] * delta[size_t(j)];
                        sum += mj[i] * qd[i];
                    }
                    y[j] = sum * scale;
                }
                const int64_t slot = nt - 1 - t;
                if (K > 1 && slot >= 0 && slot < K) {
                    std::memcpy(st_out + slot * snap + (s * H + h) * S * S, M, size_t(S * S) * sizeof(float));
                }
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
