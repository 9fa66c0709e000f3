// The CUDA all-reduce (runtime/cuda/cuda_collective.cu) on whatever GPUs the
// machine has: members that share GPU 0 (three streams of one device, so a
// one-GPU machine tests the events, the summing kernel and the copy-back),
// and, with two or more GPUs, one member per GPU over peer memory. For each,
// element counts that take the 4-wide kernel, its scalar tail and buffers
// that are not 16-byte aligned, a member that does not contribute, and work
// queued on every stream right before the all-reduce that it must wait for.
// Every member must hold exactly the host's sum in member order (the host
// communicator's bits). Prints "comm check: ok"; exits 77 (skipped) without a
// CUDA device, 1 on the first mismatch.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "runtime/collective.h"
#include "runtime/cuda/cuda_device.h"

using namespace standin;

namespace {

bool check(const std::vector<rt::cuda::CudaDevice *> & devs, const char * what) {
    const size_t m = devs.size();
    std::vector<std::unique_ptr<rt::Stream>> streams;
    std::vector<rt::CommMember>              members;
    for (rt::cuda::CudaDevice * d : devs) {
        streams.push_back(d->create_stream());
        members.push_back({d, streams.back().get()});
    }
    std::unique_ptr<rt::Communicator> comm = rt::make_communicator(members);
    if (comm == nullptr) {
        std::printf("comm check: %s: no communicator (no peer path?)\n", what);
        return false;
    }
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t n : {size_t(1), size_t(3), size_t(4), size_t(4096), size_t(1000003)}) {
        for (size_t offset : {size_t(0), size_t(1)}) {  // 1: no buffer 16-byte aligned
            std::vector<std::vector<float>> host(m, std::vector<float>(n));
            std::vector<float *> bufs(m);
            std::vector<bool>    contributes(m);
            for (size_t i = 0; i < m; ++i) {
                for (float & x : host[i]) x = u(rng);
                bufs[i] = static_cast<float *>(devs[i]->alloc((n + offset) * sizeof(float))) + offset;
                contributes[i] = i != 1;  // member 1 (of 2 or more) adds zeros
                // Queued, not waited for: the all-reduce must order itself after it.
                streams[i]->copy_to_device(bufs[i], host[i].data(), n * sizeof(float));
            }
            if (!comm->allreduce_sum_f32(bufs, contributes, n)) {
                std::printf("comm check: %s: the all-reduce declined n=%zu\n", what, n);
                return false;
            }
            std::vector<float> want(n), got(n);
            for (size_t k = 0; k < n; ++k) {
                float s = 0.0f;
                for (size_t j = 0; j < m; ++j) s += contributes[j] ? host[j][k] : 0.0f;
                want[k] = s;
            }
            for (size_t i = 0; i < m; ++i) {
                streams[i]->copy_to_host(got.data(), bufs[i], n * sizeof(float));
                streams[i]->synchronize();
                if (std::memcmp(got.data(), want.data(), n * sizeof(float)) != 0) {
                    size_t k = 0;
                    while (std::memcmp(&got[k], &want[k], sizeof(float)) == 0) ++k;
                    std::printf("comm check: %s: member %zu, n=%zu offset=%zu: element %zu is %.9g, want %.9g\n", what, i,
                                n, offset, k, got[k], want[k]);
                    return false;
                }
            }
            for (size_t i = 0; i < m; ++i) devs[i]->free(bufs[i] - offset);
        }
    }
    std::printf("comm check: %s: ok\n", what);
    return true;
}

} // namespace

int main() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        std::printf("comm check: no CUDA device, skipped\n");
        return 77;
    }
    std::vector<std::unique_ptr<rt::cuda::CudaDevice>> devices;
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) return 1;
        devices.push_back(std::make_unique<rt::cuda::CudaDevice>(i, i, prop));
    }
    rt::cuda::CudaDevice * d0 = devices[0].get();
    bool ok = check({d0, d0, d0}, "three streams of GPU 0");
    if (count >= 2) {
        std::vector<rt::cuda::CudaDevice *> all;
        for (auto & d : devices) all.push_back(d.get());
        ok = ok && check(all, "one member per GPU");
    }
    if (!ok) return 1;
    std::printf("comm check: ok\n");
    return 0;
}
