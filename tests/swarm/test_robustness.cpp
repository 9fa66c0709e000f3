// Bad input against the real standind: every malformed or fuzzed request gets
// an error reply and the daemon keeps running; unknown kinds and devices, a
// full database, a database locked by another process, a client of another uid.
#include <algorithm>
#include <random>

#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "swarm_test_util.h"

namespace {

using namespace swarm_test;

// Sends raw bytes on a fresh connection and reads the reply line (the first
// with an "ok" field: log events come before it), or "" if none.
std::string raw_exchange(const std::string & socket, const std::string & bytes) {
    try {
        standin::swarm::Client c(socket, 10000);
        try {
            c.send_raw(bytes);
            c.close_write();
        } catch (const standin::swarm::ClientError &) {
            // Closed before it read everything (too large, refused): its reply is still there.
        }
        for (;;) {
            std::string line = c.read_line();
            json        j    = json::parse(line, nullptr, false);
            if (line.empty() || !j.is_object() || j.contains("ok")) return line;
        }
    } catch (const std::exception & e) {
        return std::string("client error: ") + e.what();
    }
}

std::string error_of(const std::string & reply_line) {
    json j = json::parse(reply_line, nullptr, false);
    return j.is_object() ? j.value("error", "") : "<not json: " + reply_line + ">";
}

TEST(SwarmRobustness, FuzzedRequestsGetRepliesAndTheDaemonSurvives) {
    TempDir d;
    Daemon  dm(d, {"--max-request", "4096"});
    ASSERT_TRUE(dm.start()) << dm.log();
    const std::vector<std::string> seeds = {
        R"({"op":"submit","name":"f","cwd":"/tmp","jobs":[{"kind":"command","args":["true"],"timeout_s":5}]})",
        R"({"op":"logs","session":1,"job":1,"after":0})",
        R"({"op":"ls","ids":true,"state":"done","limit":3})",
        R"({"op":"show","session":1})",
        R"({"op":"retry","session":1,"job":1})",
    };
    const std::string alphabet = "{}[]\":,0123456789-+.eEtrufalsn \\\x01\x80\xff";
    std::mt19937      rng(4242);
    int               ok = 0, errors = 0;
    for (int iter = 0; iter < 1500; ++iter) {
        std::string s = seeds[rng() % seeds.size()];
        for (int e = 0, n = 1 + static_cast<int>(rng() % 6); e < n && !s.empty(); ++e) {
            std::size_t at = rng() % s.size();
            switch (rng() % 4) {
                case 0: s[at] = alphabet[rng() % alphabet.size()]; break;
                case 1: s.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
                case 2: s.erase(at, 1 + rng() % 4); break;
                default: s.insert(at, s.substr(rng() % s.size(), rng() % 32)); break;
            }
        }
        if (iter % 7 == 0) {
            s.resize(rng() % 200);
            for (char & c : s) c = static_cast<char>(rng());
        }
        s.erase(std::remove(s.begin(), s.end(), '\n'), s.end());
        if (s.find_first_not_of(" \t\r") == std::string::npos) s = "x";  // blank lines get no reply
        json reply = json::parse(raw_exchange(dm.socket(), s + "\n"), nullptr, false);
        ASSERT_TRUE(reply.is_object() && reply.contains("ok")) << "input: " << s;
        (reply["ok"] == true ? ok : errors)++;
    }
    EXPECT_GT(errors, 1000);
    EXPECT_FALSE(dm.exited()) << dm.log();
    EXPECT_TRUE(dm.call({{"op", "ping"}}).value("ok", false));
}

TEST(SwarmRobustness, OversizedPipelinedAndUnterminatedRequests) {
    TempDir d;
    Daemon  dm(d, {"--max-request", "4096"});
    ASSERT_TRUE(dm.start()) << dm.log();
    EXPECT_EQ(error_of(raw_exchange(dm.socket(), std::string(10000, 'x'))), "too_large");
    std::string big = R"({"op":"ping","pad":")" + std::string(5000, 'p') + "\"}\n";
    EXPECT_EQ(error_of(raw_exchange(dm.socket(), big)), "too_large");
    // A request closed without its newline still gets its answer.
    EXPECT_EQ(error_of(raw_exchange(dm.socket(), R"({"op":"show","session":99})")), "not_found");
    // Many requests on one connection, answered in order.
    standin::swarm::Client c(dm.socket(), 10000);
    std::string pipelined;
    for (int i = 0; i < 200; ++i) pipelined += i % 2 ? "{\"op\":\"ping\"}\n" : "{\"op\":\"ping\",\"bad\":1}\n";
    c.send_raw(pipelined);
    for (int i = 0; i < 200; ++i) {
        json r = json::parse(c.read_line(), nullptr, false);
        ASSERT_TRUE(r.is_object());
        EXPECT_EQ(r["ok"], i % 2 == 1) << i;
    }
    EXPECT_TRUE(dm.call({{"op", "ping"}}).value("ok", false));
}

TEST(SwarmRobustness, UnknownKindsDevicesAndCommandsAreClearErrors) {
    TempDir d;
    Daemon  dm(d);
    ASSERT_TRUE(dm.start()) << dm.log();
    json r = dm.call({{"op", "submit"}, {"name", "x"}, {"jobs", {{{"kind", "warp"}, {"args", {"a"}}}}}});
    EXPECT_EQ(r["error"], "unknown_kind");
    EXPECT_EQ(r["message"], "job 1: unknown job kind 'warp' (known: ab, bench, command, conformance, probe)");
    r = dm.call({{"op", "submit"}, {"name", "x"}, {"jobs", {{{"kind", "command"}, {"device", "STANDIN_CUDA7"},
                                                             {"args", {"true"}}}}}});
    EXPECT_EQ(r["error"], "unknown_device");
    EXPECT_NE(r["message"].get<std::string>().find("this daemon runs STANDIN_HOST0"), std::string::npos);
    r = dm.call({{"op", "submit"}, {"name", "x"}, {"jobs", {{{"kind", "command"}, {"args", {"no-such-program-x"}}}}}});
    EXPECT_EQ(r["error"], "bad_request");
    EXPECT_EQ(r["message"], "job 1: command 'no-such-program-x' was not found in PATH");
    r = dm.call({{"op", "submit"}, {"name", "x"}, {"cwd", "/no/such/dir"}, {"jobs", {{{"kind", "command"},
                                                                                       {"args", {"true"}}}}}});
    EXPECT_EQ(r["message"], "cwd /no/such/dir is not a directory");
    EXPECT_EQ(dm.call({{"op", "ls"}})["sessions"].size(), 0u);  // nothing half-submitted
}

TEST(SwarmRobustness, ConfigTemplatesBuildTheCommandLine) {
    TempDir d;
    {
        std::ofstream cfg(d / "cfg.json");
        cfg << R"({"devices": ["STANDIN_HOST0", "STANDIN_CUDA0"],
                   "kinds": {"conformance": {"argv": ["sh", "-c", "echo dev=$1 args=$2 env=$E", "x", "{device}", "{args}"],
                                             "env": {"E": "on-{device}"}}}})";
    }
    Daemon dm(d, {"--config", d / "cfg.json"});
    ASSERT_TRUE(dm.start()) << dm.log();
    json r = dm.call({{"op", "submit"}, {"name", "c"}, {"jobs", {{{"kind", "conformance"}, {"device", "STANDIN_CUDA0"},
                                                                  {"args", {"-o ADD"}}}}}});
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    json s = dm.wait_session(r["session"]);
    EXPECT_EQ(s["state"], "done");
    EXPECT_EQ(s["job_list"][0]["worker"], "STANDIN_CUDA0");
    standin::swarm::Client c(dm.socket(), 10000);
    bool seen = false;
    c.call({{"op", "logs"}, {"session", r["session"]}}, [&](const json & e) {
        seen = seen || e.value("line", "") == "dev=STANDIN_CUDA0 args=-o ADD env=on-STANDIN_CUDA0";
    });
    EXPECT_TRUE(seen);

    std::ofstream(d / "bad.json") << R"({"kinds": {"bench": {"argv": ["{standin}", "bench", "{devise}"]}}})";
    std::string log = d / "bad.log";
    EXPECT_EQ(Daemon::run_to_end({STANDIND_PATH, "--socket", d / "b.sock", "--db", d / "b.db", "--config",
                                  d / "bad.json"}, log), 1);
    EXPECT_NE(read_file(log).find("kind 'bench': unknown placeholder {devise}"), std::string::npos) << read_file(log);
}

TEST(SwarmRobustness, FullDatabaseIsAnErrorReplyAndNothingIsLost) {
    TempDir d;
    Daemon  dm(d, {"--max-db-mb", "0.25"});
    ASSERT_TRUE(dm.start()) << dm.log();
    std::vector<std::int64_t> accepted;
    json refused;
    for (int i = 0; i < 30 && refused.is_null(); ++i) {
        json r = dm.call({{"op", "submit"}, {"name", "fill"}, {"cwd", "/"},
                          {"jobs", {{{"kind", "command"}, {"args", {"true", std::string(40000, 'a' + i % 26)}}}}}});
        if (r.value("ok", false)) accepted.push_back(r["session"]);
        else refused = r;
    }
    ASSERT_FALSE(refused.is_null()) << "the size limit was never reached";
    EXPECT_EQ(refused["error"], "disk_full");
    EXPECT_NE(refused["message"].get<std::string>().find("is full"), std::string::npos);
    ASSERT_FALSE(accepted.empty());
    EXPECT_TRUE(dm.call({{"op", "ping"}}).value("ok", false));
    for (std::int64_t id : accepted) {
        EXPECT_EQ(dm.wait_session(id)["state"], "done") << "session " << id;  // results fit in the reserve
    }
    EXPECT_FALSE(dm.exited());
}

// The real thing: a database on a 600 KiB tmpfs, no free-space margin, so the
// writes hit ENOSPC. Needs root (mount); skipped elsewhere.
TEST(SwarmRobustness, RealFullDiskOnATinyTmpfs) {
    TempDir     d;
    std::string fs = d / "fs";
    ::mkdir(fs.c_str(), 0700);
    if (::geteuid() != 0 || ::mount("tmpfs", fs.c_str(), "tmpfs", 0, "size=600k") != 0) {
        GTEST_SKIP() << "cannot mount a tmpfs here";
    }
    struct Unmount {
        std::string at;
        ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
    } unmount{fs};
    Daemon dm(d, {"--min-free-mb", "0"});
    ASSERT_TRUE(dm.with_db(fs + "/state.db").start()) << dm.log();
    std::vector<std::int64_t> accepted;
    json refused;
    for (int i = 0; i < 40 && refused.is_null(); ++i) {
        json r = dm.call({{"op", "submit"}, {"name", "fill"}, {"cwd", "/"},
                          {"jobs", {{{"kind", "command"}, {"args", {"true", std::string(40000, 'a' + i % 26)}}}}}});
        if (r.value("ok", false)) accepted.push_back(r["session"]);
        else refused = r;
    }
    ASSERT_EQ(refused.value("error", ""), "disk_full") << refused.dump();
    EXPECT_TRUE(dm.call({{"op", "ping"}}).value("ok", false));
    json ls = dm.call({{"op", "ls"}, {"ids", true}});
    EXPECT_EQ(ls["ids"].size(), accepted.size());  // every accepted session is there
    // Room comes back: every accepted session runs to its end.
    ASSERT_EQ(::mount("tmpfs", fs.c_str(), "tmpfs", MS_REMOUNT, "size=8m"), 0);
    for (std::int64_t id : accepted) EXPECT_EQ(dm.wait_session(id)["state"], "done") << "session " << id;
    dm.kill9();
}

TEST(SwarmRobustness, DatabaseLockedByAnotherProcessIsABusyReply) {
    TempDir d;
    Daemon  dm(d);
    ASSERT_TRUE(dm.start()) << dm.log();
    sqlite3 * db = nullptr;
    ASSERT_EQ(sqlite3_open(dm.db().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
    json r = dm.call(submit_sh("held", {"true"}), 20000);  // waits out the daemon's 5 s busy timeout
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    EXPECT_EQ(r["error"], "db_busy") << r.dump();
    EXPECT_NE(r["message"].get<std::string>().find("locked"), std::string::npos);
    json ok = dm.call(submit_sh("after", {"true"}));
    ASSERT_TRUE(ok.value("ok", false)) << ok.dump();
    EXPECT_EQ(dm.wait_session(ok["session"])["state"], "done");
}

TEST(SwarmRobustness, RequestsFromAnotherUidAreRefused) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
    TempDir d;
    Daemon  dm(d);
    ASSERT_TRUE(dm.start()) << dm.log();
    // Open the file modes so only SO_PEERCRED stands between uid 65534 and the daemon.
    ASSERT_EQ(::chmod(d.path().c_str(), 0755), 0);
    ASSERT_EQ(::chmod(dm.socket().c_str(), 0666), 0);
    int pipefd[2];
    ASSERT_EQ(::pipe(pipefd), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
        ::close(pipefd[0]);
        std::string out = "setuid failed";
        if (::setgid(65534) == 0 && ::setuid(65534) == 0) out = raw_exchange(dm.socket(), "{\"op\":\"ls\"}\n");
        ssize_t n = ::write(pipefd[1], out.data(), out.size());
        (void) n;
        _exit(0);
    }
    ::close(pipefd[1]);
    std::string got;
    char        buf[4096];
    for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof(buf))) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(pipefd[0]);
    ::waitpid(pid, nullptr, 0);
    json r = json::parse(got, nullptr, false);
    ASSERT_TRUE(r.is_object()) << got;
    EXPECT_EQ(r["error"], "denied");
    EXPECT_NE(r["message"].get<std::string>().find("requests from uid 65534 are refused"), std::string::npos);
    EXPECT_TRUE(dm.call({{"op", "ping"}}).value("ok", false));
}

} // namespace
