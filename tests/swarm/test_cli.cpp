// `standin swarm` as a user runs it: the subcommands against a real standind,
// and the bash and zsh completion scripts it generates, run in real shells.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "swarm_test_util.h"
#include "tools/swarm/completion.h"

namespace {

using namespace swarm_test;

struct Output {
    int         rc = -1;
    std::string out;
};

// Runs a shell command (bounded by `timeout`), stdout and stderr together.
Output sh(const std::string & cmd, int timeout_s = 20) {
    Output      r;
    std::string full = "timeout " + std::to_string(timeout_s) + " sh -c '" + cmd + "' 2>&1";
    std::FILE * p    = ::popen(full.c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) r.out.append(buf, n);
    int status = ::pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

std::string swarm_cmd(const Daemon & dm, const std::string & args) {
    return std::string(STANDIN_PATH) + " swarm --socket " + dm.socket() + " " + args;
}

bool contains(const std::string & hay, const std::string & needle) { return hay.find(needle) != std::string::npos; }

TEST(SwarmCli, SubmitLsShowLogsCancelRetryResume) {
    TempDir d;
    Daemon  dm(d);
    ASSERT_TRUE(dm.start()) << dm.log();
    Output r = sh(swarm_cmd(dm, "submit --name cli --wait -- sh -c \"echo from-cli\""));
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "session 1 done: 1 of 1 jobs done")) << r.out;
    r = sh(swarm_cmd(dm, "ls"));
    EXPECT_TRUE(contains(r.out, "done") && contains(r.out, "1/1") && contains(r.out, "cli")) << r.out;
    EXPECT_EQ(sh(swarm_cmd(dm, "ls --ids")).out, "1\n");
    r = sh(swarm_cmd(dm, "show 1"));
    EXPECT_TRUE(contains(r.out, "session 1  cli  [done]") && contains(r.out, "echo from-cli")) << r.out;
    r = sh(swarm_cmd(dm, "logs 1"));
    EXPECT_TRUE(contains(r.out, "[1] from-cli")) << r.out;

    r = sh(swarm_cmd(dm, "submit -f -j \"command@STANDIN_HOST0 sh -c \\\"echo a; exit 3\\\"\""));
    EXPECT_EQ(r.rc, 1) << r.out;  // waited: a job failed
    EXPECT_TRUE(contains(r.out, "[1] a") && contains(r.out, "session 2 failed")) << r.out;
    r = sh(swarm_cmd(dm, "retry 2"));
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "session 2: 1 job(s) re-queued")) << r.out;

    r = sh(swarm_cmd(dm, "submit -j \"command sleep 30\" -j \"command true\""));
    EXPECT_TRUE(contains(r.out, "session 3 submitted (2 jobs)")) << r.out;
    ASSERT_TRUE(wait_until([&] {
        return dm.call({{"op", "show"}, {"session", 3}})["session"]["job_list"][0]["state"] == "running";
    }, 10));
    r = sh(swarm_cmd(dm, "cancel 3"));
    EXPECT_TRUE(contains(r.out, "session 3: session cancelled (1 running job(s) being stopped)")) << r.out;
    EXPECT_EQ(dm.wait_session(3, 10)["state"], "cancelled");
    r = sh(swarm_cmd(dm, "resume 3"));
    EXPECT_TRUE(contains(r.out, "session 3: 2 job(s) re-queued")) << r.out;
    sh(swarm_cmd(dm, "cancel 3"));

    std::ofstream(d / "spec.json") << R"({"name": "from-file", "jobs": [
        {"kind": "command", "args": ["sh", "-c", "echo $STANDIN_SWARM_DEVICE $E"], "env": {"E": "e1"}}]})";
    r = sh(swarm_cmd(dm, "submit --file " + (d / "spec.json") + " --json -f"));
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "[1] STANDIN_HOST0 e1") && contains(r.out, "\"name\": \"from-file\"")) << r.out;

    r = sh(swarm_cmd(dm, "show 99"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_TRUE(contains(r.out, "no session 99 [not_found]")) << r.out;
    r = sh(swarm_cmd(dm, "submit -j \"warp x\""));
    EXPECT_TRUE(contains(r.out, "unknown job kind")) << r.out;
    r = sh(std::string(STANDIN_PATH) + " swarm --socket " + (d / "none.sock") + " ls");
    EXPECT_EQ(r.rc, 2);
    EXPECT_TRUE(contains(r.out, "no standind is running at")) << r.out;
}

// Completion: the script from `standin swarm completion SHELL`, loaded in that
// shell, asked for the candidates of `line` (the cursor is at its end).
class SwarmCompletion : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(dm_.start()) << dm_.log();
        for (int i = 0; i < 2; ++i) ASSERT_TRUE(dm_.call(submit_sh("c", {"true"})).value("ok", false));
        for (const char * shell : {"bash", "zsh"}) {
            Output r = sh(std::string(STANDIN_PATH) + " swarm completion " + shell + " > " + (dir_ / shell));
            ASSERT_EQ(r.rc, 0) << r.out;
        }
    }

    // The words of `line` and the candidates, one per line, as the shell computes them.
    std::string complete(const std::string & shell, const std::string & line) {
        std::ofstream(dir_ / "line") << line;
        std::string env = "GGML_STANDIN_SWARM_SOCKET=" + dm_.socket() + " ";
        if (shell == "bash") {
            std::ofstream(dir_ / "t.sh")
                << "source " << (dir_ / "bash") << "\n"
                << "read -r -a COMP_WORDS < " << (dir_ / "line") << "\n"
                << "[[ \"$(cat " << (dir_ / "line") << ")\" == *\" \" ]] && COMP_WORDS+=(\"\")\n"
                << "COMP_WORDS[0]=" << STANDIN_PATH << "\nCOMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
                << "_standin_complete\n((${#COMPREPLY[@]})) && printf \"%s\\n\" \"${COMPREPLY[@]}\"\n";
            return sh(env + "bash " + (dir_ / "t.sh")).out;
        }
        std::ofstream(dir_ / "t.zsh")
            << "_describe() { local n=${@[-1]}; local x; for x in ${(P)n}; do print -r -- \"${x%%:*}\"; done }\n"
            << "compadd() { [[ $1 == -a ]] && print -rl -- ${(P)2} }\n"
            << "_files() { print -r -- \"<files>\" }\ncompdef() { : }\n"
            << "source " << (dir_ / "zsh") << "\n"
            << "words=(${(z)\"$(<" << (dir_ / "line") << ")\"})\n"
            << "[[ \"$(<" << (dir_ / "line") << ")\" == *\" \" ]] && words+=(\"\")\n"
            << "words[1]=" << STANDIN_PATH << "\nCURRENT=${#words}\n_standin\n";
        return sh(env + "zsh -f " + (dir_ / "t.zsh")).out;
    }

    bool have(const std::string & shell) { return sh("command -v " + shell).rc == 0; }

    TempDir dir_;
    Daemon  dm_{dir_};
};

TEST_F(SwarmCompletion, BashScriptIsValidAndCompletes) {
    ASSERT_TRUE(have("bash"));
    EXPECT_EQ(sh("bash -n " + (dir_ / "bash")).rc, 0);
    std::string top = complete("bash", "standin ");
    EXPECT_TRUE(contains(top, "swarm\n") && contains(top, "devices\n")) << top;
    EXPECT_EQ(complete("bash", "standin swarm "), "submit\nls\nshow\nlogs\ncancel\nretry\nresume\ncompletion\n");
    EXPECT_EQ(complete("bash", "standin sw"), "swarm\n");
    std::string opts = complete("bash", "standin swarm ls --");
    EXPECT_TRUE(contains(opts, "--state\n") && contains(opts, "--json\n") && contains(opts, "--help\n")) << opts;
    EXPECT_FALSE(contains(opts, "--ids")) << "hidden options stay hidden";
    EXPECT_EQ(complete("bash", "standin swarm ls --state "), "queued\nrunning\ndone\nfailed\ncancelled\n");
    EXPECT_EQ(complete("bash", "standin swarm show "), "1\n2\n");  // asked from the daemon
    EXPECT_EQ(complete("bash", "standin swarm --socket /x cancel --job 1 "), "1\n2\n");
    EXPECT_EQ(complete("bash", "standin swarm completion "), "bash\nzsh\n");
    EXPECT_EQ(complete("bash", "standin swarm submit --kind con"), "conformance\n");
    EXPECT_EQ(complete("bash", "standin swarm submit -j pr"), "probe\n");
    EXPECT_EQ(complete("bash", "standin swarm submit -- sh --"), "") << "no options after --";
}

TEST_F(SwarmCompletion, ZshScriptIsValidAndCompletes) {
    if (!have("zsh")) GTEST_SKIP() << "zsh is not installed";
    EXPECT_EQ(sh("zsh -n " + (dir_ / "zsh")).rc, 0);
    EXPECT_TRUE(contains(sh("head -1 " + (dir_ / "zsh")).out, "#compdef standin"));
    std::string top = complete("zsh", "standin ");
    EXPECT_TRUE(contains(top, "swarm\n") && contains(top, "devices\n")) << top;
    EXPECT_EQ(complete("zsh", "standin swarm "), "submit\nls\nshow\nlogs\ncancel\nretry\nresume\ncompletion\n");
    std::string opts = complete("zsh", "standin swarm ls --");
    EXPECT_TRUE(contains(opts, "--state\n") && !contains(opts, "--ids")) << opts;
    EXPECT_EQ(complete("zsh", "standin swarm ls --state "), "queued\nrunning\ndone\nfailed\ncancelled\n");
    EXPECT_EQ(complete("zsh", "standin swarm logs "), "1\n2\n");
    EXPECT_EQ(complete("zsh", "standin swarm completion "), "bash\nzsh\n");
    EXPECT_EQ(complete("zsh", "standin swarm submit --file "), "<files>\n");
}

// The model the scripts are generated from follows the CLI11 tree, whatever it holds.
TEST(SwarmCompletionModel, WalksSubcommandsOptionsAndPositionals) {
    CLI::App    app{"demo"};
    std::string s, color;
    int         n = 0;
    bool        flag = false;
    auto * a = app.add_subcommand("alpha", "First");
    a->add_option("--color", color, "Colour")->check(CLI::IsMember({"red", "blue"}));
    a->add_option("-n,--count", n, "Count");
    a->add_flag("--flag", flag, "A flag");
    a->add_option("session", s, "Session")->type_name("SESSION");
    app.add_subcommand("beta", "Second")->group("");  // hidden
    auto model = standin::swarm::completion_model(app, "demo");
    ASSERT_EQ(model.size(), 2u);
    EXPECT_EQ(model[0].path, "demo");
    ASSERT_EQ(model[0].subcommands.size(), 1u);
    EXPECT_EQ(model[0].subcommands[0].first, "alpha");
    const auto & alpha = model[1];
    EXPECT_EQ(alpha.path, "demo alpha");
    EXPECT_EQ(alpha.positionals, std::vector<std::string>{"session"});
    std::map<std::string, standin::swarm::CompletionOption> by;
    for (const auto & o : alpha.options) by[o.names.back()] = o;
    EXPECT_EQ(by["--color"].value, "choices red blue");
    EXPECT_TRUE(by["--count"].takes_value);
    EXPECT_EQ(by["--count"].value, "none");
    EXPECT_EQ(by["--count"].names, (std::vector<std::string>{"-n", "--count"}));
    EXPECT_FALSE(by["--flag"].takes_value);
}

} // namespace
