// Pooling, resampling and padding on the CUDA device, as kernels/host/image.cpp
// (POOL_1D, POOL_2D, UPSCALE through kernels/common/upscale.h, PAD,
// PAD_REFLECT_1D): one thread per dst element. Sources F32 (pools also F16),
// destinations F32; any strides.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o POOL_2D (POOL_1D, UPSCALE, PAD, PAD_REFLECT_1D)
#include <cfloat>

#include "kernels/common/op_params.h"
#include "kernels/common/upscale.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

#define SI_GRID_STRIDE(t, n) \
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < (n); t += int64_t(gridDim.x) * blockDim.x)

__device__ __forceinline__ void split4(const Shape & s, int64_t k, int64_t * i) {
    for (int j = 0; j < 4; ++j) {
        i[j] = k % s.ne[j];
        k /= s.ne[j];
    }
}

__device__ __forceinline__ const char * at(const char * base, const Shape & s, int64_t i0, int64_t i1, int64_t i2,
                                           int64_t i3) {
    return base + i0 * s.nb[0] + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3];
}

struct Pool {
    bool is_max;
    int  k0, k1, s0, s1, p0, p1;
};

__global__ void pool_1d_kernel(Shape d, Shape a, char * dd, const char * ad, Pool p, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        int64_t i[4];
        split4(d, t, i);
        float acc = p.is_max ? -FLT_MAX : 0.0f;
        int count = 0;
        for (int64_t j = i[0] * p.s0 - p.p0, e = j + p.k0; j < e; ++j) {
            if (j < 0 || j >= a.ne[0]) continue;
            const float v = load_f(a.type, at(ad, a, j, i[1], i[2], i[3]));
            acc = p.is_max ? fmaxf(v, acc) : acc + v;
            ++count;
        }
        if (!p.is_max) acc = count > 0 ? acc / float(count) : 0.0f;
        *reinterpret_cast<float *>(dd + offset_of(d, t)) = acc;
    }
}

__global__ void pool_2d_kernel(Shape d, Shape a, char * dd, const char * ad, Pool p, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        int64_t i[4];
        split4(d, t, i);
        float acc = p.is_max ? -FLT_MAX : 0.0f;
        for (int64_t y = i[1] * p.s1 - p.p1; y < i[1] * p.s1 - p.p1 + p.k1; ++y) {
            if (y < 0 || y >= a.ne[1]) continue;
            for (int64_t x = i[0] * p.s0 - p.p0; x < i[0] * p.s0 - p.p0 + p.k0; ++x) {
                if (x < 0 || x >= a.ne[0]) continue;
                const float v = load_f(a.type, at(ad, a, x, y, i[2], i[3]));
                acc = p.is_max ? fmaxf(v, acc) : acc + v;
            }
        }
        if (!p.is_max) acc /= float(p.k0 * p.k1);
        *reinterpret_cast<float *>(dd + offset_of(d, t)) = acc;
    }
}

__global__ void upscale_kernel(Shape d, Shape a, char * dd, const char * ad, upscale::Params p, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        int64_t i[4];
        split4(d, t, i);
        const int64_t s2 = upscale::nearest(i[2], p.sf[2]), s3 = upscale::nearest(i[3], p.sf[3]);
        const auto px = [&](int64_t x, int64_t y) { return *reinterpret_cast<const float *>(at(ad, a, x, y, s2, s3)); };
        *reinterpret_cast<float *>(dd + offset_of(d, t)) = upscale::sample(p, i[0], i[1], px);
    }
}

struct Pad {
    int64_t lp[4];
    bool    circular;
};

__global__ void pad_kernel(Shape d, Shape a, char * dd, const char * ad, Pad p, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        int64_t i[4], s[4];
        split4(d, t, i);
        bool in = true;
        for (int j = 0; j < 4; ++j) {
            s[j] = i[j] - p.lp[j];
            if (p.circular) s[j] = ((s[j] % a.ne[j]) + a.ne[j]) % a.ne[j];
            in = in && s[j] >= 0 && s[j] < a.ne[j];
        }
        *reinterpret_cast<float *>(dd + offset_of(d, t)) =
            in ? *reinterpret_cast<const float *>(at(ad, a, s[0], s[1], s[2], s[3])) : 0.0f;
    }
}

__global__ void pad_reflect_kernel(Shape d, Shape a, char * dd, const char * ad, int64_t p0, int64_t n) {
    SI_GRID_STRIDE(t, n) {
        int64_t i[4];
        split4(d, t, i);
        int64_t j = i[0] - p0;
        if (j < 0) j = -j;
        if (j >= a.ne[0]) j = 2 * (a.ne[0] - 1) - j;
        *reinterpret_cast<float *>(dd + offset_of(d, t)) = *reinterpret_cast<const float *>(at(ad, a, j, i[1], i[2], i[3]));
    }
}

Pool pool_of(const ggml_tensor * n, bool two_d) {
    Pool p{op_i32(n, 0) == GGML_OP_POOL_MAX, op_i32(n, 1), 1, 1, 1, 0, 0};
    if (two_d) {
        p.k1 = op_i32(n, 2);
        p.s0 = op_i32(n, 3);
        p.s1 = op_i32(n, 4);
        p.p0 = op_i32(n, 5);
        p.p1 = op_i32(n, 6);
    } else {
        p.s0 = op_i32(n, 2);
        p.p0 = op_i32(n, 3);
    }
    return p;
}

// One launch of kernel over node's elements with (dst, src0) shapes and data.
template <typename K, typename P> bool launch(rt::cuda::CudaStream & stream, ggml_tensor * node, K kernel, const P & p) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const ggml_tensor * a = node->src[0];
    kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(shape_of(node), shape_of(a),
                                                                    static_cast<char *>(node->data),
                                                                    static_cast<const char *>(a->data), p, n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace

Status pool_1d(rt::cuda::CudaStream & stream, ggml_tensor * node) { return launch(stream, node, pool_1d_kernel, pool_of(node, false)); }

Status pool_2d(rt::cuda::CudaStream & stream, ggml_tensor * node) { return launch(stream, node, pool_2d_kernel, pool_of(node, true)); }

Status upscale(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    return launch(stream, node, upscale_kernel, upscale::params_of(node, op_i32(node, 0)));
}

Status pad(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const Pad p{{op_i32(node, 0), op_i32(node, 2), op_i32(node, 4), op_i32(node, 6)}, op_i32(node, 8) != 0};
    return launch(stream, node, pad_kernel, p);
}

Status pad_reflect_1d(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    return launch(stream, node, pad_reflect_kernel, int64_t(op_i32(node, 0)));
}

} // namespace standin::kernels::cuda
