// The daemon's SQLite store without a daemon: session life cycle, interrupt
// policies, control requests, persistence across reopen, the size limit.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "swarm_test_util.h"
#include "tools/standind/store.h"

namespace {

using namespace standin::swarmd;
using standin::swarm::JobSpec;
using standin::swarm::SessionSpec;
using swarm_test::TempDir;

SessionSpec spec(int n_jobs, const std::string & name = "s") {
    SessionSpec s;
    s.name = name;
    s.cwd  = "/tmp";
    for (int i = 0; i < n_jobs; ++i) {
        JobSpec j;
        j.kind = "command";
        j.args = {"echo", std::to_string(i)};
        s.jobs.push_back(j);
    }
    return s;
}

Outcome exited(int code) {
    Outcome o;
    o.state     = code == 0 ? "done" : "failed";
    o.exit_code = code;
    if (code != 0) o.error = "exit code " + std::to_string(code);
    return o;
}

TEST(SwarmStore, SessionCompletesByItselfWithASummary) {
    TempDir     d;
    Store       st(d / "db", {});
    std::int64_t id = st.create_session(spec(2));
    EXPECT_EQ(st.get_session(id)->state, "queued");
    auto a = st.claim_next({"STANDIN_HOST0"}, "STANDIN_HOST0");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->idx, 1);
    EXPECT_EQ(a->attempts, 1);
    EXPECT_EQ(st.get_session(id)->state, "running");
    auto b = st.claim_next({"STANDIN_HOST0"}, "STANDIN_HOST0");
    ASSERT_TRUE(b);
    EXPECT_FALSE(st.claim_next({"STANDIN_HOST0"}, "STANDIN_HOST0"));
    ASSERT_TRUE(st.append_logs(a->id, 1, {{"out", now_s(), "hello"}}));
    Outcome ok = exited(0);
    ok.result  = {{"tokens_per_s", 12.5}};
    st.finish_job(a->id, ok);
    EXPECT_EQ(st.get_session(id)->state, "running");
    st.finish_job(b->id, exited(3));
    auto s = st.get_session(id);
    EXPECT_EQ(s->state, "failed");
    EXPECT_EQ(s->summary, "1 of 2 jobs done, 1 failed (#2: exit code 3)");
    auto jobs = st.get_jobs(id);
    EXPECT_EQ(jobs[0].result["tokens_per_s"], 12.5);
    EXPECT_EQ(*jobs[1].exit_code, 3);
    auto logs = st.get_logs(id, std::nullopt, 0, 100);
    ASSERT_EQ(logs.size(), 1u);
    EXPECT_EQ(logs[0].line, "hello");
}

TEST(SwarmStore, JobsGoToTheirDeviceOrAny) {
    TempDir d;
    Store   st(d / "db", {});
    SessionSpec s = spec(2);
    s.jobs[0].device = "STANDIN_CUDA0";
    st.create_session(s);
    auto j = st.claim_next({"STANDIN_HOST0"}, "STANDIN_HOST0");
    ASSERT_TRUE(j);
    EXPECT_EQ(j->idx, 2);  // job 1 waits for the CUDA worker
    auto c = st.claim_next({"STANDIN_CUDA0"}, "STANDIN_CUDA0");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->idx, 1);
}

TEST(SwarmStore, InterruptedJobsFollowThePolicyAndResultsSurviveReopen) {
    TempDir      d;
    std::int64_t id;
    {
        Store st(d / "db", {});
        id = st.create_session(spec(3));
        auto a = st.claim_next({"H"}, "H");
        st.finish_job(a->id, exited(0));
        st.claim_next({"H"}, "H");  // job 2 running when the "daemon dies"
        st.claim_next({"H"}, "H");  // job 3 too
    }
    Store st(d / "db", {});
    auto orphans = st.running_jobs();
    ASSERT_EQ(orphans.size(), 2u);
    st.interrupt_job(orphans[0].job_id, InterruptPolicy::requeue, "restart");
    st.interrupt_job(orphans[1].job_id, InterruptPolicy::fail, "restart");
    auto jobs = st.get_jobs(id);
    EXPECT_EQ(jobs[0].state, "done");
    EXPECT_EQ(*jobs[0].exit_code, 0);
    EXPECT_EQ(jobs[1].state, "queued");
    EXPECT_EQ(jobs[1].interruptions, 1);
    EXPECT_EQ(jobs[2].state, "interrupted");
    auto again = st.claim_next({"H"}, "H");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->attempts, 2);
    st.finish_job(again->id, exited(0));
    EXPECT_EQ(st.get_session(id)->state, "failed");  // job 3 was interrupted for good
    EXPECT_EQ(st.requeue(id, std::nullopt, {"interrupted", "cancelled"}), 1);  // resume
    EXPECT_EQ(st.get_session(id)->state, "queued");
    auto last = st.claim_next({"H"}, "H");
    st.finish_job(last->id, exited(0));
    EXPECT_EQ(st.get_session(id)->state, "done");
}

TEST(SwarmStore, CancelStopsQueuedJobsAndReportsRunningOnes) {
    TempDir d;
    Store   st(d / "db", {});
    std::int64_t id  = st.create_session(spec(3));
    auto         run = st.claim_next({"H"}, "H");
    auto running = st.cancel(id, std::nullopt);
    ASSERT_EQ(running.size(), 1u);
    EXPECT_EQ(running[0], run->id);
    EXPECT_EQ(st.get_session(id)->state, "running");  // until the worker stops job 1
    Outcome c;
    c.state = "cancelled";
    st.finish_job(run->id, c);
    EXPECT_EQ(st.get_session(id)->state, "cancelled");
    try {
        st.cancel(id, std::nullopt);
        ADD_FAILURE() << "cancel of an ended session accepted";
    } catch (const StoreError & e) {
        EXPECT_EQ(e.code, "bad_state");
    }
    try {
        st.cancel(999, std::nullopt);
        ADD_FAILURE() << "cancel of a missing session accepted";
    } catch (const StoreError & e) {
        EXPECT_EQ(e.code, "not_found");
    }
    EXPECT_EQ(st.requeue(id, 2, {"failed"}), 0);  // retry: nothing failed
    EXPECT_EQ(st.requeue(id, 2, {"interrupted", "cancelled"}), 1);
}

TEST(SwarmStore, SizeLimitRefusesNewWorkButKeepsRoomForResults) {
    TempDir      d;
    StoreOptions o;
    o.max_pages = 64;  // 256 KiB
    Store        st(d / "db", o);
    SessionSpec  big = spec(1);
    big.jobs[0].args.push_back(std::string(50000, 'x'));
    std::vector<std::int64_t> ids;
    bool full = false;
    for (int i = 0; i < 20 && !full; ++i) {
        try {
            ids.push_back(st.create_session(big));
        } catch (const StoreError & e) {
            EXPECT_EQ(e.code, "disk_full");
            EXPECT_NE(std::string(e.what()).find("full"), std::string::npos);
            full = true;
        }
    }
    ASSERT_TRUE(full);
    ASSERT_FALSE(ids.empty());
    // Log lines are taken until the reserve is reached, then refused (not an error).
    bool refused = false;
    for (int i = 0; i < 200 && !refused; ++i) {
        refused = !st.append_logs(1, 1, {{"out", now_s(), std::string(1000, 'l')}});
    }
    EXPECT_TRUE(refused);
    // Every accepted job can still run and record its result.
    while (auto j = st.claim_next({"H"}, "H")) {
        st.finish_job(j->id, exited(0));
    }
    for (std::int64_t id : ids) EXPECT_EQ(st.get_session(id)->state, "done");
}

TEST(SwarmStore, RefusesADatabaseFromANewerSchema) {
    TempDir d;
    { Store st(d / "db", {}); }
    sqlite3 * db = nullptr;
    ASSERT_EQ(sqlite3_open((d / "db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    try {
        Store st(d / "db", {});
        ADD_FAILURE() << "opened a newer database";
    } catch (const StoreError & e) {
        EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos);
    }
}

} // namespace
