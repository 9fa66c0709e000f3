// A fixed set of worker threads owned by a host stream. Kernels split their
// work with parallel_for; the calling thread takes part, so a pool of size 1
// has no extra thread and runs everything inline.
//
// Threads are created when the pool is built or resized, never per op.
// parallel_for is not re-entrant: one call at a time per pool (a stream runs
// one kernel at a time, which is what guarantees this).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace standin::rt::host {

class ThreadPool {
public:
    using RangeFn = std::function<void(int64_t begin, int64_t end)>;

    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool &)             = delete;
    ThreadPool & operator=(const ThreadPool &) = delete;

    int  size() const { return n_threads_; }
    void resize(int n_threads);

    // Calls fn over [0, n) in chunks of at least `grain` items, spread over the
    // pool. Returns when every chunk is done.
    void parallel_for(int64_t n, int64_t grain, const RangeFn & fn);

private:
    void start(int n_threads);
    void stop();
    void worker_loop(uint64_t seen_generation);
    void run_chunks();

    int                      n_threads_ = 1;
    std::vector<std::thread> workers_;

    std::mutex              mu_;
    std::condition_variable wake_;
    std::condition_variable done_;
    uint64_t                generation_ = 0;
    bool                    quit_       = false;
    int                     busy_       = 0;  // workers still inside the current job

    // The current job (valid while busy_ > 0 or the caller is running chunks).
    const RangeFn *      job_fn_ = nullptr;
    int64_t              job_n_  = 0;
    int64_t              job_chunk_ = 1;
    std::atomic<int64_t> next_{0};
};

// Number of hardware threads available to this process (affinity-aware).
int available_cores();

} // namespace standin::rt::host
