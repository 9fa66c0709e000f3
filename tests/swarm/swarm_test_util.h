// Helpers of the swarm tests: a temporary directory, the real standind binary
// run as a child process (fork/exec, so it can be killed with SIGKILL), and
// bounded waits. Every test cleans up its processes and files.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tools/swarm/client.h"
#include "tools/swarm/proc.h"

namespace swarm_test {

using nlohmann::json;

class TempDir {
  public:
    TempDir() {
        char tmpl[] = "/tmp/standin-swarm-XXXXXX";  // short: socket paths are at most 107 bytes
        const char * p = ::mkdtemp(tmpl);
        path_ = p != nullptr ? p : "";
    }
    ~TempDir() {
        if (!path_.empty()) {
            std::string cmd = "rm -rf '" + path_ + "'";
            int rc = std::system(cmd.c_str());
            (void) rc;
        }
    }
    const std::string & path() const { return path_; }
    std::string operator/(const std::string & name) const { return path_ + "/" + name; }

  private:
    std::string path_;
};

// Polls `pred` every 20 ms until it holds or `timeout_s` passes.
inline bool wait_until(const std::function<bool()> & pred, double timeout_s) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
        if (pred()) {
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return pred();
}

// True when `pid` no longer runs (gone, or a zombie nobody reaped yet).
inline bool process_gone(long pid) {
    std::vector<std::string> f = standin::swarm::proc_stat_fields(pid);
    return f.empty() || f[0] == "Z";
}

inline std::string read_file(const std::string & path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// One request on a fresh connection; a ClientError becomes {"ok": false, "error": "client"}.
inline json call(const std::string & socket, const json & req, int timeout_ms = 15000) {
    try {
        standin::swarm::Client c(socket, timeout_ms);
        return c.call(req);
    } catch (const std::exception & e) {
        return json{{"ok", false}, {"error", "client"}, {"message", e.what()}};
    }
}

// The real standind, started with fork/exec; killed when destroyed.
class Daemon {
  public:
    Daemon(const TempDir & dir, std::vector<std::string> extra = {}, std::string tag = "d")
        : socket_(dir / "s.sock"), db_(dir / "state.db"), log_(dir / (tag + ".log")), extra_(std::move(extra)) {}
    ~Daemon() { kill9(); }
    Daemon & with_db(const std::string & path) {
        db_ = path;
        return *this;
    }

    // Starts the daemon; returns false when it exited or did not answer in 10 s.
    bool start() { return start_program(STANDIND_PATH); }
    // The same with another copy of the daemon's binary.
    bool start_program(const std::string & program) {
        std::vector<std::string> args = {program, "--socket", socket_, "--db", db_};
        args.insert(args.end(), extra_.begin(), extra_.end());
        pid_ = spawn(args, log_);
        return wait_until([&] { return exited() || swarm_test::call(socket_, {{"op", "ping"}}, 1000).value("ok", false); }, 10) &&
               !exited();
    }
    // Runs another standind with `args` to completion (bounded); returns its exit status.
    static int run_to_end(const std::vector<std::string> & args, const std::string & log, double timeout_s = 10) {
        pid_t pid = spawn(args, log);
        int   status = 0;
        bool  ended = wait_until([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, timeout_s);
        if (!ended) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return -1;
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

    void kill9() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
            pid_ = -1;
        }
    }
    // SIGTERM and wait (bounded); returns the exit status.
    int term() {
        if (pid_ <= 0) return -1;
        ::kill(pid_, SIGTERM);
        int  status = 0;
        bool ended  = wait_until([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, 15);
        if (!ended) {
            kill9();
            return -1;
        }
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    bool exited() {
        if (pid_ <= 0) return true;
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return true;
        }
        return false;
    }

    json call(const json & req, int timeout_ms = 15000) const { return swarm_test::call(socket_, req, timeout_ms); }

    // Waits until session `id` has ended; returns its `show` reply's session.
    json wait_session(std::int64_t id, double timeout_s = 20) const {
        json s;
        wait_until([&] {
            json r = call({{"op", "show"}, {"session", id}});
            s      = r.value("session", json());
            std::string st = s.is_object() ? s.value("state", "") : "";
            return st == "done" || st == "failed" || st == "cancelled";
        }, timeout_s);
        return s;
    }

    pid_t               pid() const { return pid_; }
    const std::string & socket() const { return socket_; }
    const std::string & db() const { return db_; }
    std::string         log() const { return read_file(log_); }

    static pid_t spawn(const std::vector<std::string> & args, const std::string & log) {
        std::vector<char *> argv;
        for (const std::string & a : args) argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        pid_t pid = ::fork();
        if (pid == 0) {
            int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            ::execv(argv[0], argv.data());
            _exit(127);
        }
        return pid;
    }

  private:
    std::string              socket_, db_, log_;
    std::vector<std::string> extra_;
    pid_t                    pid_ = -1;
};

// A submit request of command jobs (each a `sh -c SCRIPT`).
inline json submit_sh(const std::string & name, const std::vector<std::string> & scripts, const std::string & cwd = "/tmp") {
    json jobs = json::array();
    for (const std::string & s : scripts) {
        jobs.push_back({{"kind", "command"}, {"args", {"sh", "-c", s}}});
    }
    return {{"op", "submit"}, {"name", name}, {"cwd", cwd}, {"jobs", jobs}};
}

} // namespace swarm_test
