// Helpers shared by the CUDA kernels: tensor shape/stride bundles passed by
// value, float-family element access (through the shared numerics), and the
// launch check.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ggml.h"
#include "kernels/common/numerics.h"
#include "runtime/cuda/cuda_device.h"

namespace standin::kernels::cuda {

// Shape and byte strides of a tensor, small enough to pass as a kernel argument.
struct Shape {
    int64_t ne[4];
    int64_t nb[4];
    int     type;
};

inline Shape shape_of(const ggml_tensor * t) {
    Shape s;
    for (int i = 0; i < 4; ++i) {
        s.ne[i] = t->ne[i];
        s.nb[i] = int64_t(t->nb[i]);
    }
    s.type = int(t->type);
    return s;
}

__device__ __forceinline__ float load_f(int type, const char * p) {
    switch (type) {
        case GGML_TYPE_F32: return *reinterpret_cast<const float *>(p);
        case GGML_TYPE_F16: return num::fp16_to_f32(*reinterpret_cast<const uint16_t *>(p));
        default:            return num::bf16_to_f32(*reinterpret_cast<const uint16_t *>(p));
    }
}

__device__ __forceinline__ void store_f(int type, char * p, float v) {
    switch (type) {
        case GGML_TYPE_F32: *reinterpret_cast<float *>(p) = v; break;
        case GGML_TYPE_F16: *reinterpret_cast<uint16_t *>(p) = num::f32_to_fp16(v); break;
        default:            *reinterpret_cast<uint16_t *>(p) = num::f32_to_bf16(v); break;
    }
}

// Byte offset of the element with row-major linear index k.
__device__ __forceinline__ int64_t offset_of(const Shape & s, int64_t k) {
    const int64_t i0 = k % s.ne[0];
    k /= s.ne[0];
    const int64_t i1 = k % s.ne[1];
    k /= s.ne[1];
    const int64_t i2 = k % s.ne[2];
    const int64_t i3 = k / s.ne[2];
    return i0 * s.nb[0] + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3];
}

inline cudaStream_t stream_of(rt::Stream & s) { return static_cast<rt::cuda::CudaStream &>(s).begin_launch(); }

// Grid for n elements, capped so huge tensors loop (grid-stride) instead of overflowing.
inline unsigned grid_for(int64_t n, int block) {
    const int64_t blocks = (n + block - 1) / block;
    return unsigned(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

#define SI_CUDA_LAUNCH_CHECK() SI_CUDA_CHECK(cudaGetLastError())

} // namespace standin::kernels::cuda
