// LIGHTNING_INDEXER on the CUDA device, as kernels/host/indexer.cpp: one block
// per (key, stream); the key row is decoded into shared memory once, then
// each thread scores tokens t = threadIdx.x, + blockDim.x, ... over every head.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o LIGHTNING_INDEXER
#include "kernels/common/quants.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/limits.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 128;

__device__ __forceinline__ const char * at(const char * base, const Shape & s, int64_t i1, int64_t i2, int64_t i3) {
    return base + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3];
}

__global__ void indexer_kernel(Shape d, Shape q, Shape k, Shape w, Shape m, char * dd, const char * qd,
                               const char * kd, const char * wd, const char * md) {
    extern __shared__ float kf[];
    const int64_t ik = blockIdx.x, s = blockIdx.y;
    const int64_t n_embd = q.ne[0], n_head = q.ne[1], n_tok = q.ne[2];
    if (threadIdx.x == 0) quant::to_f32_row(ggml_type(k.type), at(kd, k, 0, ik, s), kf, n_embd);
    __syncthreads();
    for (int64_t t = threadIdx.x; t < n_tok; t += blockDim.x) {
        const float * wr = reinterpret_cast<const float *>(at(wd, w, t, 0, s));
        float score = 0.0f;
        for (int64_t h = 0; h < n_head; ++h) {
            const float * qr = reinterpret_cast<const float *>(at(qd, q, h, t, s));
            float qk = 0.0f;
            for (int64_t i = 0; i < n_embd; ++i) qk += qr[i] * kf[i];
            score += (qk > 0.0f ? qk : 0.0f) * wr[h];
        }
        const uint16_t mk = reinterpret_cast<const uint16_t *>(at(md, m, t, 0, s % m.ne[3]))[ik];
        *reinterpret_cast<float *>(dd + t * d.nb[1] + s * d.nb[3] + ik * d.nb[0]) = score + num::fp16_to_f32(mk);
    }
}

} // namespace

Status lightning_indexer(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor *q = node->src[0], *k = node->src[1], *w = node->src[2], *m = node->src[3];
    if (k->ne[2] == 0 || q->ne[3] == 0 || q->ne[2] == 0) return true;
    if (q->ne[3] > limits::kGridYZ) return false;  // the CUDA predicate refuses these
    indexer_kernel<<<dim3(unsigned(k->ne[2]), unsigned(q->ne[3])), kBlock, size_t(q->ne[0]) * sizeof(float),
                     stream_of(stream)>>>(shape_of(node), shape_of(q), shape_of(k), shape_of(w), shape_of(m),
                                          static_cast<char *>(node->data), static_cast<const char *>(q->data),
                                          static_cast<const char *>(k->data), static_cast<const char *>(w->data),
                                          static_cast<const char *>(m->data));
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
