// The swarm protocol: what `standin swarm` (the client) and `standind` (the job
// daemon) say to each other over a Unix socket.
//
// Framing: one JSON object per line (newline-delimited JSON), each at most
// kMaxRequestBytes by default. A request is {"op": NAME, ...}; every field is
// checked here (type, range, no unknown field) before the daemon acts on it, so
// the daemon only ever sees a well-formed Request. A reply is
// {"ok": true, ...} or {"ok": false, "error": CODE, "message": TEXT}; `logs`
// with follow streams {"event": "log", ...} lines before its final reply.
//
// Shared by the client and the daemon; it has no SQLite and no socket code.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace standin::swarm {

constexpr int         kProtocolVersion = 1;
constexpr std::size_t kMaxRequestBytes = 1 << 20;  // default; the daemon's --max-request
constexpr std::size_t kMaxJobs         = 1000;     // per session
constexpr std::size_t kMaxArgs         = 4096;     // per job
constexpr std::size_t kMaxArgBytes     = 64 << 10;
constexpr std::size_t kMaxNameBytes    = 128;
constexpr std::size_t kMaxEnvVars      = 256;
constexpr double      kMaxTimeoutS     = 7 * 24 * 3600.0;

// Error codes of replies. Clients branch on these; messages are for people.
namespace err {
constexpr const char * bad_request   = "bad_request";    // malformed or invalid request
constexpr const char * too_large     = "too_large";      // request line over the size limit
constexpr const char * unknown_kind  = "unknown_kind";
constexpr const char * unknown_device = "unknown_device";
constexpr const char * not_found     = "not_found";      // no such session or job
constexpr const char * bad_state     = "bad_state";      // e.g. cancel of a finished session
constexpr const char * disk_full     = "disk_full";      // database or disk full: nothing was written
constexpr const char * db_busy       = "db_busy";        // database locked by another process
constexpr const char * db_error      = "db_error";
constexpr const char * denied        = "denied";         // peer is not the daemon's owner
constexpr const char * busy          = "busy";           // too many clients
constexpr const char * timeout       = "timeout";        // no complete request soon enough after connecting
constexpr const char * internal      = "internal";
} // namespace err

// A protocol error: the code of the reply and its message.
struct ProtocolError : std::runtime_error {
    std::string code;
    ProtocolError(std::string c, const std::string & msg) : std::runtime_error(msg), code(std::move(c)) {}
};

// Job kinds the protocol knows by name; the daemon's configuration may add more.
// "command" runs its args as they are; the others run a template (see standind/kinds.h).
const std::vector<std::string> & builtin_kinds();

// Job and session states, as stored and as reported.
//   job:     queued -> running -> done | failed | cancelled | interrupted
//   session: queued -> running -> done | failed | cancelled
bool job_state_is_final(const std::string & state);
const std::vector<std::string> & session_states();

struct JobSpec {
    std::string                        kind;
    std::string                        device = "any";  // a worker key, or "any"
    std::vector<std::string>           args;
    std::string                        name;            // optional label
    double                             timeout_s = 0;   // 0 = none
    std::map<std::string, std::string> env;             // added to the daemon's environment
};

struct SessionSpec {
    std::string          name;
    std::string          cwd;  // absolute; where the jobs run
    std::vector<JobSpec> jobs;
};

enum class Op { ping, submit, ls, show, logs, cancel, retry, resume };

struct Request {
    Op                         op = Op::ping;
    SessionSpec                submit;              // op == submit
    std::int64_t               session = 0;         // show, logs, cancel, retry, resume
    std::optional<int>         job;                 // logs, cancel, retry: a job index (1-based)
    bool                       follow = false;      // logs
    std::int64_t               after  = 0;          // logs: only lines with a larger id
    std::string                state;               // ls: filter
    int                        limit  = 0;          // ls: newest N (0 = all)
    bool                       ids_only = false;    // ls
};

// Parses and validates one request line. Throws ProtocolError (bad_request) with
// a message that names the offending field.
Request parse_request(const std::string & line);
nlohmann::json request_to_json(const Request & r);  // the inverse, for clients

// Reply helpers.
nlohmann::json ok_reply();
nlohmann::json error_reply(const std::string & code, const std::string & message);

// JSON text of `j` on one line; invalid UTF-8 (process output) is replaced, never thrown.
std::string to_line(const nlohmann::json & j);

// Default locations: GGML_STANDIN_SWARM_SOCKET, else $XDG_RUNTIME_DIR/standind.sock,
// else ~/.cache/standin/standind.sock; GGML_STANDIN_SWARM_DB, else ~/.cache/standin/standind.db.
std::string default_socket_path();
std::string default_db_path();

// The wire name of an op ("submit", ...).
std::string op_name(Op op);

} // namespace standin::swarm
