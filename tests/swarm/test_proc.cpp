// /proc of processes that end while they are read (tools/swarm/proc.h): a
// process reaped after its stat file was opened fails the read with ESRCH;
// that must read as "gone", never as an exception (one had ended a
// restarted daemon in its scan for leftover processes). And the scan itself,
// kill_orphan_group: only the group's processes that carry the marker.
#include <atomic>
#include <csignal>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tools/standind/runner.h"
#include "tools/swarm/proc.h"

namespace {

using standin::swarm::proc_file;
using standin::swarm::proc_stat_fields;
using standin::swarm::read_all_or_empty;

pid_t paused_child() {
    pid_t p = ::fork();
    if (p == 0) {
        ::pause();
        _exit(0);
    }
    return p;
}

TEST(SwarmProc, AStatFileWhoseProcessWasReapedReadsAsEmpty) {
    pid_t p = paused_child();
    ASSERT_GT(p, 0);
    const std::string path = "/proc/" + std::to_string(p) + "/stat";
    int               fd   = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ::kill(p, SIGKILL);
    ASSERT_EQ(::waitpid(p, nullptr, 0), p);
    std::string s = "unchanged";
    EXPECT_NO_THROW(s = read_all_or_empty(fd));  // the kernel answers ESRCH here
    EXPECT_EQ(s, "");
    ::close(fd);
    EXPECT_TRUE(proc_stat_fields(p).empty());
    EXPECT_EQ(proc_file(p, "environ"), "");
}

TEST(SwarmProc, StatFieldsOfALiveProcess) {
    pid_t p = paused_child();
    ASSERT_GT(p, 0);
    std::vector<std::string> f = proc_stat_fields(p);
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
    ASSERT_GT(f.size(), 19u);
    EXPECT_EQ(std::stol(f[1]), long(::getpid()));   // ppid
    EXPECT_EQ(std::stol(f[2]), long(::getpgrp()));  // pgrp: the child stayed in ours
    EXPECT_GT(std::stoll(f[19]), 0);                // starttime
    // Our own: the command name may hold spaces and ')' without moving the fields.
    EXPECT_EQ(proc_stat_fields(::getpid())[0], "R");
}

// The scan for a crashed run's leftovers reads every process's stat and
// environment and kills only the group's processes that carry the marker.
// Processes start and end around it meanwhile (the ESRCH window itself is too
// short to hit on purpose here: the first test reads through it).
TEST(SwarmProc, OrphanScanKillsOnlyTheMarkedProcessOfTheGroup) {
    std::atomic<bool> stop{false};
    std::thread       churn([&] {
        while (!stop.load()) {
            pid_t p = ::fork();
            if (p == 0) _exit(0);
            if (p > 0) ::waitpid(p, nullptr, 0);
        }
    });
    pid_t marked = ::fork();
    if (marked == 0) {
        ::setpgid(0, 0);
        char   m[]   = "STANDIN_TEST_MARK=proc-scan";
        char * env[] = {m, nullptr};
        char * argv[] = {const_cast<char *>("/bin/sleep"), const_cast<char *>("30"), nullptr};
        ::execve(argv[0], argv, env);
        _exit(127);
    }
    ASSERT_GT(marked, 0);
    ::setpgid(marked, marked);
    // Until the exec has happened the marker is not in its environment yet.
    for (int i = 0; i < 500 && proc_file(marked, "environ").find("proc-scan") == std::string::npos; ++i) {
        ::usleep(10000);
    }
    int total = 0;
    for (int i = 0; i < 200; ++i) {
        EXPECT_NO_THROW(total += standin::swarmd::kill_orphan_group(marked, "STANDIN_TEST_MARK=other"));
    }
    EXPECT_EQ(total, 0);  // another marker: nothing killed
    int killed = 0;
    EXPECT_NO_THROW(killed = standin::swarmd::kill_orphan_group(marked, "STANDIN_TEST_MARK=proc-scan"));
    stop = true;
    churn.join();
    EXPECT_EQ(killed, 1);
    int status = 0;
    ASSERT_EQ(::waitpid(marked, &status, 0), marked);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

} // namespace
