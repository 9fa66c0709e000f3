#include "runtime/collective.h"

#include "runtime/host/host_device.h"

namespace standin::rt {

namespace {

// Members whose memory the host reads directly: wait for each stream, then
// one pass that adds the members' values element by element and writes the
// sum back to every member, spread over the first member's worker pool.
class HostCommunicator final : public Communicator {
public:
    explicit HostCommunicator(std::vector<CommMember> members) : members_(std::move(members)) {}

    bool allreduce_sum_f32(const std::vector<float *> & bufs, const std::vector<bool> & contributes,
                           size_t n) override {
        const size_t m = members_.size();
        if (bufs.size() != m || contributes.size() != m) {
            return false;
        }
        for (const CommMember & mb : members_) {
            mb.stream->synchronize();
        }
        auto reduce = [&](int64_t begin, int64_t end) {
            for (int64_t k = begin; k < end; ++k) {
                float s = 0.0f;
                for (size_t j = 0; j < m; ++j) {
                    s += contributes[j] ? bufs[j][k] : 0.0f;
                }
                for (size_t j = 0; j < m; ++j) {
                    bufs[j][k] = s;
                }
            }
        };
        constexpr int64_t kGrain = 16384;  // floats per chunk: small vectors stay on one thread
        if (auto * hs = dynamic_cast<host::HostStream *>(members_[0].stream)) {
            hs->pool().parallel_for(int64_t(n), kGrain, reduce);
        } else {
            reduce(0, int64_t(n));
        }
        return true;
    }

private:
    std::vector<CommMember> members_;
};

} // namespace

std::unique_ptr<Communicator> make_communicator(const std::vector<CommMember> & members) {
    if (members.empty()) {
        return nullptr;
    }
    bool all_host = true;
    for (const CommMember & mb : members) {
        all_host = all_host && mb.device != nullptr && mb.stream != nullptr && mb.device->memory_is_host();
    }
    if (all_host) {
        return std::make_unique<HostCommunicator>(members);
    }
#ifdef STANDIN_WITH_CUDA
    return cuda::make_communicator(members);
#else
    return nullptr;
#endif
}

} // namespace standin::rt
