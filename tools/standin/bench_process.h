// Child processes for `standin bench`: spawn with an environment, capture
// stdout, time out, and stop on SIGINT/SIGTERM/SIGHUP; plus the janitor that
// removes every container the harness started (Note [bench cleanup]).
//
// Note [bench cleanup]: the harness must leave no container behind whatever
// way it ends. Signals only set a flag (the handler does nothing else); the
// running child's process group is then stopped by run_process, which returns
// `interrupted`, and the bench loop unwinds. The janitor's destructor runs
// `ENGINE rm -f NAME` for each container still listed, so normal exit, error
// returns, exceptions and signals all pass through the same cleanup. A child
// killed from outside surfaces as a failed run, which is an error exit.
// SIGKILL of the harness itself cannot be caught; `run --rm` covers that case
// once the container's command ends.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace standin::bench {

struct ProcSpec {
    std::vector<std::string>                         argv;
    std::vector<std::pair<std::string, std::string>> env_set;     // added or replaced
    std::vector<std::string>                         env_unset;   // removed
    std::string stderr_path;         // appended to; empty: /dev/null
    double      timeout_s = 0;       // 0: none
    bool        ignore_signals = false;  // cleanup commands run to the end
};

struct ProcResult {
    int         exit_code   = -1;    // valid when term_signal == 0 and !timed_out
    int         term_signal = 0;     // the child died of this signal
    bool        timed_out   = false;
    int         interrupted = 0;     // we were signalled (the signal number); child stopped
    bool        spawn_failed = false;
    std::string out;                 // the child's stdout
    bool ok() const { return !spawn_failed && !timed_out && interrupted == 0 && term_signal == 0 && exit_code == 0; }
    std::string describe() const;    // "exit 1", "killed by signal 9", "timed out", ...
};

// SIGINT, SIGTERM and SIGHUP set a flag that run_process and the bench loop read.
void install_signal_handlers();
int  pending_signal();  // 0 when none arrived

// Runs argv[0] (PATH lookup) in its own process group and waits for it.
ProcResult run_process(const ProcSpec & spec);

// Removes the containers it was told about: on remove(), and for all still
// listed in cleanup() and the destructor.
class ContainerJanitor {
public:
    explicit ContainerJanitor(std::string engine) : engine_(std::move(engine)) {}
    ~ContainerJanitor() { cleanup(); }
    ContainerJanitor(const ContainerJanitor &) = delete;
    ContainerJanitor & operator=(const ContainerJanitor &) = delete;

    std::string next_name();                  // unique per harness process
    void started(const std::string & name) { live_.push_back(name); }
    void remove(const std::string & name);    // ENGINE rm -f NAME, unlisted
    void cleanup();                           // every listed one
    std::size_t live() const { return live_.size(); }

private:
    std::string              engine_;
    std::vector<std::string> live_;
    int                      seq_ = 0;
};

} // namespace standin::bench
