// The host device: CPU memory, with a host stream whose "queue" is the calling
// thread plus a worker pool. Work is executed when it is enqueued, so every
// stream operation is complete on return and events are always signalled;
// this is the simplest honest model of a stream on a CPU, and it lets the very
// same glue and scheduler path run without a GPU.
#pragma once

#include <chrono>
#include <vector>

#include "runtime/host/thread_pool.h"
#include "runtime/runtime.h"

namespace standin::rt::host {

class HostStream final : public Stream {
public:
    explicit HostStream(int n_threads) : pool_(n_threads) {}

    Kind kind() const override { return Kind::host; }

    // A stream known to be a host stream, as one (kernels::run_node hands
    // host kernels theirs through this): the one place a stream is narrowed
    // to this type, checked against its kind.
    static HostStream & of(Stream & s);

    void copy_to_device(void * dst, const void * src, size_t n) override;
    void copy_to_host(void * dst, const void * src, size_t n) override;
    void copy_on_device(void * dst, const void * src, size_t n) override;
    void memset(void * dst, uint8_t value, size_t n) override;
    void synchronize() override {}
    void record(Event & event) override;
    void wait(Event & event) override;
    void set_threads(int n) override { pool_.resize(n); }

    // Host kernels run to completion inside the call, so a mark is the clock.
    void                profile_begin() override;
    void                profile_mark() override;
    std::vector<double> profile_end() override;

    ThreadPool & pool() { return pool_; }

private:
    ThreadPool pool_;
    std::vector<std::chrono::steady_clock::time_point> marks_;
};

class HostEvent final : public Event {
public:
    void synchronize() override {}
};

class HostDevice final : public Device {
public:
    HostDevice(int ordinal, int threads) : ordinal_(ordinal), threads_(threads) {}

    Kind        kind() const override { return Kind::host; }
    int         ordinal() const override { return ordinal_; }
    std::string description() const override;
    MemoryInfo  memory() const override;

    void * alloc(size_t bytes) override;
    void   free(void * ptr) override;
    size_t alignment() const override { return kAlignment; }
    size_t max_alloc() const override { return SIZE_MAX; }
    bool   memory_is_host() const override { return true; }

    void * alloc_host(size_t bytes) override { return alloc(bytes); }
    void   free_host(void * ptr) override { free(ptr); }

    void copy_to_device_sync(void * dst, const void * src, size_t n) override;
    void copy_to_host_sync(void * dst, const void * src, size_t n) override;
    void copy_on_device_sync(void * dst, const void * src, size_t n) override;
    void memset_sync(void * dst, uint8_t value, size_t n) override;

    std::unique_ptr<Stream> create_stream() override;
    std::unique_ptr<Event>  create_event() override { return std::make_unique<HostEvent>(); }

    // Cache-line alignment: wide vector loads never split a line.
    static constexpr size_t kAlignment = 64;
    // Allocations from kHugeFrom bytes are aligned to, and rounded up to, huge pages.
    static constexpr size_t kHugePage = size_t(2) << 20;
    static constexpr size_t kHugeFrom = size_t(4) << 20;

private:
    int ordinal_;
    int threads_;  // 0 = all cores
};

} // namespace standin::rt::host
