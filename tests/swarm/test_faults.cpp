// Faults found by a bad-input probe of the daemon, each against the real
// standind: a deleted DB.lock no longer lets a second daemon recover (and
// kill) the first one's jobs; silent connections cannot lock real clients out;
// a stopped daemon is a client timeout that says so; jobs run against the
// plugin found at run time, with its path and hash on record; a damaged
// database and a job spec that does not parse are clear errors.
#include <cstdio>
#include <filesystem>

#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "swarm_test_util.h"
#include "tools/standind/sha256.h"
#include "tools/standind/store.h"

namespace {

using namespace swarm_test;
namespace fs = std::filesystem;

struct Output {
    int         rc = -1;
    std::string out;
};

// Runs a shell command line (bounded by `timeout_s`), stdout and stderr together.
Output run_sh(const std::string & cmd, int timeout_s = 20) {
    Output      r;
    std::string full = "timeout -s KILL " + std::to_string(timeout_s) + " " + cmd + " 2>&1";
    std::FILE * p    = ::popen(full.c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) r.out.append(buf, n);
    int status = ::pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

bool contains(const std::string & hay, const std::string & needle) { return hay.find(needle) != std::string::npos; }

// A connection that says nothing (`nonblock`: connect without waiting; -1 when
// the daemon's backlog is full).
int connect_raw(const std::string & path, bool nonblock = false) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

struct Fds {
    std::vector<int> fds;
    ~Fds() {
        for (int fd : fds) ::close(fd);
    }
};

void sql(const std::string & db_path, const std::string & statement) {
    sqlite3 * db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
    char * err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, statement.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
}

// --- finding 4: the single-instance lock -----------------------------------------

// The lock is held on the database itself by the kernel: deleting DB.lock
// changes nothing, and the first daemon's running job is left alone.
TEST(SwarmFaults, SecondDaemonAfterTheLockFileIsDeletedRefusesToStart) {
    TempDir     d;
    std::string pidf = d / "sleep.pid";
    Daemon      dm(d);
    ASSERT_TRUE(dm.start()) << dm.log();
    std::int64_t id = dm.call(submit_sh("long", {"sleep 300 & echo $! > " + pidf + "; wait"}))["session"];
    ASSERT_TRUE(wait_until([&] { return !read_file(pidf).empty(); }, 10)) << dm.log();
    const long job_pid = std::stol(read_file(pidf));

    ASSERT_EQ(::unlink((dm.db() + ".lock").c_str()), 0);
    std::string log = d / "second.log";
    int rc = Daemon::run_to_end({STANDIND_PATH, "--socket", d / "other.sock", "--db", dm.db()}, log);
    EXPECT_EQ(rc, 3) << read_file(log);
    EXPECT_TRUE(contains(read_file(log), "is in use by another standind")) << read_file(log);
    EXPECT_FALSE(contains(read_file(log), "recovery")) << read_file(log);

    EXPECT_FALSE(process_gone(job_pid));
    json s = dm.call({{"op", "show"}, {"session", id}})["session"];
    EXPECT_EQ(s["job_list"][0]["state"], "running") << s.dump(2);
    EXPECT_TRUE(dm.call({{"op", "cancel"}, {"session", id}}).value("ok", false));
}

// --- finding 5: silent connections and the client's own timeout -------------------

// Connections that never send a request take no request slot (Note [silent
// connections] in tools/standind/server.h): a real client is answered at once.
TEST(SwarmFaults, SilentConnectionsDoNotLockOutARealClient) {
    TempDir d;
    Daemon  dm(d);  // the default --max-clients 64
    ASSERT_TRUE(dm.start()) << dm.log();
    Fds silent;
    for (int i = 0; i < 100; ++i) {
        int fd = connect_raw(dm.socket());
        ASSERT_GE(fd, 0);
        silent.fds.push_back(fd);
    }
    // Served connections that stay open, saying nothing more, do not hold one either.
    std::vector<std::unique_ptr<standin::swarm::Client>> idle;
    for (int i = 0; i < 70; ++i) {
        idle.push_back(std::make_unique<standin::swarm::Client>(dm.socket(), 10000));
        ASSERT_TRUE(idle.back()->call({{"op", "ping"}}).value("ok", false)) << i;
    }
    json r = dm.call({{"op", "ping"}}, 10000);
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    // ... and the idle ones can still ask again on their own connection.
    EXPECT_TRUE(idle.front()->call({{"op", "ls"}}).value("ok", false));
}

TEST(SwarmFaults, ASilentConnectionIsDroppedAtTheFirstRequestDeadline) {
    TempDir d;
    Daemon  dm(d, {"--first-request-s", "0.3"});
    ASSERT_TRUE(dm.start()) << dm.log();
    int fd = connect_raw(dm.socket());
    ASSERT_GE(fd, 0);
    timeval tv{15, 0};  // a bound for a broken daemon, far above the deadline
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::string got;
    char        buf[512];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    json reply = json::parse(got.substr(0, got.find('\n')), nullptr, false);
    EXPECT_EQ(reply.value("error", ""), "timeout") << got;
    EXPECT_TRUE(contains(reply.value("message", ""), "no complete request within 0.3 s")) << got;
    // A partial request line is not a request either; a whole one still works.
    int partial = connect_raw(dm.socket());
    ASSERT_GE(partial, 0);
    ASSERT_EQ(::send(partial, "{\"op\":", 6, MSG_NOSIGNAL), 6);
    ::setsockopt(partial, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    got.clear();
    for (ssize_t n; (n = ::recv(partial, buf, sizeof(buf), 0)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(partial);
    EXPECT_TRUE(contains(got, "\"timeout\"")) << got;
    EXPECT_TRUE(dm.call({{"op", "ping"}}).value("ok", false));
}

// A stopped daemon (SIGSTOP) still completes connections in the kernel and
// never answers: `standin swarm` gives up after its own timeout and says why.
TEST(SwarmFaults, AStoppedDaemonIsAClientTimeoutThatSaysSo) {
    TempDir d;
    Daemon  dm(d);
    ASSERT_TRUE(dm.start()) << dm.log();
    ASSERT_EQ(::kill(dm.pid(), SIGSTOP), 0);
    Output o = run_sh(std::string(STANDIN_PATH) + " swarm --socket " + dm.socket() + " --client-timeout 0.5 ls");
    EXPECT_EQ(o.rc, 2) << o.out;
    EXPECT_TRUE(contains(o.out, "did not answer within 0.5 s")) << o.out;
    EXPECT_TRUE(contains(o.out, "(pid " + std::to_string(dm.pid()) + ") is stopped")) << o.out;

    // With its backlog full, even connecting waits: bounded by the same timeout.
    Fds queued;
    for (int i = 0; i < 10000; ++i) {
        int fd = connect_raw(dm.socket(), true);
        if (fd < 0) break;
        queued.fds.push_back(fd);
    }
    o = run_sh(std::string(STANDIN_PATH) + " swarm --socket " + dm.socket() + " --client-timeout 0.5 ls");
    EXPECT_EQ(o.rc, 2) << o.out;
    EXPECT_TRUE(contains(o.out, "did not accept the connection within 0.5 s")) << o.out;
    ::kill(dm.pid(), SIGCONT);
}

// --- finding 3: the plugin, found at run time and recorded per job ----------------

TEST(SwarmFaults, JobsRunAgainstThePluginInstalledBesideTheDaemon) {
    // The daemon must not know the build tree's plugin at all.
    EXPECT_FALSE(contains(read_file(STANDIND_PATH), STANDIN_PLUGIN_BUILD_PATH));

    TempDir d;
    fs::create_directories(d / "inst/bin");
    fs::create_directories(d / "inst/lib");
    fs::copy_file(STANDIND_PATH, d / "inst/bin/standind");
    const std::string plugin = d / "inst/lib/libggml-standin.so";
    { std::ofstream(plugin) << "standin test plugin\n"; }
    const std::string config = d / "config.json";
    {
        std::ofstream(config) << R"({"kinds": {"which": {"argv": ["sh", "-c", "echo plugin=$GGML_BACKEND_PATH"],
                                                         "env": {"GGML_BACKEND_PATH": "{plugin}"}}}})";
    }
    ::unsetenv("GGML_BACKEND_PATH");  // what a daemon started by hand, outside the tests, sees
    Daemon dm(d, {"--config", config});
    ASSERT_TRUE(dm.start_program(d / "inst/bin/standind")) << dm.log();
    EXPECT_TRUE(contains(dm.log(), "plugin: " + plugin + " (beside standind)")) << dm.log();

    json r = dm.call({{"op", "submit"}, {"name", "which"}, {"cwd", "/tmp"},
                      {"jobs", {{{"kind", "which"}, {"args", json::array()}}}}});
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    json s = dm.wait_session(r["session"]);
    ASSERT_EQ(s["state"], "done") << s.dump(2);
    const json & job = s["job_list"][0];
    EXPECT_EQ(job["plugin"]["path"], plugin);
    // sha256sum of "standin test plugin\n"
    EXPECT_EQ(job["plugin"]["sha256"], "416b2e22de8549972b4d1a1de5cbe00e22a01878346d9a842b525af0fb07a7d8");
    standin::swarm::Client c(dm.socket(), 10000);
    std::string out;
    c.call({{"op", "logs"}, {"session", r["session"]}}, [&](const json & e) { out += e.value("line", "") + "\n"; });
    EXPECT_TRUE(contains(out, "plugin=" + plugin + "\n")) << out;
    EXPECT_TRUE(contains(out, "plugin " + plugin + " sha256 416b2e22")) << out;

    // A plugin that is gone is refused with its path, not run against another.
    fs::remove(plugin);
    r = dm.call({{"op", "submit"}, {"name", "gone"}, {"cwd", "/tmp"},
                 {"jobs", {{{"kind", "which"}, {"args", json::array()}}}}});
    EXPECT_FALSE(r.value("ok", true));
    EXPECT_TRUE(contains(r.value("message", ""), "its plugin " + plugin + " does not exist")) << r.dump();
}

TEST(SwarmFaults, Sha256KnownAnswers) {
    auto hex = [](const std::string & s) {
        standin::swarmd::Sha256 h;
        h.update(s.data(), s.size());
        return h.hex();
    };
    EXPECT_EQ(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// --- item 7: a damaged database, a spec that does not parse -----------------------

TEST(SwarmFaults, ADamagedDatabaseIsRefusedAtStart) {
    TempDir           d;
    const std::string db = d / "state.db";
    {
        standin::swarmd::Store      st(db, {});
        standin::swarm::SessionSpec spec;
        spec.name = "s", spec.cwd = "/tmp";
        spec.jobs.push_back({"command", "any", {"true"}, "", 0, {}});
        st.create_session(spec);
        auto job = st.claim_next({"STANDIN_HOST0"}, "STANDIN_HOST0");
        ASSERT_TRUE(job.has_value());
        std::vector<standin::swarmd::LogLine> lines(2000, {"out", 1.0, std::string(100, 'x')});
        st.append_logs(job->id, 1, lines);
    }
    // Damage the logs table only: nothing the daemon reads at start touches it.
    sqlite3 *    h = nullptr;
    std::int64_t root = 0, page = 0;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    sqlite3_stmt * q = nullptr;
    sqlite3_prepare_v2(h, "SELECT (SELECT rootpage FROM sqlite_master WHERE name='logs'), (SELECT page_size FROM pragma_page_size())",
                       -1, &q, nullptr);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    root = sqlite3_column_int64(q, 0), page = sqlite3_column_int64(q, 1);
    sqlite3_finalize(q);
    sqlite3_close(h);
    ASSERT_GT(root, 1);
    {
        std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp((root - 1) * page);
        std::string junk(static_cast<std::size_t>(page), '\xA5');
        f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
    std::string log = d / "d.log";
    int rc = Daemon::run_to_end({STANDIND_PATH, "--socket", d / "s.sock", "--db", db}, log);
    EXPECT_EQ(rc, 1) << read_file(log);
    EXPECT_TRUE(contains(read_file(log), "is damaged (PRAGMA quick_check")) << read_file(log);
}

TEST(SwarmFaults, AJobWhoseStoredSpecDoesNotParseFailsClearly) {
    TempDir d;
    Daemon  dm(d);
    {
        standin::swarmd::Store      st(dm.db(), {});
        standin::swarm::SessionSpec spec;
        spec.name = "s", spec.cwd = "/tmp";
        spec.jobs.push_back({"command", "any", {"sh", "-c", "echo ran"}, "", 0, {}});
        st.create_session(spec);
    }
    sql(dm.db(), "UPDATE job_specs SET args='[\"sh\", \"-c\", ' WHERE job_id=1");
    ASSERT_TRUE(dm.start()) << dm.log();
    json s = dm.wait_session(1);
    ASSERT_EQ(s["state"], "failed") << s.dump(2);
    const std::string err = s["job_list"][0]["error"];
    EXPECT_TRUE(contains(err, "stored args")) << err;
    EXPECT_TRUE(contains(err, "is not a JSON array of strings; the job is not run")) << err;
    EXPECT_EQ(s["job_list"][0]["exit_code"], nullptr);  // nothing ran
}

// A database of the first schema gains the plugin columns when opened.
TEST(SwarmFaults, AFirstSchemaDatabaseIsUpgraded) {
    TempDir           d;
    const std::string db = d / "state.db";
    {
        standin::swarmd::Store      st(db, {});
        standin::swarm::SessionSpec spec;
        spec.name = "s", spec.cwd = "/tmp";
        spec.jobs.push_back({"command", "any", {"true"}, "", 0, {}});
        st.create_session(spec);
    }
    sql(db, "ALTER TABLE jobs DROP COLUMN plugin_sha256; ALTER TABLE jobs DROP COLUMN plugin; PRAGMA user_version=1");
    standin::swarmd::Store st(db, {});
    auto job = st.claim_next({"STANDIN_HOST0"}, "STANDIN_HOST0");
    ASSERT_TRUE(job.has_value());
    st.set_job_plugin(job->id, "/p/libggml-standin.so", "00ff");
    auto jobs = st.get_jobs(job->session_id);
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(jobs[0].plugin, "/p/libggml-standin.so");
    EXPECT_EQ(jobs[0].plugin_sha256, "00ff");
    EXPECT_EQ(jobs[0].args, std::vector<std::string>{"true"});
}

// --- item 7: counts that cannot be negative ----------------------------------------

TEST(StandinCli, NegativeCountsAreRefusedBeforeAnythingRuns) {
    for (const char * args : {"swarm --socket /nonexistent.sock ls --limit -1", "logits --model /nonexistent.gguf --n-tokens -5",
                              "ab --model /nonexistent.gguf --n-tokens -5", "bench -m /nonexistent.gguf -r -1"}) {
        Output o = run_sh(std::string(STANDIN_PATH) + " " + args);
        EXPECT_NE(o.rc, 0) << args;
        EXPECT_TRUE(contains(o.out, "not in range") || contains(o.out, "must be") || contains(o.out, "negative"))
            << args << ": " << o.out;
        EXPECT_FALSE(contains(o.out, "no standind is running")) << args << ": " << o.out;
    }
}

} // namespace
