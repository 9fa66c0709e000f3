#include "runtime/host/thread_pool.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>

#include "diag/check.h"

namespace standin::rt::host {

namespace {

using Clock = std::chrono::steady_clock;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

// Polls `done` with pauses for up to `limit` (Note [pool handoff]).
template <class Done>
bool spin_until(Done done, Clock::duration limit) {
    const Clock::time_point t0 = Clock::now();
    for (uint32_t i = 1;; ++i) {
        if (done()) {
            return true;
        }
        cpu_relax();
        if ((i & 63) == 0 && Clock::now() - t0 >= limit) {
            return false;
        }
    }
}

} // namespace

int available_cores() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) {
            return n;
        }
    }
    return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int n_threads) { start(n_threads); }

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::resize(int n_threads) {
    if (std::max(1, n_threads) == n_threads_) {
        return;
    }
    stop();
    start(n_threads);
}

void ThreadPool::start(int n_threads) {
    n_threads_ = std::max(1, n_threads);
    quit_.store(false, std::memory_order_relaxed);
    workers_.reserve(n_threads_ - 1);
    // New workers must not mistake the last finished job for a new one.
    const uint64_t current = generation_.load(std::memory_order_relaxed);
    for (int i = 1; i < n_threads_; ++i) {
        workers_.emplace_back([this, current] { worker_loop(current); });
    }
}

void ThreadPool::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        quit_.store(true, std::memory_order_release);
    }
    wake_.notify_all();
    for (std::thread & t : workers_) {
        t.join();
    }
    workers_.clear();
}

void ThreadPool::run_chunks() {
    for (;;) {
        int64_t begin = next_.fetch_add(job_chunk_, std::memory_order_relaxed);
        if (begin >= job_n_) {
            return;
        }
        (*job_fn_)(begin, std::min(job_n_, begin + job_chunk_));
    }
}

// True when a job newer than `seen` is published, false when the pool quits.
bool ThreadPool::wait_for_job(uint64_t seen) {
    auto ready = [&] {
        // seq_cst: pairs with the caller's generation bump and sleeping_ check.
        return generation_.load(std::memory_order_seq_cst) != seen || quit_.load(std::memory_order_seq_cst);
    };
    if (!spin_until(ready, kSpinFor)) {
        std::unique_lock<std::mutex> lock(mu_);
        // Counted before the last check under the lock: a caller that bumps
        // the generation after that check sees sleeping_ > 0 and notifies
        // under the same mutex, so the wake-up cannot be lost.
        sleeping_.fetch_add(1, std::memory_order_seq_cst);
        sleeps_.fetch_add(1, std::memory_order_relaxed);
        wake_.wait(lock, ready);
        sleeping_.fetch_sub(1, std::memory_order_relaxed);
    }
    return !quit_.load(std::memory_order_acquire);
}

void ThreadPool::worker_loop(uint64_t seen) {
    while (wait_for_job(seen)) {
        seen = generation_.load(std::memory_order_acquire);
        run_chunks();
        // seq_cst: pairs with the caller's caller_sleeping_ store and pending_ check.
        if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_sleeping_.load(std::memory_order_seq_cst)) {
            std::lock_guard<std::mutex> lock(mu_);
            done_.notify_one();
        }
    }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const RangeFn & fn) {
    if (n <= 0) {
        return;
    }
    grain = std::max<int64_t>(1, grain);
    // Too little work to be worth handing out: run inline.
    if (n_threads_ == 1 || n <= grain) {
        fn(0, n);
        return;
    }
    SI_ASSERT_MSG(pending_.load(std::memory_order_acquire) == 0, "ThreadPool::parallel_for re-entered");
    // Several chunks per thread so uneven rows balance out.
    const int64_t chunk = std::max(grain, (n + 4 * n_threads_ - 1) / (4 * n_threads_));
    job_fn_    = &fn;
    job_n_     = n;
    job_chunk_ = chunk;
    next_.store(0, std::memory_order_relaxed);
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes the job fields
    if (sleeping_.load(std::memory_order_seq_cst) > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        wake_.notify_all();
    }
    run_chunks();
    // Workers finish their last chunk about when the caller does; one that was
    // descheduled is waited for asleep, so that it can have the core.
    auto done = [&] { return pending_.load(std::memory_order_seq_cst) == 0; };
    if (!spin_until(done, kSpinFor)) {
        std::unique_lock<std::mutex> lock(mu_);
        caller_sleeping_.store(true, std::memory_order_seq_cst);
        done_.wait(lock, done);
        caller_sleeping_.store(false, std::memory_order_relaxed);
    }
    job_fn_ = nullptr;
}

} // namespace standin::rt::host
