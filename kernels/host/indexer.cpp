// LIGHTNING_INDEXER (DeepSeek sparse attention's indexer): the score of each
// cached key ik for each token t of stream s,
//   dst[ik, t, 0, s] = sum_h relu(dot(q[:, h, t, s], k[:, 0, ik, s])) * w[h, t, 0, s]
//                      + mask[ik, t, 0, s % mask streams]
// q and w F32, the mask F16, k any type kernels/common/quants.h decodes (each
// key row is decoded once per op). Dim-0 elements adjacent, any row strides.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o LIGHTNING_INDEXER
#include <immintrin.h>

#include <vector>

#include "kernels/common/quants.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/simd_math.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

float dot(const float * a, const float * b, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    float s = simd::hsum(acc);
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

const char * at(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return static_cast<const char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

} // namespace

Status lightning_indexer(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor *q = node->src[0], *k = node->src[1], *w = node->src[2], *m = node->src[3];
    const int64_t n_embd = q->ne[0], n_head = q->ne[1], n_tok = q->ne[2], n_stream = q->ne[3], n_kv = k->ne[2];
    // One task: one key of one stream, against every token and head.
    pool.parallel_for(n_stream * n_kv, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n_tok * n_head)),
                      [&](int64_t t0, int64_t t1) {
        std::vector<float> kf(static_cast<size_t>(n_embd));
        for (int64_t task = t0; task < t1; ++task) {
            const int64_t s = task / n_kv, ik = task % n_kv;
            quant::to_f32_row(k->type, at(k, 0, ik, s), kf.data(), n_embd);
            for (int64_t t = 0; t < n_tok; ++t) {
                const float * wr = reinterpret_cast<const float *>(at(w, t, 0, s));
                float score = 0.0f;
                for (int64_t h = 0; h < n_head; ++h) {
                    const float qk = dot(reinterpret_cast<const float *>(at(q, h, t, s)), kf.data(), n_embd);
                    score += (qk > 0.0f ? qk : 0.0f) * wr[h];
                }
                const uint16_t mk = reinterpret_cast<const uint16_t *>(at(m, t, 0, s % m->ne[3]))[ik];
                *reinterpret_cast<float *>(const_cast<char *>(at(node, t, 0, s)) + ik * sizeof(float)) =
                    score + num::fp16_to_f32(mk);
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
