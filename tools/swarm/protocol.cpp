// Parsing and validation of swarm requests (see protocol.h for the format).
//
// Every request is validated completely before anything acts on it: a field of
// the wrong type, an unknown field, an out-of-range number or an over-long string
// is a bad_request naming the field, never a crash or a partial submit.
#include "tools/swarm/protocol.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

namespace standin::swarm {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string & msg) { throw ProtocolError(err::bad_request, msg); }

// Reads the fields of one JSON object; finish() rejects any field not read.
class Fields {
  public:
    Fields(const json & j, std::string where) : j_(j), where_(std::move(where)) {
        if (!j_.is_object()) {
            bad(where_ + " must be a JSON object");
        }
    }

    const json * get(const char * key) {
        seen_.insert(key);
        auto it = j_.find(key);
        return it == j_.end() || it->is_null() ? nullptr : &*it;
    }

    std::string str(const char * key, bool required, std::size_t max_bytes) {
        const json * v = get(key);
        if (v == nullptr) {
            if (required) {
                bad(where_ + ": missing field '" + key + "'");
            }
            return {};
        }
        if (!v->is_string()) {
            bad(where_ + ": field '" + key + "' must be a string");
        }
        return checked_string(*v, std::string(key), max_bytes);
    }

    std::string checked_string(const json & v, const std::string & what, std::size_t max_bytes) const {
        const std::string & s = v.get_ref<const std::string &>();
        if (s.size() > max_bytes) {
            bad(where_ + ": '" + what + "' is longer than " + std::to_string(max_bytes) + " bytes");
        }
        if (s.find('\0') != std::string::npos) {
            bad(where_ + ": '" + what + "' contains a NUL byte");
        }
        return s;
    }

    bool boolean(const char * key) {
        const json * v = get(key);
        if (v == nullptr) {
            return false;
        }
        if (!v->is_boolean()) {
            bad(where_ + ": field '" + key + "' must be true or false");
        }
        return v->get<bool>();
    }

    std::int64_t integer(const char * key, bool required, std::int64_t lo, std::int64_t hi, std::int64_t dflt) {
        const json * v = get(key);
        if (v == nullptr) {
            if (required) {
                bad(where_ + ": missing field '" + key + "'");
            }
            return dflt;
        }
        if (!v->is_number_integer()) {
            bad(where_ + ": field '" + key + "' must be an integer");
        }
        // A uint64 above INT64_MAX would wrap through get<int64_t>(): check it as unsigned.
        if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
            bad(where_ + ": field '" + key + "' is out of range");
        }
        std::int64_t x = v->get<std::int64_t>();
        if (x < lo || x > hi) {
            bad(where_ + ": field '" + key + "' is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        }
        return x;
    }

    double number(const char * key, double lo, double hi) {
        const json * v = get(key);
        if (v == nullptr) {
            return 0;
        }
        if (!v->is_number()) {
            bad(where_ + ": field '" + key + "' must be a number");
        }
        double x = v->get<double>();
        if (!std::isfinite(x) || x < lo || x > hi) {
            bad(where_ + ": field '" + key + "' is out of range");
        }
        return x;
    }

    void finish() const {
        for (auto it = j_.begin(); it != j_.end(); ++it) {
            if (seen_.count(it.key()) == 0) {
                bad(where_ + ": unknown field '" + it.key() + "'");
            }
        }
    }

    const std::string & where() const { return where_; }

  private:
    const json &          j_;
    std::string           where_;
    std::set<std::string> seen_;
};

bool is_identifier(const std::string & s, std::size_t max_len) {
    if (s.empty() || s.size() > max_len) {
        return false;
    }
    for (char c : s) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        if (!ok) {
            return false;
        }
    }
    return true;
}

bool is_env_name(const std::string & s) {
    if (s.empty() || s.size() > 128 || (s[0] >= '0' && s[0] <= '9')) {
        return false;
    }
    for (char c : s) {
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) {
            return false;
        }
    }
    return true;
}

JobSpec parse_job(const json & j, std::size_t index) {
    Fields f(j, "job " + std::to_string(index + 1));
    JobSpec js;
    js.kind = f.str("kind", true, 64);
    if (!is_identifier(js.kind, 64)) {
        bad(f.where() + ": kind '" + js.kind + "' is not a valid name");
    }
    std::string device = f.str("device", false, 64);
    if (!device.empty()) {
        js.device = device;
    }
    if (!is_identifier(js.device, 64)) {
        bad(f.where() + ": device '" + js.device + "' is not a valid device name");
    }
    js.name      = f.str("name", false, kMaxNameBytes);
    js.timeout_s = f.number("timeout_s", 0, kMaxTimeoutS);
    if (const json * a = f.get("args")) {
        if (!a->is_array()) {
            bad(f.where() + ": 'args' must be an array of strings");
        }
        if (a->size() > kMaxArgs) {
            bad(f.where() + ": more than " + std::to_string(kMaxArgs) + " args");
        }
        for (const json & s : *a) {
            if (!s.is_string()) {
                bad(f.where() + ": 'args' must be an array of strings");
            }
            js.args.push_back(f.checked_string(s, "args", kMaxArgBytes));
        }
    }
    if (const json * e = f.get("env")) {
        if (!e->is_object() || e->size() > kMaxEnvVars) {
            bad(f.where() + ": 'env' must be an object of at most " + std::to_string(kMaxEnvVars) + " strings");
        }
        for (auto it = e->begin(); it != e->end(); ++it) {
            if (!is_env_name(it.key()) || !it->is_string()) {
                bad(f.where() + ": env '" + it.key() + "' must be a variable name with a string value");
            }
            js.env[it.key()] = f.checked_string(*it, "env", kMaxArgBytes);
        }
    }
    f.finish();
    if (js.kind == "command" && js.args.empty()) {
        bad(f.where() + ": a 'command' job needs args (the command line to run)");
    }
    return js;
}

SessionSpec parse_submit(Fields & f) {
    SessionSpec s;
    s.name = f.str("name", true, kMaxNameBytes);
    if (s.name.empty()) {
        bad("submit: 'name' must not be empty");
    }
    for (unsigned char c : s.name) {
        if (c < 0x20 || c == 0x7f) {
            bad("submit: 'name' contains a control character");
        }
    }
    s.cwd = f.str("cwd", false, 4096);
    if (!s.cwd.empty() && s.cwd[0] != '/') {
        bad("submit: 'cwd' must be an absolute path");
    }
    const json * jobs = f.get("jobs");
    if (jobs == nullptr || !jobs->is_array() || jobs->empty()) {
        bad("submit: 'jobs' must be a non-empty array");
    }
    if (jobs->size() > kMaxJobs) {
        bad("submit: more than " + std::to_string(kMaxJobs) + " jobs in one session");
    }
    for (std::size_t i = 0; i < jobs->size(); ++i) {
        s.jobs.push_back(parse_job((*jobs)[i], i));
    }
    return s;
}

const std::vector<std::pair<Op, const char *>> & op_names() {
    static const std::vector<std::pair<Op, const char *>> names = {
        {Op::ping, "ping"}, {Op::submit, "submit"}, {Op::ls, "ls"},       {Op::show, "show"},
        {Op::logs, "logs"}, {Op::cancel, "cancel"}, {Op::retry, "retry"}, {Op::resume, "resume"},
    };
    return names;
}

} // namespace

const std::vector<std::string> & builtin_kinds() {
    static const std::vector<std::string> k = {"bench", "conformance", "probe", "ab", "command"};
    return k;
}

bool job_state_is_final(const std::string & s) {
    return s == "done" || s == "failed" || s == "cancelled" || s == "interrupted";
}

const std::vector<std::string> & session_states() {
    static const std::vector<std::string> s = {"queued", "running", "done", "failed", "cancelled"};
    return s;
}

std::string op_name(Op op) {
    for (const auto & [o, n] : op_names()) {
        if (o == op) {
            return n;
        }
    }
    return "?";
}

Request parse_request(const std::string & line) {
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
        bad("the request is not valid JSON");
    }
    Fields f(j, "request");
    Request r;
    std::string op = f.str("op", true, 32);
    bool known = false;
    for (const auto & [o, n] : op_names()) {
        if (op == n) {
            r.op  = o;
            known = true;
        }
    }
    if (!known) {
        bad("unknown op '" + op + "'");
    }
    f.integer("v", false, kProtocolVersion, kProtocolVersion, kProtocolVersion);
    const std::int64_t max_id = (std::int64_t(1) << 53);
    switch (r.op) {
        case Op::ping: break;
        case Op::submit: r.submit = parse_submit(f); break;
        case Op::ls: {
            r.state    = f.str("state", false, 32);
            r.limit    = static_cast<int>(f.integer("limit", false, 0, 1000000, 0));
            r.ids_only = f.boolean("ids");
            if (!r.state.empty()) {
                bool ok = false;
                for (const std::string & s : session_states()) {
                    ok = ok || s == r.state;
                }
                if (!ok) {
                    bad("ls: unknown state '" + r.state + "'");
                }
            }
            break;
        }
        case Op::show:
        case Op::resume: r.session = f.integer("session", true, 1, max_id, 0); break;
        case Op::logs:
            r.follow = f.boolean("follow");
            r.after  = f.integer("after", false, 0, std::numeric_limits<std::int64_t>::max(), 0);
            [[fallthrough]];
        case Op::cancel:
        case Op::retry: {
            r.session = f.integer("session", true, 1, max_id, 0);
            if (f.get("job") != nullptr) {
                r.job = static_cast<int>(f.integer("job", false, 1, kMaxJobs, 1));
            }
            break;
        }
    }
    f.finish();
    return r;
}

json request_to_json(const Request & r) {
    json j = {{"v", kProtocolVersion}, {"op", op_name(r.op)}};
    switch (r.op) {
        case Op::ping: break;
        case Op::submit: {
            j["name"] = r.submit.name;
            if (!r.submit.cwd.empty()) {
                j["cwd"] = r.submit.cwd;
            }
            json jobs = json::array();
            for (const JobSpec & js : r.submit.jobs) {
                json o = {{"kind", js.kind}, {"device", js.device}, {"args", js.args}};
                if (!js.name.empty()) o["name"] = js.name;
                if (js.timeout_s > 0) o["timeout_s"] = js.timeout_s;
                if (!js.env.empty()) o["env"] = js.env;
                jobs.push_back(std::move(o));
            }
            j["jobs"] = std::move(jobs);
            break;
        }
        case Op::ls:
            if (!r.state.empty()) j["state"] = r.state;
            if (r.limit > 0) j["limit"] = r.limit;
            if (r.ids_only) j["ids"] = true;
            break;
        case Op::show:
        case Op::resume: j["session"] = r.session; break;
        case Op::logs:
            if (r.follow) j["follow"] = true;
            if (r.after > 0) j["after"] = r.after;
            [[fallthrough]];
        case Op::cancel:
        case Op::retry:
            j["session"] = r.session;
            if (r.job) j["job"] = *r.job;
            break;
    }
    return j;
}

json ok_reply() { return json{{"ok", true}}; }

json error_reply(const std::string & code, const std::string & message) {
    return json{{"ok", false}, {"error", code}, {"message", message}};
}

std::string to_line(const json & j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {

std::string env_or_empty(const char * name) {
    const char * v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
}

std::string cache_dir() {
    std::string home = env_or_empty("HOME");
    return (home.empty() ? std::string("/tmp") : home) + "/.cache/standin";
}

} // namespace

std::string default_socket_path() {
    std::string s = env_or_empty("GGML_STANDIN_SWARM_SOCKET");
    if (!s.empty()) {
        return s;
    }
    std::string run = env_or_empty("XDG_RUNTIME_DIR");
    return run.empty() ? cache_dir() + "/standind.sock" : run + "/standind.sock";
}

std::string default_db_path() {
    std::string s = env_or_empty("GGML_STANDIN_SWARM_DB");
    return s.empty() ? cache_dir() + "/standind.db" : s;
}

} // namespace standin::swarm
