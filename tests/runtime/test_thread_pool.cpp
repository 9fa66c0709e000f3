#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/host/thread_pool.h"

using standin::rt::host::ThreadPool;

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
    for (int threads : {1, 2, 3, 8}) {
        ThreadPool pool(threads);
        for (int64_t n : {1, 7, 100, 4097}) {
            for (int64_t grain : {1, 3, 1000}) {
                std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
                pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
                    ASSERT_LE(int64_t(0), b);
                    ASSERT_LE(e, n);
                    for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
                });
                for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << threads << " " << n << " " << i;
            }
        }
    }
}

TEST(ThreadPool, UsesSeveralThreadsForLargeWork) {
    ThreadPool pool(4);
    std::mutex mu;
    std::set<std::thread::id> ids;
    for (int rep = 0; rep < 50 && ids.size() < 2; ++rep) {
        pool.parallel_for(1 << 12, 1, [&](int64_t, int64_t) {
            std::this_thread::sleep_for(std::chrono::microseconds(20));
            std::lock_guard<std::mutex> lock(mu);
            ids.insert(std::this_thread::get_id());
        });
    }
    EXPECT_GE(ids.size(), 2u);
}

TEST(ThreadPool, ZeroWorkDoesNothing) {
    ThreadPool pool(2);
    bool called = false;
    pool.parallel_for(0, 1, [&](int64_t, int64_t) { called = true; });
    EXPECT_FALSE(called);
}

TEST(ThreadPool, ResizeKeepsWorking) {
    ThreadPool pool(2);
    for (int n : {1, 5, 2, 2, 3}) {
        pool.resize(n);
        EXPECT_EQ(pool.size(), n);
        std::atomic<int64_t> sum{0};
        pool.parallel_for(1000, 1, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) sum += i;
        });
        EXPECT_EQ(sum.load(), 999 * 1000 / 2);
    }
}

TEST(ThreadPool, ManyBackToBackJobs) {
    ThreadPool pool(3);
    std::atomic<int64_t> total{0};
    for (int rep = 0; rep < 2000; ++rep) {
        pool.parallel_for(64, 1, [&](int64_t b, int64_t e) { total += e - b; });
    }
    EXPECT_EQ(total.load(), 2000 * 64);
}

// Idle workers stop spinning and sleep (Note [pool handoff]); a job published
// after that must still wake them and complete, many times over (a lost
// wake-up would hang here or leave chunks undone).
TEST(ThreadPool, JobsAfterWorkersSleptComplete) {
    ThreadPool pool(3);
    for (uint64_t round = 0; round < 3; ++round) {
        // Each of the 2 workers sleeps once per idle spell (a wake-up comes
        // only with a job), after being idle for kSpinFor.
        const uint64_t want = 2 * (round + 1);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (pool.sleeps() < want && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(ThreadPool::kSpinFor);
        }
        EXPECT_EQ(pool.sleeps(), want);
        std::vector<std::atomic<int>> hits(1000);
        pool.parallel_for(1000, 1, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
        });
        for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << round << " " << i;
    }
}

