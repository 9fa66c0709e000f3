// standind: the job daemon of `standin swarm`. It runs sessions of jobs
// (conformance, bench, probe, A/B or any command) on one worker per device and
// keeps sessions, jobs, logs and results in SQLite.
//
// Start-up order matters: the database lock first (a second daemon on the same
// database exits here, touching nothing), then the database (checked whole)
// and the recovery of jobs a killed daemon left running, then the socket, then
// the workers.
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "tools/standind/dlog.h"
#include "tools/standind/kinds.h"
#include "tools/standind/scheduler.h"
#include "tools/standind/server.h"
#include "tools/standind/store.h"

using namespace standin;
using namespace standin::swarmd;

namespace {

constexpr int kExitOther = 3;  // another daemon holds the database or the socket

struct Options {
    std::string              socket_path = swarm::default_socket_path();
    std::string              db_path     = swarm::default_db_path();
    std::string              config;
    std::vector<std::string> devices;
    std::string              on_interrupt = "requeue";
    std::size_t              max_request  = swarm::kMaxRequestBytes;
    double                   max_db_mb    = 0;
    double                   min_free_mb  = 16;
    std::size_t              max_log_lines = 200000;
    int                      max_clients   = 64;
    double                   first_request_s = 5;
};

void make_parent_dirs(const std::string & file) {
    for (std::size_t at = file.find('/', 1); at != std::string::npos; at = file.find('/', at + 1)) {
        ::mkdir(file.substr(0, at).c_str(), 0700);  // existing ones are left as they are
    }
}

std::string self_dir() {
    char    buf[4096];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) {
        return ".";
    }
    std::string p(buf, static_cast<std::size_t>(n));
    return p.substr(0, p.find_last_of('/'));
}

// The single-instance lock: flock(LOCK_EX) on the database file itself, held
// for the daemon's life and released by the kernel when the process ends, how
// ever it ends. A lock file's existence proves nothing (it can be deleted
// while its daemon runs; a second daemon would then recover, and kill, the
// first one's running jobs), and a lock on a file beside the database guards
// a name, not the database. flock locks are apart from SQLite's own fcntl
// locks on local file systems. The descriptor is close-on-exec, so no job
// inherits it, and it is never closed: closing any descriptor of the database
// would drop SQLite's fcntl locks (POSIX semantics), so it lives until exit.
// DB.lock only holds the pid, for the message a refused daemon prints.
// Returns the fd, or -1 after printing why.
int take_lock(const std::string & db) {
    int fd = ::open(db.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        std::fprintf(stderr, "standind: cannot open database %s: %s\n", db.c_str(), std::strerror(errno));
        return -1;
    }
    const std::string pid_file = db + ".lock";
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int         e = errno;
        std::string pid;
        if (int pf = ::open(pid_file.c_str(), O_RDONLY | O_CLOEXEC); pf >= 0) {
            char    buf[32] = {0};
            ssize_t n       = ::read(pf, buf, sizeof(buf) - 1);
            if (n > 0) pid.assign(buf, static_cast<std::size_t>(n));
            ::close(pf);
        }
        if (e == EWOULDBLOCK) {
            std::fprintf(stderr, "standind: database %s is in use by another standind%s%s%s; stop it first or use --db\n",
                         db.c_str(), pid.empty() ? "" : " (pid ", pid.c_str(), pid.empty() ? "" : ")");
        } else {
            std::fprintf(stderr, "standind: cannot lock database %s: %s\n", db.c_str(), std::strerror(e));
        }
        ::close(fd);  // nothing of SQLite's is open in this process yet
        return -1;
    }
    std::string me = std::to_string(::getpid());
    int         pf = ::open(pid_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (pf < 0 || ::write(pf, me.data(), me.size()) < 0) {
        // Only the message of a refused second daemon loses the pid: not fatal.
        std::fprintf(stderr, "standind: cannot write the pid into %s\n", pid_file.c_str());
    }
    if (pf >= 0) ::close(pf);
    return fd;
}

bool is_file(const std::string & p) {
    struct stat st{};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The plugin the jobs run against ({plugin}), found at run time, never a path
// fixed at build time: GGML_BACKEND_PATH when set, else the plugin installed
// beside this daemon (<prefix>/bin/standind with <prefix>/lib/libggml-standin.so,
// the build tree's layout too, or the same folder). The config's "vars" can
// still name another. "" when none is found: jobs that need it are refused.
std::string find_plugin(std::string & how) {
    if (const char * env = std::getenv("GGML_BACKEND_PATH"); env != nullptr && *env != '\0') {
        how = "GGML_BACKEND_PATH";
        return env;
    }
    const std::string dir = self_dir();
    for (const std::string & p : {dir + "/../lib/libggml-standin.so", dir + "/libggml-standin.so"}) {
        if (is_file(p)) {
            char buf[4096];
            how = "beside standind";
            return ::realpath(p.c_str(), buf) != nullptr ? std::string(buf) : p;
        }
    }
    how = "none found (set GGML_BACKEND_PATH, or vars.plugin in --config)";
    return {};
}

std::map<std::string, std::string> default_vars(const std::string & plugin) {
    return {
        {"standin", self_dir() + "/standin"},
        {"bin", STANDIN_GGML_BIN_DIR},
        {"plugin", plugin},
    };
}

int run(const Options & o) {
    make_parent_dirs(o.db_path);
    make_parent_dirs(o.socket_path);
    int lock_fd = take_lock(o.db_path);
    if (lock_fd < 0) {
        return kExitOther;
    }
    std::string              plugin_how;
    const std::string        plugin = find_plugin(plugin_how);
    Kinds                    kinds(default_vars(plugin));
    std::vector<std::string> devices = o.devices;
    try {
        if (!o.config.empty()) {
            nlohmann::json cfg = read_config_file(o.config);
            kinds.apply(cfg);
            if (devices.empty() && cfg.contains("devices")) {
                devices = cfg["devices"].get<std::vector<std::string>>();
            }
        }
    } catch (const std::exception & e) {
        std::fprintf(stderr, "standind: %s\n", e.what());
        return 1;
    }
    if (devices.empty()) {
        devices = {"STANDIN_HOST0"};
    }
    for (const std::string & d : devices) {
        if (d == "any" || d.empty() || d.find_first_of(" ,/") != std::string::npos) {
            std::fprintf(stderr, "standind: '%s' is not a device name\n", d.c_str());
            return 1;
        }
    }
    StoreOptions so;
    so.max_pages      = o.max_db_mb > 0 ? static_cast<std::int64_t>(o.max_db_mb * (1 << 20) / 4096) : 0;
    so.min_free_bytes = static_cast<std::int64_t>(o.min_free_mb * (1 << 20));
    std::unique_ptr<Store> store;
    try {
        store = std::make_unique<Store>(o.db_path, so);
    } catch (const StoreError & e) {
        std::fprintf(stderr, "standind: %s\n", e.what());
        return 1;
    }
    SchedulerOptions sopt;
    sopt.devices      = devices;
    sopt.on_interrupt = o.on_interrupt == "fail" ? InterruptPolicy::fail : InterruptPolicy::requeue;
    sopt.max_log_lines = o.max_log_lines;
    sopt.db_path      = o.db_path;
    char cwd[4096];
    sopt.default_cwd  = ::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "/";
    Scheduler sched(*store, kinds, sopt);
    try {
        int n = sched.recover();
        if (n > 0) {
            dlog("recovered %d interrupted job(s)", n);
        }
    } catch (const StoreError & e) {
        std::fprintf(stderr, "standind: recovery failed: %s\n", e.what());
        return 1;
    }

    ServerOptions vopt;
    vopt.socket_path = o.socket_path;
    vopt.max_request = o.max_request;
    vopt.max_clients = o.max_clients;
    vopt.first_request_s = o.first_request_s;
    Server server(*store, sched, kinds, vopt);
    try {
        server.bind_socket();
    } catch (const std::exception & e) {
        std::fprintf(stderr, "standind: %s\n", e.what());
        return std::strstr(e.what(), "another standind") != nullptr ? kExitOther : 1;
    }

    int wake[2];
    if (::pipe2(wake, O_CLOEXEC) != 0) {
        std::fprintf(stderr, "standind: pipe: %s\n", std::strerror(errno));
        return 1;
    }
    std::atomic<bool> stop{false};
    std::thread signals([&] {
        sigset_t set;
        sigemptyset(&set);
        for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
        int sig = 0;
        sigwait(&set, &sig);
        dlog("signal %d: stopping", sig);
        stop = true;
        ssize_t n = ::write(wake[1], "x", 1);
        (void) n;
    });
    std::string devs;
    for (const std::string & d : devices) devs += (devs.empty() ? "" : ",") + d;
    dlog("pid %d listening on %s; database %s; workers %s; on interrupt: %s", ::getpid(), o.socket_path.c_str(),
         o.db_path.c_str(), devs.c_str(), o.on_interrupt.c_str());
    const std::string plugin_now = kinds.var("plugin");
    dlog("plugin: %s (%s)", plugin_now.empty() ? "-" : plugin_now.c_str(),
         plugin_now == plugin ? plugin_how.c_str() : "--config");
    sched.start();
    server.serve(stop, wake[0]);
    sched.stop();      // running jobs are stopped and interrupted, by policy
    server.shutdown();
    signals.join();
    dlog("stopped");  // lock_fd stays open until exit (see take_lock)
    return 0;
}

} // namespace

int main(int argc, char ** argv) {
    // Signals are taken by one thread (sigwait); block them before any thread starts.
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    Options  o;
    CLI::App app{"standind: the job daemon of `standin swarm` (sessions of jobs on one worker per device)"};
    app.add_option("--socket", o.socket_path, "Unix socket (env GGML_STANDIN_SWARM_SOCKET)")->capture_default_str();
    app.add_option("--db", o.db_path, "SQLite database (env GGML_STANDIN_SWARM_DB)")->capture_default_str();
    app.add_option("--devices", o.devices, "Worker devices, comma-separated (default STANDIN_HOST0)")->delimiter(',');
    app.add_option("--config", o.config, "JSON config: devices, vars, kind templates")->check(CLI::ExistingFile);
    app.add_option("--on-interrupt", o.on_interrupt, "Jobs found running after a crash: requeue or fail")
        ->capture_default_str()->check(CLI::IsMember({"requeue", "fail"}));
    app.add_option("--max-request", o.max_request, "Largest request line, bytes")->capture_default_str()
        ->check(CLI::Range(std::size_t(256), std::size_t(64) << 20));
    app.add_option("--max-db-mb", o.max_db_mb, "Size cap of the database, MiB (0 = none)")->check(CLI::NonNegativeNumber);
    app.add_option("--min-free-mb", o.min_free_mb, "Refuse new work below this free disk space, MiB")
        ->capture_default_str()->check(CLI::NonNegativeNumber);
    app.add_option("--max-log-lines", o.max_log_lines, "Log lines kept per job attempt")->capture_default_str();
    app.add_option("--max-clients", o.max_clients, "Requests answered at once (connections waiting between requests do not count)")->capture_default_str()
        ->check(CLI::Range(1, 4096));
    app.add_option("--first-request-s", o.first_request_s,
                   "A new connection that sends no complete request within this many seconds is dropped")
        ->capture_default_str()->check(CLI::Range(0.05, 3600.0));
    CLI11_PARSE(app, argc, argv);
    return run(o);
}
