// ROPE (and ROPE_BACK, its inverse rotation): rotates channel pairs of each
// row of src0 by angles from the row's position (src1, I32, one entry per
// index of dim 2, or four per index for the multi-section modes), optional
// frequency factors (src2, F32) and YaRN scaling; see kernels/common/rope.h
// for the angle numerics. Modes: NORMAL (pairs i, i+1), NEOX (i, i+n/2),
// MROPE / IMROPE (NEOX pairing, section-wise positions), VISION (all of dim 0,
// pairs i, i+n_dims). Channels outside the rotated window are copied.
// F32 or F16 rows (dst has src0's type), contiguous in dim 0, any row strides;
// in-place is fine because each pair is read before it is written.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o ROPE (ROPE_BACK)
// Time: test-backend-ops perf -b STANDIN_HOST0 -o ROPE
#include <algorithm>
#include <vector>

#include "kernels/common/rope.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/simd_math.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

constexpr int64_t kMinElemsPerTask = 8192;

// Rotates the pairs (x[ic], x[ic + off]) with ic = i0 / div for
// i0 = 0, 2, .. < n; cache holds cos/sin at [i0], [i0 + 1].
inline void rotate(int64_t n, int64_t off, int div, const float * cache, const float * x, float * y) {
    for (int64_t i0 = 0; i0 < n; i0 += 2) {
        const int64_t ic = i0 / div;
        const float c = cache[i0], s = cache[i0 + 1];
        const float x0 = x[ic], x1 = x[ic + off];
        y[ic]       = x0 * c - x1 * s;
        y[ic + off] = x0 * s + x1 * c;
    }
}

void run(rt::host::ThreadPool & pool, ggml_tensor * dst, float sin_sign) {
    const ggml_tensor * src = dst->src[0];
    const int32_t * pos = static_cast<const int32_t *>(dst->src[1]->data);
    const float * ff = dst->src[2] ? static_cast<const float *>(dst->src[2]->data) : nullptr;
    const num::RopeParams rp = num::rope_params_from(reinterpret_cast<const int32_t *>(dst->op_params));

    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const bool vision = rp.mode == num::kRopeVision;
    const bool multi  = num::rope_is_mrope(rp.mode);
    const int64_t ncache = vision ? ne0 : rp.n_dims;
    float corr[2];
    num::rope_yarn_corr_dims(rp.n_dims, rp.n_ctx_orig, rp.freq_base, rp.beta_fast, rp.beta_slow, corr);
    const float theta_scale = num::rope_theta_scale(rp.freq_base, rp.n_dims);
    const int64_t grain = std::max<int64_t>(1, kMinElemsPerTask / std::max<int64_t>(1, ne0));
    const bool f32 = dst->type == GGML_TYPE_F32;

    pool.parallel_for(ggml_nrows(dst), grain, [&](int64_t r0, int64_t r1) {
        std::vector<float> cache(static_cast<size_t>(ncache) + 2);
        // F16 rows go through f32 buffers (8 lanes converted at a time; the
        // round trip is exact for channels that are not rotated).
        std::vector<float> x(static_cast<size_t>(ne0)), y(static_cast<size_t>(ne0));
        int64_t cached_i2 = -1;
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i2 = (r / ne1) % ne2;
            if (i2 != cached_i2) {
                float p[4] = {float(pos[i2]), 0.0f, 0.0f, 0.0f};
                if (multi) {
                    for (int k = 1; k < 4; ++k) p[k] = float(pos[i2 + ne2 * k]);
                }
                num::rope_cache_fill(rp, p, ff, corr, theta_scale, ncache, sin_sign, cache.data());
                cached_i2 = i2;
            }
            // Channels outside the rotated window pass through unchanged:
            // copy the row first, then overwrite the rotated pairs.
            const float * xr = x.data();
            float * yr = y.data();
            if (f32) {
                xr = reinterpret_cast<const float *>(row_ptr(src, r));
                yr = reinterpret_cast<float *>(row_ptr(dst, r));
                if (xr != yr) std::copy_n(xr, ne0, yr);
            } else {
                simd::row_to_f32(src->type, row_ptr(src, r), x.data(), ne0);
                std::copy(x.begin(), x.end(), y.begin());
            }
            if (vision) {
                rotate(ne0, rp.n_dims, 2, cache.data(), xr, yr);
            } else if (rp.mode == num::kRopeNormal) {
                rotate(rp.n_dims, 1, 1, cache.data(), xr + rp.n_offs, yr + rp.n_offs);
            } else {
                rotate(rp.n_dims, rp.n_dims / 2, 2, cache.data(), xr + rp.n_offs, yr + rp.n_offs);
            }
            if (!f32) simd::row_from_f32(dst->type, y.data(), row_ptr(dst, r), ne0);
        }
    });
}

} // namespace

Status rope(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const float sin_sign = node->op == GGML_OP_ROPE_BACK ? -1.0f : 1.0f;
    if (node->type != GGML_TYPE_F32 && node->type != GGML_TYPE_F16) {
        return false;
    }
    run(pool, node, sin_sign);
    return true;
}

} // namespace standin::kernels::host
