// standind's SQLite store (see store.h for the durability contract).
#include "tools/standind/store.h"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>

#include <sqlite3.h>
#include <sys/statvfs.h>

namespace standin::swarmd {

using nlohmann::json;

double now_s() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

namespace {

// 1: the first schema; 2: jobs.plugin and jobs.plugin_sha256 (the plugin file
// an attempt ran against).
constexpr int kSchemaVersion = 2;

const char * kSchema = R"sql(
CREATE TABLE IF NOT EXISTS sessions (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    name             TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    cwd              TEXT    NOT NULL,
    summary          TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_at       REAL    NOT NULL,
    started_at       REAL,
    ended_at         REAL
);
CREATE TABLE IF NOT EXISTS jobs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id    INTEGER NOT NULL REFERENCES sessions(id),
    idx           INTEGER NOT NULL,
    name          TEXT    NOT NULL DEFAULT '',
    kind          TEXT    NOT NULL,
    device        TEXT    NOT NULL,
    timeout_s     REAL    NOT NULL DEFAULT 0,
    state         TEXT    NOT NULL,
    worker        TEXT,
    attempts      INTEGER NOT NULL DEFAULT 0,
    interruptions INTEGER NOT NULL DEFAULT 0,
    pid           INTEGER,
    pid_start     INTEGER,
    exit_code     INTEGER,
    signal        INTEGER,
    error         TEXT,
    result        TEXT,
    queued_at     REAL    NOT NULL,
    started_at    REAL,
    ended_at      REAL,
    plugin        TEXT,
    plugin_sha256 TEXT,
    UNIQUE (session_id, idx)
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, id);
-- A job's args and env, written once at submit: apart from the job's state so
-- that the frequent state updates rewrite a small row, never a large one (a
-- rewrite needs free pages for the new copy before the old one is freed, and
-- at the size limit only a small reserve is left).
CREATE TABLE IF NOT EXISTS job_specs (
    job_id INTEGER PRIMARY KEY REFERENCES jobs(id),
    args   TEXT NOT NULL,
    env    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS logs (
    id      INTEGER PRIMARY KEY,
    job_id  INTEGER NOT NULL REFERENCES jobs(id),
    attempt INTEGER NOT NULL,
    stream  TEXT    NOT NULL,
    ts      REAL    NOT NULL,
    line    TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS logs_by_job ON logs(job_id, id);
)sql";

std::string code_of(int rc, sqlite3 * db = nullptr) {
    // A full disk can also surface as an I/O error (a failed WAL or shm write).
    if ((rc & 0xff) == SQLITE_IOERR && db != nullptr && sqlite3_system_errno(db) == ENOSPC) {
        return swarm::err::disk_full;
    }
    switch (rc & 0xff) {
        case SQLITE_FULL: return swarm::err::disk_full;
        case SQLITE_BUSY:
        case SQLITE_LOCKED: return swarm::err::db_busy;
        default: return swarm::err::db_error;
    }
}

// One prepared statement; binds by position (1-based), steps, reads columns.
class Stmt {
  public:
    Stmt(sqlite3 * db, const char * sql) : db_(db) {
        int rc = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr);
        if (rc != SQLITE_OK) {
            throw StoreError(code_of(rc, db), std::string("database: ") + sqlite3_errmsg(db));
        }
    }
    ~Stmt() { sqlite3_finalize(s_); }
    Stmt & bind(int i, std::int64_t v) { return ck(sqlite3_bind_int64(s_, i, v)); }
    Stmt & bind(int i, int v) { return ck(sqlite3_bind_int64(s_, i, v)); }
    Stmt & bind(int i, double v) { return ck(sqlite3_bind_double(s_, i, v)); }
    Stmt & bind(int i, const std::string & v) {
        return ck(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    }
    Stmt & bind(int i, std::optional<int> v) { return v ? bind(i, *v) : ck(sqlite3_bind_null(s_, i)); }
    Stmt & bind_null(int i) { return ck(sqlite3_bind_null(s_, i)); }

    // True while there is a row.
    bool step() {
        int rc = sqlite3_step(s_);
        if (rc == SQLITE_ROW) {
            return true;
        }
        if (rc == SQLITE_DONE) {
            return false;
        }
        throw StoreError(code_of(rc, db_), std::string("database: ") + sqlite3_errmsg(db_));
    }
    void run() { step(); }
    void reset() { sqlite3_reset(s_); sqlite3_clear_bindings(s_); }

    std::int64_t i64(int c) const { return sqlite3_column_int64(s_, c); }
    double       f64(int c) const { return sqlite3_column_double(s_, c); }
    bool         null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
    std::optional<int> opt_int(int c) const {
        return null(c) ? std::nullopt : std::optional<int>(static_cast<int>(i64(c)));
    }
    std::string text(int c) const {
        const unsigned char * t = sqlite3_column_text(s_, c);
        return t == nullptr ? std::string() : std::string(reinterpret_cast<const char *>(t),
                                                          static_cast<std::size_t>(sqlite3_column_bytes(s_, c)));
    }
    json js(int c) const {
        if (null(c)) {
            return nullptr;
        }
        json j = json::parse(text(c), nullptr, false);
        return j.is_discarded() ? json(nullptr) : j;
    }

  private:
    Stmt & ck(int rc) {
        if (rc != SQLITE_OK) {
            throw StoreError(code_of(rc, db_), std::string("database: ") + sqlite3_errmsg(db_));
        }
        return *this;
    }
    sqlite3 *      db_;
    sqlite3_stmt * s_ = nullptr;
};

std::string dump(const json & j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

const char * kJobCols =
    "j.id, j.session_id, j.idx, j.name, j.kind, j.device, j.state, j.worker, j.error, s.cwd, p.args, p.env,"
    " j.result, j.timeout_s, j.attempts, j.interruptions, j.exit_code, j.signal, j.queued_at, j.started_at,"
    " j.ended_at, COALESCE(j.plugin, ''), COALESCE(j.plugin_sha256, '')";

// The stored args (a JSON array of strings) and env (an object of strings);
// anything else is named in `error`: such a job must not run with a guess.
void read_spec(const std::string & args_text, const std::string & env_text, JobRow & r) {
    json args = json::parse(args_text, nullptr, false);
    json env  = json::parse(env_text, nullptr, false);
    bool args_ok = args.is_array(), env_ok = env.is_object();
    for (const json & a : args_ok ? args : json::array()) args_ok = args_ok && a.is_string();
    for (const json & v : env_ok ? env : json::object()) env_ok = env_ok && v.is_string();
    if (args_ok) r.args = args.get<std::vector<std::string>>();
    if (env_ok) r.env = env.get<std::map<std::string, std::string>>();
    if (!args_ok || !env_ok) {
        std::string what = !args_ok ? "args" : "env";
        const std::string & text = !args_ok ? args_text : env_text;
        r.spec_error = "the job's stored " + what + " (" + text.substr(0, 80) + (text.size() > 80 ? "..." : "") +
                       ") is not " + (!args_ok ? "a JSON array of strings" : "a JSON object of strings") +
                       "; the job is not run";
    }
}
const char * kJobFrom = " FROM jobs j JOIN sessions s ON s.id = j.session_id JOIN job_specs p ON p.job_id = j.id";

JobRow read_job(const Stmt & s) {
    JobRow r;
    r.id = s.i64(0), r.session_id = s.i64(1), r.idx = static_cast<int>(s.i64(2));
    r.name = s.text(3), r.kind = s.text(4), r.device = s.text(5), r.state = s.text(6);
    r.worker = s.text(7), r.error = s.text(8), r.cwd = s.text(9);
    read_spec(s.text(10), s.text(11), r);
    r.result = s.js(12);
    r.timeout_s = s.f64(13), r.attempts = static_cast<int>(s.i64(14)), r.interruptions = static_cast<int>(s.i64(15));
    r.exit_code = s.opt_int(16), r.signal = s.opt_int(17);
    r.queued_at = s.f64(18), r.started_at = s.f64(19), r.ended_at = s.f64(20);
    r.plugin = s.text(21), r.plugin_sha256 = s.text(22);
    return r;
}

} // namespace

// BEGIN IMMEDIATE ... COMMIT, rolled back when destroyed uncommitted (an exception).
class Store::Txn {
  public:
    explicit Txn(Store & s) : s_(s) { s_.exec("BEGIN IMMEDIATE"); }
    ~Txn() {
        if (!done_) {
            // Ignored on purpose: SQLite may have rolled back itself (SQLITE_FULL does).
            sqlite3_exec(s_.db_, "ROLLBACK", nullptr, nullptr, nullptr);
        }
    }
    void commit() {
        s_.exec("COMMIT");
        done_ = true;
        s_.bump();
    }

  private:
    Store & s_;
    bool    done_ = false;
};

Store::Store(const std::string & path, const StoreOptions & opt) : path_(path), opt_(opt) {
    int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    if (rc != SQLITE_OK) {
        std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
        sqlite3_close(db_);
        db_ = nullptr;
        throw StoreError(code_of(rc), "cannot open database " + path + ": " + msg);
    }
    try {
        sqlite3_busy_timeout(db_, 5000);
        {
            Stmt wal(db_, "PRAGMA journal_mode=WAL");
            if (!wal.step() || wal.text(0) != "wal") {
                throw StoreError(swarm::err::db_error, "cannot put database " + path + " in WAL mode");
            }
        }
        exec("PRAGMA synchronous=FULL");
        exec("PRAGMA foreign_keys=ON");
        if (opt_.max_pages > 0) {
            exec(("PRAGMA max_page_count=" + std::to_string(opt_.max_pages)).c_str());
        }
        check_integrity();
        Stmt uv(db_, "PRAGMA user_version");
        uv.step();
        std::int64_t version = uv.i64(0);
        if (version > kSchemaVersion) {
            throw StoreError(swarm::err::db_error, "database " + path + " has schema version " +
                             std::to_string(version) + ", newer than this standind's " +
                             std::to_string(kSchemaVersion));
        }
        Txn t(*this);
        exec(kSchema);
        if (version == 1) {
            exec("ALTER TABLE jobs ADD COLUMN plugin TEXT; ALTER TABLE jobs ADD COLUMN plugin_sha256 TEXT");
        }
        exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
        t.commit();
    } catch (...) {
        sqlite3_close(db_);
        db_ = nullptr;
        throw;
    }
}

// A damaged file is refused at start, not discovered one request at a time.
// quick_check reads every page (not the index/table cross-checks of
// integrity_check), which on this database takes milliseconds.
void Store::check_integrity() {
    std::string problems;
    try {
        Stmt q(db_, "PRAGMA quick_check(5)");
        while (q.step()) {
            const std::string line = q.text(0);
            if (line != "ok") problems += (problems.empty() ? "" : "; ") + line;
        }
    } catch (const StoreError & e) {
        if (e.code != swarm::err::db_error) throw;  // busy or full: not a verdict on the file
        problems = e.what();
    }
    std::replace(problems.begin(), problems.end(), '\n', ' ');  // one log line
    if (!problems.empty()) {
        throw StoreError(swarm::err::db_error, "database " + path_ + " is damaged (PRAGMA quick_check: " + problems +
                         "); move it aside to start with an empty one, or restore a copy");
    }
}

Store::~Store() {
    if (db_ != nullptr) {
        sqlite3_close(db_);
    }
}

void Store::exec(const char * sql) {
    char * msg = nullptr;
    int    rc  = sqlite3_exec(db_, sql, nullptr, nullptr, &msg);
    if (rc != SQLITE_OK) {
        std::string m = msg != nullptr ? msg : sqlite3_errstr(rc);
        sqlite3_free(msg);
        throw StoreError(code_of(rc, db_), "database: " + m);
    }
}

void Store::bump() {
    ++version_;
    changed_.notify_all();
}

std::uint64_t Store::version() {
    std::lock_guard<std::mutex> lk(mu_);
    return version_;
}

std::uint64_t Store::wait_change(std::uint64_t seen, int timeout_ms) {
    std::unique_lock<std::mutex> lk(mu_);
    changed_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return version_ != seen; });
    return version_;
}

bool Store::nearly_full_locked(std::int64_t extra_bytes) {
    if (opt_.max_pages > 0) {
        Stmt pc(db_, "SELECT (SELECT page_count FROM pragma_page_count()) - "
                     "(SELECT freelist_count FROM pragma_freelist_count()), (SELECT page_size FROM pragma_page_size())");
        pc.step();
        // Keep a tenth of the allowance (at least 16 pages) for results and state
        // changes; new work must fit (twice: indexes, page slack) beside it.
        std::int64_t reserve = std::max<std::int64_t>(16, opt_.max_pages / 10);
        std::int64_t needed  = 2 * extra_bytes / std::max<std::int64_t>(512, pc.i64(1)) + 1;
        if (pc.i64(0) + needed >= opt_.max_pages - reserve) {
            return true;
        }
    }
    struct statvfs st{};
    std::string    dir = path_.substr(0, path_.find_last_of('/') + 1);
    if (opt_.min_free_bytes > 0 && statvfs(dir.empty() ? "." : dir.c_str(), &st) == 0) {
        auto free_bytes = static_cast<std::int64_t>(st.f_bavail) * static_cast<std::int64_t>(st.f_frsize);
        return free_bytes < opt_.min_free_bytes + 2 * extra_bytes;
    }
    return false;
}

bool Store::nearly_full() {
    std::lock_guard<std::mutex> lk(mu_);
    return nearly_full_locked(0);
}

std::string Store::full_message() {
    return "the database " + path_ + " is full (its size limit or the disk): nothing was written; "
           "free disk space, or raise standind's --max-db-mb";
}

std::int64_t Store::create_session(const swarm::SessionSpec & spec) {
    std::lock_guard<std::mutex> lk(mu_);
    std::int64_t bytes = 512;
    for (const swarm::JobSpec & js : spec.jobs) {
        bytes += 256 + static_cast<std::int64_t>(js.name.size() + js.kind.size());
        for (const std::string & a : js.args) bytes += static_cast<std::int64_t>(a.size()) + 4;
        for (const auto & [k, v] : js.env) bytes += static_cast<std::int64_t>(k.size() + v.size()) + 6;
    }
    if (nearly_full_locked(bytes)) {
        throw StoreError(swarm::err::disk_full, full_message());
    }
    Txn    t(*this);
    double now = now_s();
    Stmt   s(db_, "INSERT INTO sessions(name, state, cwd, created_at) VALUES(?, 'queued', ?, ?)");
    s.bind(1, spec.name).bind(2, spec.cwd.empty() ? std::string("/") : spec.cwd).bind(3, now).run();
    std::int64_t id = sqlite3_last_insert_rowid(db_);
    Stmt j(db_, "INSERT INTO jobs(session_id, idx, name, kind, device, timeout_s, state, queued_at)"
                " VALUES(?, ?, ?, ?, ?, ?, 'queued', ?)");
    Stmt p(db_, "INSERT INTO job_specs(job_id, args, env) VALUES(?, ?, ?)");
    for (std::size_t i = 0; i < spec.jobs.size(); ++i) {
        const swarm::JobSpec & js = spec.jobs[i];
        j.reset();
        j.bind(1, id).bind(2, static_cast<int>(i + 1)).bind(3, js.name).bind(4, js.kind).bind(5, js.device);
        j.bind(6, js.timeout_s).bind(7, now).run();
        p.reset();
        p.bind(1, static_cast<std::int64_t>(sqlite3_last_insert_rowid(db_))).bind(2, dump(json(js.args)));
        p.bind(3, dump(json(js.env))).run();
    }
    t.commit();
    return id;
}

std::optional<JobRow> Store::claim_next(const std::vector<std::string> & devices, const std::string & worker) {
    std::lock_guard<std::mutex> lk(mu_);
    std::string where = "j.state = 'queued' AND j.device IN ('any'";
    for (std::size_t i = 0; i < devices.size(); ++i) {
        where += ", ?";
    }
    where += ")";
    Txn  t(*this);
    Stmt q(db_, (std::string("SELECT ") + kJobCols + kJobFrom + " WHERE " + where + " ORDER BY j.id LIMIT 1").c_str());
    for (std::size_t i = 0; i < devices.size(); ++i) {
        q.bind(static_cast<int>(i + 1), devices[i]);
    }
    if (!q.step()) {
        return std::nullopt;
    }
    JobRow r = read_job(q);
    double now = now_s();
    Stmt   u(db_, "UPDATE jobs SET state='running', worker=?, attempts=attempts+1, started_at=?, ended_at=NULL, plugin=NULL,"
                  " plugin_sha256=NULL,"
                  " pid=NULL, pid_start=NULL, exit_code=NULL, signal=NULL, error=NULL, result=NULL WHERE id=?");
    u.bind(1, worker).bind(2, now).bind(3, r.id).run();
    Stmt s(db_, "UPDATE sessions SET state='running', started_at=COALESCE(started_at, ?) WHERE id=?");
    s.bind(1, now).bind(2, r.session_id).run();
    t.commit();
    r.state = "running", r.worker = worker, r.attempts += 1, r.started_at = now;
    return r;
}

void Store::set_job_plugin(std::int64_t job_id, const std::string & path, const std::string & sha256) {
    std::lock_guard<std::mutex> lk(mu_);
    Txn  t(*this);
    Stmt u(db_, "UPDATE jobs SET plugin=?, plugin_sha256=? WHERE id=?");
    u.bind(1, path).bind(2, sha256).bind(3, job_id).run();
    t.commit();
}

void Store::set_job_process(std::int64_t job_id, std::int64_t pid, std::int64_t pid_start) {
    std::lock_guard<std::mutex> lk(mu_);
    Txn  t(*this);
    Stmt u(db_, "UPDATE jobs SET pid=?, pid_start=? WHERE id=?");
    u.bind(1, pid).bind(2, pid_start).bind(3, job_id).run();
    t.commit();
}

bool Store::append_logs(std::int64_t job_id, int attempt, const std::vector<LogLine> & lines) {
    std::lock_guard<std::mutex> lk(mu_);
    if (lines.empty()) {
        return true;
    }
    std::int64_t bytes = 0;
    for (const LogLine & l : lines) bytes += static_cast<std::int64_t>(l.line.size()) + 48;
    if (nearly_full_locked(bytes)) {
        return false;
    }
    Txn  t(*this);
    Stmt s(db_, "INSERT INTO logs(job_id, attempt, stream, ts, line) VALUES(?, ?, ?, ?, ?)");
    for (const LogLine & l : lines) {
        s.reset();
        s.bind(1, job_id).bind(2, attempt).bind(3, l.stream).bind(4, l.ts).bind(5, l.line).run();
    }
    t.commit();
    return true;
}

std::map<std::string, int> Store::counts_of(std::int64_t session) {
    std::map<std::string, int> c;
    Stmt q(db_, "SELECT state, count(*) FROM jobs WHERE session_id=? GROUP BY state");
    q.bind(1, session);
    while (q.step()) {
        c[q.text(0)] = static_cast<int>(q.i64(1));
    }
    return c;
}

// Called inside a transaction after a job reached a final state: when it was the
// session's last unfinished job, the session ends, with a summary.
void Store::complete_if_last(std::int64_t session) {
    std::map<std::string, int> c = counts_of(session);
    if (c["queued"] + c["running"] > 0) {
        return;
    }
    Stmt cr(db_, "SELECT cancel_requested FROM sessions WHERE id=?");
    cr.bind(1, session);
    bool cancelled = cr.step() && cr.i64(0) != 0;
    int  total = 0;
    for (const auto & [k, n] : c) {
        total += n;
    }
    std::string state = cancelled ? "cancelled" : (c["done"] == total ? "done" : "failed");
    std::string summary = std::to_string(c["done"]) + " of " + std::to_string(total) + " jobs done";
    for (const char * k : {"failed", "cancelled", "interrupted"}) {
        if (c[k] > 0) {
            summary += ", " + std::to_string(c[k]) + " " + k;
        }
    }
    Stmt f(db_, "SELECT idx, COALESCE(error, '') FROM jobs WHERE session_id=? AND state<>'done' ORDER BY idx LIMIT 3");
    f.bind(1, session);
    std::string first;
    while (f.step()) {
        first += (first.empty() ? "" : "; ") + std::string("#") + std::to_string(f.i64(0)) + ": " + f.text(1);
    }
    if (!first.empty()) {
        summary += " (" + first + ")";
    }
    Stmt u(db_, "UPDATE sessions SET state=?, summary=?, ended_at=? WHERE id=?");
    u.bind(1, state).bind(2, summary).bind(3, now_s()).bind(4, session).run();
}

void Store::finish_job(std::int64_t job_id, const Outcome & o) {
    std::lock_guard<std::mutex> lk(mu_);
    Txn  t(*this);
    Stmt u(db_, "UPDATE jobs SET state=?, exit_code=?, signal=?, error=?, result=?, ended_at=?, pid=NULL"
                " WHERE id=? AND state='running' RETURNING session_id");
    u.bind(1, o.state).bind(2, o.exit_code).bind(3, o.signal);
    if (o.error.empty()) u.bind_null(4); else u.bind(4, o.error);
    if (o.result.is_null()) u.bind_null(5); else u.bind(5, dump(o.result));
    u.bind(6, now_s()).bind(7, job_id);
    if (u.step()) {
        std::int64_t session = u.i64(0);
        while (u.step()) {
        }
        complete_if_last(session);
    }
    t.commit();
}

void Store::interrupt_job(std::int64_t job_id, InterruptPolicy policy, const std::string & why) {
    std::lock_guard<std::mutex> lk(mu_);
    Txn  t(*this);
    double now = now_s();
    Stmt q(db_, "SELECT session_id, attempts FROM jobs WHERE id=? AND state='running'");
    q.bind(1, job_id);
    if (!q.step()) {
        return;
    }
    std::int64_t session = q.i64(0);
    int          attempt = static_cast<int>(q.i64(1));
    Stmt l(db_, "INSERT INTO logs(job_id, attempt, stream, ts, line) VALUES(?, ?, 'sys', ?, ?)");
    l.bind(1, job_id).bind(2, attempt).bind(3, now)
        .bind(4, "interrupted: " + why + (policy == InterruptPolicy::requeue ? " (re-queued)" : "")).run();
    if (policy == InterruptPolicy::requeue) {
        Stmt u(db_, "UPDATE jobs SET state='queued', interruptions=interruptions+1, queued_at=?, pid=NULL WHERE id=?");
        u.bind(1, now).bind(2, job_id).run();
    } else {
        Stmt u(db_, "UPDATE jobs SET state='interrupted', interruptions=interruptions+1, error=?, ended_at=?,"
                    " pid=NULL WHERE id=?");
        u.bind(1, "interrupted: " + why).bind(2, now).bind(3, job_id).run();
        complete_if_last(session);
    }
    t.commit();
}

std::vector<Orphan> Store::running_jobs() {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<Orphan> out;
    Stmt q(db_, "SELECT id, COALESCE(pid, 0), COALESCE(pid_start, 0), attempts, session_id, idx FROM jobs"
                " WHERE state='running' ORDER BY id");
    while (q.step()) {
        out.push_back({q.i64(0), q.i64(1), q.i64(2), static_cast<int>(q.i64(3)), q.i64(4), static_cast<int>(q.i64(5))});
    }
    return out;
}

std::vector<std::int64_t> Store::cancel(std::int64_t session, std::optional<int> job) {
    std::lock_guard<std::mutex> lk(mu_);
    Txn  t(*this);
    Stmt s(db_, "SELECT state FROM sessions WHERE id=?");
    s.bind(1, session);
    if (!s.step()) {
        throw StoreError(swarm::err::not_found, "no session " + std::to_string(session));
    }
    std::string sstate = s.text(0);
    if (sstate == "done" || sstate == "failed" || sstate == "cancelled") {
        throw StoreError(swarm::err::bad_state, "session " + std::to_string(session) + " has already ended (" +
                         sstate + ")");
    }
    std::string sel = "FROM jobs WHERE session_id=?1" + std::string(job ? " AND idx=?2" : "");
    if (job) {
        Stmt e(db_, ("SELECT state " + sel).c_str());
        e.bind(1, session).bind(2, *job);
        if (!e.step()) {
            throw StoreError(swarm::err::not_found, "session " + std::to_string(session) + " has no job " +
                             std::to_string(*job));
        }
        if (swarm::job_state_is_final(e.text(0))) {
            throw StoreError(swarm::err::bad_state, "job " + std::to_string(*job) + " has already ended (" +
                             e.text(0) + ")");
        }
    } else {
        Stmt c(db_, "UPDATE sessions SET cancel_requested=1 WHERE id=?");
        c.bind(1, session).run();
    }
    std::vector<std::int64_t> running;
    Stmt r(db_, ("SELECT id " + sel + " AND state='running'").c_str());
    r.bind(1, session);
    if (job) r.bind(2, *job);
    while (r.step()) {
        running.push_back(r.i64(0));
    }
    Stmt u(db_, ("UPDATE jobs SET state='cancelled', error='cancelled before it ran', ended_at=?3 WHERE session_id=?1" +
                 std::string(job ? " AND idx=?2" : "") + " AND state='queued'").c_str());
    u.bind(1, session).bind(3, now_s());
    if (job) u.bind(2, *job);
    u.run();
    complete_if_last(session);
    t.commit();
    return running;
}

int Store::requeue(std::int64_t session, std::optional<int> job, const std::vector<std::string> & states) {
    std::lock_guard<std::mutex> lk(mu_);
    Txn  t(*this);
    Stmt s(db_, "SELECT 1 FROM sessions WHERE id=?");
    s.bind(1, session);
    if (!s.step()) {
        throw StoreError(swarm::err::not_found, "no session " + std::to_string(session));
    }
    std::string in;
    for (std::size_t i = 0; i < states.size(); ++i) {
        in += (i ? ", " : "") + std::string("?") + std::to_string(i + 4);
    }
    Stmt u(db_, ("UPDATE jobs SET state='queued', queued_at=?3, ended_at=NULL, exit_code=NULL, signal=NULL,"
                 " error=NULL, result=NULL WHERE session_id=?1" +
                 std::string(job ? " AND idx=?2" : "") + " AND state IN (" + in + ")").c_str());
    u.bind(1, session).bind(3, now_s());
    if (job) u.bind(2, *job);
    for (std::size_t i = 0; i < states.size(); ++i) {
        u.bind(static_cast<int>(i + 4), states[i]);
    }
    u.run();
    int n = sqlite3_changes(db_);
    if (n > 0) {
        Stmt r(db_, "UPDATE sessions SET state=CASE WHEN state IN ('done','failed','cancelled') THEN 'queued'"
                    " ELSE state END, summary=NULL, ended_at=NULL, cancel_requested=0 WHERE id=?");
        r.bind(1, session).run();
    }
    t.commit();
    return n;
}

std::vector<SessionRow> Store::list_sessions(const std::string & state, int limit) {
    std::lock_guard<std::mutex> lk(mu_);
    std::string sql = "SELECT id, name, state, cwd, COALESCE(summary, ''), created_at, COALESCE(started_at, 0),"
                      " COALESCE(ended_at, 0), cancel_requested FROM sessions";
    if (!state.empty()) sql += " WHERE state=?1";
    sql += " ORDER BY id DESC";
    if (limit > 0) sql += " LIMIT " + std::to_string(limit);
    Stmt q(db_, sql.c_str());
    if (!state.empty()) q.bind(1, state);
    std::vector<SessionRow> out;
    std::map<std::int64_t, std::size_t> at;
    while (q.step()) {
        SessionRow r;
        r.id = q.i64(0), r.name = q.text(1), r.state = q.text(2), r.cwd = q.text(3), r.summary = q.text(4);
        r.created_at = q.f64(5), r.started_at = q.f64(6), r.ended_at = q.f64(7), r.cancel_requested = q.i64(8) != 0;
        at[r.id] = out.size();
        out.push_back(std::move(r));
    }
    if (!out.empty()) {
        Stmt c(db_, "SELECT session_id, state, count(*) FROM jobs WHERE session_id >= ? GROUP BY session_id, state");
        c.bind(1, out.back().id);
        while (c.step()) {
            auto it = at.find(c.i64(0));
            if (it != at.end()) {
                out[it->second].counts[c.text(1)] = static_cast<int>(c.i64(2));
            }
        }
    }
    std::reverse(out.begin(), out.end());
    return out;
}

std::optional<SessionRow> Store::get_session(std::int64_t id) {
    std::lock_guard<std::mutex> lk(mu_);
    Stmt q(db_, "SELECT id, name, state, cwd, COALESCE(summary, ''), created_at, COALESCE(started_at, 0),"
                " COALESCE(ended_at, 0), cancel_requested FROM sessions WHERE id=?");
    q.bind(1, id);
    if (!q.step()) {
        return std::nullopt;
    }
    SessionRow r;
    r.id = q.i64(0), r.name = q.text(1), r.state = q.text(2), r.cwd = q.text(3), r.summary = q.text(4);
    r.created_at = q.f64(5), r.started_at = q.f64(6), r.ended_at = q.f64(7), r.cancel_requested = q.i64(8) != 0;
    r.counts = counts_of(id);
    return r;
}

std::vector<JobRow> Store::get_jobs(std::int64_t session) {
    std::lock_guard<std::mutex> lk(mu_);
    Stmt q(db_, (std::string("SELECT ") + kJobCols + kJobFrom + " WHERE j.session_id=? ORDER BY j.idx").c_str());
    q.bind(1, session);
    std::vector<JobRow> out;
    while (q.step()) {
        out.push_back(read_job(q));
    }
    return out;
}

std::vector<LogRow> Store::get_logs(std::int64_t session, std::optional<int> job, std::int64_t after, int limit) {
    std::lock_guard<std::mutex> lk(mu_);
    std::string sql = "SELECT l.id, j.idx, l.attempt, l.stream, l.ts, l.line FROM logs l JOIN jobs j ON j.id = l.job_id"
                      " WHERE j.session_id=?1 AND l.id > ?2";
    if (job) sql += " AND j.idx=?3";
    sql += " ORDER BY l.id LIMIT " + std::to_string(limit);
    Stmt q(db_, sql.c_str());
    q.bind(1, session).bind(2, after);
    if (job) q.bind(3, *job);
    std::vector<LogRow> out;
    while (q.step()) {
        out.push_back({q.i64(0), static_cast<int>(q.i64(1)), static_cast<int>(q.i64(2)), q.text(3), q.f64(4),
                       q.text(5)});
    }
    return out;
}

} // namespace standin::swarmd
