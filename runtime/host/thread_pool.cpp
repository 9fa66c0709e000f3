#include "runtime/host/thread_pool.h"

#include <sched.h>

#include <algorithm>

#include "diag/check.h"

namespace standin::rt::host {

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
    if (n_threads == n_threads_) {
        return;
    }
    stop();
    start(n_threads);
}

void ThreadPool::start(int n_threads) {
    n_threads_ = std::max(1, n_threads);
    quit_      = false;
    workers_.reserve(n_threads_ - 1);
    // New workers must not mistake the last finished job for a new one.
    const uint64_t current = generation_;
    for (int i = 1; i < n_threads_; ++i) {
        workers_.emplace_back([this, current] { worker_loop(current); });
    }
}

void ThreadPool::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        quit_ = true;
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

void ThreadPool::worker_loop(uint64_t seen) {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            wake_.wait(lock, [&] { return quit_ || generation_ != seen; });
            if (quit_) {
                return;
            }
            seen = generation_;
        }
        run_chunks();
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (--busy_ == 0) {
                done_.notify_one();
            }
        }
    }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const RangeFn & fn) {
    if (n <= 0) {
        return;
    }
    grain = std::max<int64_t>(1, grain);
    // Too little work to be worth waking anyone: run inline.
    if (n_threads_ == 1 || n <= grain) {
        fn(0, n);
        return;
    }
    // Several chunks per thread so uneven rows balance out.
    const int64_t chunk = std::max(grain, (n + 4 * n_threads_ - 1) / (4 * n_threads_));
    {
        std::lock_guard<std::mutex> lock(mu_);
        SI_ASSERT_MSG(busy_ == 0, "ThreadPool::parallel_for re-entered");
        job_fn_    = &fn;
        job_n_     = n;
        job_chunk_ = chunk;
        next_.store(0, std::memory_order_relaxed);
        busy_ = static_cast<int>(workers_.size());
        ++generation_;
    }
    wake_.notify_all();
    run_chunks();
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return busy_ == 0; });
    job_fn_ = nullptr;
}

} // namespace standin::rt::host
