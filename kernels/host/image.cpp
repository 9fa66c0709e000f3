// Pooling, resampling and padding of the vision and audio encoders:
//   POOL_1D: dst[o] = max or mean of src[o s - p + j], j < k, over the taps
//            inside the row (the mean divides by that count); op_params:
//            op, k, s, p
//   POOL_2D: the same over (x, y), except that the mean always divides by
//            k0 k1 (padding counts), as in ggml; op_params: op, k0, k1, s0, s1,
//            p0, p1
//   UPSCALE: kernels/common/upscale.h (op_params[0]: mode and flags)
//   PAD:     dst = src shifted by the left pads (op_params[0, 2, 4, 6]; the
//            right pads follow), zeros outside, or wrapped around when
//            op_params[8] (circular) is set
//   PAD_REFLECT_1D: dim 0 padded by p0 / p1 mirrored elements (the edge
//            element not repeated)
// Sources F32 (pools also F16), destinations F32; any strides.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o POOL_2D (POOL_1D, UPSCALE, PAD, PAD_REFLECT_1D)
#include <cfloat>

#include "kernels/common/op_params.h"
#include "kernels/common/upscale.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

int64_t grain_for(int64_t n) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)); }

const char * at(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return static_cast<const char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

float & out(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return *reinterpret_cast<float *>(const_cast<char *>(at(t, i0, i1, i2, i3)));
}

int64_t wrap(int64_t i, int64_t n) { return ((i % n) + n) % n; }

// (i1, i2, i3) of row r of t.
void split(const ggml_tensor * t, int64_t r, int64_t & i1, int64_t & i2, int64_t & i3) {
    i1 = r % t->ne[1];
    i2 = (r / t->ne[1]) % t->ne[2];
    i3 = r / (t->ne[1] * t->ne[2]);
}

} // namespace

Status pool_1d(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const bool is_max = op_i32(node, 0) == GGML_OP_POOL_MAX;
    const int64_t k = op_i32(node, 1), s = op_i32(node, 2), p = op_i32(node, 3);
    const int64_t IW = src->ne[0], OW = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), grain_for(OW * k), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            int64_t i1, i2, i3;
            split(node, r, i1, i2, i3);
            for (int64_t o = 0; o < OW; ++o) {
                float acc = is_max ? -FLT_MAX : 0.0f;
                int count = 0;
                for (int64_t j = o * s - p, e = j + k; j < e; ++j) {
                    if (j < 0 || j >= IW) continue;
                    const float v = load_f(src->type, at(src, j, i1, i2, i3));
                    acc = is_max ? std::max(v, acc) : acc + v;
                    ++count;
                }
                if (!is_max) acc = count > 0 ? acc / float(count) : 0.0f;
                out(node, o, i1, i2, i3) = acc;
            }
        }
    });
    return true;
}

Status pool_2d(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const bool is_max = op_i32(node, 0) == GGML_OP_POOL_MAX;
    const int64_t k0 = op_i32(node, 1), k1 = op_i32(node, 2), s0 = op_i32(node, 3), s1 = op_i32(node, 4);
    const int64_t p0 = op_i32(node, 5), p1 = op_i32(node, 6);
    const int64_t IW = src->ne[0], IH = src->ne[1], OW = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), grain_for(OW * k0 * k1), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            int64_t oy, i2, i3;
            split(node, r, oy, i2, i3);
            for (int64_t ox = 0; ox < OW; ++ox) {
                float acc = is_max ? -FLT_MAX : 0.0f;
                for (int64_t y = oy * s1 - p1; y < oy * s1 - p1 + k1; ++y) {
                    if (y < 0 || y >= IH) continue;
                    for (int64_t x = ox * s0 - p0; x < ox * s0 - p0 + k0; ++x) {
                        if (x < 0 || x >= IW) continue;
                        const float v = load_f(src->type, at(src, x, y, i2, i3));
                        acc = is_max ? std::max(v, acc) : acc + v;
                    }
                }
                if (!is_max) acc /= float(k0 * k1);
                out(node, ox, oy, i2, i3) = acc;
            }
        }
    });
    return true;
}

Status upscale(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const upscale::Params p = upscale::params_of(node, op_i32(node, 0));
    const int64_t W = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), grain_for(W * 4), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            int64_t i1, i2, i3;
            split(node, r, i1, i2, i3);
            const int64_t s2 = upscale::nearest(i2, p.sf[2]), s3 = upscale::nearest(i3, p.sf[3]);
            const auto px = [&](int64_t x, int64_t y) { return *reinterpret_cast<const float *>(at(src, x, y, s2, s3)); };
            for (int64_t i0 = 0; i0 < W; ++i0) out(node, i0, i1, i2, i3) = upscale::sample(p, i0, i1, px);
        }
    });
    return true;
}

Status pad(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const int64_t lp[4] = {op_i32(node, 0), op_i32(node, 2), op_i32(node, 4), op_i32(node, 6)};
    const bool circular = op_i32(node, 8) != 0;
    const int64_t W = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), grain_for(W), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            int64_t i[4];
            split(node, r, i[1], i[2], i[3]);
            int64_t si[4];
            bool inside = true;
            for (int d = 1; d < 4; ++d) {
                si[d] = circular ? wrap(i[d] - lp[d], src->ne[d]) : i[d] - lp[d];
                inside = inside && si[d] >= 0 && si[d] < src->ne[d];
            }
            for (int64_t i0 = 0; i0 < W; ++i0) {
                const int64_t s0 = circular ? wrap(i0 - lp[0], src->ne[0]) : i0 - lp[0];
                const bool in = inside && s0 >= 0 && s0 < src->ne[0];
                out(node, i0, i[1], i[2], i[3]) =
                    in ? *reinterpret_cast<const float *>(at(src, s0, si[1], si[2], si[3])) : 0.0f;
            }
        }
    });
    return true;
}

Status pad_reflect_1d(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const int64_t p0 = op_i32(node, 0);
    const int64_t n = src->ne[0], W = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), grain_for(W), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            int64_t i1, i2, i3;
            split(node, r, i1, i2, i3);
            for (int64_t i0 = 0; i0 < W; ++i0) {
                int64_t j = i0 - p0;               // index into the source row
                if (j < 0) j = -j;                 // mirrored about element 0
                if (j >= n) j = 2 * (n - 1) - j;   // mirrored about element n - 1
                out(node, i0, i1, i2, i3) = *reinterpret_cast<const float *>(at(src, j, i1, i2, i3));
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
