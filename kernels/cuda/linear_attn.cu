// Linear attention on the CUDA device, as kernels/host/linear_attn.cpp
// (RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7, GATED_DELTA_NET). One block per
// (sequence, head), S threads; the head's S x S state lives in shared memory
// (the predicate bounds S so it fits). For WKV6 and GLA thread j owns state
// column j and output j; for WKV7 thread i owns row i; for the delta net
// thread j owns row j of the transposed state. Each token's k, v, q, ...
// vectors are staged in shared memory first. The per-thread sums run over
// the state index in the host's order, so the f32 rounding matches it.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o RWKV_WKV6 (RWKV_WKV7, GATED_LINEAR_ATTN, GATED_DELTA_NET)
#include <atomic>

#include "kernels/common/op_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/limits.h"

namespace standin::kernels::cuda {

namespace {

// The largest head size whose state fits the shared memory these kernels
// opt in to (S * S floats plus the staged vectors): Note [kernel limits].
constexpr int kMaxS = int(limits::kLinearAttnMaxHead);

struct Wkv {
    int64_t S, H, C, T, per_seq;
};

enum class Kind { wkv6, gla, wkv7 };

// srcs: WKV6 k v r tf td; GLA k v q g; WKV7 r w k v a b (the state is passed apart).
template <Kind K>
__global__ void wkv_kernel(Wkv w, const float * s0, const float * s1, const float * s2, const float * s3,
                           const float * s4, const float * s5, const float * state_in, float * out, float scale) {
    extern __shared__ float smem[];
    const int64_t S = w.S;
    float * St = smem;          // S * S
    float * vec = smem + S * S;  // 6 * S staged vectors
    const int64_t s = blockIdx.x / w.H, h = blockIdx.x % w.H;
    const int64_t off = s * S * w.C + h * S * S;
    const int j = threadIdx.x;
    for (int64_t e = j; e < S * S; e += blockDim.x) St[e] = state_in[off + e];
    __syncthreads();
    const float * srcs[6] = {s0, s1, s2, s3, s4, s5};
    for (int64_t t = s * w.per_seq; t < (s + 1) * w.per_seq; ++t) {
        const int64_t o = t * w.C + h * S;
        for (int v = 0; v < 6; ++v) {
            if (srcs[v] == nullptr) continue;
            // WKV6 time_first is per head, not per token.
            const bool per_head = K == Kind::wkv6 && v == 3;
            vec[v * S + j] = srcs[v][(per_head ? h * S : o) + j];
        }
        __syncthreads();
        if (K == Kind::wkv6) {
            const float *k = vec, *v = vec + S, *r = vec + 2 * S, *tf = vec + 3 * S, *td = vec + 4 * S;
            float y = 0.0f;
            for (int64_t i = 0; i < S; ++i) {
                const float kv = v[j] * k[i];
                float & x = St[i * S + j];
                y += (kv * tf[i] + x) * r[i];
                x = x * td[i] + kv;
            }
            out[o + j] = y;
        } else if (K == Kind::gla) {
            const float *k = vec, *v = vec + S, *q = vec + 2 * S, *g = vec + 3 * S;
            float y = 0.0f;
            for (int64_t i = 0; i < S; ++i) {
                float & x = St[i * S + j];
                x = x * g[i] + v[j] * k[i];
                y += x * (q[i] * scale);
            }
            out[o + j] = y;
        } else {
            const float *r = vec, *wd = vec + S, *k = vec + 2 * S, *v = vec + 3 * S, *a = vec + 4 * S, *b = vec + 5 * S;
            float * row = St + j * S;
            float sa = 0.0f;
            for (int64_t i = 0; i < S; ++i) sa += a[i] * row[i];
            float y = 0.0f;
            for (int64_t i = 0; i < S; ++i) {
                row[i] = row[i] * wd[i] + v[j] * k[i] + sa * b[i];
                y += row[i] * r[i];
            }
            out[o + j] = y;
        }
        __syncthreads();
    }
    float * st_out = out + w.C * w.T;
    for (int64_t e = j; e < S * S; e += blockDim.x) st_out[off + e] = St[e];
}

Wkv wkv_of(const ggml_tensor * node, const ggml_tensor * state) {
    Wkv w;
    w.C = node->ne[0];
    w.H = node->src[1]->ne[1];
    w.S = w.C / w.H;
    w.T = node->src[1]->ne[2];
    w.per_seq = w.T / state->ne[1];
    return w;
}

size_t smem_bytes(int64_t S) { return size_t(S * S + 6 * S) * sizeof(float); }

// Lets every kernel of this file use the shared memory of the largest head.
template <typename F> void allow_smem(F kernel) {
    SI_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes(kMaxS))));
}

const float * f(const ggml_tensor * t) { return t ? static_cast<const float *>(t->data) : nullptr; }

template <Kind K> bool run_wkv(rt::cuda::CudaStream & stream, ggml_tensor * node, int n_src, float scale) {
    const ggml_tensor * state = node->src[n_src - 1];
    const Wkv w = wkv_of(node, state);
    if (w.S > kMaxS || w.S <= 0) return false;  // the CUDA predicate refuses these
    static std::atomic<uint64_t> done{0};
    once_per_device(done, [](int) { allow_smem(wkv_kernel<K>); });
    const float * s[6] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    for (int i = 0; i < n_src - 1; ++i) s[i] = f(node->src[i]);
    const int64_t blocks = state->ne[1] * w.H;
    if (blocks == 0) return true;
    wkv_kernel<K><<<unsigned(blocks), unsigned(w.S), smem_bytes(w.S), stream_of(stream)>>>(
        w, s[0], s[1], s[2], s[3], s[4], s[5], f(state), static_cast<float *>(node->data), scale);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

struct Gdn {
    Operand q, k, v, g, beta;
    const float * state;
    float * attn;
    float * st_out;
    int64_t K;
    float scale;
};

__device__ __forceinline__ const float * row3(const char * base, const Shape & s, int64_t i1, int64_t i2, int64_t i3) {
    return reinterpret_cast<const float *>(base + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3]);
}

__global__ void delta_net_kernel(Gdn p) {
    extern __shared__ float smem[];
    const int64_t S = p.v.ne[0], H = p.v.ne[1], nt = p.v.ne[2], ns = p.v.ne[3];
    const int64_t s = blockIdx.x / H, h = blockIdx.x % H;
    const int64_t hq = h % p.q.ne[1], sq = s / (ns / p.q.ne[3]);
    const int64_t hk = h % p.k.ne[1], sk = s / (ns / p.k.ne[3]);
    const bool kda = p.g.ne[0] == S;
    float * M = smem;             // M[j*S + i] = St[i][j]
    float * kv = smem + S * S;    // k
    float * qv = kv + S;          // q
    float * gv = qv + S;          // exp(g) per i (KDA)
    const int j = threadIdx.x;
    const float * s_in = p.state + (s * H + h) * S * S;
    for (int64_t e = j; e < S * S; e += blockDim.x) M[e] = s_in[e];
    const int64_t snap = S * S * H * ns;
    for (int64_t t = 0; t < nt; ++t) {
        kv[j] = row3(p.k.d, p.k, hk, t, sk)[j];
        qv[j] = row3(p.q.d, p.q, hq, t, sq)[j];
        const float * g = row3(p.g.d, p.g, h, t, s);
        if (kda) gv[j] = expf(g[j]);
        __syncthreads();
        float * mj = M + j * S;
        if (kda) {
            for (int64_t i = 0; i < S; ++i) mj[i] *= gv[i];
        } else {
            const float e = expf(g[0]);
            for (int64_t i = 0; i < S; ++i) mj[i] *= e;
        }
        float sum = 0.0f;
        for (int64_t i = 0; i < S; ++i) sum += mj[i] * kv[i];
        const float b = *row3(p.beta.d, p.beta, h, t, s);
        const float delta = (row3(p.v.d, p.v, h, t, s)[j] - sum) * b;
        float y = 0.0f;
        for (int64_t i = 0; i < S; ++i) {
            mj[i] += kv[i] * delta;
            y += mj[i] * qv[i];
        }
        p.attn[((s * nt + t) * H + h) * S + j] = y * p.scale;
        const int64_t slot = nt - 1 - t;
        if (slot >= 0 && slot < p.K && (p.K > 1 || slot == 0)) {
            float * o = p.st_out + slot * snap + (s * H + h) * S * S + j * S;
            for (int64_t i = 0; i < S; ++i) o[i] = mj[i];
        }
        __syncthreads();
    }
    if (nt == 0) {  // no token: the state passes through
        float * o = p.st_out + (s * H + h) * S * S;
        for (int64_t e = j; e < S * S; e += blockDim.x) o[e] = M[e];
    }
}

} // namespace

Status rwkv_wkv6(rt::cuda::CudaStream & stream, ggml_tensor * node) { return run_wkv<Kind::wkv6>(stream, node, 6, 1.0f); }

Status gated_linear_attn(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    return run_wkv<Kind::gla>(stream, node, 5, op_f32(node, 0));
}

Status rwkv_wkv7(rt::cuda::CudaStream & stream, ggml_tensor * node) { return run_wkv<Kind::wkv7>(stream, node, 7, 1.0f); }

Status gated_delta_net(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    Gdn p;
    const ggml_tensor * const * s = node->src;
    Operand * in[] = {&p.q, &p.k, &p.v, &p.g, &p.beta};
    for (int i = 0; i < 5; ++i) *in[i] = operand_of(s[i]);
    p.state = static_cast<const float *>(s[5]->data);
    p.attn = static_cast<float *>(node->data);
    const int64_t S = p.v.ne[0], H = p.v.ne[1], nt = p.v.ne[2], ns = p.v.ne[3];
    p.st_out = p.attn + S * H * nt * ns;
    p.K = op_i32(node, 0);
    p.scale = 1.0f / sqrtf(float(S));
    if (S > kMaxS || S <= 0) return false;  // the CUDA predicate refuses these
    static std::atomic<uint64_t> done{0};
    once_per_device(done, [](int) { allow_smem(delta_net_kernel); });
    if (H * ns == 0) return true;
    delta_net_kernel<<<unsigned(H * ns), unsigned(S), smem_bytes(S), stream_of(stream)>>>(p);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
