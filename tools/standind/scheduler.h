// Workers, one per device: each takes the oldest queued job for its device (or
// for "any"), runs it (runner.h), streams its output into the store and records
// how it ended. Control requests (cancel, retry, resume) go through here so a
// job that is being claimed cannot miss a cancel.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tools/standind/kinds.h"
#include "tools/standind/store.h"

namespace standin::swarmd {

struct SchedulerOptions {
    std::vector<std::string> devices = {"STANDIN_HOST0"};
    InterruptPolicy          on_interrupt = InterruptPolicy::requeue;
    std::size_t              max_log_lines = 200000;  // per attempt; the rest is dropped, with a note
    std::string              db_path;                 // names the daemon in the jobs' marker variable
    std::string              default_cwd = "/";
};

class Scheduler {
  public:
    Scheduler(Store & store, const Kinds & kinds, SchedulerOptions opt);
    ~Scheduler();
    Scheduler(const Scheduler &)             = delete;
    Scheduler & operator=(const Scheduler &) = delete;

    // Start-up: jobs a dead daemon left running are stopped and interrupted
    // (re-queued or failed, by policy). Returns how many there were.
    int  recover();
    void start();
    // Stops every running job (they are interrupted, by policy) and the workers.
    void stop();
    void wake();

    // Checks a submit against this daemon (kinds, devices, programs, cwd) and
    // fills in defaults; throws swarm::ProtocolError naming the job.
    void check_submit(swarm::SessionSpec & spec) const;

    std::vector<std::int64_t> cancel(std::int64_t session, std::optional<int> job);
    int requeue(std::int64_t session, std::optional<int> job, const std::vector<std::string> & states);

    const std::vector<std::string> & devices() const { return opt_.devices; }
    bool stopping() const { return stopping_.load(); }

  private:
    void worker_loop(const std::string & device);
    void run_job(const std::string & device, const JobRow & job, std::atomic<bool> & cancel);
    void record(const JobRow & job, const Outcome & o);
    std::vector<std::string> job_environment(const JobRow & job, const Command & cmd, const std::string & device) const;
    std::string marker(std::int64_t job_id, int attempt) const;

    Store &                                      store_;
    const Kinds &                                kinds_;
    SchedulerOptions                             opt_;
    std::mutex                                   mu_;
    std::condition_variable                      cv_;
    std::uint64_t                                work_gen_ = 0;
    std::atomic<bool>                            stopping_{false};
    std::map<std::int64_t, std::atomic<bool> *>  running_;  // job id -> its cancel flag
    std::vector<std::thread>                     workers_;
};

} // namespace standin::swarmd
