// The training ops on the CUDA device, as kernels/host/backward.cpp (same
// formulas, same order of operations, row sums in double where the host takes
// them in double), all F32 (COUNT_EQUAL: I32 in, one I64 out):
//   GET_ROWS_BACK   dst (zeroed) row idx[i] += grad row i, in index order
//   REPEAT_BACK     dst = sum of the repeats of src that REPEAT would copy from dst
//   SILU_BACK       dx = dy * s * (1 + x * (1 - s)), s = sigmoid(x)
//   RMS_NORM_BACK   dx = (dz + x * (-sum(x dz) / (sum(x^2) + n eps))) / rms(x)
//   SOFT_MAX_BACK   dx = scale * y * (dy - dot(y, dy))
//   CROSS_ENTROPY_LOSS       -1/nrows * sum over rows of sum(labels * log_softmax(logits))
//   CROSS_ENTROPY_LOSS_BACK  d/nrows * (softmax(logits) - labels)
//   COUNT_EQUAL     the number of equal elements
//   OPT_STEP_ADAMW / OPT_STEP_SGD  the in-place updates of w (and m, v)
//
// Layout of the work: the elementwise ops (SILU_BACK, REPEAT_BACK, the
// optimizer steps) take one thread per output element with a grid-stride
// loop; the row ops (RMS_NORM_BACK, SOFT_MAX_BACK, both cross-entropy ops) one
// block per row. GET_ROWS_BACK gives each thread one column, which walks the
// indices in order, so rows hit twice are summed in ggml-cpu's order (no
// float atomics). CROSS_ENTROPY_LOSS writes one float per row into scratch and
// sums those in a second launch; COUNT_EQUAL adds integer block counts
// atomically (exact in any order).
//
// SILU_BACK, RMS_NORM_BACK and SOFT_MAX_BACK may run in place (ggml-alloc lets
// dst reuse a source): each element is read and then written by one thread,
// and a row's sums are complete (block_sum's barrier) before any of it is
// written.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o SOFT_MAX_BACK (RMS_NORM_BACK
// REPEAT_BACK GET_ROWS_BACK CROSS_ENTROPY_LOSS CROSS_ENTROPY_LOSS_BACK
// COUNT_EQUAL SILU_BACK OPT_STEP_ADAMW OPT_STEP_SGD): every case passed on the
// H200 (results/h200/summary-38.txt)
#include "kernels/common/op_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;  // threads of the elementwise kernels

// Threads per block of the row kernels: a warp for short rows, up to 256.
int row_threads(int64_t n) { return n >= 1024 ? 256 : (n >= 128 ? 128 : 32); }

__device__ __forceinline__ int64_t grid_stride() { return int64_t(gridDim.x) * blockDim.x; }
__device__ __forceinline__ int64_t first_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }

// --- GET_ROWS_BACK ------------------------------------------------------------------
// dst (zeroed before) row idx[i] += grad row i, for i in index order; one
// thread per column. grad is 2-D (the predicate), its row i at i * nb[1];
// out-of-range indices are skipped, as on the host.
__global__ void get_rows_back_kernel(Shape d, Shape g, char * dd, const char * gd, const int32_t * idx,
                                     int64_t n_idx) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    for (int64_t c = first_index(); c < d.ne[0]; c += grid_stride()) {
        for (int64_t i = 0; i < n_idx; ++i) {
            const int32_t r = idx[i];
            if (r < 0 || r >= d.ne[1]) continue;
            float * out = reinterpret_cast<float *>(dd + r * d.nb[1] + c * d.nb[0]);
            *out += load_f(g.type, gd + i * g.nb[1] + c * g.nb[0]);
        }
    }
}

Status get_rows_back(cudaStream_t st, ggml_tensor * node) {
    const ggml_tensor * grad = node->src[0];
    const ggml_tensor * idx  = node->src[1];
    // dst is one dense F32 array (the predicate): all-zero bytes are 0.0f.
    SI_CUDA_CHECK(cudaMemsetAsync(node->data, 0, ggml_nbytes(node), st));
    const int64_t n_idx = ggml_nelements(idx);
    if (node->ne[0] == 0 || n_idx == 0) return true;
    launch(get_rows_back_kernel, dim3(grid_for(node->ne[0], kBlock)), dim3(kBlock), 0, st, shape_of(node),
           shape_of(grad), static_cast<char *>(node->data), static_cast<const char *>(grad->data),
           static_cast<const int32_t *>(idx->data), n_idx);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

// --- REPEAT_BACK --------------------------------------------------------------------
// dst[c, k1, k2, k3] = sum over the repeats (i0, i1, i2, i3) of
// src[i0 * ne0 + c, i1 * ne1 + k1, i2 * ne2 + k2, i3 * ne3 + k3], summed in
// float from 0 with i0 fastest, the host's order for each element.
__global__ void repeat_back_kernel(Shape d, Shape s, char * dd, const char * sd, int64_t n) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    const int64_t ne0 = d.ne[0], ne1 = d.ne[1], ne2 = d.ne[2], ne3 = d.ne[3];
    const int64_t nr0 = s.ne[0] / ne0, nr1 = s.ne[1] / ne1, nr2 = s.ne[2] / ne2, nr3 = s.ne[3] / ne3;
    for (int64_t k = first_index(); k < n; k += grid_stride()) {
        const int64_t c = k % ne0, r = k / ne0;
        const int64_t k1 = r % ne1, k2 = (r / ne1) % ne2, k3 = r / (ne1 * ne2);
        float acc = 0.0f;
        for (int64_t i3 = 0; i3 < nr3; ++i3) {
            for (int64_t i2 = 0; i2 < nr2; ++i2) {
                for (int64_t i1 = 0; i1 < nr1; ++i1) {
                    const char * row = sd + (i3 * ne3 + k3) * s.nb[3] + (i2 * ne2 + k2) * s.nb[2] +
                                       (i1 * ne1 + k1) * s.nb[1];
                    for (int64_t i0 = 0; i0 < nr0; ++i0) {
                        acc += *reinterpret_cast<const float *>(row + (i0 * ne0 + c) * s.nb[0]);
                    }
                }
            }
        }
        *reinterpret_cast<float *>(row_at(dd, d, k1, k2, k3) + c * d.nb[0]) = acc;
    }
}

Status repeat_back(cudaStream_t st, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    launch(repeat_back_kernel, dim3(grid_for(n, kBlock)), dim3(kBlock), 0, st, shape_of(node),
           shape_of(node->src[0]), static_cast<char *>(node->data), static_cast<const char *>(node->src[0]->data), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

// --- SILU_BACK ----------------------------------------------------------------------
__global__ void silu_back_kernel(Shape d, Shape dy, Shape x, char * dd, const char * dyd, const char * xd, int64_t n) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    for (int64_t k = first_index(); k < n; k += grid_stride()) {
        const float xv = *reinterpret_cast<const float *>(xd + offset_of(x, k));
        const float g  = *reinterpret_cast<const float *>(dyd + offset_of(dy, k));
        const float sg = 1.0f / (1.0f + expf(-xv));
        *reinterpret_cast<float *>(dd + offset_of(d, k)) = g * sg * (1.0f + xv * (1.0f - sg));
    }
}

Status silu_back(cudaStream_t st, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const ggml_tensor * dy = node->src[0];
    const ggml_tensor * x  = node->src[1];
    launch(silu_back_kernel, dim3(grid_for(n, kBlock)), dim3(kBlock), 0, st, shape_of(node), shape_of(dy),
           shape_of(x), static_cast<char *>(node->data), static_cast<const char *>(dy->data),
           static_cast<const char *>(x->data), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

// --- row ops: RMS_NORM_BACK, SOFT_MAX_BACK ------------------------------------------
// Row (i1, i2, i3) of a tensor whose dim-0 elements are adjacent F32 (the predicates).
__device__ __forceinline__ const float * frow(const char * base, const Shape & s, int64_t i1, int64_t i2, int64_t i3) {
    return reinterpret_cast<const float *>(row_at(base, s, i1, i2, i3));
}
__device__ __forceinline__ float * frow_w(char * base, const Shape & s, int64_t i1, int64_t i2, int64_t i3) {
    return reinterpret_cast<float *>(row_at(base, s, i1, i2, i3));
}

// dz = src[0], x = src[1], all of dst's shape.
__global__ void rms_norm_back_kernel(Shape d, Shape dz, Shape x, char * dd, const char * dzd, const char * xd,
                                     float eps) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    __shared__ double scratch[32];
    const int64_t nc = d.ne[0], rows = d.ne[1] * d.ne[2] * d.ne[3];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        split_row(d, r, i1, i2, i3);
        const float * xr = frow(xd, x, i1, i2, i3);
        const float * g  = frow(dzd, dz, i1, i2, i3);
        double sum_xx = 0.0, sum_xdz = 0.0;
        for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) {
            sum_xx  += double(xr[c] * xr[c]);
            sum_xdz += double(xr[c] * g[c]);
        }
        sum_xx  = block_sum(sum_xx, scratch);
        sum_xdz = block_sum(sum_xdz, scratch);
        const float mean_eps = float(sum_xx) / float(nc) + eps;
        const float sum_eps  = float(sum_xx) + eps * float(nc);
        const float rrms     = 1.0f / sqrtf(mean_eps);
        const float scale_x  = float(-sum_xdz) / sum_eps;
        float * out = frow_w(dd, d, i1, i2, i3);
        for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) out[c] = (g[c] + xr[c] * scale_x) * rrms;
    }
}

// dy = src[0], y = src[1] (the forward softmax), all of dst's shape.
__global__ void soft_max_back_kernel(Shape d, Shape dy, Shape y, char * dd, const char * dyd, const char * yd,
                                     float scale) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    __shared__ double scratch[32];
    const int64_t nc = d.ne[0], rows = d.ne[1] * d.ne[2] * d.ne[3];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        split_row(d, r, i1, i2, i3);
        const float * yr = frow(yd, y, i1, i2, i3);
        const float * g  = frow(dyd, dy, i1, i2, i3);
        double dot = 0.0;
        for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) dot += double(yr[c] * g[c]);
        const float dt = float(block_sum(dot, scratch));
        float * out = frow_w(dd, d, i1, i2, i3);
        for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) out[c] = (g[c] - dt) * yr[c] * scale;
    }
}

template <typename K> Status row_op(cudaStream_t st, ggml_tensor * node, K kernel, float param) {
    const int64_t rows = ggml_nrows(node);
    if (rows == 0 || node->ne[0] == 0) return true;
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    launch(kernel, dim3(row_grid(rows)), dim3(row_threads(node->ne[0])), 0, st, shape_of(node), shape_of(a),
           shape_of(b), static_cast<char *>(node->data), static_cast<const char *>(a->data),
           static_cast<const char *>(b->data), param);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

// --- CROSS_ENTROPY_LOSS, CROSS_ENTROPY_LOSS_BACK ------------------------------------
// The row's maximum and sum(exp(x - max)) (in double, as the host's exp_sum).
__device__ __forceinline__ double exp_sum(const float * x, int64_t n, float & mx, float * fscratch,
                                          double * dscratch) {
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) m = fmaxf(m, x[c]);
    mx = block_max(m, fscratch);
    double sum = 0.0;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) sum += double(expf(x[c] - mx));
    return block_sum(sum, dscratch);
}

// row_sum[r] = sum(((x - max) - log(sum exp)) * labels) of row r, rounded to float.
__global__ void cross_entropy_rows_kernel(Shape x, Shape l, const char * xd, const char * ld, float * row_sum) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    __shared__ float  fscratch[32];
    __shared__ double dscratch[32];
    const int64_t nc = x.ne[0], rows = x.ne[1] * x.ne[2] * x.ne[3];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        split_row(x, r, i1, i2, i3);
        const float * xr = frow(xd, x, i1, i2, i3);
        const float * lr = frow(ld, l, i1, i2, i3);
        float mx;
        const float log_sum = float(log(exp_sum(xr, nc, mx, fscratch, dscratch)));
        double s = 0.0;
        for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) s += double(((xr[c] - mx) - log_sum) * lr[c]);
        s = block_sum(s, dscratch);
        if (threadIdx.x == 0) row_sum[r] = float(s);
    }
}

// dst = -1/nr * the sum of the row sums (in double); one block.
__global__ void cross_entropy_total_kernel(const float * row_sum, int64_t nr, float * dst) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    __shared__ double scratch[32];
    double t = 0.0;
    for (int64_t r = threadIdx.x; r < nr; r += blockDim.x) t += double(row_sum[r]);
    t = block_sum(t, scratch);
    if (threadIdx.x == 0) *dst = float(t) * (-1.0f / float(nr));
}

Status cross_entropy_loss(rt::cuda::CudaStream & stream, cudaStream_t st, ggml_tensor * node) {
    const ggml_tensor * logits = node->src[0];
    const ggml_tensor * labels = node->src[1];
    const int64_t nr = ggml_nrows(logits);
    // The row sums in the stream's reused scratch (no allocation in a
    // recorded graph), else in stream-ordered memory freed after the launch.
    const size_t bytes = size_t(nr > 0 ? nr : 1) * sizeof(float);
    void * pooled = nullptr;
    void * mem = stream.scratch(bytes);
    if (mem == nullptr) {
        if (!scratch_alloc(&pooled, bytes, st)) return Status::out_of_memory;
        mem = pooled;
    }
    float * row_sum = static_cast<float *>(mem);
    if (nr > 0) {
        launch(cross_entropy_rows_kernel, dim3(row_grid(nr)), dim3(row_threads(logits->ne[0])), 0, st,
               shape_of(logits), shape_of(labels), static_cast<const char *>(logits->data),
               static_cast<const char *>(labels->data), row_sum);
        SI_CUDA_LAUNCH_CHECK();
    }
    launch(cross_entropy_total_kernel, dim3(1), dim3(kBlock), 0, st, static_cast<const float *>(row_sum), nr,
           static_cast<float *>(node->data));
    SI_CUDA_LAUNCH_CHECK();
    if (pooled != nullptr) SI_CUDA_CHECK(cudaFreeAsync(pooled, st));
    return true;
}

// grad = src[0] (one float, the loss's gradient), logits = src[1], labels = src[2].
__global__ void cross_entropy_back_kernel(Shape d, Shape x, Shape l, char * dd, const char * xd, const char * ld,
                                          const float * grad) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    __shared__ float  fscratch[32];
    __shared__ double dscratch[32];
    const int64_t nc = x.ne[0], rows = x.ne[1] * x.ne[2] * x.ne[3];
    const float d_by_nr = grad[0] / float(rows);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        split_row(x, r, i1, i2, i3);
        const float * xr = frow(xd, x, i1, i2, i3);
        const float * lr = frow(ld, l, i1, i2, i3);
        float mx;
        const float inv = float(1.0 / exp_sum(xr, nc, mx, fscratch, dscratch));
        float * out = frow_w(dd, d, i1, i2, i3);
        // exp(x - max) recomputed: the same float the host stored in dst and re-read.
        for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) out[c] = (expf(xr[c] - mx) * inv - lr[c]) * d_by_nr;
    }
}

Status cross_entropy_loss_back(cudaStream_t st, ggml_tensor * node) {
    const ggml_tensor * grad   = node->src[0];
    const ggml_tensor * logits = node->src[1];
    const ggml_tensor * labels = node->src[2];
    const int64_t nr = ggml_nrows(logits);
    if (nr == 0 || logits->ne[0] == 0) return true;
    launch(cross_entropy_back_kernel, dim3(row_grid(nr)), dim3(row_threads(logits->ne[0])), 0, st, shape_of(node),
           shape_of(logits), shape_of(labels), static_cast<char *>(node->data),
           static_cast<const char *>(logits->data), static_cast<const char *>(labels->data),
           static_cast<const float *>(grad->data));
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

// --- COUNT_EQUAL --------------------------------------------------------------------
// Block counts added atomically into dst (zeroed before): integer sums are
// exact in any order.
__global__ void count_equal_kernel(Shape a, Shape b, const char * ad, const char * bd, unsigned long long * dst,
                                   int64_t n) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    __shared__ unsigned long long scratch[32];
    unsigned long long cnt = 0;
    for (int64_t k = first_index(); k < n; k += grid_stride()) {
        cnt += *reinterpret_cast<const int32_t *>(ad + offset_of(a, k)) ==
               *reinterpret_cast<const int32_t *>(bd + offset_of(b, k));
    }
    cnt = block_sum(cnt, scratch);
    if (threadIdx.x == 0 && cnt != 0) atomicAdd(dst, cnt);
}

Status count_equal(cudaStream_t st, ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    static_assert(sizeof(unsigned long long) == sizeof(int64_t), "the I64 result is counted as unsigned long long");
    SI_CUDA_CHECK(cudaMemsetAsync(node->data, 0, sizeof(int64_t), st));
    const int64_t n = ggml_nelements(a);
    if (n == 0) return true;
    // A few blocks suffice for a count; fewer blocks, fewer atomics.
    const unsigned blocks = grid_for(n, kBlock) < 1024u ? grid_for(n, kBlock) : 1024u;
    launch(count_equal_kernel, dim3(blocks), dim3(kBlock), 0, st, shape_of(a), shape_of(b),
           static_cast<const char *>(a->data), static_cast<const char *>(b->data),
           static_cast<unsigned long long *>(node->data), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

// --- OPT_STEP_ADAMW, OPT_STEP_SGD ---------------------------------------------------
// w, g, m, v dense F32 arrays of n elements; p the 7 parameters (alpha, beta1,
// beta2, eps, wd, beta1h, beta2h), read on the device since a graph computes them.
__global__ void adamw_kernel(float * w, const float * g, float * m, float * v, const float * p, int64_t n) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    const float alpha = p[0], beta1 = p[1], beta2 = p[2], eps = p[3], wd = p[4], beta1h = p[5], beta2h = p[6];
    const float keep = 1.0f - alpha * wd;
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const float gi = g[i];
        const float mi = m[i] * beta1 + gi * (1.0f - beta1);
        const float vi = v[i] * beta2 + gi * gi * (1.0f - beta2);
        m[i] = mi;
        v[i] = vi;
        const float mh = mi * beta1h;
        const float vh = sqrtf(vi * beta2h) + eps;
        w[i] = w[i] * keep - alpha * mh / vh;
    }
}

// p: alpha, wd.
__global__ void sgd_kernel(float * w, const float * g, const float * p, int64_t n) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    const float alpha = p[0], keep = 1.0f - alpha * p[1];
    for (int64_t i = first_index(); i < n; i += grid_stride()) w[i] = w[i] * keep - alpha * g[i];
}

Status opt_step(cudaStream_t st, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node->src[0]);
    if (n == 0) return true;
    auto f = [&](int i) { return static_cast<float *>(node->src[i]->data); };
    if (node->op == GGML_OP_OPT_STEP_ADAMW) {
        launch(adamw_kernel, dim3(grid_for(n, kBlock)), dim3(kBlock), 0, st, f(0), static_cast<const float *>(f(1)),
               f(2), f(3), static_cast<const float *>(f(4)), n);
    } else {
        launch(sgd_kernel, dim3(grid_for(n, kBlock)), dim3(kBlock), 0, st, f(0), static_cast<const float *>(f(1)),
               static_cast<const float *>(f(2)), n);
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace

Status backward(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    cudaStream_t st = stream_of(stream);
    switch (node->op) {
        case GGML_OP_GET_ROWS_BACK:           return get_rows_back(st, node);
        case GGML_OP_REPEAT_BACK:             return repeat_back(st, node);
        case GGML_OP_SILU_BACK:               return silu_back(st, node);
        case GGML_OP_RMS_NORM_BACK:           return row_op(st, node, rms_norm_back_kernel, op_f32(node, 0));
        case GGML_OP_SOFT_MAX_BACK:           return row_op(st, node, soft_max_back_kernel, op_f32(node, 0));
        case GGML_OP_CROSS_ENTROPY_LOSS:      return cross_entropy_loss(stream, st, node);
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK: return cross_entropy_loss_back(st, node);
        case GGML_OP_COUNT_EQUAL:             return count_equal(st, node);
        case GGML_OP_OPT_STEP_ADAMW:
        case GGML_OP_OPT_STEP_SGD:            return opt_step(st, node);
        default:                              return false;
    }
}

} // namespace standin::kernels::cuda
