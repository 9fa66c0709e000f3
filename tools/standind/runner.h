// Running one job attempt as a child process: fork/exec in its own process
// group, stdin from /dev/null, stdout and stderr captured line by line, a
// timeout and a cancel request both stopping the whole group (SIGTERM, then
// SIGKILL after a grace period).
//
// The child also gets PR_SET_PDEATHSIG(SIGKILL): when the daemon dies (kill -9)
// the job dies with it instead of running on unwatched; start-up recovery then
// kills what is left of its process group (kill_orphan_group).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace standin::swarmd {

struct Spawn {
    std::vector<std::string> argv;  // argv[0] is an absolute path (find_program)
    std::vector<std::string> env;   // NAME=value
    std::string              cwd;
};

struct RunHooks {
    std::function<void(const char * stream, std::string && line)> on_line;      // "out" | "err"
    std::function<void(long pid, long long pid_start)>          on_started;
    std::function<void()>                                      on_tick;      // about every 100 ms
    const std::atomic<bool> *                                  cancel = nullptr;
    double                                                     timeout_s = 0;
    double                                                     grace_s   = 3;
    std::size_t                                                max_line  = 16 << 10;  // longer lines are split
};

struct RunResult {
    bool        started = false;  // false: fork or exec failed, see error
    int         exit_code = -1;   // when it exited
    int         signal = 0;       // when a signal ended it
    bool        timed_out = false;
    bool        cancelled = false;
    std::string error;
};

RunResult run_process(const Spawn & spawn, const RunHooks & hooks);

// A process's start time (field 22 of /proc/PID/stat), 0 when it does not exist.
// With the pid it identifies a process across a daemon restart despite pid reuse.
long long process_start_time(long pid);

// Kills (SIGKILL) what a dead daemon's job left behind: the processes of group
// `pgid` whose environment holds `marker` (NAME=value, set on every job), so a
// process that merely reused the number is never touched. Returns how many.
int kill_orphan_group(long pgid, const std::string & marker);

} // namespace standin::swarmd
