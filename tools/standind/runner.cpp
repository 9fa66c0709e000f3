// Child processes of jobs (see runner.h).
//
// The daemon is multi-threaded, so between fork and exec the child calls only
// async-signal-safe functions; everything it needs (argv, envp, the program's
// absolute path) is prepared before the fork. exec failures come back through a
// close-on-exec pipe, so "command not found" is a clear job error, not exit 127.
#include "tools/standind/runner.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/swarm/proc.h"

namespace standin::swarmd {

namespace {

double mono_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Where the child failed before exec replaced it.
struct ChildFailure {
    int stage;  // 1 = chdir, 2 = exec, 3 = stdio
    int err;
};

[[noreturn]] void child_fail(int fd, int stage) {
    ChildFailure f{stage, errno};
    ssize_t      n = ::write(fd, &f, sizeof(f));
    (void) n;
    _exit(127);
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void child_exec(const Spawn & sp, char * const * argv, char * const * envp, int devnull, int out_w,
                             int err_w, int report_w, pid_t parent) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
        _exit(127);  // the daemon died before the line above took effect
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);  // the daemon ignores it; an ignored disposition survives exec
    if (::dup2(devnull, 0) < 0 || ::dup2(out_w, 1) < 0 || ::dup2(err_w, 2) < 0) {
        child_fail(report_w, 3);
    }
    if (::chdir(sp.cwd.c_str()) != 0) {
        child_fail(report_w, 1);
    }
    ::execve(argv[0], argv, envp);
    child_fail(report_w, 2);
}

// Splits a byte stream into lines; lines longer than max are cut into pieces.
class Lines {
  public:
    Lines(const char * stream, const RunHooks & h) : stream_(stream), h_(h) {}
    void feed(const char * p, std::size_t n) {
        buf_.append(p, n);
        std::size_t start = 0;
        for (;;) {
            std::size_t nl = buf_.find('\n', start);
            if (nl == std::string::npos) {
                break;
            }
            emit(buf_.substr(start, nl - start));
            start = nl + 1;
        }
        buf_.erase(0, start);
        while (buf_.size() >= h_.max_line) {
            emit(buf_.substr(0, h_.max_line));
            buf_.erase(0, h_.max_line);
        }
    }
    void finish() {
        if (!buf_.empty()) {
            emit(std::move(buf_));
            buf_.clear();
        }
    }

  private:
    void emit(std::string line) {
        if (!line.empty() && line.back() == '\r') {
            line.pop_back();
        }
        while (line.size() > h_.max_line) {  // a long line that ended within one read
            if (h_.on_line) h_.on_line(stream_, line.substr(0, h_.max_line));
            line.erase(0, h_.max_line);
        }
        if (h_.on_line) {
            h_.on_line(stream_, std::move(line));
        }
    }
    const char *     stream_;
    const RunHooks & h_;
    std::string      buf_;
};

// Reads what is available; returns false at end of stream.
bool drain(int fd, Lines & lines) {
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n > 0) {
            lines.feed(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return true;
        }
        lines.finish();
        return false;
    }
}

std::string failure_text(const Spawn & sp, const ChildFailure & f) {
    const char * what = f.stage == 1 ? "cannot enter the working directory " : "cannot run ";
    std::string  obj  = f.stage == 1 ? sp.cwd : sp.argv[0];
    if (f.stage == 3) {
        return std::string("cannot set up the job's stdio: ") + std::strerror(f.err);
    }
    return what + obj + ": " + std::strerror(f.err);
}

void close_fd(int & fd) {
    if (fd >= 0) {
        ::close(fd);
        fd = -1;
    }
}

} // namespace

RunResult run_process(const Spawn & sp, const RunHooks & h) {
    RunResult r;
    if (sp.argv.empty()) {
        r.error = "the command line is empty";
        return r;
    }
    std::vector<char *> argv, envp;
    for (const std::string & a : sp.argv) argv.push_back(const_cast<char *>(a.c_str()));
    for (const std::string & e : sp.env) envp.push_back(const_cast<char *>(e.c_str()));
    argv.push_back(nullptr);
    envp.push_back(nullptr);

    int out[2] = {-1, -1}, err[2] = {-1, -1}, rep[2] = {-1, -1};
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(rep, O_CLOEXEC) != 0) {
        r.error = std::string("cannot create pipes: ") + std::strerror(errno);
        for (int * fd : {&devnull, &out[0], &out[1], &err[0], &err[1], &rep[0], &rep[1]}) close_fd(*fd);
        return r;
    }
    pid_t parent = ::getpid();
    pid_t pid    = ::fork();
    if (pid == 0) {
        child_exec(sp, argv.data(), envp.data(), devnull, out[1], err[1], rep[1], parent);
    }
    int fork_errno = errno;
    for (int * fd : {&devnull, &out[1], &err[1], &rep[1]}) close_fd(*fd);
    if (pid < 0) {
        r.error = std::string("cannot fork: ") + std::strerror(fork_errno);
        for (int * fd : {&out[0], &err[0], &rep[0]}) close_fd(*fd);
        return r;
    }
    ::setpgid(pid, pid);  // also here: the group must exist before any kill(-pid)

    ChildFailure f{};
    ssize_t      got;
    do {
        got = ::read(rep[0], &f, sizeof(f));
    } while (got < 0 && errno == EINTR);
    close_fd(rep[0]);
    if (got == static_cast<ssize_t>(sizeof(f))) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        close_fd(out[0]);
        close_fd(err[0]);
        r.error = failure_text(sp, f);
        return r;
    }
    r.started = true;
    if (h.on_started) {
        h.on_started(pid, process_start_time(pid));
    }

    ::fcntl(out[0], F_SETFL, O_NONBLOCK);
    ::fcntl(err[0], F_SETFL, O_NONBLOCK);
    Lines  out_lines("out", h), err_lines("err", h);
    int    status = 0;
    bool   reaped = false, killed = false;
    double t0 = mono_s(), term_at = -1, reaped_at = -1;
    while (out[0] >= 0 || err[0] >= 0 || !reaped) {
        pollfd pf[2];
        nfds_t n = 0;
        if (out[0] >= 0) pf[n++] = {out[0], POLLIN, 0};
        if (err[0] >= 0) pf[n++] = {err[0], POLLIN, 0};
        ::poll(pf, n, 100);
        if (out[0] >= 0 && !drain(out[0], out_lines)) close_fd(out[0]);
        if (err[0] >= 0 && !drain(err[0], err_lines)) close_fd(err[0]);
        double now = mono_s();
        if (!reaped && ::waitpid(pid, &status, WNOHANG) == pid) {
            reaped    = true;
            reaped_at = now;
            // What is left of the group is the job's own leftovers (background
            // children holding the pipes): they end with the job.
            ::kill(-pid, SIGKILL);
        }
        if (reaped && now - reaped_at > 2.0) {
            close_fd(out[0]);  // a process that left the group still holds the pipe: stop waiting
            close_fd(err[0]);
        }
        if (h.on_tick) {
            h.on_tick();
        }
        if (reaped) {
            continue;
        }
        if (h.cancel != nullptr && h.cancel->load() && !r.cancelled && !r.timed_out) {
            r.cancelled = true;
            term_at     = now;
            ::kill(-pid, SIGTERM);
        }
        if (h.timeout_s > 0 && now - t0 > h.timeout_s && !r.timed_out && !r.cancelled) {
            r.timed_out = true;
            term_at     = now;
            ::kill(-pid, SIGTERM);
        }
        if (term_at >= 0 && !killed && now - term_at > h.grace_s) {
            killed = true;
            ::kill(-pid, SIGKILL);
        }
    }
    if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r.signal = WTERMSIG(status);
    }
    return r;
}

namespace {

// Whether `marker` is one of the environment entries of process `pid`.
bool environ_has(long pid, const std::string & marker) {
    const std::string s  = swarm::proc_file(pid, "environ");
    std::size_t       at = 0;
    while (at < s.size()) {
        std::size_t end = s.find('\0', at);
        if (s.compare(at, (end == std::string::npos ? s.size() : end) - at, marker) == 0) {
            return true;
        }
        if (end == std::string::npos) {
            break;
        }
        at = end + 1;
    }
    return false;
}

} // namespace

long long process_start_time(long pid) {
    std::vector<std::string> f = swarm::proc_stat_fields(pid);
    return f.size() > 19 ? std::atoll(f[19].c_str()) : 0;
}

int kill_orphan_group(long pgid, const std::string & marker) {
    if (pgid <= 1) {
        return 0;
    }
    int   n = 0;
    DIR * d = ::opendir("/proc");
    if (d == nullptr) {
        return 0;
    }
    while (dirent * e = ::readdir(d)) {
        char * end = nullptr;
        long   pid = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || pid <= 1) {
            continue;
        }
        std::vector<std::string> f = swarm::proc_stat_fields(pid);
        if (f.size() > 2 && std::atol(f[2].c_str()) == pgid && environ_has(pid, marker) &&
            ::kill(static_cast<pid_t>(pid), SIGKILL) == 0) {
            ++n;
        }
    }
    ::closedir(d);
    return n;
}

} // namespace standin::swarmd
