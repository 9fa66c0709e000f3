// ROPE and ROPE_BACK (inverse rotation) on the CUDA device, as
// kernels/host/rope.cpp: channel pairs of each row of src0 are rotated by
// angles from the row's position (src1, I32: one per index of dim 2, or four
// per index for MROPE / IMROPE), optional frequency factors (src2, F32) and
// YaRN scaling, with the numerics of kernels/common/rope.h. Modes: NORMAL
// (pairs i, i+1), NEOX (i, i + n_dims/2), MROPE / IMROPE (NEOX pairing,
// section-wise positions). VISION is left to the host (its per-section angle
// restarts are not mirrored here; the predicate refuses it). Channels outside
// the rotated window are copied. F32 or F16 rows (dst has src0's type),
// contiguous in dim 0 per the predicate (addressed through nb[0] anyway).
//
// One block per (i2, i3) and group of heads: its threads first build the
// cos/sin cache of that position in shared memory, then rotate the group's
// heads (dim 1). Prompts have positions enough to fill the GPU with one group
// per position; a decoded token has one position, whose heads are then spread
// over blocks of about kBlock pairs each. Pair k's angle is
// the position multiplied by theta_scale k times in sequence, the same float
// operations as rope_cache_fill, so the angles equal the host's and ggml's
// (a closed form pos * theta_scale^k would drift by many ulps for long
// contexts).
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o ROPE (ROPE_BACK)
#include "kernels/common/rope.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/limits.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;
constexpr int64_t kFillBlocks = 256;  // positions below this split their heads over blocks

struct RopeArgs {
    num::RopeParams rp;
    float corr[2];
    float theta_scale;
    float sin_sign;
    bool  copy_rest;  // dst is not src: channels outside the window are copied
};

// cache[2k], cache[2k+1] = cos, sin of pair k (k < n_dims/2).
__device__ void fill_cache(const RopeArgs & ra, const int32_t * pos, int64_t i2, int64_t ne2, const float * ff,
                           float * cache) {
    const num::RopeParams & rp = ra.rp;
    const bool multi = num::rope_is_mrope(rp.mode);
    const int sect_dims = rp.sections[0] + rp.sections[1] + rp.sections[2] + rp.sections[3];
    for (int k = threadIdx.x; k < rp.n_dims / 2; k += blockDim.x) {
        int stream = 0;
        if (multi) {
            stream = num::rope_mrope_stream(k % sect_dims, rp.sections, rp.mode == num::kRopeImrope);
        }
        float theta = float(pos[i2 + ne2 * stream]);
        for (int j = 0; j < k; ++j) theta *= ra.theta_scale;
        const float f = ff != nullptr ? ff[k] : 1.0f;
        float c, s;
        num::rope_yarn(theta / f, rp.freq_scale, ra.corr, 2 * k, rp.ext_factor, rp.attn_factor, &c, &s);
        cache[2 * k]     = c;
        cache[2 * k + 1] = s * ra.sin_sign;
    }
}

__global__ void rope_kernel(Shape d, Shape a, char * dd, const char * ad, const int32_t * pos, const float * ff,
                            RopeArgs ra) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    extern __shared__ float cache[];
    const num::RopeParams & rp = ra.rp;
    const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2], ne3 = a.ne[3];
    const int64_t npairs = rp.n_dims / 2;
    const bool normal = rp.mode == num::kRopeNormal;
    const int64_t per_group = (ne1 + gridDim.z - 1) / gridDim.z;  // heads per block
    const int64_t h0 = int64_t(blockIdx.z) * per_group, h1 = h0 + per_group < ne1 ? h0 + per_group : ne1;
    for (int64_t i3 = blockIdx.y; i3 < ne3; i3 += gridDim.y) {
        for (int64_t i2 = blockIdx.x; i2 < ne2; i2 += gridDim.x) {
            __syncthreads();  // the previous position's cache is no longer read
            fill_cache(ra, pos, i2, ne2, ff, cache);
            __syncthreads();
            for (int64_t t = h0 * npairs + threadIdx.x; t < h1 * npairs; t += blockDim.x) {
                const int64_t i1 = t / npairs, k = t % npairs;
                const char * x = row_at(ad, a, i1, i2, i3);
                char * y = row_at(dd, d, i1, i2, i3);
                const int64_t ic = rp.n_offs + (normal ? 2 * k : k);
                const int64_t off = normal ? 1 : npairs;
                const float c = cache[2 * k], s = cache[2 * k + 1];
                const float x0 = load_f(a.type, x + ic * a.nb[0]);
                const float x1 = load_f(a.type, x + (ic + off) * a.nb[0]);
                store_f(d.type, y + ic * d.nb[0], x0 * c - x1 * s);
                store_f(d.type, y + (ic + off) * d.nb[0], x0 * s + x1 * c);
            }
            if (ra.copy_rest) {
                const int64_t rest = ne0 - rp.n_dims;
                for (int64_t t = h0 * rest + threadIdx.x; t < h1 * rest; t += blockDim.x) {
                    const int64_t i1 = t / rest, j = t % rest;
                    const int64_t i0 = j < rp.n_offs ? j : j + rp.n_dims;
                    store_f(d.type, row_at(dd, d, i1, i2, i3) + i0 * d.nb[0],
                            load_f(a.type, row_at(ad, a, i1, i2, i3) + i0 * a.nb[0]));
                }
            }
        }
    }
}

} // namespace

Status rope(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    if ((node->type != GGML_TYPE_F32 && node->type != GGML_TYPE_F16) || src->type != node->type) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    RopeArgs ra;
    ra.rp = num::rope_params_from(reinterpret_cast<const int32_t *>(node->op_params));
    if (ra.rp.mode == num::kRopeVision || ra.rp.n_dims <= 0 || ra.rp.n_dims % 2 != 0) {
        return false;
    }
    num::rope_yarn_corr_dims(ra.rp.n_dims, ra.rp.n_ctx_orig, ra.rp.freq_base, ra.rp.beta_fast, ra.rp.beta_slow,
                             ra.corr);
    ra.theta_scale = num::rope_theta_scale(ra.rp.freq_base, ra.rp.n_dims);
    ra.sin_sign = node->op == GGML_OP_ROPE_BACK ? -1.0f : 1.0f;
    bool same = node->data == src->data;
    for (int i = 0; i < 4; ++i) same = same && node->nb[i] == src->nb[i];
    ra.copy_rest = !same;
    if (ggml_nelements(node) == 0) {
        return true;
    }
    const int64_t positions = src->ne[2] * src->ne[3], pairs = src->ne[1] * (ra.rp.n_dims / 2);
    int64_t groups = 1;
    if (positions < kFillBlocks) {
        groups = (pairs + kBlock - 1) / kBlock;
        groups = groups < src->ne[1] ? groups : src->ne[1];
        groups = groups > 0 ? groups : 1;
    }
    const dim3 grid(unsigned(src->ne[2] < limits::kGridX ? src->ne[2] : limits::kGridX), grid_yz(src->ne[3]),
                    unsigned(groups < limits::kGridYZ ? groups : limits::kGridYZ));
    const size_t smem = size_t(ra.rp.n_dims) * sizeof(float);
    if (int64_t(smem) > limits::kRopeCacheBytes) return false;  // the CUDA predicate refuses these
    launch(rope_kernel, dim3(grid), dim3(kBlock), smem, stream_of(stream), shape_of(node), shape_of(src), static_cast<char *>(node->data), static_cast<const char *>(src->data),
        static_cast<const int32_t *>(node->src[1]->data),
        node->src[2] != nullptr ? static_cast<const float *>(node->src[2]->data) : nullptr, ra);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
