// The summing kernel of the CUDA all-reduce (kernels/cuda/allreduce.cu).
#pragma once

#include <cstddef>
#include <cstdint>

namespace standin::rt::cuda {
class CudaStream;
}

namespace standin::kernels::cuda {

constexpr int kMaxCommMembers = 16;  // the most devices ggml's meta device holds (GGML_BACKEND_META_MAX_DEVICES)

// The members' buffers in member order; bit j of `contributes` says whether
// member j's values count (else it adds zeros).
struct MemberInputs {
    const float * in[kMaxCommMembers] = {};
    int           m           = 0;
    uint32_t      contributes = 0;
};

// out[k] = sum of the contributing members' in[j][k] in member order, from
// 0.0f, for k < n; on `stream`, which must be able to read every in[j]
// (its own device's memory, or a peer's with peer access enabled).
void sum_members(rt::cuda::CudaStream & stream, float * out, const MemberInputs & in, size_t n);

} // namespace standin::kernels::cuda
