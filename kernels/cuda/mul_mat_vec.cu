// MUL_MAT for few src1 columns (N <= 8, token generation) on the CUDA device:
// one warp per weight row computes that row's dot products with all N
// columns, so each weight byte is read from memory once per call.
//   Block weights: lane u takes "part" u of the row (8 values of a block,
//   kernels/cuda/dequant.cuh), so the warp reads 32 neighbouring parts (8
//   blocks of the 32-element formats, or one 256-element super-block) at a
//   time and decodes them on the fly; the matching src1 values are two 16-byte
//   loads per column.
//   F32/F16/BF16 weights: 16-byte loads of 8 elements when rows are aligned
//   and K % 8 == 0, else one element per lane and step.
// Partial sums are reduced with warp shuffles; lane 0 writes dst. Float
// weights with aligned rows take mmv_float_kernel instead (4 rows in flight
// per lane, and a whole block per row for short matrices). src1 comes
// as dense, 16-byte aligned f32 columns (mul_mat.cuh, stage_y), already
// rounded to F16/BF16 under weights of those types. Also the MUL_MAT_ID
// variant (one (slot, token) pair per grid row, its expert read from ids),
// which also takes the integer-form formats (a run of 16 per lane and step).
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT (-p 'n=[1-8],') and -o MUL_MAT_ID
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "diag/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/mul_mat.cuh"

namespace standin::kernels::cuda::mm {

namespace {

constexpr int kWarps = 4;  // weight rows per block

__host__ __device__ constexpr bool is_float_t(int T) {
    return T == GGML_TYPE_F32 || T == GGML_TYPE_F16 || T == GGML_TYPE_BF16;
}

// 8 consecutive weights at a 16-byte aligned address.
template <int T> __device__ __forceinline__ void load8(const char * p, float w[8]) {
    if constexpr (T == GGML_TYPE_F32) {
        const float4 x0 = reinterpret_cast<const float4 *>(p)[0], x1 = reinterpret_cast<const float4 *>(p)[1];
        w[0] = x0.x; w[1] = x0.y; w[2] = x0.z; w[3] = x0.w;
        w[4] = x1.x; w[5] = x1.y; w[6] = x1.z; w[7] = x1.w;
    } else {
        const uint4 u = *reinterpret_cast<const uint4 *>(p);
        const uint32_t v[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            if constexpr (T == GGML_TYPE_F16) {
                const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&v[i]));
                w[2 * i] = f.x;
                w[2 * i + 1] = f.y;
            } else {
                w[2 * i] = __uint_as_float(v[i] << 16);
                w[2 * i + 1] = __uint_as_float(v[i] & 0xffff0000u);
            }
        }
    }
}

template <int NC>
__device__ __forceinline__ void fma8(float acc[NC], const float v[8], const float * const yc[NC], int ncols,
                                     int64_t ka, int64_t kb) {
#pragma unroll
    for (int c = 0; c < NC; ++c) {
        if (c < ncols) {
            const float4 ya = *reinterpret_cast<const float4 *>(yc[c] + ka);
            const float4 yb = *reinterpret_cast<const float4 *>(yc[c] + kb);
            float s = acc[c];
            s = fmaf(v[0], ya.x, s); s = fmaf(v[1], ya.y, s); s = fmaf(v[2], ya.z, s); s = fmaf(v[3], ya.w, s);
            s = fmaf(v[4], yb.x, s); s = fmaf(v[5], yb.y, s); s = fmaf(v[6], yb.z, s); s = fmaf(v[7], yb.w, s);
            acc[c] = s;
        }
    }
}

// This lane's share of the dot products of one weight row with NC columns.
template <int T, int NC>
__device__ __forceinline__ void row_dot(const char * arow, const float * const yc[NC], int ncols, int64_t K,
                                        bool a_vec, float acc[NC]) {
    const int lane = int(threadIdx.x & 31u);
    if constexpr (is_float_t(T)) {
        constexpr int es = T == GGML_TYPE_F32 ? 4 : 2;
        if (a_vec) {
            for (int64_t u = lane; u < K / 8; u += 32) {
                float w[8];
                load8<T>(arow + u * 8 * es, w);
                fma8<NC>(acc, w, yc, ncols, 8 * u, 8 * u + 4);
            }
        } else {
            for (int64_t k = lane; k < K; k += 32) {
                const float w = load_f(T, arow + k * es);
#pragma unroll
                for (int c = 0; c < NC; ++c) {
                    if (c < ncols) acc[c] = fmaf(w, yc[c][k], acc[c]);
                }
            }
        }
    } else if constexpr (dq::kIntForm<T>) {
        // Integer-form weights (MUL_MAT_ID's pairs): lane u decodes run u of
        // the row (quants.h's run_to_f32) against 16 values of each column.
        using B = typename dq::IntForm<T>::B;
        constexpr int kRuns = B::kElems / 16;
        const B * row = reinterpret_cast<const B *>(arow);
        for (int64_t u = lane; u < K / 16; u += 32) {
            float v[16];
            quant::run_to_f32(row[u / kRuns], int(u % kRuns), v);
            fma8<NC>(acc, v, yc, ncols, 16 * u, 16 * u + 4);
            fma8<NC>(acc, v + 8, yc, ncols, 16 * u + 8, 16 * u + 12);
        }
    } else {
        using P = dq::Part<T>;
        const int64_t n_units = (K / P::kQKb) * P::kParts;
        const uint8_t * row = reinterpret_cast<const uint8_t *>(arow);
        for (int64_t u = lane; u < n_units; u += 32) {
            const int64_t ib = u / P::kParts;
            float v[8];
            int a, b;
            P::get(row + ib * P::kBytes, int(u % P::kParts), v, a, b);
            fma8<NC>(acc, v, yc, ncols, ib * P::kQKb + a, ib * P::kQKb + b);
        }
    }
}

// Column pointers of the staged src1 for matrix (i12, i13), and zeroed sums.
template <int NC>
__device__ __forceinline__ void start_columns(const Args & p, int64_t i12, int64_t i13, const float * (&yc)[NC],
                                              float (&acc)[NC]) {
#pragma unroll
    for (int c = 0; c < NC; ++c) {
        yc[c] = reinterpret_cast<const float *>(p.y + c * p.y_nb1 + i12 * p.y_nb2 + i13 * p.y_nb3);
        acc[c] = 0.0f;
    }
}

template <int T, int NC>
__global__ void __launch_bounds__(kWarps * 32) mmv_kernel(Args p) {
    const int64_t m = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (m >= p.M) {
        return;  // the whole warp
    }
    const int ncols = int(p.N);
    for (int64_t z = blockIdx.y; z < p.ne12 * p.ne13; z += gridDim.y) {
        const int64_t i12 = z % p.ne12, i13 = z / p.ne12;
        const char * arow = p.a + m * p.a_nb1 + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3;
        const float * yc[NC];
        float acc[NC];
        start_columns<NC>(p, i12, i13, yc, acc);
        row_dot<T, NC>(arow, yc, ncols, p.K, p.a_vec, acc);
        store_row_sums<NC, 1, kWarps>(acc, nullptr, true, ncols, p.d + i12 * p.d_nb2 + i13 * p.d_nb3 + m * 4,
                                      p.d_nb1);
    }
}

// Float weights with 16-byte aligned rows and K % 8 == 0: R warps per row
// (1, or all kWarps of the block when rows are too few to fill the GPU),
// kUnroll 16-byte units per lane loaded before any is used; with R > 1 the
// partial sums meet in shared memory.
constexpr int kUnroll = 4;

template <int T, int NC, int R>
__global__ void __launch_bounds__(kWarps * 32) mmv_float_kernel(Args p) {
    __shared__ float part_sums[kWarps][NC];
    constexpr int es = T == GGML_TYPE_F32 ? 4 : 2;
    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x / 32), sub = warp % R;
    const int64_t m = int64_t(blockIdx.x) * (kWarps / R) + warp / R, n_units = p.K / 8;
    const bool live = m < p.M;
    const int ncols = int(p.N);
    for (int64_t z = blockIdx.y; z < p.ne12 * p.ne13; z += gridDim.y) {
        const int64_t i12 = z % p.ne12, i13 = z / p.ne12;
        const char * arow = p.a + m * p.a_nb1 + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3;
        const float * yc[NC];
        float acc[NC];
        start_columns<NC>(p, i12, i13, yc, acc);
        const int64_t first = live ? int64_t(sub) * 32 + lane : n_units;
        for (int64_t u0 = first; u0 < n_units; u0 += int64_t(R) * 32 * kUnroll) {
            float w[kUnroll][8];
#pragma unroll
            for (int j = 0; j < kUnroll; ++j) {
                const int64_t u = u0 + int64_t(j) * R * 32;
                if (u < n_units) load8<T>(arow + u * 8 * es, w[j]);
            }
#pragma unroll
            for (int j = 0; j < kUnroll; ++j) {
                const int64_t u = u0 + int64_t(j) * R * 32;
                if (u < n_units) fma8<NC>(acc, w[j], yc, ncols, 8 * u, 8 * u + 4);
            }
        }
        store_row_sums<NC, R, kWarps>(acc, part_sums, live, ncols, p.d + i12 * p.d_nb2 + i13 * p.d_nb3 + m * 4,
                                      p.d_nb1);
    }
}

template <int T>
__global__ void __launch_bounds__(kWarps * 32) mmv_id_kernel(IdArgs p) {
    const int lane = int(threadIdx.x & 31u);
    const int64_t m = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (m >= p.M) {
        return;
    }
    for (int64_t q = blockIdx.y; q < p.n_used * p.n_tok; q += gridDim.y) {
        const int64_t e = q % p.n_used, t = q / p.n_used;
        const int32_t x = *reinterpret_cast<const int32_t *>(p.ids + e * p.ids_nb0 + t * p.ids_nb1);
        float * out = reinterpret_cast<float *>(p.d + e * p.d_nb1 + t * p.d_nb2) + m;
        if (x < 0 || x >= p.n_as) {
            if (lane == 0) *out = 0.0f;
            continue;
        }
        const float * yc[1] = {reinterpret_cast<const float *>(p.y + (e % p.ne11) * p.y_nb1 + t * p.y_nb2)};
        float acc[1] = {0.0f};
        row_dot<T, 1>(p.a + x * p.a_nb2 + m * p.a_nb1, yc, 1, p.K, p.a_vec, acc);
        const float s = warp_sum(acc[0]);
        if (lane == 0) *out = s;
    }
}

template <int T, int NC> void launch_nc(const Args & p, cudaStream_t st) {
    const dim3 block(kWarps * 32);
    if constexpr (is_float_t(T)) {
        if (p.a_vec && p.M <= int64_t(INT32_MAX)) {
            if (p.M * p.ne12 * p.ne13 >= 1024) {
                mmv_float_kernel<T, NC, 1>
                    <<<dim3(unsigned((p.M + kWarps - 1) / kWarps), grid_yz(p.ne12 * p.ne13)), block, 0, st>>>(p);
            } else {
                mmv_float_kernel<T, NC, kWarps><<<dim3(unsigned(p.M), grid_yz(p.ne12 * p.ne13)), block, 0, st>>>(p);
            }
            return;
        }
    }
    mmv_kernel<T, NC><<<dim3(unsigned((p.M + kWarps - 1) / kWarps), grid_yz(p.ne12 * p.ne13)), block, 0, st>>>(p);
}

template <int T> void launch_t(const Args & p, cudaStream_t st) {
    with_col_width(p.N, [&](auto nc) { launch_nc<T, decltype(nc)::value>(p, st); });
}

template <int T> void launch_id_t(const IdArgs & p, cudaStream_t st) {
    const dim3 grid(unsigned((p.M + kWarps - 1) / kWarps), grid_yz(p.n_used * p.n_tok));
    mmv_id_kernel<T><<<grid, kWarps * 32, 0, st>>>(p);
}

// Calls F<type>() for the weight type, false when there is no kernel for it.
template <typename F> bool dispatch_type(ggml_type t, F && f) {
    return with_weight_type(t, [&](auto ty) { f.template operator()<decltype(ty)::value>(); });
}

// The integer-form formats have no kernel here for MUL_MAT (their plan has no
// vec_float: mm_plan.h), only the MUL_MAT_ID one.
struct VecLauncher {
    const Args & p;
    cudaStream_t st;
    template <int T> void operator()() const {
        if constexpr (dq::kIntForm<T>) {
            SI_ASSERT_MSG(false, "the product plan chose the float mat-vec for an integer-form weight type");
        } else {
            launch_t<T>(p, st);
        }
    }
};

struct VecIdLauncher {
    const IdArgs & p;
    cudaStream_t st;
    template <int T> void operator()() const { launch_id_t<T>(p, st); }
};

struct Nop {
    template <int T> void operator()() const {}
};

} // namespace

bool vec_type_ok(ggml_type t) { return dispatch_type(t, Nop{}); }

void launch_vec(ggml_type t, const Args & p, cudaStream_t st) { dispatch_type(t, VecLauncher{p, st}); }

void launch_vec_id(ggml_type t, const IdArgs & p, cudaStream_t st) { dispatch_type(t, VecIdLauncher{p, st}); }

} // namespace standin::kernels::cuda::mm
