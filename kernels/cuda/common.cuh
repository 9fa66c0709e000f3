// Helpers shared by the CUDA kernels: tensor shape/stride bundles passed by
// value, float-family element access (through the shared numerics), the
// launch check, warp/block reductions, row addressing and grid sizing.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <utility>

#include "diag/config.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "kernels/common/numerics.h"
#include "kernels/cuda/limits.h"
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

// A kernel operand: its shape and its bytes (argument structs of kernels
// with many sources hold one per source).
struct Operand : Shape {
    const char * d;
};

// Whether the bytes of two tensors meet (a fused launch that writes one and
// reads or writes the other must not run them at once).
inline bool overlaps(const ggml_tensor * a, const ggml_tensor * b) {
    const char * pa = static_cast<const char *>(a->data);
    const char * pb = static_cast<const char *>(b->data);
    return pa < pb + ggml_nbytes(b) && pb < pa + ggml_nbytes(a);
}

inline Operand operand_of(const ggml_tensor * t) {
    Operand o;
    static_cast<Shape &>(o) = shape_of(t);
    o.d = static_cast<const char *>(t->data);
    return o;
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

inline cudaStream_t stream_of(rt::cuda::CudaStream & s) { return s.begin_launch(); }

// Grid for n elements, capped so huge tensors loop (grid-stride) instead of overflowing.
inline unsigned grid_for(int64_t n, int block) {
    const int64_t blocks = (n + block - 1) / block;
    return unsigned(blocks < limits::kGridX ? blocks : limits::kGridX);
}

#define SI_CUDA_LAUNCH_CHECK() SI_CUDA_CHECK(cudaGetLastError())

// --- programmatic dependent launch ------------------------------------------------
// Note [dependent launch]
// A kernel launched through launch() may start while the kernel before it on
// the stream is still draining (Hopper's programmatic dependent launch; kept
// by CUDA graph capture), so a decode step of a few hundred small kernels
// does not pay each one's ramp-up and tail. The contract, for every kernel
// launched that way: call pdl_wait() before reading anything an earlier
// kernel wrote, and before writing anything it may still read. What comes
// before the wait touches only memory no kernel writes (weights). Each
// kernel calls pdl_trigger() once its own work is under way, so the next one
// may begin launching. Without the launch attribute (GGML_STANDIN_PDL=0, or
// a plain <<<>>> launch) both calls are no-ops and order is the stream's.
// A kernel's inputs are weights only where weights_fixed() says so at launch:
// a mat-vec's src0 may as well be a quantized KV cache (KQ with flash
// attention off) that the kernel just before wrote, or a tensor a CPY
// quantized, and a fused norm's factor any tensor of the graph.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Whether t's bytes are a model's weights (its buffer's usage is
// GGML_BACKEND_BUFFER_USAGE_WEIGHTS, as llama.cpp marks the buffers it loads
// a model into): written by uploads only, never by a kernel, so a kernel may
// read them before pdl_wait (Note [dependent launch]). Anything else, a KV
// cache, an activation or test-backend-ops' tensors, is read after it.
inline bool weights_fixed(const ggml_tensor * t) {
    return t->buffer != nullptr && ggml_backend_buffer_get_usage(t->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
}

// Whether launch() asks for dependent launch (GGML_STANDIN_PDL, read once).
inline bool pdl_enabled() {
    static const bool on = diag::config().pdl;
    return on;
}

// kernel<<<grid, block, smem, st>>>(args...), with the dependent-launch
// attribute when enabled, plus `extra` attributes (a cluster shape); the
// kernel must keep the contract of Note [dependent launch].
template <typename... KArgs, typename... Args>
void launch_ex(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
               const cudaLaunchAttribute * extra, int n_extra, Args &&... args) {
    cudaLaunchAttribute attrs[4];
    int n = 0;
    for (int i = 0; i < n_extra && n < 3; ++i) attrs[n++] = extra[i];
    if (pdl_enabled()) {
        attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attrs[n].val.programmaticStreamSerializationAllowed = 1;
        ++n;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = attrs;
    cfg.numAttrs = unsigned(n);
    SI_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

template <typename... KArgs, typename... Args>
void launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, Args &&... args) {
    launch_ex(kernel, grid, block, smem, st, nullptr, 0, std::forward<Args>(args)...);
}

// --- reductions ----------------------------------------------------------------
// Warp-wide (all 32 lanes active) and block-wide (blockDim.x a multiple of 32,
// at most 1024; every thread of the block must call, and every thread gets the
// result). `scratch` is 32 elements of shared memory; calls may reuse it back to
// back (the leading barrier orders them).

template <typename T> __device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// One level of warp_sum_each: the first n of v are live; a lane keeps half
// of them (the upper half where lane bit O is set) plus what the lane O away
// sends of its own. Recursion, not a loop, so that every index is a constant
// (a loop over levels stayed rolled, v in local memory).
template <int N, int n, int O> __device__ __forceinline__ void warp_sum_halve(float (&v)[N], int lane) {
    if constexpr (n > 1) {
        const bool upper = (lane & O) != 0;
#pragma unroll
        for (int i = 0; i < n / 2; ++i) {
            const float send = upper ? v[i] : v[i + n / 2];
            const float keep = upper ? v[i + n / 2] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
        }
        warp_sum_halve<N, n / 2, O / 2>(v, lane);
    }
}

// N values of each lane summed over the warp at once (N a power of two, at
// most 32): lane l returns the sum of in[l / (32 / N)]. Each level trades half
// of a lane's values with the lane O away and keeps the other half, so N
// values take N - 1 + log2(32 / N) shuffles where N warp_sums take 5 N (a
// mat-vec's 16 row-by-column sums: 16 instead of 80).
template <int N> __device__ __forceinline__ float warp_sum_each(const float (&in)[N]) {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "a power of two, at most one value per lane");
    float v[N];
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = in[i];
    warp_sum_halve<N, N, 16>(v, int(threadIdx.x & 31u));
    float s = v[0];
#pragma unroll
    for (int o = 16 / N; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The rounding of a 32-group of the integer kernels' activations
// (act_round.cuh) from the group's max |x|: codes are rint(x * id), the scale
// kept for them d. The one statement of it for every kernel that writes them.
struct Act32Scale {
    float id, d;
};
__device__ __forceinline__ Act32Scale act32_scale(float amax) {
    return {amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f, __half2float(__float2half_rn(__fdiv_rn(amax, 127.0f)))};
}

// A 32-group of the integer kernels' activations held by a whole warp, one
// value per lane, quantized as quantize_act does (act_round.cuh): the lane's
// code goes to *q, and lane 0 stores {d, d * sum of the codes} at *ds. For
// the producers that write the next product's quantized input themselves.
__device__ __forceinline__ void quantize_warp32(float x, int8_t * q, float2 * ds) {
    const Act32Scale s = act32_scale(warp_max(fabsf(x)));
    const int code = __float2int_rn(__fmul_rn(x, s.id));
    *q = int8_t(code);
    const int sum = warp_sum(code);
    if ((threadIdx.x & 31u) == 0) *ds = make_float2(s.d, s.d * float(sum));
}

template <typename T> __device__ __forceinline__ T block_sum(T v, T * scratch) {
    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5), nw = int(blockDim.x >> 5);
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_sum(lane < nw ? scratch[lane] : T(0));
}

__device__ __forceinline__ float block_max(float v, float * scratch) {
    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5), nw = int(blockDim.x >> 5);
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_max(lane < nw ? scratch[lane] : -INFINITY);
}

// Byte pointer of row (i1, i2, i3) of a tensor.
template <typename P>  // char or const char
__device__ __forceinline__ P * row_at(P * base, const Shape & s, int64_t i1, int64_t i2, int64_t i3) {
    return base + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3];
}

// Row r (counting over dims 1..3) -> (i1, i2, i3).
__device__ __forceinline__ void split_row(const Shape & s, int64_t r, int64_t & i1, int64_t & i2, int64_t & i3) {
    i1 = r % s.ne[1];
    r /= s.ne[1];
    i2 = r % s.ne[2];
    i3 = r / s.ne[2];
}

// Grid for kernels that loop over rows with a block per row.
inline unsigned row_grid(int64_t rows) { return unsigned(rows < limits::kGridX ? (rows > 0 ? rows : 1) : limits::kGridX); }

// Grid dimension y/z limit: larger extents are covered by looping in the kernel.
constexpr unsigned kMaxGridYZ = unsigned(limits::kGridYZ);
inline unsigned grid_yz(int64_t n) { return unsigned(n < int64_t(kMaxGridYZ) ? (n > 0 ? n : 1) : kMaxGridYZ); }

// Stream-ordered scratch memory (cudaMallocAsync). Out of memory is a caller
// condition, not an internal error: it is logged and reported as false.
inline bool scratch_alloc(void ** p, size_t bytes, cudaStream_t st) {
    const cudaError_t err = cudaMallocAsync(p, bytes, st);
    if (err != cudaSuccess) {
        (void) cudaGetLastError();  // reset the last error, so the next launch check does not report it
        rt::cuda::warn_failed(err, "cudaMallocAsync (kernel scratch)", __FILE__, __LINE__);
        *p = nullptr;
        return false;
    }
    return true;
}

// Runs setup(device) once per device for the current device: function and
// pool attributes are per device, so a process-wide "once" would leave the
// second GPU of a split without them. `done` holds one bit per device; devices
// past 63 run setup every time.
template <typename F> void once_per_device(std::atomic<uint64_t> & done, F && setup) {
    int dev = 0;
    SI_CUDA_CHECK(cudaGetDevice(&dev));
    const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
    if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return;
    setup(dev);
    done.fetch_or(bit, std::memory_order_release);
}

// Whether every pointer and stride is a multiple of `align` bytes.
inline bool aligned_to(const ggml_tensor * t, size_t align) {
    return reinterpret_cast<uintptr_t>(t->data) % align == 0 && t->nb[1] % align == 0 && t->nb[2] % align == 0 &&
           t->nb[3] % align == 0;
}

} // namespace standin::kernels::cuda
