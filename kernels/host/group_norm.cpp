// Normalisations over other extents than RMS_NORM/NORM (kernels/host/norm.cpp):
//   L2_NORM:    y = x / max(||x||, eps) over dim 0 (eps: op_params[0]); the
//               vectors of delta-net q/k and RWKV-7's a/b
//   GROUP_NORM: y = (x - mean) / sqrt(var + eps) over each group of channels
//               (dim 2 cut in op_params[0] groups of ceil(ne2 / groups)
//               channels, the last possibly shorter) times dims 0 and 1, per
//               i3; eps is op_params[1]. The vision/audio encoders' norm.
// F32, any strides (elements are read through nb[0]). Sums run in double, as
// in ggml's reference.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o L2_NORM (GROUP_NORM)
#include <cmath>

#include "kernels/common/op_params.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

float & elem(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return *reinterpret_cast<float *>(static_cast<char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                                      i3 * t->nb[3]);
}

} // namespace

Status l2_norm(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const float eps = op_f32(node, 0);
    const int64_t n = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)),
                                 [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const char * x = row_ptr(src, r);
            char * y = row_ptr(node, r);
            double sum = 0.0;
            for (int64_t i = 0; i < n; ++i) {
                const float v = *reinterpret_cast<const float *>(x + i * src->nb[0]);
                sum += double(v * v);
            }
            const float scale = 1.0f / std::fmax(std::sqrt(float(sum)), eps);
            for (int64_t i = 0; i < n; ++i) {
                *reinterpret_cast<float *>(y + i * node->nb[0]) = *reinterpret_cast<const float *>(x + i * src->nb[0]) * scale;
            }
        }
    });
    return true;
}

Status group_norm(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const int64_t groups = op_i32(node, 0);
    const float eps = op_f32(node, 1);
    const int64_t ne0 = src->ne[0], ne1 = src->ne[1], nc = src->ne[2], ne3 = src->ne[3];
    const int64_t per_group = (nc + groups - 1) / groups;
    // One task: one group of one i3.
    stream.pool().parallel_for(groups * ne3, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t g = t % groups, i3 = t / groups;
            const int64_t c0 = g * per_group, c1 = std::min(nc, c0 + per_group);
            if (c1 <= c0) continue;
            const double count = double(ne0 * ne1 * (c1 - c0));
            double sum = 0.0;
            for (int64_t c = c0; c < c1; ++c)
                for (int64_t i1 = 0; i1 < ne1; ++i1)
                    for (int64_t i0 = 0; i0 < ne0; ++i0) sum += double(elem(src, i0, i1, c, i3));
            const float mean = float(sum / count);
            double sum2 = 0.0;
            for (int64_t c = c0; c < c1; ++c)
                for (int64_t i1 = 0; i1 < ne1; ++i1)
                    for (int64_t i0 = 0; i0 < ne0; ++i0) {
                        const float v = elem(src, i0, i1, c, i3) - mean;
                        sum2 += double(v * v);
                    }
            const float scale = 1.0f / std::sqrt(float(sum2 / count) + eps);
            for (int64_t c = c0; c < c1; ++c)
                for (int64_t i1 = 0; i1 < ne1; ++i1)
                    for (int64_t i0 = 0; i0 < ne0; ++i0) {
                        elem(node, i0, i1, c, i3) = (elem(src, i0, i1, c, i3) - mean) * scale;
                    }
        }
    });
    return true;
}

} // namespace standin::kernels::host
