// ROPE and ROPE_BACK (inverse rotation) on the CUDA device, as
// kernels/host/rope.cpp: channel pairs of each row of src0 are rotated by
// angles from the row's position (src1, I32: one per index of dim 2, or four
// per index for MROPE / IMROPE), optional frequency factors (src2, F32) and
// YaRN scaling, with the numerics of kernels/common/rope.h. Modes: NORMAL
// (pairs i, i+1), NEOX (i, i + n_dims/2), MROPE / IMROPE (NEOX pairing,
// section-wise positions), VISION (all of dim 0, pairs i, i + n_dims; each
// section restarts its angle, replayed per pair by rope_vision_theta).
// Channels outside the rotated window are copied. F32 or F16 rows (dst has
// src0's type), contiguous in dim 0 per the predicate (addressed through
// nb[0] anyway).
//
// Prompts: one block per (i2, i3): its threads first build the cos/sin cache
// of that position in shared memory, then rotate its heads (dim 1). A few
// positions (decoding) take rope_pair_kernel instead, a thread per pair that
// computes its own angle (no barrier between the loads and the rotation).
// Pair k's angle is
// the position multiplied by theta_scale k times in sequence, the same float
// operations as rope_cache_fill, so the angles equal the host's and ggml's
// (a closed form pos * theta_scale^k would drift by many ulps for long
// contexts).
//
// Fused with the SET_ROWS that stores the rotated rows into a KV cache
// (fusion.cpp, rope_set_rows_ok): each value is also written, converted to
// the cache's type, at its cache row, so the cache write costs no launch of
// its own. The rope's own result is still written, for any other reader,
// except in decoding's rope_qkv launch when the graph's use counts show the
// cache write is its only reader (ggml may have put it over Q's source).
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o ROPE (ROPE_BACK), and
// ROPE_SET_ROWS (the fused pair)
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/limits.h"
#include "kernels/cuda/rope.cuh"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;
constexpr int64_t kFillBlocks = 256;  // positions below this take rope_pair_kernel

// Stores v at y, and into the cache when there is one.
__device__ __forceinline__ void store_both(const Shape & d, char * y, const CacheOut & co, int64_t i0, int64_t i1,
                                           int64_t i2, float v) {
    store_f(d.type, y + i0 * d.nb[0], v);
    if (char * c = cache_at(co, i0, i1, i2, d.ne[0])) store_f(co.type, c, v);
}

// cache[2k], cache[2k+1] = cos, sin of pair k (k < rope_pairs).
__device__ void fill_cache(const RopeArgs & ra, const int32_t * pos, int64_t i2, int64_t ne2, const float * ff,
                           float * cache) {
    for (int k = threadIdx.x; k < rope_pairs(ra.rp); k += blockDim.x) {
        const float2 cs = pair_cos_sin(ra, pos, i2, ne2, ff, k);
        cache[2 * k]     = cs.x;
        cache[2 * k + 1] = cs.y;
    }
}

__global__ void rope_kernel(Shape d, Shape a, char * dd, const char * ad, const int32_t * pos, const float * ff,
                            RopeArgs ra, CacheOut co) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    extern __shared__ float cache[];
    const num::RopeParams & rp = ra.rp;
    const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2], ne3 = a.ne[3];
    const int64_t npairs = rope_pairs(rp), rotated = 2 * npairs;  // channels rotated, from n_offs
    const bool normal = rp.mode == num::kRopeNormal;
    for (int64_t i3 = blockIdx.y; i3 < ne3; i3 += gridDim.y) {
        for (int64_t i2 = blockIdx.x; i2 < ne2; i2 += gridDim.x) {
            __syncthreads();  // the previous position's cache is no longer read
            fill_cache(ra, pos, i2, ne2, ff, cache);
            __syncthreads();
            for (int64_t t = threadIdx.x; t < ne1 * npairs; t += blockDim.x) {
                const int64_t i1 = t / npairs, k = t % npairs;
                const char * x = row_at(ad, a, i1, i2, i3);
                char * y = row_at(dd, d, i1, i2, i3);
                const int64_t ic = rp.n_offs + (normal ? 2 * k : k);
                const int64_t off = normal ? 1 : npairs;
                const float x0 = load_f(a.type, x + ic * a.nb[0]);
                const float x1 = load_f(a.type, x + (ic + off) * a.nb[0]);
                const float2 cs = make_float2(cache[2 * k], cache[2 * k + 1]);
                store_both(d, y, co, ic, i1, i2, rope_first(x0, x1, cs));
                store_both(d, y, co, ic + off, i1, i2, rope_second(x0, x1, cs));
            }
            if (ra.copy_rest || co.d != nullptr) {  // in place, the cache still needs the rest
                const int64_t rest = ne0 - rotated;
                for (int64_t t = threadIdx.x; t < ne1 * rest; t += blockDim.x) {
                    const int64_t i1 = t / rest, j = t % rest;
                    const int64_t i0 = j < rp.n_offs ? j : j + rotated;
                    store_both(d, row_at(dd, d, i1, i2, i3), co, i0, i1, i2,
                               load_f(a.type, row_at(ad, a, i1, i2, i3) + i0 * a.nb[0]));
                }
            }
        }
    }
}

// Decoding (few positions): a thread per rotated pair or copied channel of
// a head, 32-bit indices (the launch checks they fit). Each thread works out
// its own angle instead of sharing a block's cos/sin cache, so nothing waits
// on a barrier: the position, the pair's two values and the cache row index
// are loaded together after the wait, and the kernel is about one memory
// round trip long (the cached version was two, plus the cache's fill).
// The kernel takes a list of such jobs (RopeJobs): decoding's Q rotation,
// K rotation with its cache write, and V's cache write (a job with no pairs:
// every channel copied, and no result of its own) go in one launch
// (rope_qkv); a lone ROPE is a list of one.
struct RopeJob {
    Shape          d, a;
    char *         dd;  // the job's own result; null: cache rows only
    const char *   ad;
    const int32_t * pos;
    const float *  ff;
    RopeArgs       ra;
    CacheOut       co;
    int            per_head;  // threads per head: rotated pairs, then copied channels
    int            threads;   // per_head * heads * positions
};

constexpr int kMaxJobs = 3;
struct RopeJobs {
    RopeJob job[kMaxJobs];
    int     n;
    int     total;  // threads of all jobs
};

__global__ void rope_pair_kernel(const __grid_constant__ RopeJobs jobs) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    for (int t = int(blockIdx.x * blockDim.x + threadIdx.x); t < jobs.total; t += int(gridDim.x * blockDim.x)) {
        int k = 0, tt = t;
        while (k + 1 < jobs.n && tt >= jobs.job[k].threads) tt -= jobs.job[k++].threads;
        const RopeJob & jb = jobs.job[k];
        const num::RopeParams & rp = jb.ra.rp;
        const Shape & a = jb.a;
        const int ne1 = int(a.ne[1]), ne2 = int(a.ne[2]);
        const int npairs = int(rope_pairs(rp)), rotated = 2 * npairs;
        const bool normal = rp.mode == num::kRopeNormal;
        const int j = tt % jb.per_head, r = tt / jb.per_head;
        const int i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char * x = row_at(jb.ad, a, i1, i2, i3);
        char * y = jb.dd != nullptr ? row_at(jb.dd, jb.d, i1, i2, i3) : nullptr;
        // The cache row of this position (null: none, or an index outside the cache).
        const CacheOut & co = jb.co;
        char * crow = nullptr;
        if (co.d != nullptr) {
            const char * ip = co.idx + int64_t(i2) * co.idx_nb;
            const int64_t row = co.idx64 ? *reinterpret_cast<const int64_t *>(ip) : *reinterpret_cast<const int32_t *>(ip);
            if (row >= 0 && row < co.rows) {
                crow = co.d + row * co.row_nb + int64_t(i1) * a.ne[0] * (co.type == GGML_TYPE_F32 ? 4 : 2);
            }
        }
        const auto put = [&](int i0, float v) {
            if (y != nullptr) store_f(jb.d.type, y + i0 * jb.d.nb[0], v);
            if (crow != nullptr) store_f(co.type, crow + i0 * (co.type == GGML_TYPE_F32 ? 4 : 2), v);
        };
        if (j < npairs) {
            const int ic = rp.n_offs + (normal ? 2 * j : j), off = normal ? 1 : npairs;
            const float x0 = load_f(a.type, x + ic * a.nb[0]);
            const float x1 = load_f(a.type, x + (ic + off) * a.nb[0]);
            const float2 cs = pair_cos_sin(jb.ra, jb.pos, i2, ne2, jb.ff, j);
            put(ic, rope_first(x0, x1, cs));
            put(ic + off, rope_second(x0, x1, cs));
        } else {
            const int jr = j - npairs, i0 = jr < rp.n_offs ? jr : jr + rotated;
            put(i0, load_f(a.type, x + i0 * a.nb[0]));
        }
    }
}

} // namespace

bool rope_args_of(const ggml_tensor * node, RopeArgs & ra) {
    const ggml_tensor * src = node->src[0];
    if ((node->type != GGML_TYPE_F32 && node->type != GGML_TYPE_F16) || src->type != node->type) {
        return false;
    }
    ra.rp = num::rope_params_from(reinterpret_cast<const int32_t *>(node->op_params));
    if (ra.rp.n_dims <= 0 || ra.rp.n_dims % 2 != 0 ||
        (ra.rp.mode == num::kRopeVision && (2 * int64_t(ra.rp.n_dims) != src->ne[0] || ra.rp.n_offs != 0))) {
        return false;
    }
    num::rope_yarn_corr_dims(ra.rp.n_dims, ra.rp.n_ctx_orig, ra.rp.freq_base, ra.rp.beta_fast, ra.rp.beta_slow,
                             ra.corr);
    ra.theta_scale = num::rope_theta_scale(ra.rp.freq_base, ra.rp.n_dims);
    ra.sin_sign = node->op == GGML_OP_ROPE_BACK ? -1.0f : 1.0f;
    bool same = node->data == src->data;
    for (int i = 0; i < 4; ++i) same = same && node->nb[i] == src->nb[i];
    ra.copy_rest = !same;
    return true;
}

namespace {

// A ROPE node (with the cache rows of a fused SET_ROWS, co) as a pair-kernel
// job; false when it is not a decoding-sized one (the per-position kernel's).
bool rope_job_of(ggml_tensor * node, const RopeArgs & ra, const CacheOut & co, RopeJob & jb) {
    const ggml_tensor * src = node->src[0];
    const int64_t positions = src->ne[2] * src->ne[3];
    const int64_t rest = (ra.copy_rest || co.d != nullptr) ? src->ne[0] - 2 * rope_pairs(ra.rp) : 0;
    const int64_t threads = (rope_pairs(ra.rp) + rest) * src->ne[1] * positions;
    if (positions >= kFillBlocks || threads >= (int64_t(1) << 30) || ggml_nelements(node) >= (int64_t(1) << 30)) {
        return false;
    }
    jb.d = shape_of(node);
    jb.a = shape_of(src);
    jb.dd = static_cast<char *>(node->data);
    jb.ad = static_cast<const char *>(src->data);
    jb.pos = static_cast<const int32_t *>(node->src[1]->data);
    jb.ff = node->src[2] != nullptr ? static_cast<const float *>(node->src[2]->data) : nullptr;
    jb.ra = ra;
    jb.co = co;
    jb.per_head = int(rope_pairs(ra.rp) + rest);
    jb.threads = int(threads);
    return true;
}

void launch_jobs(rt::cuda::CudaStream & stream, RopeJobs & jobs) {
    constexpr int kPairBlock = 128;  // more blocks (SMs) for a decoded token's few heads
    jobs.total = 0;
    for (int k = 0; k < jobs.n; ++k) jobs.total += jobs.job[k].threads;
    const int64_t blocks = (int64_t(jobs.total) + kPairBlock - 1) / kPairBlock;
    launch(rope_pair_kernel, dim3(unsigned(std::max<int64_t>(1, std::min<int64_t>(blocks, limits::kGridX)))),
           dim3(kPairBlock), 0, stream_of(stream), jobs);
    SI_CUDA_LAUNCH_CHECK();
}

} // namespace

CacheOut cache_out_of(const ggml_tensor * set_rows) {
    const ggml_tensor * idx = set_rows->src[1];
    CacheOut co;
    co.d = static_cast<char *>(set_rows->data);
    co.row_nb = int64_t(set_rows->nb[1]);
    co.rows = set_rows->ne[1];
    co.type = set_rows->type;
    co.idx = static_cast<const char *>(idx->data);
    co.idx_nb = int64_t(idx->nb[0]);
    co.idx64 = idx->type == GGML_TYPE_I64;
    return co;
}

namespace {

Status rope_launch(rt::cuda::CudaStream & stream, ggml_tensor * node, const CacheOut & co) {
    const ggml_tensor * src = node->src[0];
    RopeArgs ra;
    if (!rope_args_of(node, ra)) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    if (ggml_nelements(node) == 0) {
        return true;
    }
    RopeJobs jobs;
    jobs.n = 1;
    if (rope_job_of(node, ra, co, jobs.job[0])) {
        launch_jobs(stream, jobs);
        return true;
    }
    const dim3 grid(unsigned(src->ne[2] < limits::kGridX ? src->ne[2] : limits::kGridX), grid_yz(src->ne[3]), 1);
    const size_t smem = size_t(2 * rope_pairs(ra.rp)) * sizeof(float);
    if (int64_t(smem) > limits::kRopeCacheBytes) return false;  // the CUDA predicate refuses these
    launch(rope_kernel, dim3(grid), dim3(kBlock), smem, stream_of(stream), shape_of(node), shape_of(src), static_cast<char *>(node->data), static_cast<const char *>(src->data),
        static_cast<const int32_t *>(node->src[1]->data),
        node->src[2] != nullptr ? static_cast<const float *>(node->src[2]->data) : nullptr, ra, co);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace

Status rope(rt::cuda::CudaStream & stream, ggml_tensor * node) { return rope_launch(stream, node, CacheOut{}); }

bool rope_set_rows_ok(const ggml_tensor * rope, const ggml_tensor * set_rows) {
    if (rope->op != GGML_OP_ROPE || set_rows->op != GGML_OP_SET_ROWS || rope->ne[3] != 1 ||
        !ggml_is_contiguous(rope)) {
        return false;
    }
    const ggml_tensor * v = set_rows->src[0];
    const ggml_tensor * idx = set_rows->src[1];
    // The whole rotated tensor, one row per position, as the cache's rows.
    const bool whole_view = v != nullptr && v->view_src == rope && v->view_offs == 0 && ggml_is_contiguous(v) &&
                            v->ne[0] == rope->ne[0] * rope->ne[1] && v->ne[1] == rope->ne[2] && v->ne[2] == 1 &&
                            v->ne[3] == 1;
    return whole_view && idx != nullptr && (idx->type == GGML_TYPE_I64 || idx->type == GGML_TYPE_I32) &&
           idx->ne[0] == v->ne[1] && (set_rows->type == GGML_TYPE_F32 || set_rows->type == GGML_TYPE_F16) &&
           set_rows->ne[0] == v->ne[0] && set_rows->nb[0] == ggml_type_size(set_rows->type) &&
           set_rows->ne[2] == 1 && set_rows->ne[3] == 1;
}

Status rope_set_rows(rt::cuda::CudaStream & stream, ggml_tensor * rope, ggml_tensor * set_rows) {
    return rope_launch(stream, rope, cache_out_of(set_rows));
}

namespace {

// A SET_ROWS that the pair kernel can run as a job with no pairs: rows of a
// 2-D F32 / F16 source, contiguous within a row, to rows of a cache of the
// same width; decoding-sized (as rope_job_of's bounds).
bool set_rows_copy_ok(const ggml_tensor * set_rows) {
    if (set_rows->op != GGML_OP_SET_ROWS) {
        return false;
    }
    const ggml_tensor * v = set_rows->src[0];
    const ggml_tensor * idx = set_rows->src[1];
    return v != nullptr && idx != nullptr && (v->type == GGML_TYPE_F32 || v->type == GGML_TYPE_F16) &&
           v->nb[0] == ggml_type_size(v->type) && v->ne[2] == 1 && v->ne[3] == 1 && v->ne[1] < kFillBlocks &&
           v->ne[0] * v->ne[1] < (int64_t(1) << 30) && (idx->type == GGML_TYPE_I64 || idx->type == GGML_TYPE_I32) &&
           idx->ne[0] == v->ne[1] && (set_rows->type == GGML_TYPE_F32 || set_rows->type == GGML_TYPE_F16) &&
           set_rows->ne[0] == v->ne[0] && set_rows->nb[0] == ggml_type_size(set_rows->type) && set_rows->ne[2] == 1 &&
           set_rows->ne[3] == 1;
}

RopeJob copy_job_of(const ggml_tensor * set_rows) {
    const ggml_tensor * v = set_rows->src[0];
    RopeJob jb = {};
    // One "head" of the whole row per position: position i2 is source row i2.
    jb.a.ne[0] = v->ne[0];
    jb.a.ne[1] = 1;
    jb.a.ne[2] = v->ne[1];
    jb.a.ne[3] = 1;
    jb.a.nb[0] = int64_t(v->nb[0]);
    jb.a.nb[1] = int64_t(v->nb[1]);
    jb.a.nb[2] = int64_t(v->nb[1]);
    jb.a.nb[3] = int64_t(v->nb[1]) * v->ne[1];
    jb.a.type = int(v->type);
    jb.ad = static_cast<const char *>(v->data);
    jb.ra.rp = num::RopeParams{};  // no pairs: every channel is copied
    jb.co = cache_out_of(set_rows);
    jb.per_head = int(v->ne[0]);
    jb.threads = int(v->ne[0] * v->ne[1]);
    return jb;
}

} // namespace

bool rope_qkv_ok(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * k_set, const ggml_tensor * v_set,
                 bool k_cache_only) {
    if (q->op != GGML_OP_ROPE || !rope_set_rows_ok(k, k_set) || !set_rows_copy_ok(v_set)) {
        return false;
    }
    RopeArgs ra;
    RopeJob jb;
    if (!rope_args_of(q, ra) || !rope_job_of(const_cast<ggml_tensor *>(q), ra, CacheOut{}, jb) || !rope_args_of(k, ra) ||
        !rope_job_of(const_cast<ggml_tensor *>(k), ra, cache_out_of(k_set), jb)) {
        return false;
    }
    // One launch runs the three at once: nothing one writes may be read (or
    // written) by another. K's rotated result is not written when only its
    // cache write reads it (ggml may well have put it over Q's source).
    const ggml_tensor * writes[] = {q, k_set, v_set, k};
    const int n_writes = k_cache_only ? 3 : 4;
    const ggml_tensor * reads[] = {q->src[0], q->src[1], q->src[2], k->src[0], k->src[1], k->src[2], k_set->src[1],
                                   v_set->src[0], v_set->src[1]};
    for (int w = 0; w < n_writes; ++w) {
        // A rope in place reads what it writes, each thread its own pair.
        const ggml_tensor * own = writes[w]->op == GGML_OP_ROPE ? writes[w]->src[0] : nullptr;
        for (const ggml_tensor * r : reads) {
            if (r != nullptr && r != own && overlaps(writes[w], r)) return false;
        }
        for (int o = w + 1; o < n_writes; ++o) {
            if (overlaps(writes[w], writes[o])) return false;
        }
    }
    return true;
}

Status rope_qkv(rt::cuda::CudaStream & stream, ggml_tensor * q, ggml_tensor * k, ggml_tensor * k_set,
                ggml_tensor * v_set, bool k_cache_only) {
    RopeJobs jobs;
    jobs.n = 3;
    RopeArgs qa, ka;
    if (!rope_args_of(q, qa) || !rope_args_of(k, ka) || !rope_job_of(q, qa, CacheOut{}, jobs.job[0]) ||
        !rope_job_of(k, ka, cache_out_of(k_set), jobs.job[1])) {
        return false;  // rope_qkv_ok refuses these
    }
    if (k_cache_only) jobs.job[1].dd = nullptr;
    jobs.job[2] = copy_job_of(v_set);
    launch_jobs(stream, jobs);
    return true;
}

} // namespace standin::kernels::cuda
