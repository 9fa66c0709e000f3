// Workers and job control (see scheduler.h).
#include "tools/standind/scheduler.h"

#include <chrono>
#include <cstring>
#include <csignal>

#include <sys/stat.h>
#include <unistd.h>

#include "tools/standind/dlog.h"
#include "tools/standind/runner.h"
#include "tools/standind/sha256.h"

extern char ** environ;

namespace standin::swarmd {

using swarm::ProtocolError;

namespace {

double mono_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// The command line as a shell would take it back (for the log's first line).
std::string join_argv(const std::vector<std::string> & argv) {
    std::string s;
    for (const std::string & a : argv) {
        bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`;&|<>()*?") == std::string::npos;
        std::string q = "'";
        for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        s += (s.empty() ? "" : " ") + (plain ? a : q + "'");
    }
    return s;
}

std::string path_of(const std::map<std::string, std::string> & env) {
    auto it = env.find("PATH");
    if (it != env.end()) {
        return it->second;
    }
    const char * p = std::getenv("PATH");
    return p != nullptr ? p : "/usr/local/bin:/usr/bin:/bin";
}

std::string signal_text(int sig) {
    const char * abbrev = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (abbrev != nullptr ? std::string(" (SIG") + abbrev + ")" : "");
}

// The outcome of an attempt that ran (or failed to start).
Outcome outcome_of(const RunResult & rr, double timeout_s, const std::string & last_out) {
    Outcome o;
    if (!rr.started) {
        o.state = "failed";
        o.error = rr.error;
        return o;
    }
    if (rr.exit_code >= 0) o.exit_code = rr.exit_code;
    if (rr.signal > 0) o.signal = rr.signal;
    if (rr.cancelled) {
        o.state = "cancelled";
        o.error = "cancelled while it ran";
    } else if (rr.timed_out) {
        o.state = "failed";
        char buf[64];
        std::snprintf(buf, sizeof(buf), "timed out after %g s", timeout_s);
        o.error = buf;
    } else if (rr.exit_code == 0) {
        o.state = "done";
    } else {
        o.state = "failed";
        o.error = rr.exit_code > 0 ? "exit code " + std::to_string(rr.exit_code) : signal_text(rr.signal);
    }
    // Tools that print a JSON report as their last line (e.g. --json) have it kept as the result.
    nlohmann::json j = nlohmann::json::parse(last_out, nullptr, false);
    if (!j.is_discarded() && (j.is_object() || j.is_array())) {
        o.result = std::move(j);
    }
    return o;
}

} // namespace

Scheduler::Scheduler(Store & store, const Kinds & kinds, SchedulerOptions opt)
    : store_(store), kinds_(kinds), opt_(std::move(opt)) {}

Scheduler::~Scheduler() { stop(); }

std::string Scheduler::marker(std::int64_t job_id, int attempt) const {
    return "STANDIN_SWARM_JOB_KEY=" + opt_.db_path + "#" + std::to_string(job_id) + "." + std::to_string(attempt);
}

int Scheduler::recover() {
    std::vector<Orphan> orphans = store_.running_jobs();
    for (const Orphan & o : orphans) {
        int killed = kill_orphan_group(static_cast<long>(o.pid), marker(o.job_id, o.attempt));
        dlog("recovery: session %lld job %d was running when the daemon stopped (%d leftover processes killed); %s",
             static_cast<long long>(o.session), o.idx, killed,
             opt_.on_interrupt == InterruptPolicy::requeue ? "re-queued" : "marked interrupted");
        store_.interrupt_job(o.job_id, opt_.on_interrupt, "the daemon stopped while it ran");
    }
    return static_cast<int>(orphans.size());
}

void Scheduler::start() {
    for (const std::string & d : opt_.devices) {
        workers_.emplace_back([this, d] { worker_loop(d); });
    }
}

void Scheduler::stop() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (stopping_.exchange(true)) {
            return;
        }
        for (auto & [id, flag] : running_) {
            flag->store(true);
        }
    }
    cv_.notify_all();
    for (std::thread & t : workers_) {
        t.join();
    }
    workers_.clear();
}

void Scheduler::wake() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        ++work_gen_;
    }
    cv_.notify_all();
}

void Scheduler::check_submit(swarm::SessionSpec & spec) const {
    if (spec.cwd.empty()) {
        spec.cwd = opt_.default_cwd;
    }
    struct stat st{};
    if (::stat(spec.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        throw ProtocolError(swarm::err::bad_request, "cwd " + spec.cwd + " is not a directory");
    }
    for (std::size_t i = 0; i < spec.jobs.size(); ++i) {
        const swarm::JobSpec & j  = spec.jobs[i];
        std::string            at = "job " + std::to_string(i + 1) + ": ";
        if (!kinds_.has(j.kind)) {
            std::string known;
            for (const std::string & k : kinds_.names()) known += (known.empty() ? "" : ", ") + k;
            throw ProtocolError(swarm::err::unknown_kind, at + "unknown job kind '" + j.kind + "' (known: " + known + ")");
        }
        bool device_ok = j.device == "any";
        for (const std::string & d : opt_.devices) device_ok = device_ok || d == j.device;
        if (!device_ok) {
            std::string known;
            for (const std::string & d : opt_.devices) known += (known.empty() ? "" : ", ") + d;
            throw ProtocolError(swarm::err::unknown_device, at + "no worker for device '" + j.device +
                                "' (this daemon runs " + known + ", or use 'any')");
        }
        Command     c = kinds_.build(j.kind, j.args, j.env, j.device == "any" ? opt_.devices.front() : j.device);
        std::string why;
        if (c.uses_plugin) {
            const std::string plugin = kinds_.var("plugin");
            struct stat       pst{};
            if (plugin.empty() || ::stat(plugin.c_str(), &pst) != 0) {
                throw ProtocolError(swarm::err::bad_request, at + "kind '" + j.kind + "' runs against the plugin, and " +
                                    (plugin.empty() ? std::string("this daemon found none (start it with GGML_BACKEND_PATH, "
                                                                  "or set vars.plugin in its --config)")
                                                    : "its plugin " + plugin + " does not exist"));
            }
        }
        if (c.argv.empty() || find_program(c.argv[0], spec.cwd, path_of(c.env), why).empty()) {
            throw ProtocolError(swarm::err::bad_request, at + (c.argv.empty() ? "the command line is empty" : why));
        }
    }
}

std::vector<std::int64_t> Scheduler::cancel(std::int64_t session, std::optional<int> job) {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<std::int64_t> ids = store_.cancel(session, job);
    for (std::int64_t id : ids) {
        auto it = running_.find(id);
        if (it != running_.end()) {
            it->second->store(true);
        }
    }
    return ids;
}

int Scheduler::requeue(std::int64_t session, std::optional<int> job, const std::vector<std::string> & states) {
    int n;
    {
        std::lock_guard<std::mutex> lk(mu_);
        n = store_.requeue(session, job, states);
        ++work_gen_;
    }
    cv_.notify_all();
    return n;
}

void Scheduler::worker_loop(const std::string & device) {
    std::uint64_t seen = 0;
    while (!stopping_) {
        std::optional<JobRow> job;
        std::atomic<bool>     cancel{false};
        {
            std::unique_lock<std::mutex> lk(mu_);
            seen = work_gen_;
            try {
                job = store_.claim_next({device}, device);
            } catch (const StoreError & e) {
                dlog("worker %s: cannot take a job: %s", device.c_str(), e.what());
            }
            if (!job) {
                // Woken by new work; the timeout also covers a claim that failed above.
                cv_.wait_for(lk, std::chrono::seconds(2), [&] { return stopping_ || work_gen_ != seen; });
                continue;
            }
            running_[job->id] = &cancel;
        }
        run_job(device, *job, cancel);
        std::lock_guard<std::mutex> lk(mu_);
        running_.erase(job->id);
    }
}

std::vector<std::string> Scheduler::job_environment(const JobRow & job, const Command & cmd,
                                                    const std::string & device) const {
    std::map<std::string, std::string> vars;
    for (char ** e = environ; e != nullptr && *e != nullptr; ++e) {
        std::string kv(*e);
        std::size_t eq = kv.find('=');
        // The daemon's own settings are not the job's business (and the plugin
        // would warn about GGML_STANDIN_* names it does not know).
        if (eq == std::string::npos || kv.rfind("GGML_STANDIN_SWARM_", 0) == 0 || kv.rfind("STANDIN_SWARM_", 0) == 0) {
            continue;
        }
        vars[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto & [k, v] : cmd.env) vars[k] = v;
    vars["STANDIN_SWARM_SESSION"] = std::to_string(job.session_id);
    vars["STANDIN_SWARM_JOB"]     = std::to_string(job.idx);
    vars["STANDIN_SWARM_DEVICE"]  = device;
    vars["STANDIN_SWARM_ATTEMPT"] = std::to_string(job.attempts);
    std::vector<std::string> out;
    for (const auto & [k, v] : vars) out.push_back(k + "=" + v);
    out.push_back(marker(job.id, job.attempts));
    return out;
}

void Scheduler::run_job(const std::string & device, const JobRow & job, std::atomic<bool> & cancel) {
    Command     cmd = kinds_.has(job.kind) ? kinds_.build(job.kind, job.args, job.env, device) : Command{};
    std::string why = !job.spec_error.empty() ? job.spec_error
                    : kinds_.has(job.kind)    ? ""
                                              : "unknown job kind '" + job.kind + "' (the daemon's config changed)";
    std::string prog = why.empty() ? find_program(cmd.argv.empty() ? "" : cmd.argv[0], job.cwd, path_of(cmd.env), why)
                                   : "";
    std::string plugin, plugin_sha;
    if (why.empty() && cmd.uses_plugin) {
        // Which build the job tests, on record: the file as it is now, by content.
        plugin     = kinds_.var("plugin");
        plugin_sha = plugin.empty() ? "" : sha256_file(plugin, why);
        if (plugin.empty()) why = "no plugin: this daemon found none (GGML_BACKEND_PATH, or vars.plugin in --config)";
        else if (plugin_sha.empty()) why = "the plugin is missing: " + why;
        if (!why.empty()) prog.clear();
    }
    std::vector<LogLine> pending;
    std::size_t          n_lines = 0, dropped = 0;
    std::string          last_out;
    double               last_flush = mono_s();
    auto flush = [&] {
        if (pending.empty()) return;
        try {
            if (!store_.append_logs(job.id, job.attempts, pending)) dropped += pending.size();
        } catch (const StoreError & e) {
            dropped += pending.size();
            dlog("job %lld: log lines dropped: %s", static_cast<long long>(job.id), e.what());
        }
        pending.clear();
        last_flush = mono_s();
    };
    auto sys = [&](const std::string & line) { pending.push_back({"sys", now_s(), line}); };

    sys("attempt " + std::to_string(job.attempts) + " on " + device + ": " + join_argv(cmd.argv));
    if (!plugin_sha.empty()) {
        sys("plugin " + plugin + " sha256 " + plugin_sha);
        try {
            store_.set_job_plugin(job.id, plugin, plugin_sha);
        } catch (const StoreError & e) {
            dlog("job %lld: plugin not recorded: %s", static_cast<long long>(job.id), e.what());
        }
    }
    RunResult rr;
    double    t0 = mono_s();
    if (prog.empty()) {
        rr.error = why;
    } else {
        Spawn sp{cmd.argv, job_environment(job, cmd, device), job.cwd};
        sp.argv[0] = prog;
        RunHooks h;
        h.cancel    = &cancel;
        h.timeout_s = job.timeout_s;
        h.on_line   = [&](const char * stream, std::string && line) {
            if (stream[0] == 'o' && !line.empty()) last_out = line;
            if (++n_lines == opt_.max_log_lines + 1) sys("log truncated: more than " + std::to_string(opt_.max_log_lines) + " lines");
            if (n_lines <= opt_.max_log_lines) pending.push_back({stream, now_s(), std::move(line)});
        };
        h.on_tick = [&] {
            if (pending.size() >= 256 || mono_s() - last_flush > 0.1) flush();
        };
        h.on_started = [&](long pid, long long start) {
            try {
                store_.set_job_process(job.id, pid, start);
            } catch (const StoreError & e) {
                dlog("job %lld: pid not recorded: %s", static_cast<long long>(job.id), e.what());
            }
        };
        rr = run_process(sp, h);
    }
    if (stopping_ && rr.cancelled) {
        flush();
        try {
            store_.interrupt_job(job.id, opt_.on_interrupt, "the daemon was stopped");
        } catch (const StoreError & e) {
            dlog("job %lld: left running in the database (recovered at the next start): %s",
                 static_cast<long long>(job.id), e.what());
        }
        return;
    }
    Outcome o = outcome_of(rr, job.timeout_s, last_out);
    char    took[64];
    std::snprintf(took, sizeof(took), " after %.2f s", mono_s() - t0);
    sys(o.state + (o.error.empty() ? "" : ": " + o.error) + (rr.started ? took : ""));
    flush();
    if (dropped > 0) {
        sys(std::to_string(dropped) + " log lines were not stored: " + store_.full_message());
        flush();
    }
    record(job, o);
}

// The result must not be lost to a transient database error (busy, disk full):
// retry until it is stored or the daemon stops (then the job is still `running`
// in the database, and the next start interrupts it by policy).
void Scheduler::record(const JobRow & job, const Outcome & o) {
    for (int attempt = 0;; ++attempt) {
        try {
            store_.finish_job(job.id, o);
            return;
        } catch (const StoreError & e) {
            if (attempt == 0 || attempt % 60 == 0) {
                dlog("job %lld: result not stored yet, retrying: %s", static_cast<long long>(job.id), e.what());
            }
        }
        std::unique_lock<std::mutex> lk(mu_);
        if (cv_.wait_for(lk, std::chrono::seconds(1), [&] { return stopping_.load(); })) {
            return;
        }
    }
}

} // namespace standin::swarmd
