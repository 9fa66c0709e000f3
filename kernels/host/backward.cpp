// The training ops: gradients of forward ops and optimizer steps, all F32
// (COUNT_EQUAL: I32 in, one I64 out). Each follows ggml-cpu's formula and
// order of operations; sums over a row are taken in double where ggml-cpu
// takes them in ggml_float (double), so results agree to float rounding.
//   GET_ROWS_BACK   dst (zeroed) row idx[i] += grad row i, in index order
//   REPEAT_BACK     dst = sum of the repeats of src that REPEAT would copy from dst
//   SILU_BACK       dx = dy * s * (1 + x * (1 - s)), s = sigmoid(x)
//   RMS_NORM_BACK   dx = (dz + x * (-sum(x dz) / (sum(x^2) + n eps))) / rms(x)
//   SOFT_MAX_BACK   dx = scale * y * (dy - dot(y, dy))
//   CROSS_ENTROPY_LOSS       -1/nrows * sum over rows of sum(labels * log_softmax(logits))
//   CROSS_ENTROPY_LOSS_BACK  d/nrows * (softmax(logits) - labels)
//   COUNT_EQUAL     the number of equal elements
//   OPT_STEP_ADAMW / OPT_STEP_SGD  the in-place updates of w (and m, v)
// The predicates (kernels/op_rows_train.cpp) take contiguous rows only.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o GET_ROWS_BACK (and the other op names)
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/op_params.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

const float * frow(const ggml_tensor * t, int64_t r) { return reinterpret_cast<const float *>(row_ptr(t, r)); }
float * frow_w(const ggml_tensor * t, int64_t r) { return reinterpret_cast<float *>(row_ptr(t, r)); }

// Rows per parallel task for rows of n floats.
int64_t grain_of(int64_t n) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, n)); }

Status get_rows_back(rt::host::ThreadPool & pool, ggml_tensor * node) {
    const ggml_tensor * grad = node->src[0];
    const ggml_tensor * idx  = node->src[1];
    const int64_t nc = node->ne[0], n_idx = ggml_nelements(idx);
    // Columns are split across threads; each walks all indices in order, so
    // rows hit twice are summed in ggml-cpu's order.
    pool.parallel_for(nc, 256, [&](int64_t c0, int64_t c1) {
        for (int64_t r = 0; r < ggml_nrows(node); ++r) std::fill(frow_w(node, r) + c0, frow_w(node, r) + c1, 0.0f);
        for (int64_t i = 0; i < n_idx; ++i) {
            const int32_t r = static_cast<const int32_t *>(idx->data)[i];
            if (r < 0 || r >= node->ne[1]) continue;
            float * out = frow_w(node, r);
            const char * in = static_cast<const char *>(grad->data) + i * grad->nb[1];
            for (int64_t c = c0; c < c1; ++c) out[c] += load_f(grad->type, in + c * grad->nb[0]);
        }
    });
    return true;
}

Status repeat_back(rt::host::ThreadPool & pool, ggml_tensor * node) {
    const ggml_tensor * s = node->src[0];
    const int64_t ne0 = node->ne[0], ne1 = node->ne[1], ne2 = node->ne[2];
    const int64_t nr0 = s->ne[0] / ne0, nr1 = s->ne[1] / ne1, nr2 = s->ne[2] / ne2, nr3 = s->ne[3] / node->ne[3];
    pool.parallel_for(ggml_nrows(node), grain_of(ne0 * nr0), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t k1 = r % ne1, k2 = (r / ne1) % ne2, k3 = r / (ne1 * ne2);
            float * out = frow_w(node, r);
            std::fill_n(out, ne0, 0.0f);
            for (int64_t i3 = 0; i3 < nr3; ++i3)
                for (int64_t i2 = 0; i2 < nr2; ++i2)
                    for (int64_t i1 = 0; i1 < nr1; ++i1)
                        for (int64_t i0 = 0; i0 < nr0; ++i0) {
                            const float * in = reinterpret_cast<const float *>(
                                static_cast<const char *>(s->data) + (i3 * node->ne[3] + k3) * s->nb[3] +
                                (i2 * ne2 + k2) * s->nb[2] + (i1 * ne1 + k1) * s->nb[1] + i0 * ne0 * s->nb[0]);
                            for (int64_t c = 0; c < ne0; ++c) out[c] += in[c];
                        }
        }
    });
    return true;
}

Status silu_back(rt::host::ThreadPool & pool, ggml_tensor * node) {
    const ggml_tensor * dy = node->src[0];
    const ggml_tensor * x  = node->src[1];
    const int64_t nc = node->ne[0];
    pool.parallel_for(ggml_nrows(node), grain_of(nc), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float * xr = frow(x, r);
            const float * g  = frow(dy, r);
            float * out = frow_w(node, r);
            for (int64_t c = 0; c < nc; ++c) {
                const float sg = 1.0f / (1.0f + std::exp(-xr[c]));
                out[c] = g[c] * sg * (1.0f + xr[c] * (1.0f - sg));
            }
        }
    });
    return true;
}

Status rms_norm_back(rt::host::ThreadPool & pool, ggml_tensor * node) {
    const ggml_tensor * dz = node->src[0];
    const ggml_tensor * x  = node->src[1];
    const int64_t nc = node->ne[0];
    const float eps = op_f32(node, 0);
    pool.parallel_for(ggml_nrows(node), grain_of(nc), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float * xr = frow(x, r);
            const float * g  = frow(dz, r);
            double sum_xx = 0.0, sum_xdz = 0.0;
            for (int64_t c = 0; c < nc; ++c) {
                sum_xx  += double(xr[c] * xr[c]);
                sum_xdz += double(xr[c] * g[c]);
            }
            const float mean_eps = float(sum_xx) / float(nc) + eps;
            const float sum_eps  = float(sum_xx) + eps * float(nc);
            const float rrms     = 1.0f / std::sqrt(mean_eps);
            const float scale_x  = float(-sum_xdz) / sum_eps;
            float * out = frow_w(node, r);
            for (int64_t c = 0; c < nc; ++c) out[c] = (g[c] + xr[c] * scale_x) * rrms;
        }
    });
    return true;
}

Status soft_max_back(rt::host::ThreadPool & pool, ggml_tensor * node) {
    const ggml_tensor * dy = node->src[0];
    const ggml_tensor * y  = node->src[1];
    const int64_t nc = node->ne[0];
    const float scale = op_f32(node, 0);
    pool.parallel_for(ggml_nrows(node), grain_of(nc), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float * yr = frow(y, r);
            const float * g  = frow(dy, r);
            double dot = 0.0;
            for (int64_t c = 0; c < nc; ++c) dot += double(yr[c] * g[c]);
            const float d = float(dot);
            float * out = frow_w(node, r);
            for (int64_t c = 0; c < nc; ++c) out[c] = (g[c] - d) * yr[c] * scale;
        }
    });
    return true;
}

// Row max and sum(exp(x - max)) in double, as ggml_vec_soft_max_f32 sums them.
double exp_sum(const float * x, int64_t n, float & mx, float * e) {
    mx = -INFINITY;
    for (int64_t c = 0; c < n; ++c) mx = std::max(mx, x[c]);
    double sum = 0.0;
    for (int64_t c = 0; c < n; ++c) {
        const float v = std::exp(x[c] - mx);
        if (e != nullptr) e[c] = v;
        sum += double(v);
    }
    return sum;
}

Status cross_entropy_loss(rt::host::ThreadPool & pool, ggml_tensor * node) {
    const ggml_tensor * logits = node->src[0];
    const ggml_tensor * labels = node->src[1];
    const int64_t nc = logits->ne[0], nr = ggml_nrows(logits);
    std::vector<float> row_sum(static_cast<size_t>(nr));
    pool.parallel_for(nr, grain_of(nc), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float * x = frow(logits, r);
            const float * l = frow(labels, r);
            float mx;
            const float log_sum = float(std::log(exp_sum(x, nc, mx, nullptr)));
            double s = 0.0;
            for (int64_t c = 0; c < nc; ++c) s += double(((x[c] - mx) - log_sum) * l[c]);
            row_sum[size_t(r)] = float(s);
        }
    });
    double total = 0.0;
    for (float v : row_sum) total += double(v);
    *static_cast<float *>(node->data) = float(total) * (-1.0f / float(nr));
    return true;
}

Status cross_entropy_loss_back(rt::host::ThreadPool & pool, ggml_tensor * node) {
    const ggml_tensor * grad   = node->src[0];
    const ggml_tensor * logits = node->src[1];
    const ggml_tensor * labels = node->src[2];
    const int64_t nc = logits->ne[0], nr = ggml_nrows(logits);
    const float d_by_nr = static_cast<const float *>(grad->data)[0] / float(nr);
    pool.parallel_for(nr, grain_of(nc), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            float * out = frow_w(node, r);
            const float * l = frow(labels, r);
            float mx;
            const float inv = float(1.0 / exp_sum(frow(logits, r), nc, mx, out));
            for (int64_t c = 0; c < nc; ++c) out[c] = (out[c] * inv - l[c]) * d_by_nr;
        }
    });
    return true;
}

Status count_equal(rt::host::ThreadPool & pool, ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    const int64_t nc = a->ne[0], nr = ggml_nrows(a);
    std::vector<int64_t> row_count(static_cast<size_t>(nr));
    pool.parallel_for(nr, grain_of(nc), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int32_t * x = reinterpret_cast<const int32_t *>(row_ptr(a, r));
            const int32_t * y = reinterpret_cast<const int32_t *>(row_ptr(b, r));
            int64_t n = 0;
            for (int64_t c = 0; c < nc; ++c) n += x[c] == y[c];
            row_count[size_t(r)] = n;
        }
    });
    int64_t total = 0;
    for (int64_t v : row_count) total += v;
    *static_cast<int64_t *>(node->data) = total;
    return true;
}

Status opt_step_adamw(rt::host::ThreadPool & pool, ggml_tensor * node) {
    float * w = static_cast<float *>(node->src[0]->data);
    const float * g = static_cast<const float *>(node->src[1]->data);
    float * m = static_cast<float *>(node->src[2]->data);
    float * v = static_cast<float *>(node->src[3]->data);
    const float * p = static_cast<const float *>(node->src[4]->data);
    const float alpha = p[0], beta1 = p[1], beta2 = p[2], eps = p[3], wd = p[4], beta1h = p[5], beta2h = p[6];
    const float keep = 1.0f - alpha * wd;
    pool.parallel_for(ggml_nelements(node->src[0]), 4096, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
            m[i] = m[i] * beta1 + g[i] * (1.0f - beta1);
            v[i] = v[i] * beta2 + g[i] * g[i] * (1.0f - beta2);
            const float mh = m[i] * beta1h;
            const float vh = std::sqrt(v[i] * beta2h) + eps;
            w[i] = w[i] * keep - alpha * mh / vh;
        }
    });
    return true;
}

Status opt_step_sgd(rt::host::ThreadPool & pool, ggml_tensor * node) {
    float * w = static_cast<float *>(node->src[0]->data);
    const float * g = static_cast<const float *>(node->src[1]->data);
    const float * p = static_cast<const float *>(node->src[2]->data);
    const float alpha = p[0], keep = 1.0f - alpha * p[1];
    pool.parallel_for(ggml_nelements(node->src[0]), 4096, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) w[i] = w[i] * keep - alpha * g[i];
    });
    return true;
}

} // namespace

Status backward(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    switch (node->op) {
        case GGML_OP_GET_ROWS_BACK:           return get_rows_back(pool, node);
        case GGML_OP_REPEAT_BACK:             return repeat_back(pool, node);
        case GGML_OP_SILU_BACK:               return silu_back(pool, node);
        case GGML_OP_RMS_NORM_BACK:           return rms_norm_back(pool, node);
        case GGML_OP_SOFT_MAX_BACK:           return soft_max_back(pool, node);
        case GGML_OP_CROSS_ENTROPY_LOSS:      return cross_entropy_loss(pool, node);
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK: return cross_entropy_loss_back(pool, node);
        case GGML_OP_COUNT_EQUAL:             return count_equal(pool, node);
        case GGML_OP_OPT_STEP_ADAMW:          return opt_step_adamw(pool, node);
        case GGML_OP_OPT_STEP_SGD:            return opt_step_sgd(pool, node);
        default:                              return false;
    }
}

} // namespace standin::kernels::host
