// The all-reduce of CUDA devices (runtime/collective.h) over peer memory: each
// member's stream sums every member's buffer itself (kernels/cuda/allreduce.cu),
// reading the other GPUs' memory directly, so one all-reduce is two rounds of
// cross-stream events, one kernel and one copy per member, all enqueued:
// nothing waits on the host.
//
//   1. every stream waits for every other's queued work (its buffer is final);
//   2. each member sums all buffers into scratch of its own, member order;
//   3. every stream waits for every other's sum (no buffer is still being read);
//   4. each member copies its sum over its buffer.
//
// Members may share a GPU (two streams of one device): then nothing crosses a
// peer link, which is how a one-GPU machine tests it (tests/runtime/comm_check.cu).
// GPUs without a peer path between them get no communicator: ggml's generic
// all-reduce (copies through the host) runs instead.
#include <memory>
#include <vector>

#include "diag/log.h"
#include "kernels/cuda/allreduce.h"
#include "runtime/collective.h"
#include "runtime/cuda/cuda_device.h"

namespace standin::rt::cuda {

namespace {

class CudaCommunicator final : public Communicator {
public:
    explicit CudaCommunicator(std::vector<CudaStream *> streams) : streams_(std::move(streams)) {
        for (CudaStream * s : streams_) {
            ready_.push_back(std::make_unique<CudaEvent>(s->device()));
            summed_.push_back(std::make_unique<CudaEvent>(s->device()));
        }
    }

    bool allreduce_sum_f32(const std::vector<float *> & bufs, const std::vector<bool> & contributes,
                           size_t n) override {
        const size_t m = streams_.size();
        if (bufs.size() != m || contributes.size() != m) {
            return false;
        }
        if (n == 0) {
            return true;
        }
        // Scratch first, so that a refusal (growing it while a CUDA graph is
        // being recorded) leaves everything as it was.
        std::vector<float *> sums(m);
        for (size_t i = 0; i < m; ++i) {
            sums[i] = static_cast<float *>(streams_[i]->scratch(n * sizeof(float)));
            if (sums[i] == nullptr) {
                return false;
            }
        }
        kernels::cuda::MemberInputs in;
        in.m = int(m);
        for (size_t j = 0; j < m; ++j) {
            in.in[j] = bufs[j];
            in.contributes |= contributes[j] ? 1u << j : 0u;
        }
        barrier(ready_);
        for (size_t i = 0; i < m; ++i) kernels::cuda::sum_members(*streams_[i], sums[i], in, n);
        barrier(summed_);
        for (size_t i = 0; i < m; ++i) {
            SI_CUDA_CHECK(cudaMemcpyAsync(bufs[i], sums[i], n * sizeof(float), cudaMemcpyDeviceToDevice,
                                          streams_[i]->begin_launch()));
        }
        return true;
    }

private:
    std::vector<CudaStream *>               streams_;
    std::vector<std::unique_ptr<CudaEvent>> ready_, summed_;

    // Every stream waits for what every other stream has queued so far.
    void barrier(const std::vector<std::unique_ptr<CudaEvent>> & events) {
        for (size_t i = 0; i < streams_.size(); ++i) {
            SI_CUDA_CHECK(cudaEventRecord(events[i]->handle(), streams_[i]->begin_launch()));
        }
        for (size_t i = 0; i < streams_.size(); ++i) {
            for (size_t j = 0; j < streams_.size(); ++j) {
                if (j != i) SI_CUDA_CHECK(cudaStreamWaitEvent(streams_[i]->begin_launch(), events[j]->handle(), 0));
            }
        }
    }
};

} // namespace

std::unique_ptr<Communicator> make_communicator(const std::vector<CommMember> & members) {
    if (members.empty() || members.size() > size_t(kernels::cuda::kMaxCommMembers)) {
        return nullptr;
    }
    std::vector<CudaStream *> streams;
    for (const CommMember & mb : members) {
        if (mb.device == nullptr || mb.stream == nullptr || mb.device->kind() != Kind::cuda ||
            mb.stream->kind() != Kind::cuda) {
            return nullptr;
        }
        streams.push_back(&CudaStream::of(*mb.stream));
    }
    // Every member reads every other member's memory.
    for (CudaStream * a : streams) {
        for (CudaStream * b : streams) {
            if (!enable_peer(a->device(), b->device())) {
                SI_LOG_INFO("all-reduce: GPU %d cannot read GPU %d's memory directly; ggml's generic all-reduce is used",
                            a->device(), b->device());
                return nullptr;
            }
        }
    }
    return std::make_unique<CudaCommunicator>(std::move(streams));
}

} // namespace standin::rt::cuda
