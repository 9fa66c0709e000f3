// Unit tests of `standin bench`'s pure parts (aggregation, ratios, the gate,
// the writers, the run plan, op perf parsing) and of its process handling
// (exit codes, timeouts, signals, container cleanup) with small shell children.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/standin/bench_ops.h"
#include "tools/standin/bench_plan.h"
#include "tools/standin/bench_process.h"
#include "tools/standin/bench_report.h"

namespace {

namespace fs = std::filesystem;
using namespace standin::bench;
using nlohmann::json;
using BRun = standin::bench::Run;  // TEST bodies see testing::Test::Run

BRun make_run(const std::string & config, const std::string & test, int rep, double ts, int fa = 0) {
    BRun r;
    r.config = config, r.model = "m", r.test = test, r.rep = rep, r.ts = ts, r.fa = fa;
    r.record = {{"avg_ts", ts}, {"flash_attn", fa}, {"n_prompt", 64}, {"n_gen", 0}, {"cpu_info", "cpu, x"},
                {"samples_ts", {ts}}};
    return r;
}

const Row * find_row(const std::vector<Row> & rows, const std::string & config, const std::string & test) {
    for (const auto & r : rows) {
        if (r.config == config && r.test == test) return &r;
    }
    return nullptr;
}

Meta host_meta() {
    Meta m;
    m.kind = "host", m.reference = "real", m.reps = 3, m.configs = {"real", "standalone"};
    return m;
}

TEST(BenchReport, MeanStddevBestAndPairedRatios) {
    // Repetition 1 ran while the machine was busy: both configurations slowed.
    std::vector<BRun> runs = {make_run("real", "pp64", 0, 100), make_run("standalone", "pp64", 0, 50),
                              make_run("real", "pp64", 1, 40),  make_run("standalone", "pp64", 1, 30),
                              make_run("real", "pp64", 2, 90),  make_run("standalone", "pp64", 2, 60)};
    std::vector<Row> rows = aggregate(runs, "real");
    ASSERT_EQ(rows.size(), 2u);
    const Row * s = find_row(rows, "standalone", "pp64");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->n, 3);
    EXPECT_NEAR(s->mean, 140.0 / 3, 1e-9);
    double m = 140.0 / 3;
    EXPECT_NEAR(s->stddev, std::sqrt(((50 - m) * (50 - m) + (30 - m) * (30 - m) + (60 - m) * (60 - m)) / 2), 1e-9);
    EXPECT_DOUBLE_EQ(s->q75, 60);                  // of three runs, the fastest
    EXPECT_DOUBLE_EQ(s->ratio, 0.6);               // 60 over the reference's 100
    EXPECT_NEAR(s->paired_ratio, 60.0 / 90, 1e-12);  // median of 0.5, 0.75, 0.667
    EXPECT_DOUBLE_EQ(find_row(rows, "real", "pp64")->ratio, 1.0);
}

TEST(BenchReport, RatioIgnoresOneLuckyRun) {
    // Nine repetitions: the 7th slowest is the upper quartile; one run twice as
    // fast as the rest (on either side) moves neither it nor the ratio.
    std::vector<BRun> runs;
    for (int rep = 0; rep < 9; ++rep) {
        runs.push_back(make_run("real", "tg64", rep, rep == 4 ? 200 : 100 - rep));
        runs.push_back(make_run("standalone", "tg64", rep, 50 + rep));
    }
    std::vector<Row> rows = aggregate(runs, "real");
    const Row * s = find_row(rows, "standalone", "tg64");
    const Row * r = find_row(rows, "real", "tg64");
    EXPECT_DOUBLE_EQ(s->q75, 56);   // 50..58: the 7th
    EXPECT_DOUBLE_EQ(r->q75, 99);   // 92..100 without rep 4, plus 200: the 7th is 99
    EXPECT_DOUBLE_EQ(s->ratio, 56.0 / 99);
}

TEST(BenchReport, NoReferenceGivesNoRatio) {
    std::vector<Row> rows = aggregate({make_run("standalone", "tg16", 0, 10)}, "real");
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_TRUE(std::isnan(rows[0].ratio));
    EXPECT_TRUE(std::isnan(rows[0].paired_ratio));
}

TEST(BenchReport, RunsFromLlamaBenchJson) {
    json j = json::parse(R"([{"avg_ts": 12.5, "n_prompt": 64, "n_gen": 0, "flash_attn": 1},
                             {"avg_ts": 3.0, "n_prompt": 0, "n_gen": 16, "flash_attn": 1}])");
    std::string err;
    auto runs = runs_from_llama_bench(j, "standalone", "m", 2, err);
    ASSERT_EQ(err, "");
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].test, "pp64");
    EXPECT_EQ(runs[1].test, "tg16");
    EXPECT_EQ(runs[1].fa, 1);
    EXPECT_EQ(runs[1].rep, 2);
    EXPECT_DOUBLE_EQ(runs[0].ts, 12.5);
    runs_from_llama_bench(json::parse("[]"), "x", "m", 0, err);
    EXPECT_NE(err, "");
}

TEST(BenchReport, ResultsRoundTrip) {
    std::vector<BRun> runs = {make_run("real", "pp64", 0, 100), make_run("standalone", "pp64", 0, 80)};
    Meta m = host_meta();
    json j = results_json(m, runs, aggregate(runs, "real"));
    Meta m2;
    std::vector<BRun> back;
    ASSERT_EQ(read_results(json::parse(j.dump()), m2, back), "");
    EXPECT_EQ(m2.kind, "host");
    EXPECT_EQ(m2.configs, m.configs);
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back[1].config, "standalone");
    EXPECT_DOUBLE_EQ(back[1].ts, 80);
    EXPECT_DOUBLE_EQ(aggregate(back, "real")[1].ratio, 0.8);
    EXPECT_NE(read_results(json::parse(R"({"runs": []})"), m2, back), "");
}

TEST(BenchReport, CsvHasConfigurationAndLlamaBenchFields) {
    std::vector<BRun> runs = {make_run("real", "pp64", 0, 100), make_run("standalone", "pp64", 1, 80)};
    std::string csv = to_csv(host_meta(), runs);
    std::istringstream is(csv);
    std::string header, l1, l2;
    std::getline(is, header), std::getline(is, l1), std::getline(is, l2);
    EXPECT_EQ(header.rfind("kind,config,rep,model_name,test,", 0), 0u) << header;
    EXPECT_NE(header.find("avg_ts"), std::string::npos);
    EXPECT_NE(header.find("cpu_info"), std::string::npos);
    EXPECT_EQ(l2.rfind("host,standalone,1,m,pp64,", 0), 0u) << l2;
    EXPECT_NE(l1.find("\"cpu, x\""), std::string::npos) << "a comma inside a field is quoted: " << l1;
}

TEST(BenchReport, MarkdownShowsRatios) {
    std::vector<BRun> runs = {make_run("real", "pp64", 0, 100), make_run("standalone", "pp64", 0, 80)};
    std::string md = to_markdown(host_meta(), aggregate(runs, "real"));
    EXPECT_NE(md.find("| model | test | fa | real | standalone |"), std::string::npos) << md;
    EXPECT_NE(md.find("| m | pp64 | 0 | 100.0 ± 0.000 | 80.00 ± 0.000 (0.80× [0.80]) |"), std::string::npos) << md;
}

TEST(BenchReport, GnuplotScriptNamesEveryConfiguration) {
    std::vector<BRun> runs = {make_run("real", "pp64", 0, 100), make_run("standalone", "pp64", 0, 80)};
    Chart c = gnuplot_chart(host_meta(), aggregate(runs, "real"), "/t/d.dat", "/t/o.png");
    EXPECT_NE(c.script.find("set output '/t/o.png'"), std::string::npos);
    EXPECT_NE(c.script.find("title 'standalone'"), std::string::npos);
    EXPECT_NE(c.data.find("100 0 1.0000 80 0 0.8000"), std::string::npos) << c.data;
}

std::vector<Floor> floors_of(const char * text) {
    std::vector<Floor> f;
    EXPECT_EQ(parse_floors(json::parse(text), f), "");
    return f;
}

TEST(BenchGate, HeldBrokenAndSkipped) {
    std::vector<BRun> runs = {make_run("real", "pp64", 0, 100), make_run("standalone", "pp64", 0, 80),
                             make_run("real", "tg16", 0, 10), make_run("standalone", "tg16", 0, 4)};
    std::vector<Row> rows = aggregate(runs, "real");
    auto floors = floors_of(R"({"floors": [
        {"kind": "host", "model": "m", "test": "pp64", "config": "standalone", "min_ratio": 0.7},
        {"kind": "host", "model": "*", "test": "tg16", "fa": 0, "config": "standalone", "min_ratio": 0.5},
        {"kind": "host", "model": "m", "test": "tg16", "fa": 1, "config": "standalone", "min_ratio": 0.5},
        {"kind": "cuda", "model": "m", "test": "pp64", "config": "standalone", "min_ratio": 0.99}]})");
    GateResult g = evaluate_gate(floors, rows, host_meta());
    ASSERT_EQ(g.broken.size(), 1u);
    EXPECT_NE(g.broken[0].find("host/*/tg16/fa0/standalone"), std::string::npos) << g.broken[0];
    EXPECT_NE(g.broken[0].find("ratio 0.400 < floor 0.500"), std::string::npos) << g.broken[0];
    ASSERT_EQ(g.held.size(), 1u);
    ASSERT_EQ(g.skipped.size(), 1u);  // fa 1 was not run; the cuda floor is not listed at all
    EXPECT_FALSE(g.pass());
}

TEST(BenchGate, HalvedConfigurationTripsAndUnchangedPasses) {
    std::vector<BRun> runs;
    for (int rep = 0; rep < 3; ++rep) {
        runs.push_back(make_run("real", "pp64", rep, 100 + rep));
        runs.push_back(make_run("standalone", "pp64", rep, 95 + rep));
    }
    auto floors = floors_of(R"({"floors": [{"name": "standalone-pp", "kind": "host", "model": "m", "test": "pp64",
                                           "config": "standalone", "min_ratio": 0.65}]})");
    EXPECT_TRUE(evaluate_gate(floors, aggregate(runs, "real"), host_meta()).pass());
    for (auto & r : runs) {
        if (r.config == "standalone") r.ts /= 2;
    }
    GateResult g = evaluate_gate(floors, aggregate(runs, "real"), host_meta());
    ASSERT_EQ(g.broken.size(), 1u);
    EXPECT_EQ(g.broken[0].rfind("standalone-pp:", 0), 0u) << g.broken[0];
}

TEST(BenchGate, NothingApplicableDoesNotPass) {
    std::vector<Row> rows = aggregate({make_run("real", "pp64", 0, 100)}, "real");
    auto floors = floors_of(R"({"floors": [{"kind": "cuda", "model": "m", "test": "pp64", "config": "real", "min_ratio": 1}]})");
    GateResult g = evaluate_gate(floors, rows, host_meta());
    EXPECT_TRUE(g.held.empty() && g.broken.empty());
    EXPECT_FALSE(g.pass());
}

TEST(BenchGate, MissingReferenceIsBroken) {
    std::vector<Row> rows = aggregate({make_run("standalone", "pp64", 0, 100)}, "real");
    auto floors = floors_of(R"({"floors": [{"kind": "host", "model": "m", "test": "pp64", "config": "standalone", "min_ratio": 0.5}]})");
    GateResult g = evaluate_gate(floors, rows, host_meta());
    ASSERT_EQ(g.broken.size(), 1u);
    EXPECT_NE(g.broken[0].find("no ratio"), std::string::npos);
}

TEST(BenchGate, AbsoluteFloorOnlyOnTheNamedGpu) {
    std::vector<Row> rows = aggregate({make_run("real", "tg16", 0, 100), make_run("standalone", "tg16", 0, 90)}, "real");
    auto floors = floors_of(R"({"floors": [{"kind": "host", "model": "m", "test": "tg16", "config": "standalone",
                                           "gpu": "H200", "min_ts": 120}]})");
    Meta m = host_meta();
    m.gpu_info = "NVIDIA H100 80GB";
    GateResult g = evaluate_gate(floors, rows, m);
    EXPECT_TRUE(g.broken.empty());
    EXPECT_EQ(g.skipped.size(), 1u);
    m.gpu_info = "NVIDIA H200";
    g = evaluate_gate(floors, rows, m);
    ASSERT_EQ(g.broken.size(), 1u);
    EXPECT_NE(g.broken[0].find("90.00 t/s < floor 120.0 t/s"), std::string::npos) << g.broken[0];
}

TEST(BenchGate, BadFloorsAreErrors) {
    std::vector<Floor> f;
    EXPECT_NE(parse_floors(json::parse(R"({"floors": [{"kind": "host"}]})"), f), "");
    EXPECT_NE(parse_floors(json::parse(R"({"floors": [{"kind": "host", "model": "m", "test": "t", "config": "c"}]})"), f), "");
    EXPECT_NE(parse_floors(json::parse(R"([])"), f), "");
}

PlanOptions plan_opts(const std::string & kind) {
    PlanOptions o;
    o.kind = kind, o.configs = {"real", "standalone", "interposed-none", "interposed-all"};
    o.models = {"/m/a.gguf"}, o.n_prompt = {64}, o.n_gen = {16}, o.fa = {0}, o.reps = 2;
    o.llama_bench = "/bin/dir/llama-bench", o.plugin = "/p/libggml-standin.so", o.real = "/bin/dir/libggml-cuda.so";
    o.work = "/w";
    return o;
}

std::string env_of(const Invocation & inv, const std::string & k) {
    for (const auto & [key, v] : inv.env_set) {
        if (key == k) return v;
    }
    return "<unset>";
}

TEST(BenchPlan, InterleavedAndRotated) {
    std::vector<Invocation> list;
    ASSERT_EQ(plan(plan_opts("cuda"), list), "");
    ASSERT_EQ(list.size(), 2u * 2u * 4u);  // reps x tests x configs
    std::vector<std::string> first4, next4;
    for (int i = 0; i < 4; ++i) first4.push_back(list[i].config), next4.push_back(list[4 + i].config);
    EXPECT_EQ(first4, (std::vector<std::string>{"real", "standalone", "interposed-none", "interposed-all"}));
    EXPECT_EQ(list[4].test, "tg16");
    EXPECT_EQ(list[8].rep, 1);
    EXPECT_EQ(list[8].config, "standalone");  // rotated by one in the second repetition
}

TEST(BenchPlan, CudaCommands) {
    std::vector<Invocation> list;
    ASSERT_EQ(plan(plan_opts("cuda"), list), "");
    std::string real = format_command(list[0]), inter = format_command(list[2]), all = format_command(list[3]);
    EXPECT_NE(real.find("env -u GGML_BACKEND_PATH"), std::string::npos) << real;
    EXPECT_NE(real.find("/bin/dir/llama-bench -m /m/a.gguf -r 1 -o json -p 64 -n 0 -fa 0 -dev CUDA0 -ngl 99"),
              std::string::npos) << real;
    EXPECT_EQ(env_of(list[1], "GGML_STANDIN_MODE"), "standalone");
    EXPECT_NE(format_command(list[1]).find("-dev STANDIN_CUDA0"), std::string::npos);
    EXPECT_EQ(env_of(list[2], "GGML_STANDIN_REAL"), "/bin/dir/libggml-cuda.so");
    EXPECT_EQ(env_of(list[2], "GGML_STANDIN_LOCAL_OPS"), "none");
    EXPECT_EQ(env_of(list[3], "GGML_STANDIN_LOCAL_OPS"), "all");
    EXPECT_NE(inter.find("-dev STANDIN_CUDA0"), std::string::npos) << inter;
    EXPECT_NE(all.find("GGML_BACKEND_PATH=/p/libggml-standin.so"), std::string::npos) << all;
}

TEST(BenchPlan, HostInterposedRunsInTheAppFolder) {
    std::vector<Invocation> list;
    ASSERT_EQ(plan(plan_opts("host"), list), "");
    EXPECT_EQ(list[0].argv[0], "/bin/dir/llama-bench");
    EXPECT_NE(format_command(list[0]).find("-dev none"), std::string::npos);
    EXPECT_NE(format_command(list[1]).find("-dev STANDIN_HOST0 -ngl 99"), std::string::npos);
    EXPECT_EQ(list[2].argv[0], "/w/app-host/llama-bench");
    EXPECT_EQ(env_of(list[2], "GGML_BACKEND_PATH"), "<unset>");  // replace mode: found by ggml's loader
    EXPECT_EQ(env_of(list[2], "GGML_STANDIN_LOCAL_OPS"), "none");
    EXPECT_NE(format_command(list[2]).find("-dev none"), std::string::npos);
}

TEST(BenchPlan, Errors) {
    std::vector<Invocation> list;
    PlanOptions o = plan_opts("host");
    o.configs = {"real", "fast"};
    EXPECT_NE(plan(o, list).find("unknown configuration 'fast'"), std::string::npos);
    o = plan_opts("tpu");
    EXPECT_NE(plan(o, list), "");
    o = plan_opts("host");
    o.n_prompt = {0}, o.n_gen = {0};
    EXPECT_NE(plan(o, list), "");
}

TEST(BenchPlan, Containerized) {
    std::vector<Invocation> list;
    PlanOptions o = plan_opts("cuda");
    o.container_image = "img:1", o.engine = "docker";
    ASSERT_EQ(plan(o, list), "");
    Invocation inv = list[2];
    containerize(o, "c1", inv);
    std::string c = format_command(inv);
    EXPECT_EQ(c.rfind("env -u GGML_BACKEND_PATH", 0), 0u) << c;  // the client gets a clean environment
    EXPECT_NE(c.find("docker run --rm --name c1 --network none"), std::string::npos) << c;
    EXPECT_NE(c.find("-v /m:/m:ro"), std::string::npos) << c;
    EXPECT_NE(c.find("-e GGML_STANDIN_LOCAL_OPS=none"), std::string::npos) << c;
    EXPECT_NE(c.find("--gpus all img:1 /bin/dir/llama-bench -m /m/a.gguf"), std::string::npos) << c;
}

TEST(BenchOps, ParsePerfLinesAndTable) {
    std::string out =
        "Backend 1/1: CPU\n"
        "  ADD(type=f32,ne=[4096,1,1,1],nr=[1,512,1,1]):     8192 runs -    12.50 us/run -  24 kB/run - \x1b[1;34m 2.0 GB/s\x1b[0m\n"
        "  MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=4096):  not supported\n"
        "  Backend CPU: OK\n";
    auto s = parse_op_perf(out, "real", 0);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].op_case, "ADD(type=f32,ne=[4096,1,1,1],nr=[1,512,1,1])");
    EXPECT_DOUBLE_EQ(s[0].us, 12.5);
    s.push_back({"standalone", s[0].op_case, 0, 25.0});
    std::string md = ops_markdown(host_meta(), s);
    EXPECT_NE(md.find("| 12.50 | 25.00 (0.50×) |"), std::string::npos) << md;
    std::vector<OpSample> back;
    ASSERT_EQ(read_ops_json(json::parse(ops_json(s).dump()), back), "");
    EXPECT_EQ(back.size(), 2u);
}

TEST(BenchOps, PlanDevices) {
    std::vector<Invocation> list;
    ASSERT_EQ(plan_ops(plan_opts("host"), "", {"ADD", "MUL_MAT"}, "type=f32", list), "");
    ASSERT_EQ(list.size(), 8u);
    EXPECT_EQ(format_command(list[0]).substr(format_command(list[0]).find("/bin/dir/")),
              "/bin/dir/test-backend-ops perf -b CPU -o ADD,MUL_MAT -p type=f32");
    EXPECT_NE(format_command(list[2]).find("-b STANDIN_CPU"), std::string::npos);
    EXPECT_EQ(env_of(list[2], "GGML_STANDIN_MODE"), "interpose");
}

TEST(BenchProcess, ExitCodeOutputAndEnvironment) {
    setenv("BENCH_TEST_DROP", "1", 1);
    ProcSpec s;
    s.argv      = {"sh", "-c", "echo \"$BENCH_TEST_SET-${BENCH_TEST_DROP:-gone}\"; exit 3"};
    s.env_set   = {{"BENCH_TEST_SET", "yes"}};
    s.env_unset = {"BENCH_TEST_DROP"};
    ProcResult r = run_process(s);
    EXPECT_EQ(r.out, "yes-gone\n");
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.describe(), "exit 3");
}

TEST(BenchProcess, TimeoutStopsTheGroup) {
    ProcSpec s;
    s.argv      = {"sh", "-c", "sleep 30 & wait"};
    s.timeout_s = 0.3;
    auto t0 = std::chrono::steady_clock::now();
    ProcResult r = run_process(s);
    EXPECT_TRUE(r.timed_out);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST(BenchProcess, KilledChildIsReported) {
    ProcSpec s;
    s.argv = {"sh", "-c", "kill -9 $$"};
    ProcResult r = run_process(s);
    EXPECT_EQ(r.term_signal, 9);
    EXPECT_EQ(r.describe(), "killed by signal 9");
    s.argv = {"/nonexistent/tool"};
    EXPECT_EQ(run_process(s).exit_code, 127);
}

TEST(BenchProcess, JanitorRemovesEveryStartedContainer) {
    fs::path dir = fs::temp_directory_path() / ("bench-janitor-" + std::to_string(getpid()));
    fs::create_directories(dir);
    fs::path engine = dir / "engine", log = dir / "log";
    std::ofstream(engine) << "#!/bin/sh\necho \"$*\" >> " << log.string() << "\n";
    fs::permissions(engine, fs::perms::owner_all);
    {
        ContainerJanitor j(engine.string());
        std::string a = j.next_name(), b = j.next_name();
        EXPECT_NE(a, b);
        j.started(a), j.started(b);
        j.remove(a);
        EXPECT_EQ(j.live(), 1u);
    }  // the destructor removes b
    std::ifstream f(log);
    std::string l1, l2;
    std::getline(f, l1), std::getline(f, l2);
    EXPECT_EQ(l1.rfind("rm -f standin-bench-", 0), 0u) << l1;
    EXPECT_TRUE(l1.size() > 2 && l1.back() == '1') << l1;
    EXPECT_TRUE(l2.size() > 2 && l2.back() == '2') << l2;
    fs::remove_all(dir);
}

} // namespace
