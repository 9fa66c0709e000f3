// standind's database: sessions, jobs, their logs and results, in one SQLite
// file in WAL mode.
//
// Durability: every state change is one transaction, committed before the
// daemon acts on it or answers (synchronous=FULL), so a daemon killed at any
// instant loses no finished result; on restart recover() finds the jobs it left
// running. One connection behind a mutex: SQLite serialises writers anyway, and
// the daemon's write rate is small (log lines are batched by the workers).
//
// Opening runs PRAGMA quick_check: a damaged database is refused (StoreError)
// before the daemon serves anything from it.
//
// Errors: every method throws StoreError, whose code is a protocol error code
// (disk_full, db_busy, db_error); a failed transaction is rolled back whole.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/swarm/protocol.h"

struct sqlite3;

namespace standin::swarmd {

struct StoreError : std::runtime_error {
    std::string code;  // swarm::err::*
    StoreError(std::string c, const std::string & m) : std::runtime_error(m), code(std::move(c)) {}
};

struct StoreOptions {
    std::int64_t max_pages      = 0;         // PRAGMA max_page_count (0 = SQLite's default)
    std::int64_t min_free_bytes = 16 << 20;  // below this free disk space, refuse new work
};

struct JobRow {
    std::int64_t                       id = 0, session_id = 0;
    int                                idx = 0;  // 1-based within the session
    std::string                        name, kind, device, state, worker, error, cwd;
    std::vector<std::string>           args;
    std::map<std::string, std::string> env;
    nlohmann::json                     result;   // the last stdout line when it is JSON, else null
    double                             timeout_s = 0;
    int                                attempts = 0, interruptions = 0;
    std::optional<int>                 exit_code, signal;
    double                             queued_at = 0, started_at = 0, ended_at = 0;
    std::string                        plugin, plugin_sha256;  // what the last attempt ran against ("" = none)
    std::string                        spec_error;  // set when the stored args or env do not parse
};

struct SessionRow {
    std::int64_t               id = 0;
    std::string                name, state, cwd, summary;
    double                     created_at = 0, started_at = 0, ended_at = 0;
    bool                       cancel_requested = false;
    std::map<std::string, int> counts;  // jobs by state
};

struct LogRow {
    std::int64_t id = 0;
    int          job = 0;  // job index
    int          attempt = 0;
    std::string  stream;   // out | err | sys (the daemon's own notes)
    double       ts = 0;
    std::string  line;
};

struct LogLine {
    std::string stream;
    double      ts = 0;
    std::string line;
};

// How a job attempt ended, as the worker saw it.
struct Outcome {
    std::string        state;  // done | failed | cancelled
    std::optional<int> exit_code, signal;
    std::string        error;
    nlohmann::json     result;
};

enum class InterruptPolicy { requeue, fail };

// A job found running at start-up: its process group may still be alive.
struct Orphan {
    std::int64_t job_id = 0;
    std::int64_t pid = 0, pid_start = 0;
    int          attempt = 0;
    std::int64_t session = 0;
    int          idx = 0;
};

class Store {
  public:
    Store(const std::string & path, const StoreOptions & opt);
    ~Store();
    Store(const Store &)             = delete;
    Store & operator=(const Store &) = delete;

    // Sessions and jobs.
    std::int64_t              create_session(const swarm::SessionSpec & spec);
    std::optional<JobRow>     claim_next(const std::vector<std::string> & devices, const std::string & worker);
    void                      set_job_process(std::int64_t job_id, std::int64_t pid, std::int64_t pid_start);
    // The plugin file a job's attempt runs against (its {plugin}), and its SHA-256.
    void                      set_job_plugin(std::int64_t job_id, const std::string & path, const std::string & sha256);
    void                      finish_job(std::int64_t job_id, const Outcome & o);
    // A running job the daemon stopped (restart, shutdown): requeued or failed as `policy` says.
    void                      interrupt_job(std::int64_t job_id, InterruptPolicy policy, const std::string & why);
    // Jobs left `running` by a daemon that died; call once at start-up, then interrupt_job each.
    std::vector<Orphan>       running_jobs();

    // Control. Each returns the ids of the jobs that are running and must be stopped.
    std::vector<std::int64_t> cancel(std::int64_t session, std::optional<int> job);
    // Re-queues the jobs of `session` (or job `job`) whose state is in `states`; returns how many.
    int                       requeue(std::int64_t session, std::optional<int> job,
                                      const std::vector<std::string> & states);

    // Queries.
    std::vector<SessionRow>   list_sessions(const std::string & state, int limit);
    std::optional<SessionRow> get_session(std::int64_t id);
    std::vector<JobRow>       get_jobs(std::int64_t session);
    std::vector<LogRow>       get_logs(std::int64_t session, std::optional<int> job, std::int64_t after, int limit);

    // Log lines of a running attempt. Returns false (and stores nothing) when the
    // database is near its size limit: the room left is kept for results.
    bool append_logs(std::int64_t job_id, int attempt, const std::vector<LogLine> & lines);

    // True when new work must be refused (near max_pages, or the disk nearly full).
    bool        nearly_full();
    std::string full_message();

    // Change notification, for `logs --follow`: a counter bumped by every commit.
    std::uint64_t version();
    std::uint64_t wait_change(std::uint64_t seen, int timeout_ms);

    const std::string & path() const { return path_; }

  private:
    class Txn;
    void check_integrity();
    void exec(const char * sql);
    void check(int rc, const char * what);
    void complete_if_last(std::int64_t session);
    void bump();
    std::map<std::string, int> counts_of(std::int64_t session);
    bool nearly_full_locked(std::int64_t extra_bytes);

    sqlite3 *               db_ = nullptr;
    std::string             path_;
    StoreOptions            opt_;
    std::mutex              mu_;
    std::condition_variable changed_;
    std::uint64_t           version_ = 0;
};

double now_s();

} // namespace standin::swarmd
