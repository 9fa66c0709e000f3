// `standin swarm`: the client of standind, the job daemon. Sessions of jobs
// (conformance, bench, probe, A/B or any command) are submitted, listed, shown,
// followed, cancelled, retried and resumed; `completion` prints a bash or zsh
// script generated from this tool's own command table.
//
// Everything goes through the daemon's socket (tools/swarm/client.h); nothing
// here reads the database.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>
#include <fstream>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tools/standin/commands.h"
#include "tools/swarm/client.h"
#include "tools/swarm/completion.h"
#include "tools/swarm/protocol.h"

namespace standin::tools {

using nlohmann::json;

namespace {

// Splits a job spec's argument text like a shell would: spaces separate words;
// '...' and "..." quote; a backslash escapes the next character.
std::vector<std::string> split_words(const std::string & s) {
    std::vector<std::string> out;
    std::string cur;
    bool        in_word = false;
    char        quote   = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (quote != 0) {
            if (c == quote) quote = 0;
            else if (c == '\\' && quote == '"' && i + 1 < s.size()) cur += s[++i];
            else cur += c;
        } else if (c == '\'' || c == '"') {
            quote = c, in_word = true;
        } else if (c == '\\' && i + 1 < s.size()) {
            cur += s[++i], in_word = true;
        } else if (c == ' ' || c == '\t' || c == '\n') {
            if (in_word) out.push_back(cur), cur.clear(), in_word = false;
        } else {
            cur += c, in_word = true;
        }
    }
    if (quote != 0) {
        throw std::runtime_error("unbalanced quote in job spec: " + s);
    }
    if (in_word) out.push_back(cur);
    return out;
}

// "KIND[@DEVICE] ARGS..." -> a job.
json job_from_spec(const std::string & spec) {
    std::vector<std::string> w = split_words(spec);
    if (w.empty()) {
        throw std::runtime_error("empty --job spec (expected KIND[@DEVICE] ARGS...)");
    }
    std::string head = w[0];
    std::size_t at   = head.find('@');
    json j = {{"kind", head.substr(0, at)}, {"device", at == std::string::npos ? "any" : head.substr(at + 1)},
              {"args", std::vector<std::string>(w.begin() + 1, w.end())}};
    return j;
}

std::string when(double t) {
    if (t <= 0) return "-";
    time_t s = static_cast<time_t>(t);
    tm     lt{};
    localtime_r(&s, &lt);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &lt);
    return buf;
}

std::string secs(const json & a, const json & b) {
    if (!a.is_number() || !b.is_number()) return "-";
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1fs", b.get<double>() - a.get<double>());
    return buf;
}

int client_timeout_ms(const SwarmOptions & o) { return static_cast<int>(o.client_timeout * 1000); }

// Sends one request and reads its reply; prints a failure (exit 2: the daemon
// could not be reached or did not answer in time; 1: it answered with an
// error). A `busy` daemon (every request slot taken) is asked again until the
// client timeout has passed.
int call(const SwarmOptions & o, const json & req, json & reply,
         const std::function<void(const json &)> & on_event = nullptr, int timeout_ms = 0) {
    if (timeout_ms <= 0) timeout_ms = client_timeout_ms(o);
    const auto give_up = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(std::min(timeout_ms, client_timeout_ms(o)));
    for (int wait_ms = 50;; wait_ms = std::min(wait_ms * 2, 1000)) {
        try {
            swarm::Client c(o.socket.empty() ? swarm::default_socket_path() : o.socket, timeout_ms);
            reply = c.call(req, on_event);
        } catch (const swarm::ClientError & e) {
            std::fprintf(stderr, "standin swarm: %s\n", e.what());
            return 2;
        }
        if (reply.value("error", std::string()) != swarm::err::busy ||
            std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms) >= give_up) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    }
    if (!reply.value("ok", false)) {
        std::fprintf(stderr, "standin swarm: %s [%s]\n", reply.value("message", std::string("error")).c_str(),
                     reply.value("error", std::string("?")).c_str());
        return 1;
    }
    return 0;
}

void print_log(const json & e, bool prefix) {
    if (e.value("event", "") != "log") return;
    std::string line   = e.value("line", "");
    std::string stream = e.value("stream", "");
    std::string pre    = prefix ? "[" + std::to_string(e.value("job", 0)) + "] " : "";
    if (stream == "sys") pre += "standind: ";
    std::FILE * out = stream == "err" ? stderr : stdout;
    std::fprintf(out, "%s%s\n", pre.c_str(), line.c_str());
    std::fflush(out);
}

int do_logs(const SwarmOptions & o, std::int64_t session, bool follow, bool print, std::string * final_state) {
    json req = {{"op", "logs"}, {"session", session}};
    if (o.job > 0) req["job"] = o.job;
    if (follow) req["follow"] = true;
    json reply;
    // Following has no overall limit, but the daemon sends a heartbeat every
    // few seconds of quiet: a longer silence means it is stopped or stuck.
    int rc = call(o, req, reply, [&](const json & e) { if (print) print_log(e, o.job == 0); },
                  follow ? std::max(client_timeout_ms(o), 30000) : 0);
    if (final_state != nullptr && rc == 0) *final_state = reply.value("state", "");
    return rc;
}

json build_submit(const SwarmOptions & o) {
    json req = {{"op", "submit"}};
    json jobs = json::array();
    if (!o.file.empty()) {
        std::stringstream ss;
        if (o.file == "-") {
            ss << std::cin.rdbuf();
        } else {
            std::ifstream in(o.file);
            if (!in) throw std::runtime_error("cannot read " + o.file);
            ss << in.rdbuf();
        }
        json f = json::parse(ss.str(), nullptr, false);
        if (f.is_discarded() || !f.is_object()) throw std::runtime_error(o.file + " is not a JSON object");
        for (auto it = f.begin(); it != f.end(); ++it) req[it.key()] = *it;  // the daemon validates every field
        if (req.contains("jobs") && req["jobs"].is_array()) jobs = req["jobs"];
    }
    for (const std::string & spec : o.jobs) jobs.push_back(job_from_spec(spec));
    if (!o.command.empty()) {
        jobs.push_back({{"kind", o.kind}, {"device", o.device}, {"args", o.command}});
    }
    if (o.timeout > 0) {
        for (json & j : jobs) if (j.is_object() && !j.contains("timeout_s")) j["timeout_s"] = o.timeout;
    }
    if (jobs.empty()) throw std::runtime_error("no jobs: give --job SPEC, --file FILE or -- COMMAND...");
    req["jobs"] = jobs;
    if (!o.name.empty()) {
        req["name"] = o.name;
    } else if (!req.contains("name")) {
        std::string name;
        for (const json & j : jobs) {
            std::string k = j.is_object() ? j.value("kind", "?") : "?";
            if (name.find(k) == std::string::npos) name += (name.empty() ? "" : "+") + k;
        }
        req["name"] = name.substr(0, swarm::kMaxNameBytes);
    }
    if (!req.contains("cwd")) {
        char cwd[4096];
        if (::getcwd(cwd, sizeof(cwd)) != nullptr) req["cwd"] = cwd;
    }
    return req;
}

int submit(const SwarmOptions & o) {
    json req;
    try {
        req = build_submit(o);
    } catch (const std::exception & e) {
        std::fprintf(stderr, "standin swarm submit: %s\n", e.what());
        return 2;
    }
    json reply;
    if (int rc = call(o, req, reply)) return rc;
    std::int64_t id = reply["session"].get<std::int64_t>();
    bool wait = o.wait || o.wait_logs;
    if (o.json && !wait) std::printf("%s\n", reply.dump().c_str());
    else if (!wait) std::printf("session %lld submitted (%d jobs)\n", static_cast<long long>(id), reply.value("jobs", 0));
    if (!wait) return 0;
    std::string state;
    SwarmOptions w = o;
    w.job = 0;
    if (int rc = do_logs(w, id, true, o.wait_logs, &state)) return rc;
    json show;
    if (int rc = call(o, {{"op", "show"}, {"session", id}}, show)) return rc;
    const json & s = show["session"];
    if (o.json) std::printf("%s\n", s.dump(2).c_str());
    else std::printf("session %lld %s: %s\n", static_cast<long long>(id), s.value("state", "").c_str(),
                     s.value("summary", "").c_str());
    return s.value("state", "") == "done" ? 0 : 1;
}

int ls(const SwarmOptions & o) {
    json req = {{"op", "ls"}};
    if (!o.state.empty()) req["state"] = o.state;
    if (o.limit > 0) req["limit"] = o.limit;
    if (o.ids) req["ids"] = true;
    json reply;
    if (int rc = call(o, req, reply, nullptr, o.ids ? std::min(3000, client_timeout_ms(o)) : 0)) return rc;
    if (o.ids) {
        for (const json & id : reply["ids"]) std::printf("%lld\n", id.get<long long>());
        return 0;
    }
    if (o.json) {
        std::printf("%s\n", reply["sessions"].dump(2).c_str());
        return 0;
    }
    std::printf("%-6s %-10s %-9s %-19s %s\n", "ID", "STATE", "DONE", "CREATED", "NAME");
    for (const json & s : reply["sessions"]) {
        std::string done = std::to_string(s["jobs"].value("done", 0)) + "/" + std::to_string(s.value("total", 0));
        std::printf("%-6lld %-10s %-9s %-19s %s\n", s["id"].get<long long>(), s.value("state", "").c_str(),
                    done.c_str(), when(s.value("created_at", 0.0)).c_str(), s.value("name", "").c_str());
    }
    return 0;
}

int show(const SwarmOptions & o) {
    json reply;
    if (int rc = call(o, {{"op", "show"}, {"session", o.session}}, reply)) return rc;
    const json & s = reply["session"];
    if (o.json) {
        std::printf("%s\n", s.dump(2).c_str());
        return 0;
    }
    std::printf("session %lld  %s  [%s]\n  cwd %s\n  created %s  started %s  ended %s\n",
                s["id"].get<long long>(), s.value("name", "").c_str(), s.value("state", "").c_str(),
                s.value("cwd", "").c_str(), when(s.value("created_at", 0.0)).c_str(),
                when(s["started_at"].is_number() ? s["started_at"].get<double>() : 0).c_str(),
                when(s["ended_at"].is_number() ? s["ended_at"].get<double>() : 0).c_str());
    if (!s.value("summary", "").empty()) std::printf("  %s\n", s.value("summary", "").c_str());
    std::printf("\n%-4s %-12s %-14s %-11s %-5s %-8s %-4s %s\n", "JOB", "KIND", "DEVICE", "STATE", "EXIT", "TIME", "TRY",
                "COMMAND / ERROR");
    for (const json & j : s["job_list"]) {
        std::string device = j.value("device", "");
        if (device == "any" && !j.value("worker", "").empty()) device = j.value("worker", "");
        std::string exit = j["exit_code"].is_number() ? std::to_string(j["exit_code"].get<int>())
                         : j["signal"].is_number()    ? "sig" + std::to_string(j["signal"].get<int>()) : "-";
        std::string what;
        for (const json & a : (j["argv"].is_array() ? j["argv"] : j["args"])) what += (what.empty() ? "" : " ") + a.get<std::string>();
        if (!j.value("error", "").empty()) what += "  (" + j.value("error", "") + ")";
        std::printf("%-4d %-12s %-14s %-11s %-5s %-8s %-4d %s\n", j.value("job", 0), j.value("kind", "").c_str(),
                    device.c_str(), j.value("state", "").c_str(), exit.c_str(),
                    secs(j["started_at"], j["ended_at"]).c_str(), j.value("attempts", 0), what.c_str());
    }
    return 0;
}

int control(const SwarmOptions & o, const char * op) {
    json req = {{"op", op}, {"session", o.session}};
    if (o.job > 0 && std::string(op) != "resume") req["job"] = o.job;
    json reply;
    if (int rc = call(o, req, reply)) return rc;
    std::string what = o.job > 0 ? "job " + std::to_string(o.job) : "session";
    if (std::string(op) == "cancel") {
        std::printf("session %lld: %s cancelled (%d running job(s) being stopped)\n", static_cast<long long>(o.session),
                    what.c_str(), reply.value("running_stopped", 0));
    } else {
        std::printf("session %lld: %d job(s) re-queued\n", static_cast<long long>(o.session), reply.value("requeued", 0));
    }
    return 0;
}

const CLI::App & root_of(const CLI::App & app) {
    const CLI::App * a = &app;
    while (a->get_parent() != nullptr) a = a->get_parent();
    return *a;
}

} // namespace

CLI::App * add_swarm_command(CLI::App & app, SwarmOptions & o) {
    CLI::App * sw = app.add_subcommand("swarm", "Sessions of jobs (conformance, bench, probe, A/B, commands) on standind");
    sw->require_subcommand(1);
    sw->add_option("--socket", o.socket, "standind's socket (default: GGML_STANDIN_SWARM_SOCKET, "
                                         "$XDG_RUNTIME_DIR/standind.sock or ~/.cache/standin/standind.sock)");
    sw->add_option("--client-timeout", o.client_timeout,
                   "Seconds to wait for the daemon to accept and answer (a follow waits this long, at least 30 s, "
                   "between lines)")
        ->capture_default_str()->check(CLI::Range(0.1, 86400.0));

    CLI::App * sub = sw->add_subcommand("submit", "Submit a session: --job 'KIND[@DEVICE] ARGS...', --file, or -- COMMAND");
    sub->add_option("--name", o.name, "Session name (default: its job kinds)");
    sub->add_option("-j,--job", o.jobs, "A job: 'KIND[@DEVICE] ARGS...' (kinds: conformance, bench, probe, ab, command)")
        ->type_name("JOB")->allow_extra_args(false);
    sub->add_option("--file", o.file, "JSON session spec {name, cwd, jobs: [{kind, device, args, timeout_s, env}]} (- = stdin)");
    sub->add_option("--kind", o.kind, "Kind of the job given after --")->capture_default_str()
        ->check(CLI::IsMember(swarm::builtin_kinds()));
    sub->add_option("--device", o.device, "Device of the job given after -- (a worker's device or any)")->capture_default_str();
    sub->add_option("--timeout", o.timeout, "Per-job time limit, seconds (0 = none)")->check(CLI::NonNegativeNumber);
    sub->add_flag("--wait", o.wait, "Wait for the session to end; exit 0 only when every job is done");
    sub->add_flag("-f,--follow", o.wait_logs, "Wait, printing the jobs' output as it comes");
    sub->add_flag("--json", o.json, "Print JSON");
    sub->add_option("command", o.command, "A command job's command line (after --)");

    CLI::App * ls = sw->add_subcommand("ls", "List sessions");
    ls->add_option("--state", o.state, "Only sessions in this state")->check(CLI::IsMember(swarm::session_states()));
    ls->add_option("--limit", o.limit, "Only the newest N (0 = all)")->check(CLI::NonNegativeNumber);
    ls->add_flag("--json", o.json, "Print JSON");
    ls->add_flag("--ids", o.ids, "Print session ids only (for shell completion)")->group("");

    CLI::App * show = sw->add_subcommand("show", "Show a session and its jobs");
    show->add_option("session", o.session, "Session id")->required()->type_name("SESSION");
    show->add_flag("--json", o.json, "Print JSON");

    CLI::App * logs = sw->add_subcommand("logs", "Print a session's logs");
    logs->add_option("session", o.session, "Session id")->required()->type_name("SESSION");
    logs->add_option("--job", o.job, "Only this job (1-based index)")->check(CLI::PositiveNumber);
    logs->add_flag("-f,--follow", o.follow, "Keep printing until the session ends");

    for (const char * name : {"cancel", "retry", "resume"}) {
        const char * what = std::string(name) == "cancel" ? "Cancel a session's queued and running jobs (or one job)"
                          : std::string(name) == "retry"  ? "Re-queue a session's failed jobs (or one job)"
                                                          : "Re-queue a session's interrupted and cancelled jobs";
        CLI::App * c = sw->add_subcommand(name, what);
        c->add_option("session", o.session, "Session id")->required()->type_name("SESSION");
        if (std::string(name) != "resume") {
            c->add_option("--job", o.job, "Only this job (1-based index)")->check(CLI::PositiveNumber);
        }
    }

    CLI::App * comp = sw->add_subcommand("completion", "Print a shell completion script for standin");
    comp->add_option("shell", o.shell, "bash or zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));
    return sw;
}

int cmd_swarm(const CLI::App & sw, const SwarmOptions & o) {
    std::vector<const CLI::App *> chosen = sw.get_subcommands([](const CLI::App * s) { return s->parsed(); });
    if (chosen.empty()) return 2;
    std::string name = chosen.front()->get_name();
    if (name == "submit") return submit(o);
    if (name == "ls") return ls(o);
    if (name == "show") return show(o);
    if (name == "logs") return do_logs(o, o.session, o.follow, true, nullptr);
    if (name == "cancel" || name == "retry" || name == "resume") return control(o, name.c_str());
    if (name == "completion") {
        std::fputs(swarm::completion_script(root_of(sw), "standin", o.shell == "zsh" ? swarm::Shell::zsh
                                                                                        : swarm::Shell::bash).c_str(),
                   stdout);
        return 0;
    }
    return 2;
}

} // namespace standin::tools
