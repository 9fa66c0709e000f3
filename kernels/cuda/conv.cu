// Convolutions on the CUDA device, as kernels/host/conv.cpp (IM2COL,
// IM2COL_3D, CONV_2D, CONV_2D_DW, CONV_3D, COL2IM_1D, CONV_TRANSPOSE_1D,
// CONV_TRANSPOSE_2D): one
// thread per dst element, each summing its taps in the host's order (the
// transposed convolutions gather the input pixels that land on their output,
// so no two threads write one element). Kernels F32 or F16; under an F16
// kernel CONV_2D and the transposed convolutions round each input value to
// F16 first, as the host and ggml's reference do.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o IM2COL (IM2COL_3D, CONV_2D, CONV_2D_DW,
//       CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D)
#include "kernels/common/op_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

#define SI_GRID_STRIDE(t, n) \
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < (n); t += int64_t(gridDim.x) * blockDim.x)

struct Conv {
    int s0, s1, s2, p0, p1, p2, d0, d1, d2;
};

__device__ __forceinline__ float ld(const char * base, const Shape & s, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return load_f(s.type, base + i0 * s.nb[0] + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3]);
}

__device__ __forceinline__ float as_kernel_type(int kt, float v) {
    return kt == GGML_TYPE_F16 ? num::fp16_to_f32(num::f32_to_fp16(v)) : v;
}

__device__ __forceinline__ float & out(char * base, const Shape & s, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return *reinterpret_cast<float *>(base + i0 * s.nb[0] + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3]);
}

// IM2COL (2-D and 1-D): dst element (j, ox, oy, n), j = (ic, ky, kx).
__global__ void im2col_kernel(Shape d, Shape a, char * dd, const char * ad, Conv c, bool is_2d, int64_t KH, int64_t KW,
                              int64_t n) {
    const int64_t IC = is_2d ? a.ne[2] : a.ne[1], IH = is_2d ? a.ne[1] : 1, IW = a.ne[0];
    const int64_t row = IC * KH * KW, OW = d.ne[1], OH = is_2d ? d.ne[2] : 1;
    SI_GRID_STRIDE(t, n) {
        const int64_t j = t % row, pos = t / row;
        const int64_t ox = pos % OW, oy = (pos / OW) % OH, b = pos / (OW * OH);
        const int64_t kx = j % KW, ky = (j / KW) % KH, ic = j / (KW * KH);
        const int64_t ix = ox * c.s0 + kx * c.d0 - c.p0, iy = oy * c.s1 + ky * c.d1 - c.p1;
        float v = 0.0f;
        if (ix >= 0 && ix < IW && iy >= 0 && iy < IH) v = is_2d ? ld(ad, a, ix, iy, ic, b) : ld(ad, a, ix, ic, b, 0);
        store_f(d.type, dd + t * (d.nb[0]), v);
    }
}

__global__ void im2col_3d_kernel(Shape d, Shape a, char * dd, const char * ad, Conv c, int64_t IC, int64_t KD,
                                 int64_t KH, int64_t KW, int64_t n) {
    const int64_t row = IC * KD * KH * KW, OW = d.ne[1], OH = d.ne[2], OD = d.ne[3] / (a.ne[3] / IC);
    SI_GRID_STRIDE(t, n) {
        const int64_t j = t % row, pos = t / row;
        const int64_t ox = pos % OW, oy = (pos / OW) % OH, oz = (pos / (OW * OH)) % OD, b = pos / (OW * OH * OD);
        const int64_t kx = j % KW, ky = (j / KW) % KH, kz = (j / (KW * KH)) % KD, ic = j / (KW * KH * KD);
        const int64_t ix = ox * c.s0 + kx * c.d0 - c.p0, iy = oy * c.s1 + ky * c.d1 - c.p1;
        const int64_t iz = oz * c.s2 + kz * c.d2 - c.p2;
        float v = 0.0f;
        if (ix >= 0 && ix < a.ne[0] && iy >= 0 && iy < a.ne[1] && iz >= 0 && iz < a.ne[2]) v = ld(ad, a, ix, iy, iz, b * IC + ic);
        store_f(d.type, dd + t * d.nb[0], v);
    }
}

__global__ void conv_2d_kernel(Shape d, Shape k, Shape a, char * dd, const char * kd, const char * ad, Conv c, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        const int64_t ox = t % d.ne[0], oy = (t / d.ne[0]) % d.ne[1], oc = (t / (d.ne[0] * d.ne[1])) % d.ne[2];
        const int64_t b = t / (d.ne[0] * d.ne[1] * d.ne[2]);
        float sum = 0.0f;
        for (int64_t ic = 0; ic < k.ne[2]; ++ic)
            for (int64_t ky = 0; ky < k.ne[1]; ++ky)
                for (int64_t kx = 0; kx < k.ne[0]; ++kx) {
                    const int64_t ix = ox * c.s0 + kx * c.d0 - c.p0, iy = oy * c.s1 + ky * c.d1 - c.p1;
                    const float x = (ix >= 0 && ix < a.ne[0] && iy >= 0 && iy < a.ne[1])
                                        ? as_kernel_type(k.type, ld(ad, a, ix, iy, ic, b))
                                        : 0.0f;
                    sum += x * ld(kd, k, kx, ky, ic, oc);
                }
        out(dd, d, ox, oy, oc, b) = sum;
    }
}

__global__ void conv_2d_dw_kernel(Shape d, Shape k, Shape a, char * dd, const char * kd, const char * ad, Conv c, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        const int64_t ox = t % d.ne[0], oy = (t / d.ne[0]) % d.ne[1], ch = (t / (d.ne[0] * d.ne[1])) % d.ne[2];
        const int64_t b = t / (d.ne[0] * d.ne[1] * d.ne[2]);
        float sum = 0.0f;
        for (int64_t ky = 0; ky < k.ne[1]; ++ky) {
            const int64_t iy = oy * c.s1 + ky * c.d1 - c.p1;
            if (iy < 0 || iy >= a.ne[1]) continue;
            for (int64_t kx = 0; kx < k.ne[0]; ++kx) {
                const int64_t ix = ox * c.s0 + kx * c.d0 - c.p0;
                if (ix < 0 || ix >= a.ne[0]) continue;
                sum += ld(ad, a, ix, iy, ch, b) * ld(kd, k, kx, ky, 0, ch);
            }
        }
        out(dd, d, ox, oy, ch, b) = sum;
    }
}

__global__ void conv_t1d_kernel(Shape d, Shape k, Shape a, char * dd, const char * kd, const char * ad, int s0, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        const int64_t x = t % d.ne[0], oc = t / d.ne[0];
        float sum = 0.0f;
        for (int64_t kk = x % s0; kk < k.ne[0] && kk <= x; kk += s0) {
            const int64_t i = (x - kk) / s0;
            if (i >= a.ne[0]) continue;
            for (int64_t ic = 0; ic < k.ne[2]; ++ic) {
                sum += as_kernel_type(k.type, ld(ad, a, i, ic, 0, 0)) * ld(kd, k, kk, oc, ic, 0);
            }
        }
        out(dd, d, x, oc, 0, 0) = sum;
    }
}

__global__ void conv_t2d_kernel(Shape d, Shape k, Shape a, char * dd, const char * kd, const char * ad, int s, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        const int64_t x = t % d.ne[0], y = (t / d.ne[0]) % d.ne[1], oc = (t / (d.ne[0] * d.ne[1])) % d.ne[2];
        const int64_t b = t / (d.ne[0] * d.ne[1] * d.ne[2]);
        float sum = 0.0f;
        for (int64_t ky = y % s; ky < k.ne[1] && ky <= y; ky += s) {
            const int64_t iy = (y - ky) / s;
            if (iy >= a.ne[1]) continue;
            for (int64_t kx = x % s; kx < k.ne[0] && kx <= x; kx += s) {
                const int64_t ix = (x - kx) / s;
                if (ix >= a.ne[0]) continue;
                for (int64_t ic = 0; ic < k.ne[3]; ++ic) {
                    sum += as_kernel_type(k.type, ld(ad, a, ix, iy, ic, b)) * ld(kd, k, kx, ky, oc, ic);
                }
            }
        }
        out(dd, d, x, y, oc, b) = sum;
    }
}

__global__ void conv_3d_kernel(Shape d, Shape k, Shape a, char * dd, const char * kd, const char * ad, Conv c, int64_t C,
                               int64_t OC, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        const int64_t ox = t % d.ne[0], oy = (t / d.ne[0]) % d.ne[1], oz = (t / (d.ne[0] * d.ne[1])) % d.ne[2];
        const int64_t o3 = t / (d.ne[0] * d.ne[1] * d.ne[2]);
        const int64_t oc = o3 % OC, b = o3 / OC;
        float sum = 0.0f;
        for (int64_t ic = 0; ic < C; ++ic)
            for (int64_t kz = 0; kz < k.ne[2]; ++kz)
                for (int64_t ky = 0; ky < k.ne[1]; ++ky)
                    for (int64_t kx = 0; kx < k.ne[0]; ++kx) {
                        const int64_t ix = ox * c.s0 + kx * c.d0 - c.p0, iy = oy * c.s1 + ky * c.d1 - c.p1;
                        const int64_t iz = oz * c.s2 + kz * c.d2 - c.p2;
                        const bool in = ix >= 0 && ix < a.ne[0] && iy >= 0 && iy < a.ne[1] && iz >= 0 && iz < a.ne[2];
                        const float x = in ? as_kernel_type(k.type, ld(ad, a, ix, iy, iz, b * C + ic)) : 0.0f;
                        sum += x * ld(kd, k, kx, ky, kz, oc * C + ic);
                    }
        out(dd, d, ox, oy, oz, o3) = sum;
    }
}

__global__ void col2im_1d_kernel(Shape d, Shape a, char * dd, const char * ad, int64_t s0, int64_t K, int64_t p0,
                                 int64_t n) {
    SI_GRID_STRIDE(t, n) {
        const int64_t to = t % d.ne[0], oc = t / d.ne[0], ta = to + p0;
        const int64_t lo = ta - K + 1 > 0 ? (ta - K + 1 + s0 - 1) / s0 : 0;
        const int64_t hi = ta / s0 < a.ne[1] - 1 ? ta / s0 : a.ne[1] - 1;
        float sum = 0.0f;
        for (int64_t ti = lo; ti <= hi; ++ti) {
            const int64_t kk = ta - ti * s0;
            if (kk >= 0 && kk < K) sum += ld(ad, a, oc * K + kk, ti, 0, 0);
        }
        store_f(d.type, dd + to * d.nb[0] + oc * d.nb[1], sum);
    }
}

Conv conv2d_of(const ggml_tensor * n) {
    return Conv{op_i32(n, 0), op_i32(n, 1), 1, op_i32(n, 2), op_i32(n, 3), 0, op_i32(n, 4), op_i32(n, 5), 1};
}

const char * cd(const ggml_tensor * t) { return static_cast<const char *>(t->data); }

} // namespace

Status im2col(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor *k = node->src[0], *a = node->src[1];
    const bool is_2d = op_i32(node, 6) == 1;
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    im2col_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(a), static_cast<char *>(node->data), cd(a), conv2d_of(node), is_2d,
        is_2d ? k->ne[1] : 1, k->ne[0], n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status im2col_3d(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor *k = node->src[0], *a = node->src[1];
    const int64_t IC = op_i32(node, 9);
    const int64_t n = ggml_nelements(node);
    if (n == 0 || a->ne[3] / IC == 0) return true;
    const Conv c{op_i32(node, 0), op_i32(node, 1), op_i32(node, 2), op_i32(node, 3), op_i32(node, 4),
                 op_i32(node, 5), op_i32(node, 6), op_i32(node, 7), op_i32(node, 8)};
    im2col_3d_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(a), static_cast<char *>(node->data), cd(a), c, IC, k->ne[2], k->ne[1], k->ne[0], n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status conv_2d(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor *k = node->src[0], *a = node->src[1];
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    conv_2d_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(k), shape_of(a), static_cast<char *>(node->data), cd(k), cd(a), conv2d_of(node), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status conv_2d_dw(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor *k = node->src[0], *a = node->src[1];
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    conv_2d_dw_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(k), shape_of(a), static_cast<char *>(node->data), cd(k), cd(a), conv2d_of(node), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status conv_transpose_1d(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor *k = node->src[0], *a = node->src[1];
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    conv_t1d_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(k), shape_of(a), static_cast<char *>(node->data), cd(k), cd(a), op_i32(node, 0), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status conv_transpose_2d(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor *k = node->src[0], *a = node->src[1];
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    conv_t2d_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(k), shape_of(a), static_cast<char *>(node->data), cd(k), cd(a), op_i32(node, 0), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status conv_3d(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor *k = node->src[0], *a = node->src[1];
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const Conv c{op_i32(node, 0), op_i32(node, 1), op_i32(node, 2), op_i32(node, 3), op_i32(node, 4),
                 op_i32(node, 5), op_i32(node, 6), op_i32(node, 7), op_i32(node, 8)};
    conv_3d_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(k), shape_of(a), static_cast<char *>(node->data), cd(k), cd(a), c, op_i32(node, 9),
        op_i32(node, 11), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

Status col2im_1d(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const int64_t OC = op_i32(node, 1);
    col2im_1d_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(
        shape_of(node), shape_of(a), static_cast<char *>(node->data), cd(a), op_i32(node, 0), a->ne[0] / OC,
        op_i32(node, 2), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
