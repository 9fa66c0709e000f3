// The mixture-of-experts fusions of Note [fusion] (kernels/fusion.h; matched
// in kernels/fusion_moe.cpp) on the CUDA device. Each computes what its nodes
// compute one by one, bit for bit: the same formulas, the same reduction
// trees (softmax.cu's block of threads_for(n) threads, reduce.cu's SUM_ROWS
// over a 32-thread block), and route.cu's order of the experts (falling
// value, lower index first on ties; NaN last).
//
//   moe_route: one block per token. The gate's probabilities and the choice
//     values go to shared memory; every expert's rank is counted against all
//     others (n_expert <= 1024: at most a million comparisons per token,
//     where a sorting network needs launches or barriers per stage); then
//     warp 0 gathers the k weights and runs the steps after them.
//   moe_sum: one thread per (row, token): the k weighted values, the MUL's
//     result and the left-to-right sum, in registers.
//
// Measured on decoding of the `moe` model (8 layers, 128 experts, 8 used):
// ggml-cuda had 190 kernels per token, standin 246 before these two, of them
// 65 binary kernels (the MUL and the seven ADDs of each layer) and per layer
// an ARGSORT, a SOFT_MAX, a GET_ROWS, a SUM_ROWS, a CLAMP and a DIV; 150
// with them, and tg128 went from 0.77 to 1.01 of ggml-cuda's (on an H100,
// results/h200/summary-94.txt, -95.txt). The rank count on integer keys
// (num::falling_order_key) took the router from 9.6 to 5.8 us per layer
// (ggml-cuda's topk_moe: 5.2) and tg128 to 1.11 (summary-96.txt).
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o TOPK_MOE,MOE_WEIGHTED_REDUCTION;
// the model ctests model.logits.tiny_moe_f32.cuda_*.
#include <cstring>

#include "kernels/common/math_ops.h"
#include "kernels/common/numerics.h"
#include "kernels/common/op_params.h"
#include "kernels/common/softmax.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kMaxExperts = 1024;  // one thread per expert at most, ranks counted in shared memory
constexpr int kMaxUsed = 64;       // the k weights: two per lane of warp 0

// softmax.cu's and reduce.cu's block size for a row of n.
inline int row_threads(int64_t n) { return n >= 1024 ? 256 : (n >= 128 ? 128 : 32); }

enum Gate : int { kGateNone, kGateSoftmax, kGateSigmoid };

struct RouteArgs {
    const char * in;  // the gate's input (or the logits, kGateNone), rows in_nb1 apart
    int64_t      in_nb1;
    int          n_exp, k, gate;
    float        sm_scale;   // the gate SOFT_MAX's scale
    float *      probs;      // the gate's result, or nullptr
    const float * bias;      // [n_exp], or nullptr
    float *      chosen_by;  // the bias ADD's result, or nullptr
    int32_t *    order;      // ARGSORT's result [n_exp, T]
    float *      weights;    // GET_ROWS's result [1, k, T]
    float *      wsoftmax;   // nullptr where the graph has no such step
    float *      sum;
    float *      clamped;
    mathop::Params clamp;
    float *      div;
    float *      scaled;
    float        scale_s, scale_b;
};

// Warp 0's SOFT_MAX over x[0..k) (k <= 64), as softmax_kernel with 32 threads.
__device__ void warp_softmax(float * x, int k, int lane) {
    float mx = -INFINITY;
    for (int e = lane; e < k; e += 32) mx = fmaxf(mx, x[e]);
    mx = warp_max(mx);
    mx = warp_max(lane < 1 ? mx : -INFINITY);
    double s = 0.0;
    float ex[kMaxUsed / 32];
    for (int e = lane, q = 0; e < k; e += 32, ++q) {
        ex[q] = expf(x[e] - mx);
        s += double(ex[q]);
    }
    s = warp_sum(s);
    s = warp_sum(lane < 1 ? s : 0.0);
    const float inv = float(1.0 / s);
    for (int e = lane, q = 0; e < k; e += 32, ++q) x[e] = ex[q] * inv;
}

// Warp 0's SUM_ROWS of x[0..k), as sum_rows_kernel with 32 threads.
__device__ float warp_row_sum(const float * x, int k, int lane) {
    double s = 0.0;
    for (int e = lane; e < k; e += 32) s += double(x[e]);
    s = warp_sum(s);
    s = warp_sum(lane < 1 ? s : 0.0);
    return float(s / 1.0);
}

__device__ void store_k(float * dst, const float * w, int k, int lane) {
    for (int e = lane; e < k; e += 32) dst[e] = w[e];
}

__global__ void moe_route_kernel(RouteArgs a) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    __shared__ float  fscratch[32];
    __shared__ double dscratch[32];
    __shared__ float  p[kMaxExperts];  // the probabilities
    // The choice values' num::falling_order_key: one 64-bit comparison per
    // pair of experts in the rank count (n per thread, most of the kernel's
    // time) where the float order needs NaN and tie tests.
    __shared__ uint64_t key[kMaxExperts];
    __shared__ int    ord[kMaxExperts];
    __shared__ float  w[kMaxUsed];
    const int64_t t = blockIdx.x;
    const int n = a.n_exp, tid = int(threadIdx.x), lane = tid & 31;
    const float * x = reinterpret_cast<const float *>(a.in + t * a.in_nb1);
    const int64_t row = t * n;

    if (a.gate == kGateSoftmax) {
        float mx = -INFINITY;
        for (int i = tid; i < n; i += blockDim.x) mx = fmaxf(mx, x[i] * a.sm_scale);
        mx = block_max(mx, fscratch);
        double s = 0.0;
        for (int i = tid; i < n; i += blockDim.x) {
            const float e = expf(x[i] * a.sm_scale - mx);
            p[i] = e;
            s += double(e);
        }
        s = block_sum(s, dscratch);
        const float inv = float(1.0 / s);
        for (int i = tid; i < n; i += blockDim.x) p[i] *= inv;
    } else {
        for (int i = tid; i < n; i += blockDim.x) p[i] = a.gate == kGateSigmoid ? 1.0f / (1.0f + expf(-x[i])) : x[i];
    }
    for (int i = tid; i < n; i += blockDim.x) {
        if (a.probs != nullptr) a.probs[row + i] = p[i];
        const float c = a.bias != nullptr ? p[i] + a.bias[i] : p[i];  // the choice value
        key[i] = num::falling_order_key(c, uint32_t(i));
        if (a.chosen_by != nullptr) a.chosen_by[row + i] = c;
    }
    __syncthreads();
    for (int i = tid; i < n; i += blockDim.x) {
        const uint64_t ki = key[i];
        int rank = 0;
#pragma unroll 8
        for (int j = 0; j < n; ++j) rank += key[j] > ki ? 1 : 0;
        ord[rank] = i;
        a.order[row + rank] = i;
    }
    __syncthreads();
    if (tid >= 32) return;

    const int k = a.k;
    for (int e = lane; e < k; e += 32) w[e] = p[ord[e]];
    __syncwarp();
    store_k(a.weights + t * k, w, k, lane);
    if (a.wsoftmax != nullptr) {
        warp_softmax(w, k, lane);
        store_k(a.wsoftmax + t * k, w, k, lane);
    }
    if (a.div != nullptr) {
        const float s = warp_row_sum(w, k, lane);
        const float cl = mathop::apply(a.clamp, s);
        if (lane == 0) {
            a.sum[t] = s;
            a.clamped[t] = cl;
        }
        for (int e = lane; e < k; e += 32) w[e] = w[e] / cl;
        store_k(a.div + t * k, w, k, lane);
    }
    if (a.scaled != nullptr) {
        for (int e = lane; e < k; e += 32) a.scaled[t * k + e] = w[e] * a.scale_s + a.scale_b;
    }
}

struct SumArgs {
    const char * ex;  // experts [n, k, T]
    int64_t      ex_nb1, ex_nb2;
    const char * w;   // weights [1, k, T]
    int64_t      w_nb1, w_nb2;
    float *      mul;  // [n, k, T], contiguous
    float *      add[kMoeSumMaxAdds];  // [n, T], contiguous
    uint32_t     write_mask;
    int          n_adds;
    int64_t      n, k, T;
};

__global__ void moe_sum_kernel(SumArgs a) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    const int64_t total = a.n * a.T;
    for (int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; q < total; q += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i = q % a.n, t = q / a.n;
        float acc = 0.0f;
        for (int64_t e = 0; e < a.k; ++e) {
            const float x = *reinterpret_cast<const float *>(a.ex + i * 4 + e * a.ex_nb1 + t * a.ex_nb2);
            const float v = x * *reinterpret_cast<const float *>(a.w + e * a.w_nb1 + t * a.w_nb2);
            a.mul[(t * a.k + e) * a.n + i] = v;
            if (e == 0) {
                acc = v;
            } else if (e <= a.n_adds) {
                acc = acc + v;
                if ((a.write_mask >> (e - 1)) & 1u) a.add[e - 1][t * a.n + i] = acc;
            }
        }
    }
}

bool dense_f32(const ggml_tensor * t) { return t->type == GGML_TYPE_F32 && ggml_is_contiguous(t); }

float * out_of(const ggml_tensor * t) { return t != nullptr ? static_cast<float *>(t->data) : nullptr; }

} // namespace

bool moe_route_ok(const MoeRoute & r) {
    const ggml_tensor * s = r.argsort;
    const int64_t n = s->ne[0], T = s->ne[1], k = r.weights->src[1]->ne[0];
    if (n < 1 || n > kMaxExperts || k < 1 || k > kMaxUsed || T < 1 || T > limits::kGridX || s->ne[2] != 1 ||
        s->ne[3] != 1 || s->type != GGML_TYPE_I32 || !ggml_is_contiguous(s)) {
        return false;
    }
    const ggml_tensor * in = r.gate != nullptr ? r.gate->src[0] : s->src[0];
    if (in->type != GGML_TYPE_F32 || in->nb[0] != 4 || in->ne[0] != n || in->ne[1] != T || in->ne[2] != 1 ||
        in->ne[3] != 1 || in->nb[1] % 4 != 0) {
        return false;
    }
    if (r.gate != nullptr && (!dense_f32(r.gate) || !ggml_are_same_shape(r.gate, in))) return false;
    if (r.gate != nullptr && r.gate->op == GGML_OP_SOFT_MAX) {
        const num::SoftmaxParams sp = num::softmax_params_from(reinterpret_cast<const int32_t *>(r.gate->op_params));
        if (r.gate->src[1] != nullptr || r.gate->src[2] != nullptr || sp.max_bias != 0.0f) return false;
    }
    if (r.bias != nullptr) {
        const ggml_tensor * b = r.bias->src[1];
        if (!dense_f32(r.bias) || !dense_f32(b) || b->ne[0] != n || ggml_nelements(b) != n ||
            !ggml_are_same_shape(r.bias, in)) {
            return false;
        }
    }
    // Every later step: dense F32 of the weights' k x T values.
    for (const ggml_tensor * x : {r.weights, r.wsoftmax, r.div, r.scale}) {
        if (x != nullptr && (!dense_f32(x) || ggml_nelements(x) != k * T)) return false;
    }
    for (const ggml_tensor * x : {r.sum, r.clamp}) {
        if (x != nullptr && (!dense_f32(x) || ggml_nelements(x) != T || x->ne[0] != 1)) return false;
    }
    // A step's reshaped input has k-element rows (SUM_ROWS and SOFT_MAX work per row).
    if (r.wsoftmax != nullptr) {
        const ggml_tensor * in_w = r.wsoftmax->src[0];
        const num::SoftmaxParams sp = num::softmax_params_from(reinterpret_cast<const int32_t *>(r.wsoftmax->op_params));
        if (in_w->ne[0] != k || r.wsoftmax->src[1] != nullptr || r.wsoftmax->src[2] != nullptr || sp.scale != 1.0f ||
            sp.max_bias != 0.0f) {
            return false;
        }
    }
    if (r.sum != nullptr && (r.sum->src[0]->ne[0] != k || r.div->src[0]->ne[0] != k || r.div->src[1]->ne[1] != T)) {
        return false;
    }
    return true;
}

Status moe_route(rt::cuda::CudaStream & stream, const MoeRoute & r) {
    RouteArgs a{};
    const ggml_tensor * s = r.argsort;
    const ggml_tensor * in = r.gate != nullptr ? r.gate->src[0] : s->src[0];
    a.in = static_cast<const char *>(in->data);
    a.in_nb1 = int64_t(in->nb[1]);
    a.n_exp = int(s->ne[0]);
    a.k = int(r.weights->src[1]->ne[0]);
    a.gate = r.gate == nullptr ? kGateNone : r.gate->op == GGML_OP_SOFT_MAX ? kGateSoftmax : kGateSigmoid;
    a.sm_scale = 1.0f;
    if (a.gate == kGateSoftmax) {
        a.sm_scale = num::softmax_params_from(reinterpret_cast<const int32_t *>(r.gate->op_params)).scale;
    }
    a.probs = out_of(r.gate);
    a.bias = r.bias != nullptr ? static_cast<const float *>(r.bias->src[1]->data) : nullptr;
    a.chosen_by = out_of(r.bias);
    a.order = static_cast<int32_t *>(s->data);
    a.weights = out_of(r.weights);
    a.wsoftmax = out_of(r.wsoftmax);
    a.sum = out_of(r.sum);
    a.clamped = out_of(r.clamp);
    a.div = out_of(r.div);
    if (r.clamp != nullptr) a.clamp = mathop::params_of(r.clamp);
    a.scaled = out_of(r.scale);
    if (r.scale != nullptr) {
        std::memcpy(&a.scale_s, reinterpret_cast<const float *>(r.scale->op_params) + 0, sizeof(float));
        std::memcpy(&a.scale_b, reinterpret_cast<const float *>(r.scale->op_params) + 1, sizeof(float));
    }
    launch(moe_route_kernel, dim3(unsigned(s->ne[1])), dim3(row_threads(s->ne[0])), 0, stream_of(stream), a);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

bool moe_sum_ok(const MoeSum & s) {
    const ggml_tensor * mul = s.mul;
    const ggml_tensor * ex = mul->src[0];
    const ggml_tensor * w = mul->src[1];
    if (!dense_f32(mul) || ex->type != GGML_TYPE_F32 || w->type != GGML_TYPE_F32 || ex->nb[0] != 4 ||
        ex->nb[1] % 4 != 0 || ex->nb[2] % 4 != 0 || uintptr_t(ex->data) % 4 != 0 || mul->ne[1] > kMoeSumMaxAdds + 1) {
        return false;
    }
    for (int i = 0; i < s.n_adds; ++i) {
        if (!dense_f32(s.adds[i]) || s.adds[i]->ne[0] != mul->ne[0] || s.adds[i]->ne[1] != mul->ne[2]) return false;
    }
    return true;
}

Status moe_sum(rt::cuda::CudaStream & stream, const MoeSum & s) {
    const ggml_tensor * mul = s.mul;
    SumArgs a{};
    a.ex = static_cast<const char *>(mul->src[0]->data);
    a.ex_nb1 = int64_t(mul->src[0]->nb[1]);
    a.ex_nb2 = int64_t(mul->src[0]->nb[2]);
    a.w = static_cast<const char *>(mul->src[1]->data);
    a.w_nb1 = int64_t(mul->src[1]->nb[1]);
    a.w_nb2 = int64_t(mul->src[1]->nb[2]);
    a.mul = out_of(mul);
    for (int i = 0; i < s.n_adds; ++i) a.add[i] = out_of(s.adds[i]);
    // The last sum is the result: always written.
    a.write_mask = s.write_mask | (1u << (s.n_adds - 1));
    a.n_adds = s.n_adds;
    a.n = mul->ne[0];
    a.k = mul->ne[1];
    a.T = mul->ne[2];
    constexpr int kBlock = 256;
    launch(moe_sum_kernel, dim3(grid_for(a.n * a.T, kBlock)), dim3(kBlock), 0, stream_of(stream), a);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
