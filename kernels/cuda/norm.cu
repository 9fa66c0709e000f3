// RMS_NORM: y = x / sqrt(mean(x^2) + eps), and NORM: y = (x - mean(x)) /
// sqrt(var(x) + eps), over dim 0 with eps the float in op_params[0], on the
// CUDA device (kernels/host/norm.cpp is the host twin). F32 in and out, any
// strides (elements are addressed through nb[0]); in place is fine, since each
// element is read and then written by the same thread. One block per row;
// partial sums are kept in double, as the host does, so long rows do not lose
// precision.
//
// Also RMS_NORM fused with the MUL by a weight that follows it (fusion.cpp).
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o RMS_NORM (NORM; the RMS_NORM_MUL_ADD
// cases take the fused path)
#include <cuda_fp16.h>

#include <cstring>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

// With MUL, also z = y * w (w: a weight row), written beside y: the fused
// RMS_NORM x MUL of fusion.cpp. y is written either way, so whether another
// node reads it does not matter; the product is the MUL kernel's own (one
// rounding of the stored y times w).
struct MulOut {
    const char * w = nullptr;
    int64_t      wnb0 = 0;
    char *       z = nullptr;
    int64_t      znb0 = 0;
    // Also z quantized for the integer mat-vec, exactly as quantize_act
    // would from the stored z (act_round.cuh, 32-groups): codes at
    // q + i and {d, d * sum} at ds + i / 32 of this row. q null: none.
    int8_t *     q = nullptr;
    float2 *     ds = nullptr;
};

// z = v * wv at element i of the row, and its code when mo quantizes.
__device__ __forceinline__ void put_product(const MulOut & mo, int64_t i, float v, float wv) {
    const float z = v * wv;
    *reinterpret_cast<float *>(mo.z + i * mo.znb0) = z;
    // A warp holds one 32-group here (n and blockDim multiples of 32).
    if (mo.q != nullptr) quantize_warp32(z, mo.q + i, mo.ds + i / 32);
}

template <bool RMS, bool MUL>
__device__ void norm_row(const char * x, int64_t xnb0, char * y, int64_t ynb0, int64_t n, float eps, double * scratch,
                         MulOut mo) {
    auto at = [&](int64_t i) { return *reinterpret_cast<const float *>(x + i * xnb0); };
    float mean = 0.0f;
    if constexpr (!RMS) {
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += double(at(i));
        mean = float(block_sum(s, scratch) / double(n));
    }
    double sq = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = at(i) - mean;
        sq += double(v * v);
    }
    const float var = float(block_sum(sq, scratch) / double(n));
    const float k = 1.0f / sqrtf(var + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = (at(i) - mean) * k;
        *reinterpret_cast<float *>(y + i * ynb0) = v;
        if constexpr (MUL) {
            put_product(mo, i, v, *reinterpret_cast<const float *>(mo.w + i * mo.wnb0));
        }
    }
}

// Decode's rows (contiguous, n = kE x blockDim): each thread keeps its kE
// elements of x and of w in registers, so x is read once (not once per pass)
// and w, where it is a model's weight (w_early: weights_fixed), before the
// wait on the previous kernel (Note [dependent launch]); the kE outputs of a
// thread are then independent of each other.
// Same partition of the sum and the same operations as norm_row<true, true>,
// so the results are equal bit for bit.
// The widest block rms_norm_mul_reg_kernel<kE> launches with: its registers
// times the threads must fit the SM's 65536, or the launch fails (ptxas,
// sm_90: 54 at 4 elements, 82 at 8; 8 at 1024 threads failed to launch on the
// H200, results/h200/summary-38.txt).
template <int kE> constexpr int kRegNormMaxThreads = kE <= 4 ? 1024 : 512;

template <int kE>
__global__ void __launch_bounds__(kRegNormMaxThreads<kE>)
    rms_norm_mul_reg_kernel(Shape a, const char * ad, char * dd, float eps, Shape w, const char * wd, char * zd,
                            int8_t * q, float2 * ds, bool w_early) {
    __shared__ double scratch[32];
    const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3], n = a.ne[0];
    const int t = int(threadIdx.x), bd = int(blockDim.x);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        split_row(a, r, i1, i2, i3);
        const float * wr = reinterpret_cast<const float *>(row_at(wd, w, i1 % w.ne[1], i2 % w.ne[2], i3 % w.ne[3]));
        float wv[kE];
        if (!w_early) pdl_wait();
#pragma unroll
        for (int j = 0; j < kE; ++j) wv[j] = wr[t + j * bd];
        if (r == blockIdx.x) {
            pdl_wait();
            pdl_trigger();
        }
        const float * x = reinterpret_cast<const float *>(row_at(ad, a, i1, i2, i3));
        float v[kE];
        double sq = 0.0;
#pragma unroll
        for (int j = 0; j < kE; ++j) {
            v[j] = x[t + j * bd];
            sq += double(v[j] * v[j]);
        }
        const float var = float(block_sum(sq, scratch) / double(n));
        const float k = 1.0f / sqrtf(var + eps);
        // dst (the norm), z (its product) and the codes: rows of n, dense (the dispatch's condition).
        MulOut mo;
        mo.z = zd + r * n * 4;
        mo.znb0 = 4;
        if (q != nullptr) {
            mo.q = q + r * n;
            mo.ds = ds + r * (n / 32);
        }
        float * y = reinterpret_cast<float *>(dd + r * n * 4);
#pragma unroll
        for (int j = 0; j < kE; ++j) {
            const int64_t i = t + j * bd;
            const float yv = v[j] * k;  // norm_row's (x - mean) * k with mean 0: x - 0.0f is x
            y[i] = yv;
            put_product(mo, i, yv, wv[j]);
        }
    }
}

template <bool RMS>
__global__ void norm_kernel(Shape d, Shape a, char * dd, const char * ad, float eps) {
    __shared__ double scratch[32];
    pdl_wait();
    pdl_trigger();
    const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        split_row(a, r, i1, i2, i3);
        norm_row<RMS, false>(row_at(ad, a, i1, i2, i3), a.nb[0], row_at(dd, d, i1, i2, i3), d.nb[0],
                             a.ne[0], eps, scratch, MulOut{});
    }
}

// z (shape of d) = rms_norm(a) * w, w broadcast by repetition along dims 1..3.
__global__ void rms_norm_mul_kernel(Shape d, Shape a, char * dd, const char * ad, float eps, Shape w,
                                    const char * wd, Shape z, char * zd, int8_t * q, float2 * ds) {
    __shared__ double scratch[32];
    pdl_wait();
    pdl_trigger();
    const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        split_row(a, r, i1, i2, i3);
        MulOut mo;
        mo.w = row_at(wd, w, i1 % w.ne[1], i2 % w.ne[2], i3 % w.ne[3]);
        mo.wnb0 = w.nb[0];
        mo.z = row_at(zd, z, i1, i2, i3);
        mo.znb0 = z.nb[0];
        if (q != nullptr) {
            mo.q = q + r * a.ne[0];
            mo.ds = ds + r * (a.ne[0] / 32);
        }
        norm_row<true, true>(row_at(ad, a, i1, i2, i3), a.nb[0], row_at(dd, d, i1, i2, i3), d.nb[0], a.ne[0], eps,
                             scratch, mo);
    }
}

// Rows are few when decoding (one per token): a wide block per row keeps
// each thread's share of a 4096-element row at 4 elements.
int threads_for(int64_t n) { return n >= 4096 ? 1024 : n >= 1024 ? 256 : (n >= 128 ? 128 : 32); }

} // namespace

Status norm(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    if (src->type != GGML_TYPE_F32 || node->type != GGML_TYPE_F32) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    float eps = 0.0f;
    std::memcpy(&eps, node->op_params, sizeof(float));
    const int64_t rows = ggml_nrows(src);
    if (rows == 0 || src->ne[0] == 0) {
        return true;
    }
    const int threads = threads_for(src->ne[0]);
    cudaStream_t st = stream_of(stream);
    const Shape d = shape_of(node), a = shape_of(src);
    char * dd = static_cast<char *>(node->data);
    const char * ad = static_cast<const char *>(src->data);
    switch (node->op) {
        case GGML_OP_RMS_NORM: launch(norm_kernel<true>, dim3(row_grid(rows)), dim3(threads), 0, st, d, a, dd, ad, eps); break;
        case GGML_OP_NORM:     launch(norm_kernel<false>, dim3(row_grid(rows)), dim3(threads), 0, st, d, a, dd, ad, eps); break;
        default:               return false;
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

bool rms_norm_mul_ok(const ggml_tensor * norm, const ggml_tensor * mul) {
    const ggml_tensor * w = mul->src[1];
    return norm->op == GGML_OP_RMS_NORM && mul->op == GGML_OP_MUL && mul->src[0] == norm && w != nullptr &&
           norm->type == GGML_TYPE_F32 && norm->src[0]->type == GGML_TYPE_F32 && w->type == GGML_TYPE_F32 &&
           mul->type == GGML_TYPE_F32 && ggml_are_same_shape(mul, norm) && w->ne[0] == norm->ne[0] &&
           ggml_can_repeat(w, norm);
}

Status rms_norm_mul(rt::cuda::CudaStream & stream, ggml_tensor * norm, ggml_tensor * mul) {
    return rms_norm_mul_quant(stream, norm, mul, nullptr, nullptr);
}

Status rms_norm_mul_quant(rt::cuda::CudaStream & stream, ggml_tensor * norm, ggml_tensor * mul, int8_t * q, float2 * ds) {
    const ggml_tensor * src = norm->src[0];
    const ggml_tensor * w = mul->src[1];
    float eps = 0.0f;
    std::memcpy(&eps, norm->op_params, sizeof(float));
    const int64_t rows = ggml_nrows(src);
    if (rows == 0 || src->ne[0] == 0) {
        return true;
    }
    const int64_t n = src->ne[0];
    const int threads = threads_for(n);
    // Rows held in registers (rms_norm_mul_reg_kernel): x, the norm and the
    // product dense, w's rows contiguous, and a whole number of elements per thread.
    const bool dense = ggml_is_contiguous(src) && ggml_is_contiguous(norm) && ggml_is_contiguous(mul) &&
                       w->nb[0] == sizeof(float) && n % threads == 0;
    const int per = int(n / threads);
    // kE elements per thread, where the block width allows it; false: not launched.
    const auto reg = [&](auto ke) {
        constexpr int kE = decltype(ke)::value;
        if (per != kE || threads > kRegNormMaxThreads<kE>) return false;
        launch(rms_norm_mul_reg_kernel<kE>, dim3(row_grid(rows)), dim3(threads), 0, stream_of(stream),
               shape_of(src), static_cast<const char *>(src->data), static_cast<char *>(norm->data), eps,
               shape_of(w), static_cast<const char *>(w->data), static_cast<char *>(mul->data), q, ds,
               weights_fixed(w));
        return true;
    };
    if (dense && (reg(std::integral_constant<int, 1>{}) || reg(std::integral_constant<int, 2>{}) ||
                  reg(std::integral_constant<int, 4>{}) || reg(std::integral_constant<int, 8>{}))) {
        SI_CUDA_LAUNCH_CHECK();
        return true;
    }
    launch(rms_norm_mul_kernel, dim3(row_grid(rows)), dim3(threads), 0, stream_of(stream),
           shape_of(norm), shape_of(src), static_cast<char *>(norm->data), static_cast<const char *>(src->data), eps,
           shape_of(w), static_cast<const char *>(w->data), shape_of(mul), static_cast<char *>(mul->data), q, ds);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
