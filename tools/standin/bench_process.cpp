// Process handling for `standin bench` (see bench_process.h and
// Note [bench cleanup]). POSIX only: fork/exec into a new process group, a
// pipe for stdout, poll with a short tick so timeouts and signals are seen.
#include "tools/standin/bench_process.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace standin::bench {

namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_signal(int sig) { g_signal = sig; }

constexpr int kTickMs = 100;          // how often the wait loop checks signals and time
constexpr double kGraceS = 3.0;       // SIGTERM to SIGKILL

// The child side of fork: never returns.
[[noreturn]] void exec_child(const ProcSpec & spec, int out_fd) {
    setpgid(0, 0);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) std::signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int in = open("/dev/null", O_RDONLY);
    int err = spec.stderr_path.empty() ? open("/dev/null", O_WRONLY)
                                       : open(spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in >= 0) dup2(in, 0);
    dup2(out_fd, 1);
    if (err >= 0) dup2(err, 2);
    for (const auto & k : spec.env_unset) unsetenv(k.c_str());
    for (const auto & [k, v] : spec.env_set) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char *> args;
    for (const auto & a : spec.argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    dprintf(2, "standin bench: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
}

// SIGTERM to the group, then SIGKILL after the grace period; reaps the child.
int stop_group(pid_t pid) {
    kill(-pid, SIGTERM);
    auto t0 = std::chrono::steady_clock::now();
    int  status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > kGraceS) {
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        usleep(20000);
    }
    kill(-pid, SIGKILL);  // stragglers of the group
    return status;
}

} // namespace

std::string ProcResult::describe() const {
    if (spawn_failed) return "could not be started";
    if (interrupted != 0) return "stopped by signal " + std::to_string(interrupted) + " to the harness";
    if (timed_out) return "timed out";
    if (term_signal != 0) return "killed by signal " + std::to_string(term_signal);
    return "exit " + std::to_string(exit_code);
}

void install_signal_handlers() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
}

int pending_signal() { return g_signal; }

ProcResult run_process(const ProcSpec & spec) {
    ProcResult r;
    int fds[2];
    if (spec.argv.empty() || pipe2(fds, O_CLOEXEC) != 0) {
        r.spawn_failed = true;
        return r;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        r.spawn_failed = true;
        return r;
    }
    if (pid == 0) exec_child(spec, fds[1]);
    setpgid(pid, pid);  // also here: no window where a signal reaches the old group only
    close(fds[1]);

    auto   t0 = std::chrono::steady_clock::now();
    bool   eof = false;
    int    status = 0;
    char   buf[8192];
    for (;;) {
        if (!eof) {
            pollfd p{fds[0], POLLIN, 0};
            if (poll(&p, 1, kTickMs) > 0) {
                ssize_t n = read(fds[0], buf, sizeof(buf));
                if (n > 0) r.out.append(buf, static_cast<size_t>(n));
                else if (n == 0 || errno != EINTR) eof = true;
            }
        } else {
            usleep(kTickMs * 1000);
        }
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            // Drain what the child wrote just before it ended, without waiting on
            // a straggler of its group that still holds the pipe; then stop those.
            fcntl(fds[0], F_SETFL, O_NONBLOCK);
            ssize_t n;
            while (!eof && (n = read(fds[0], buf, sizeof(buf))) > 0) r.out.append(buf, static_cast<size_t>(n));
            kill(-pid, SIGKILL);
            break;
        }
        double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!spec.ignore_signals && g_signal != 0) {
            r.interrupted = g_signal;
            status = stop_group(pid);
            break;
        }
        if (spec.timeout_s > 0 && el > spec.timeout_s) {
            r.timed_out = true;
            status = stop_group(pid);
            break;
        }
    }
    close(fds[0]);
    if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
    else if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (r.interrupted != 0 || r.timed_out) r.term_signal = 0;  // our own stop, reported as such
    return r;
}

std::string ContainerJanitor::next_name() {
    return "standin-bench-" + std::to_string(getpid()) + "-" + std::to_string(++seq_);
}

void ContainerJanitor::remove(const std::string & name) {
    ProcSpec s;
    s.argv           = {engine_, "rm", "-f", name};
    s.timeout_s      = 60;
    s.ignore_signals = true;
    run_process(s);
    live_.erase(std::remove(live_.begin(), live_.end(), name), live_.end());
}

void ContainerJanitor::cleanup() {
    while (!live_.empty()) remove(live_.back());
}

} // namespace standin::bench
