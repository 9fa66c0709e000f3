// The real standind, end to end over its socket: sessions run and complete by
// themselves; kill -9 mid-job loses no finished result and the session goes on;
// a second daemon on the same database refuses to start; concurrent clients.
// (Bad input, the size limit and the peer check: test_robustness.cpp.)
#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include <sys/stat.h>

#include "swarm_test_util.h"
#include "tools/swarm/proc.h"

namespace {

using namespace swarm_test;

std::vector<json> logs_of(const Daemon & dm, std::int64_t id, int job = 0) {
    std::vector<json> out;
    json req = {{"op", "logs"}, {"session", id}};
    if (job > 0) req["job"] = job;
    standin::swarm::Client c(dm.socket(), 10000);
    json end = c.call(req, [&](const json & e) { out.push_back(e); });
    EXPECT_TRUE(end.value("ok", false)) << end.dump();
    return out;
}

bool has_line(const std::vector<json> & logs, const std::string & stream, const std::string & needle) {
    for (const json & e : logs) {
        if (e.value("stream", "") == stream && e.value("line", "").find(needle) != std::string::npos) return true;
    }
    return false;
}

// The parent of a live process; 0 if unreadable.
long parent_of(long pid) {
    std::vector<std::string> f = standin::swarm::proc_stat_fields(pid);
    return f.size() > 1 ? std::atol(f[1].c_str()) : 0;
}

TEST(SwarmDaemon, SubmitRunsJobsAndTheSessionCompletesByItself) {
    TempDir d;
    Daemon  dm(d);
    ASSERT_TRUE(dm.start()) << dm.log();
    json r = dm.call(submit_sh("first", {"echo hello; echo '{\"tok_s\": 42}'", "echo oops >&2; exit 4"}));
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    std::int64_t id = r["session"];
    json s = dm.wait_session(id);
    EXPECT_EQ(s["state"], "failed");
    EXPECT_EQ(s["summary"], "1 of 2 jobs done, 1 failed (#2: exit code 4)");
    const json & jobs = s["job_list"];
    EXPECT_EQ(jobs[0]["state"], "done");
    EXPECT_EQ(jobs[0]["exit_code"], 0);
    EXPECT_EQ(jobs[0]["result"]["tok_s"], 42);
    EXPECT_EQ(jobs[0]["worker"], "STANDIN_HOST0");
    EXPECT_EQ(jobs[1]["state"], "failed");
    EXPECT_EQ(jobs[1]["exit_code"], 4);
    auto logs = logs_of(dm, id);
    EXPECT_TRUE(has_line(logs, "out", "hello"));
    EXPECT_TRUE(has_line(logs, "err", "oops"));
    EXPECT_TRUE(has_line(logs, "sys", "failed: exit code 4"));
    EXPECT_FALSE(has_line(logs_of(dm, id, 1), "err", "oops"));  // --job filters
}

TEST(SwarmDaemon, BinaryAndEndlessOutputIsStoredSafely) {
    TempDir d;
    Daemon  dm(d, {"--max-log-lines", "1000"});
    ASSERT_TRUE(dm.start()) << dm.log();
    // Invalid UTF-8, a carriage return, a 100 KB line without newline, then far too many lines.
    json r = dm.call(submit_sh("noise", {"printf \"bin \\377\\376\\r\\n\"; head -c 100000 /dev/zero | tr \"\\0\" x; "
                                         "echo; seq 1 5000"}));
    json s = dm.wait_session(r["session"]);
    EXPECT_EQ(s["state"], "done");
    auto logs = logs_of(dm, r["session"]);
    EXPECT_TRUE(has_line(logs, "out", "bin \xEF\xBF\xBD"));  // replaced, not dropped
    std::size_t longest = 0;
    for (const json & e : logs) longest = std::max(longest, e.value("line", "").size());
    EXPECT_EQ(longest, 16384u);  // long lines are split
    EXPECT_TRUE(has_line(logs, "sys", "log truncated: more than 1000 lines"));
    EXPECT_LT(logs.size(), 1010u);
}

TEST(SwarmDaemon, FollowStreamsLinesAsTheyComeAndEndsWithTheSession) {
    TempDir d;
    Daemon  dm(d);
    ASSERT_TRUE(dm.start()) << dm.log();
    json r = dm.call(submit_sh("follow", {"for i in 1 2 3 4; do echo line$i; sleep 0.2; done"}));
    ASSERT_TRUE(r.value("ok", false));
    std::vector<std::string> lines;
    standin::swarm::Client   c(dm.socket(), 20000);
    json end = c.call({{"op", "logs"}, {"session", r["session"]}, {"follow", true}}, [&](const json & e) {
        if (e.value("stream", "") == "out") lines.push_back(e["line"]);
    });
    EXPECT_EQ(end["state"], "done");
    EXPECT_EQ(lines, (std::vector<std::string>{"line1", "line2", "line3", "line4"}));
}

TEST(SwarmDaemon, CancelStopsARunningJobAndItsChildren) {
    TempDir d;
    Daemon  dm(d);
    ASSERT_TRUE(dm.start()) << dm.log();
    std::string pidf = d / "child.pid";
    json r = dm.call(submit_sh("cancel", {"sleep 300 & echo $! > " + pidf + "; wait", "echo never"}));
    std::int64_t id = r["session"];
    ASSERT_TRUE(wait_until([&] { return !read_file(pidf).empty(); }, 10));
    json c = dm.call({{"op", "cancel"}, {"session", id}});
    ASSERT_TRUE(c.value("ok", false)) << c.dump();
    EXPECT_EQ(c["running_stopped"], 1);
    json s = dm.wait_session(id, 10);
    EXPECT_EQ(s["state"], "cancelled");
    EXPECT_EQ(s["job_list"][0]["state"], "cancelled");
    EXPECT_EQ(s["job_list"][1]["state"], "cancelled");
    EXPECT_TRUE(wait_until([&] { return process_gone(std::stol(read_file(pidf))); }, 5));
    json again = dm.call({{"op", "cancel"}, {"session", id}});
    EXPECT_EQ(again["error"], "bad_state");
    // resume re-queues what was cancelled; retry has nothing failed to re-run.
    EXPECT_EQ(dm.call({{"op", "retry"}, {"session", id}})["error"], "bad_state");
}

TEST(SwarmDaemon, TimeoutFailsTheJob) {
    TempDir d;
    Daemon  dm(d);
    ASSERT_TRUE(dm.start()) << dm.log();
    json req = submit_sh("slow", {"sleep 30"});
    req["jobs"][0]["timeout_s"] = 0.5;
    json s = dm.wait_session(dm.call(req)["session"], 10);
    EXPECT_EQ(s["state"], "failed");
    EXPECT_EQ(s["job_list"][0]["error"], "timed out after 0.5 s");
}

// Job 2 fails its first attempt by being interrupted, and succeeds when re-run.
std::string resumable(const TempDir & d, const std::string & pidf) {
    std::string mark = d / "started-once";
    return "if [ -e " + mark + " ]; then echo second-run; exit 0; fi; touch " + mark + "; sleep 300 & echo $! > " +
           pidf + "; wait";
}

TEST(SwarmDaemon, Kill9MidJobThenRestartLosesNoResult) {
    TempDir     d;
    std::string pidf = d / "sleep.pid";
    auto        dm   = std::make_unique<Daemon>(d);
    ASSERT_TRUE(dm->start()) << dm->log();
    json r = dm->call(submit_sh("crash", {"echo one; echo '{\"n\": 1}'", resumable(d, pidf), "echo three"}));
    std::int64_t id = r["session"];
    ASSERT_TRUE(wait_until([&] { return !read_file(pidf).empty(); }, 10)) << dm->log();
    json before = dm->call({{"op", "show"}, {"session", id}})["session"];
    ASSERT_EQ(before["job_list"][0]["state"], "done");
    ASSERT_EQ(before["job_list"][1]["state"], "running");
    long orphan = std::stol(read_file(pidf));
    long shell  = parent_of(orphan);  // the job's shell, killed by its parent-death signal
    ASSERT_GT(shell, 1);
    dm->kill9();
    // That signal arrives asynchronously: once it has, the sleep is the one
    // leftover the restarted daemon finds (else the count races with it).
    ASSERT_TRUE(wait_until([&] { return process_gone(shell); }, 5));

    Daemon again(d, {}, "d2");
    ASSERT_TRUE(again.start()) << again.log();
    EXPECT_NE(again.log().find("1 leftover processes killed"), std::string::npos) << again.log();
    EXPECT_TRUE(wait_until([&] { return process_gone(orphan); }, 5));
    json s = again.wait_session(id);
    EXPECT_EQ(s["state"], "done") << s.dump(2);
    const json & jobs = s["job_list"];
    EXPECT_EQ(jobs[0]["exit_code"], 0);  // finished before the crash: kept as it was
    EXPECT_EQ(jobs[0]["attempts"], 1);
    EXPECT_EQ(jobs[0]["result"]["n"], 1);
    EXPECT_EQ(jobs[1]["attempts"], 2);
    EXPECT_EQ(jobs[1]["interruptions"], 1);
    EXPECT_EQ(jobs[2]["state"], "done");
    auto logs = logs_of(again, id);
    EXPECT_TRUE(has_line(logs, "out", "one"));
    EXPECT_TRUE(has_line(logs, "sys", "interrupted: the daemon stopped while it ran (re-queued)"));
    EXPECT_TRUE(has_line(logs, "out", "second-run"));
    EXPECT_TRUE(has_line(logs, "out", "three"));
}

TEST(SwarmDaemon, InterruptPolicyFailThenResume) {
    TempDir     d;
    std::string pidf = d / "sleep.pid";
    auto        dm   = std::make_unique<Daemon>(d, std::vector<std::string>{"--on-interrupt", "fail"});
    ASSERT_TRUE(dm->start()) << dm->log();
    std::int64_t id = dm->call(submit_sh("crash", {resumable(d, pidf)}))["session"];
    ASSERT_TRUE(wait_until([&] { return !read_file(pidf).empty(); }, 10));
    dm->kill9();
    Daemon again(d, {"--on-interrupt", "fail"}, "d2");
    ASSERT_TRUE(again.start()) << again.log();
    json s = again.wait_session(id, 5);
    EXPECT_EQ(s["state"], "failed");
    EXPECT_EQ(s["job_list"][0]["state"], "interrupted");
    EXPECT_NE(s["summary"].get<std::string>().find("1 interrupted"), std::string::npos);
    json res = again.call({{"op", "resume"}, {"session", id}});
    ASSERT_TRUE(res.value("ok", false)) << res.dump();
    EXPECT_EQ(res["requeued"], 1);
    EXPECT_EQ(again.wait_session(id)["state"], "done");
}

TEST(SwarmDaemon, SigtermStopsCleanlyAndTheJobRunsAgainAfterRestart) {
    TempDir     d;
    std::string pidf = d / "sleep.pid";
    auto        dm   = std::make_unique<Daemon>(d);
    ASSERT_TRUE(dm->start());
    std::int64_t id = dm->call(submit_sh("term", {resumable(d, pidf)}))["session"];
    ASSERT_TRUE(wait_until([&] { return !read_file(pidf).empty(); }, 10));
    EXPECT_EQ(dm->term(), 0) << dm->log();
    EXPECT_TRUE(process_gone(std::stol(read_file(pidf))));
    struct stat st{};
    EXPECT_NE(::stat(dm->socket().c_str(), &st), 0);  // a clean stop removes its socket
    Daemon again(d, {}, "d2");
    ASSERT_TRUE(again.start());
    EXPECT_EQ(again.wait_session(id)["state"], "done");
}

TEST(SwarmDaemon, SecondDaemonOnTheSameDatabaseRefusesToStart) {
    TempDir d;
    Daemon  dm(d);
    ASSERT_TRUE(dm.start()) << dm.log();
    std::string log = d / "second.log";
    int rc = Daemon::run_to_end({STANDIND_PATH, "--socket", d / "other.sock", "--db", dm.db()}, log);
    EXPECT_EQ(rc, 3);
    EXPECT_NE(read_file(log).find("is in use by another standind (pid " + std::to_string(dm.pid()) + ")"),
              std::string::npos) << read_file(log);
    std::string log2 = d / "third.log";
    rc = Daemon::run_to_end({STANDIND_PATH, "--socket", dm.socket(), "--db", d / "other.db"}, log2);
    EXPECT_EQ(rc, 3);
    EXPECT_NE(read_file(log2).find("another standind is already listening on " + dm.socket()), std::string::npos);
    EXPECT_TRUE(dm.call({{"op", "ping"}}).value("ok", false));  // the first one is untouched
}

TEST(SwarmDaemon, ConcurrentClientsSubmit400Sessions) {
    TempDir d;
    Daemon  dm(d, {"--devices", "STANDIN_HOST0,STANDIN_HOST1"});
    ASSERT_TRUE(dm.start()) << dm.log();
    constexpr int kClients = 8, kEach = 50;
    std::vector<std::vector<std::int64_t>> ids(kClients);
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < kClients; ++c) {
        threads.emplace_back([&, c] {
            for (int i = 0; i < kEach; ++i) {
                json r = dm.call({{"op", "submit"}, {"name", "c" + std::to_string(c) + "-" + std::to_string(i)},
                                  {"cwd", "/"}, {"jobs", {{{"kind", "command"}, {"args", {"true"}}}}}});
                if (r.value("ok", false)) ids[c].push_back(r["session"]);
                else ++errors;
            }
        });
    }
    for (std::thread & t : threads) t.join();
    EXPECT_EQ(errors.load(), 0);
    std::set<std::int64_t> all;
    for (const auto & v : ids) all.insert(v.begin(), v.end());
    EXPECT_EQ(all.size(), static_cast<std::size_t>(kClients * kEach));
    bool finished = wait_until([&] {
        json r = dm.call({{"op", "ls"}, {"ids", true}, {"state", "done"}});
        return r.value("ok", false) && r["ids"].size() == all.size();
    }, 25);
    EXPECT_TRUE(finished);
    json ls = dm.call({{"op", "ls"}});
    EXPECT_EQ(ls["sessions"].size(), all.size());
}

} // namespace
