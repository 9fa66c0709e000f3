// The rotation of ROPE on the CUDA device, shared by rope.cu's kernels and
// the mat-vec epilogue that rotates Q and K as the products leave the kernel
// (RowRope, mul_mat.cuh): one definition of the angle and of the rotation,
// so a fused launch computes the bits the ROPE kernel would.
#pragma once

#include "ggml.h"
#include "kernels/common/rope.h"
#include "kernels/cuda/common.cuh"

namespace standin::kernels::cuda {

// A ROPE / ROPE_BACK node's rotation as the kernels take it (rope_args_of).
struct RopeArgs {
    num::RopeParams rp;
    float corr[2];
    float theta_scale;
    float sin_sign;
    bool  copy_rest;  // dst is not src: channels outside the window are copied
};

// The cache rows of a fused SET_ROWS: row i2 of the rotated tensor (all its
// heads, ne0 * ne1 values) goes to cache row idx[i2]; none when d is null.
struct CacheOut {
    char *       d = nullptr;
    int64_t      row_nb = 0;   // bytes between cache rows
    int64_t      rows = 0;     // cache rows (an index outside is skipped, as SET_ROWS does)
    int          type = 0;     // F32 or F16
    const char * idx = nullptr;
    int64_t      idx_nb = 0;
    bool         idx64 = true;
};

// Where element i0 of head i1 at position i2 goes in the cache; null: nowhere.
__device__ __forceinline__ char * cache_at(const CacheOut & co, int64_t i0, int64_t i1, int64_t i2, int64_t ne0) {
    if (co.d == nullptr) return nullptr;
    const char * p = co.idx + i2 * co.idx_nb;
    const int64_t row = co.idx64 ? *reinterpret_cast<const int64_t *>(p) : int64_t(*reinterpret_cast<const int32_t *>(p));
    if (row < 0 || row >= co.rows) return nullptr;
    return co.d + row * co.row_nb + (i1 * ne0 + i0) * (co.type == GGML_TYPE_F32 ? 4 : 2);
}

// The rotation's parameters from a ROPE / ROPE_BACK node; false for what the
// support predicate (op_table.cpp) refuses.
bool rope_args_of(const ggml_tensor * node, RopeArgs & ra);

// The cache rows a SET_ROWS writes (its destination, indices and type).
CacheOut cache_out_of(const ggml_tensor * set_rows);

// Pairs of one row: n_dims / 2, or n_dims in VISION mode (all of dim 0).
__host__ __device__ inline int64_t rope_pairs(const num::RopeParams & rp) {
    return rp.mode == num::kRopeVision ? rp.n_dims : rp.n_dims / 2;
}

// cos and sin (times the sign) of pair k at position i2: the angle is the
// position multiplied by theta_scale k times in sequence (or replayed per
// section in VISION mode), the float operations of rope_cache_fill.
__device__ __forceinline__ float2 pair_cos_sin(const RopeArgs & ra, const int32_t * pos, int64_t i2, int64_t ne2,
                                               const float * ff, int k) {
    const num::RopeParams & rp = ra.rp;
    float theta;
    if (rp.mode == num::kRopeVision) {
        const float p[4] = {float(pos[i2]), float(pos[i2 + ne2]), float(pos[i2 + 2 * ne2]), float(pos[i2 + 3 * ne2])};
        theta = num::rope_vision_theta(rp, p, ra.theta_scale, k);
    } else {
        int stream = 0;
        if (num::rope_is_mrope(rp.mode)) {
            const int sect_dims = rp.sections[0] + rp.sections[1] + rp.sections[2] + rp.sections[3];
            stream = num::rope_mrope_stream(k % sect_dims, rp.sections, rp.mode == num::kRopeImrope);
        }
        theta = float(pos[i2 + ne2 * stream]);
        for (int j = 0; j < k; ++j) theta *= ra.theta_scale;
    }
    const float f = ff != nullptr ? ff[k] : 1.0f;
    float c, s;
    num::rope_yarn(theta / f, rp.freq_scale, ra.corr, 2 * k, rp.ext_factor, rp.attn_factor, &c, &s);
    return make_float2(c, s * ra.sin_sign);
}

// The rotated pair (x0, x1) by cs = (cos, sin): x0 c - x1 s and x0 s + x1 c,
// each with its one fused multiply-add spelled out, so that every kernel
// rounds them alike (left to the compiler, the contraction may differ).
__device__ __forceinline__ float rope_first(float x0, float x1, float2 cs) {
    return fmaf(x0, cs.x, -__fmul_rn(x1, cs.y));
}
__device__ __forceinline__ float rope_second(float x0, float x1, float2 cs) {
    return fmaf(x0, cs.y, __fmul_rn(x1, cs.x));
}

} // namespace standin::kernels::cuda
