// A fixed set of worker threads owned by a host stream. Kernels split their
// work with parallel_for; the calling thread takes part, so a pool of size 1
// has no extra thread and runs everything inline.
//
// Threads are created when the pool is built or resized, never per op.
// parallel_for is not re-entrant: one call at a time per pool (a stream runs
// one kernel at a time, which is what guarantees this).
//
// Note [pool handoff]
// A decoded token is a few hundred small ops, each one parallel_for. Waking
// workers through a condition variable costs a futex call and a scheduler
// wake-up per worker per op (tens of microseconds on a virtual machine), which
// was a large share of a token. So the handoff spins: a job is published by
// bumping an atomic generation, and idle workers poll it for a while
// (kSpinFor) before they sleep on a condition variable; the caller only takes
// the mutex to notify when some worker is asleep. Completion is an atomic
// count that the caller polls for as long, then sleeps on, woken by the last
// worker only if it sleeps. The spins are short on purpose: on a machine with
// more runnable threads than cores, a spinning thread takes the core from the
// worker it waits for (unbounded spinning made decode 2.5x slower there).
#pragma once

#include <atomic>
#include <chrono>
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

    // How long an idle worker polls for the next job before it sleeps.
    static constexpr std::chrono::microseconds kSpinFor{200};

    // Times a worker went to sleep on the condition variable (for tests: a
    // pool that is fed back-to-back jobs keeps this near zero).
    uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

private:
    void start(int n_threads);
    void stop();
    void worker_loop(uint64_t seen_generation);
    void run_chunks();
    bool wait_for_job(uint64_t seen);

    int                      n_threads_ = 1;
    std::vector<std::thread> workers_;

    // Publication: job fields are written, then generation_ is released.
    std::atomic<uint64_t> generation_{0};
    std::atomic<bool>     quit_{false};
    std::atomic<int>      pending_{0};   // workers that have not finished the current job
    std::atomic<int>      sleeping_{0};  // workers blocked on wake_ (or about to be)
    std::atomic<bool>     caller_sleeping_{false};  // the caller blocked on done_
    std::atomic<uint64_t> sleeps_{0};

    std::mutex              mu_;
    std::condition_variable wake_;
    std::condition_variable done_;

    // The current job (valid while pending_ > 0 or the caller is running chunks).
    const RangeFn *      job_fn_    = nullptr;
    int64_t              job_n_     = 0;
    int64_t              job_chunk_ = 1;
    std::atomic<int64_t> next_{0};
};

// Number of hardware threads available to this process (affinity-aware).
int available_cores();

} // namespace standin::rt::host
