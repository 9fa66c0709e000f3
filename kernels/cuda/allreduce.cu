// The sum of a tensor-parallel all-reduce (runtime/cuda/cuda_collective.cu):
// one member's output, element k the sum over the members in member order of
// their element k (0 for a member that does not contribute), read from the
// members' memory directly (their own, or a peer GPU's over NVLink/PCIe).
// Every member runs the same additions in the same order, so all get the same
// bits, as the host communicator's members do (runtime/collective.cpp).
#include "kernels/cuda/allreduce.h"

#include <algorithm>
#include <cstdint>

#include "runtime/cuda/cuda_device.h"

namespace standin::kernels::cuda {

namespace {

__device__ __forceinline__ float member_sum(const MemberInputs & in, size_t k) {
    float s = 0.0f;
    for (int j = 0; j < in.m; ++j) {
        s += (in.contributes >> j) & 1u ? in.in[j][k] : 0.0f;
    }
    return s;
}

// Four consecutive elements per thread where every input and the output are
// 16-byte aligned (the common case: ggml's tensor data), one otherwise.
__global__ void sum_members_vec4(float4 * out, MemberInputs in, size_t n4) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4; i += size_t(gridDim.x) * blockDim.x) {
        float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int j = 0; j < in.m; ++j) {
            if (((in.contributes >> j) & 1u) == 0) {
                s.x += 0.0f, s.y += 0.0f, s.z += 0.0f, s.w += 0.0f;  // as member_sum: -0 + 0 is +0
                continue;
            }
            const float4 v = reinterpret_cast<const float4 *>(in.in[j])[i];
            s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
        }
        out[i] = s;
    }
}

__global__ void sum_members_scalar(float * out, MemberInputs in, size_t begin, size_t n) {
    for (size_t k = begin + blockIdx.x * size_t(blockDim.x) + threadIdx.x; k < n; k += size_t(gridDim.x) * blockDim.x) {
        out[k] = member_sum(in, k);
    }
}

bool aligned16(const void * p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

} // namespace

void sum_members(rt::cuda::CudaStream & stream, float * out, const MemberInputs & in, size_t n) {
    if (n == 0) {
        return;
    }
    constexpr int kThreads = 256;
    const cudaStream_t s = stream.begin_launch();
    bool vec = aligned16(out);
    for (int j = 0; j < in.m; ++j) vec = vec && aligned16(in.in[j]);
    const size_t n4 = vec ? n / 4 : 0;
    // Enough blocks to keep every multiprocessor's loads in flight, no more:
    // the loop strides over the rest.
    const size_t max_blocks = size_t(4) * size_t(stream.sm_count());
    if (n4 > 0) {
        const size_t blocks = std::min(max_blocks, (n4 + kThreads - 1) / kThreads);
        sum_members_vec4<<<unsigned(blocks), kThreads, 0, s>>>(reinterpret_cast<float4 *>(out), in, n4);
    }
    if (4 * n4 < n) {
        const size_t rest   = n - 4 * n4;
        const size_t blocks = std::min(max_blocks, (rest + kThreads - 1) / kThreads);
        sum_members_scalar<<<unsigned(blocks), kThreads, 0, s>>>(out, in, 4 * n4, n);
    }
    SI_CUDA_CHECK(cudaGetLastError());
}

} // namespace standin::kernels::cuda
