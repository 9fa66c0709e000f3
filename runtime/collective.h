// Collective operations across devices, for tensor parallelism: llama's
// `--split-mode tensor` runs one slice of each layer per device and asks the
// devices' registry for an all-reduce (ggml_backend_comm_*, glue/comm.cpp).
//
// Contract: a Communicator is made for a fixed list of (device, stream)
// members. allreduce_sum_f32 is ordered after all work already enqueued on
// every member's stream, and leaves each member's buffer holding the sum of
// all contributing members' buffers, added in member order (so every member
// gets bit-identical values). A member that does not contribute counts as
// zeros; its buffer is overwritten with the sum too. It returns false, having
// changed nothing, when it cannot do the reduction; the caller then uses its
// own fallback (ggml's meta backend has a generic one).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/runtime.h"

namespace standin::rt {

struct CommMember {
    Device * device = nullptr;
    Stream * stream = nullptr;
};

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual bool allreduce_sum_f32(const std::vector<float *> & bufs, const std::vector<bool> & contributes,
                                   size_t n) = 0;
};

// A communicator over `members`, or nullptr when no implementation covers
// them: members whose memory the host reads directly (host devices), or
// CUDA devices that can read each other's memory (cuda::make_communicator).
std::unique_ptr<Communicator> make_communicator(const std::vector<CommMember> & members);

namespace cuda {
// CUDA members only (runtime/cuda/cuda_collective.cu; a build with CUDA).
std::unique_ptr<Communicator> make_communicator(const std::vector<CommMember> & members);
} // namespace cuda

} // namespace standin::rt
