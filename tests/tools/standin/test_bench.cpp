// Unit tests of `standin bench`'s pure parts (aggregation, ratios, the gate,
// the writers, the run plan, op perf parsing, llama-batched-bench's table and
// commands) and of its process handling (exit codes, timeouts, signals,
// container cleanup) with small shell children.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/standin/bench_batched.h"
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

// --- batched decode (llama-batched-bench) ------------------------------------

// stdout of the pinned llama-batched-bench (tools/batched-bench): the settings
// line, then the table in its printf format ("|%6d | %6d | %4d | %6d | %8.3f |
// %8.2f | ..."); the perf summary goes to stderr.
const char * kBatchedOut =
    "\n"
    "llama_batched_bench: n_kv_max = 5120, n_batch = 2048, n_ubatch = 512, flash_attn = 1, is_pp_shared = 0, "
    "is_tg_separate = 0, n_gpu_layers = 99, n_threads = 16, n_threads_batch = 16\n"
    "\n"
    "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n"
    "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n"
    "|   128 |     32 |    1 |    160 |    0.041 |  3100.25 |    0.109 |   292.76 |    0.151 |  1062.48 |\n"
    "|   128 |     32 |    2 |    320 |    0.031 |  8162.22 |    0.133 |   482.99 |    0.164 |  1952.74 |\n"
    "|   128 |     32 |    8 |   1280 |    0.094 | 10915.91 |    0.210 |  1220.32 |    0.304 |  4216.23 |\n"
    "|   128 |     32 |   32 |   5120 |    0.380 | 10791.58 |    0.318 |  3217.83 |    0.698 |  7337.54 |\n"
    "\n";

Invocation batched_inv(const std::string & config, int rep, std::vector<int> npl = {1, 2, 8, 32}, int fa = 1) {
    Invocation inv;
    inv.config = config, inv.model_name = "m", inv.test = "batched", inv.rep = rep, inv.fa = fa;
    inv.n_prompt = 128, inv.n_gen = 32, inv.batch_sizes = std::move(npl);
    return inv;
}

// A table line as the pinned tool prints it.
std::string batched_line(int b, double s_pp, double s_tg) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "|%6d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n",
                  128, 32, b, b * 160, b * 128 / s_pp, s_pp, b * 32 / s_tg, s_tg, 1.0, 100.0);
    return buf;
}

std::string batched_out(const std::vector<std::pair<int, std::pair<double, double>>> & rows) {
    std::string s = "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n"
                    "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n";
    for (const auto & [b, sp] : rows) s += batched_line(b, sp.first, sp.second);
    return s;
}

TEST(BenchBatched, SequenceCountList) {
    std::vector<int> v;
    EXPECT_EQ(parse_batch_sizes("1,2,4,8,16,32", v), "");
    EXPECT_EQ(v, (std::vector<int>{1, 2, 4, 8, 16, 32}));
    EXPECT_EQ(parse_batch_sizes(" 4, 1 ", v), "");
    EXPECT_EQ(v, (std::vector<int>{4, 1}));  // the order given is the order run
    for (const char * bad :
         {"", " ", "1,,2", "1,2,", ",1", "1,-2", "-1", "0", "257", "a", "1.5", "2,2", "0x4", "1;2"}) {
        EXPECT_NE(parse_batch_sizes(bad, v), "") << "'" << bad << "' was accepted";
    }
    EXPECT_NE(parse_batch_sizes("abc", v).find("not a whole number"), std::string::npos);
    EXPECT_NE(parse_batch_sizes("0", v).find("outside 1..256"), std::string::npos);
    EXPECT_NE(parse_batch_sizes("8,8", v).find("twice"), std::string::npos);
}

TEST(BenchBatched, ParsesTheTable) {
    std::vector<BatchedLine> lines;
    json settings;
    ASSERT_EQ(parse_batched_output(kBatchedOut, lines, settings), "");
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_EQ(lines[3].b, 32);
    EXPECT_EQ(lines[3].n_kv, 5120);
    EXPECT_DOUBLE_EQ(lines[3].s_pp, 10791.58);
    EXPECT_DOUBLE_EQ(lines[3].s_tg, 3217.83);
    EXPECT_DOUBLE_EQ(lines[0].t, 0.151);
    EXPECT_EQ(settings.value("n_kv_max", 0), 5120);
    EXPECT_EQ(settings.value("flash_attn", -2), 1);
    EXPECT_EQ(settings.value("n_threads_batch", 0), 16);

    std::string err;
    std::vector<BRun> runs = runs_from_batched(kBatchedOut, batched_inv("standalone", 2), err);
    EXPECT_EQ(err, "");
    ASSERT_EQ(runs.size(), 8u);  // pp and tg per B
    EXPECT_EQ(runs[0].test, "batchedB1-pp128");
    EXPECT_EQ(runs[1].test, "batchedB1-tg32");
    EXPECT_EQ(runs[7].test, "batchedB32-tg32");
    EXPECT_DOUBLE_EQ(runs[6].ts, 10791.58);
    EXPECT_DOUBLE_EQ(runs[7].ts, 3217.83);
    EXPECT_EQ(runs[7].config, "standalone");
    EXPECT_EQ(runs[7].fa, 1);
    EXPECT_EQ(runs[7].rep, 2);
    EXPECT_TRUE(runs[7].error.empty());
    EXPECT_EQ(runs[7].record.value("pl", 0), 32);
    EXPECT_EQ(runs[7].record.value("n_ubatch", 0), 512);
    EXPECT_DOUBLE_EQ(runs[7].record["avg_ts"].get<double>(), 3217.83);
    EXPECT_DOUBLE_EQ(runs[7].record["samples_ts"][0].get<double>(), 3217.83);
}

TEST(BenchBatched, MalformedOrMissingLinesAreFailedTestsNotZeros) {
    // B=2's line cut short (a crash mid-print), B=8 with an infinite speed, B=4 absent.
    std::string out = batched_out({{1, {3100.25, 292.76}}}) +
                      "|   128 |     32 |    2 |    320 |    0.031 |  8162.22 |\n" +
                      "|   128 |     32 |    8 |   1280 |    0.000 |      inf |    0.210 |  1220.32 |    0.304 |  4216.23 |\n";
    std::string err;
    std::vector<BRun> runs = runs_from_batched(out, batched_inv("real", 0, {1, 2, 4, 8}), err);
    ASSERT_EQ(runs.size(), 8u);
    EXPECT_TRUE(runs[0].error.empty() && runs[1].error.empty());
    EXPECT_NE(err.find("malformed table line"), std::string::npos) << err;
    EXPECT_NE(err.find("no table line for B=4"), std::string::npos) << err;
    EXPECT_NE(err.find("S_PP t/s is inf for B=8"), std::string::npos) << err;
    for (int i : {2, 3, 4, 5, 6}) {
        EXPECT_FALSE(runs[i].error.empty()) << runs[i].test;
        EXPECT_TRUE(std::isnan(runs[i].ts)) << runs[i].test;
        EXPECT_FALSE(runs[i].record.contains("avg_ts")) << runs[i].test;
    }
    EXPECT_TRUE(runs[7].error.empty());  // B=8's tg figure is sound
    EXPECT_EQ(runs[2].test, "batchedB2-pp128");

    // No table at all (the tool failed before printing it), or another fa than asked.
    runs = runs_from_batched("error: unable to load model\n", batched_inv("real", 0, {1, 2}), err);
    ASSERT_EQ(runs.size(), 4u);
    EXPECT_NE(err.find("no results table"), std::string::npos) << err;
    for (const auto & r : runs) EXPECT_FALSE(r.error.empty());
    runs = runs_from_batched(kBatchedOut, batched_inv("real", 0, {1}, 0), err);
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_NE(err.find("flash_attn = 1, expected 0"), std::string::npos) << err;
    EXPECT_FALSE(runs[0].error.empty());

    runs = failed_batched_runs(batched_inv("real", 1, {4, 16}), "exit 134");
    ASSERT_EQ(runs.size(), 4u);
    EXPECT_EQ(runs[3].test, "batchedB16-tg32");
    EXPECT_EQ(runs[3].error, "exit 134");
}

PlanOptions batched_plan_opts(const std::string & kind) {
    PlanOptions o = plan_opts(kind);
    o.reps = 1, o.n_gen = {0}, o.fa = {0, 1};
    o.batched_npl = {1, 4, 32}, o.batched_npp = 128, o.batched_ntg = 32;
    o.llama_batched_bench = "/bin/dir/llama-batched-bench";
    o.llama_arg_env = {"LLAMA_ARG_THREADS"};
    o.threads = 3;
    return o;
}

const Invocation * find_inv(const std::vector<Invocation> & list, const std::string & config, bool batched, int fa) {
    for (const auto & i : list) {
        if (i.config == config && i.batched() == batched && i.fa == fa) return &i;
    }
    return nullptr;
}

bool unset(const Invocation & inv, const std::string & k) {
    return std::find(inv.env_unset.begin(), inv.env_unset.end(), k) != inv.env_unset.end();
}

TEST(BenchBatched, PlanHostCommands) {
    std::vector<Invocation> list;
    ASSERT_EQ(plan(batched_plan_opts("host"), list), "");
    ASSERT_EQ(list.size(), 2u * 2u * 4u);  // (pp64, batched) x fa x configs
    EXPECT_TRUE(list[8].batched());        // after the llama-bench tests of the repetition
    EXPECT_EQ(list[8].test, "batched");
    const std::string tail = " -fa off -c 5120 -b 2048 -ub 512 -npp 128 -ntg 32 -npl 1,4,32 -t 3";
    const Invocation * real = find_inv(list, "real", true, 0);
    ASSERT_NE(real, nullptr);
    EXPECT_EQ(format_command(*real).substr(format_command(*real).find("/bin/dir/")),
              "/bin/dir/llama-batched-bench -m /m/a.gguf -dev none" + tail);
    const Invocation * sa = find_inv(list, "standalone", true, 1);
    EXPECT_NE(format_command(*sa).find("/bin/dir/llama-batched-bench -m /m/a.gguf -dev STANDIN_HOST0 -ngl 99 -fa on"),
              std::string::npos) << format_command(*sa);
    for (const char * cfg : {"interposed-none", "interposed-all"}) {
        const Invocation * in = find_inv(list, cfg, true, 0);
        EXPECT_EQ(in->argv[0], "/w/app-host/llama-batched-bench");  // replace mode, as llama-bench
        EXPECT_EQ(format_command(*in).substr(format_command(*in).find("/w/app-host/")),
                  "/w/app-host/llama-batched-bench -m /m/a.gguf -dev none" + tail);
    }
    // The device environment is llama-bench's for the same configuration, plus
    // the batched tool's isolation from the caller's llama.cpp settings.
    for (const auto & cfg : known_configs()) {
        const Invocation * b = find_inv(list, cfg, true, 0), * l = find_inv(list, cfg, false, 0);
        auto expected = l->env_set;
        expected.emplace_back("XDG_CONFIG_HOME", "/w/no-llama-config");
        EXPECT_EQ(b->env_set, expected) << cfg;
        for (const auto & k : l->env_unset) EXPECT_TRUE(unset(*b, k)) << cfg << " " << k;
        EXPECT_TRUE(unset(*b, "LLAMA_ARG_THREADS")) << cfg;
        EXPECT_FALSE(unset(*l, "LLAMA_ARG_THREADS")) << cfg;  // llama-bench does not read them
    }
}

TEST(BenchBatched, PlanCudaCommands) {
    std::vector<Invocation> list;
    PlanOptions o = batched_plan_opts("cuda");
    o.threads = 0, o.extra = {"-ub", "256"};
    ASSERT_EQ(plan(o, list), "");
    const Invocation * real = find_inv(list, "real", true, 1);
    EXPECT_EQ(format_command(*real).substr(format_command(*real).find("/bin/dir/")),
              "/bin/dir/llama-batched-bench -m /m/a.gguf -dev CUDA0 -ngl 99 -fa on -c 5120 -b 2048 -ub 512 "
              "-npp 128 -ntg 32 -npl 1,4,32");  // no -t, and llama-bench's extra arguments stay llama-bench's
    const Invocation * none = find_inv(list, "interposed-none", true, 1);
    EXPECT_EQ(none->argv[0], "/bin/dir/llama-batched-bench");
    EXPECT_EQ(env_of(*none, "GGML_STANDIN_REAL"), "/bin/dir/libggml-cuda.so");
    EXPECT_EQ(env_of(*none, "GGML_STANDIN_LOCAL_OPS"), "none");
    EXPECT_NE(format_command(*none).find("-dev STANDIN_CUDA0 -ngl 99"), std::string::npos);
    EXPECT_EQ(env_of(*find_inv(list, "standalone", true, 0), "GGML_STANDIN_MODE"), "standalone");
    EXPECT_EQ(find_inv(list, "standalone", true, 0)->batch_sizes, (std::vector<int>{1, 4, 32}));
}

TEST(BenchBatched, ContextFitsTheLargestBatchAndErrors) {
    PlanOptions o = batched_plan_opts("host");
    EXPECT_EQ(batched_context(o), 5120);  // 32 x 160, already a multiple of 256
    o.batched_npl = {3, 1}, o.batched_npp = 100, o.batched_ntg = 10;
    EXPECT_EQ(batched_context(o), 512);   // 330 rounded up
    o.batched_npl = {1}, o.batched_npp = 128, o.batched_ntg = 32;
    EXPECT_EQ(batched_context(o), 256);
    o.batched_npl = {256}, o.batched_npp = 512, o.batched_ntg = 128;
    EXPECT_EQ(batched_context(o), 256 * 640);

    std::vector<Invocation> list;
    o = batched_plan_opts("host");
    o.n_prompt = {0};  // batched runs alone are a plan
    ASSERT_EQ(plan(o, list), "");
    EXPECT_EQ(list.size(), 2u * 4u);
    o.batched_npl = {2, 2};
    EXPECT_NE(plan(o, list), "");
    o.batched_npl = {2}, o.batched_ntg = 0;
    EXPECT_NE(plan(o, list), "");
    o.batched_ntg = 1 << 30;
    EXPECT_NE(plan(o, list), "");
}

TEST(BenchBatched, AppFolderHoldsTheBatchedTool) {
    fs::path dir = fs::temp_directory_path() / ("bench-app-" + std::to_string(getpid()));
    fs::create_directories(dir / "bin");
    PlanOptions o = batched_plan_opts("host");
    o.work = (dir / "work").string();
    o.llama_bench = (dir / "bin/llama-bench").string(), o.llama_batched_bench = (dir / "bin/batched").string();
    o.real = (dir / "bin/libggml-cpu.so").string(), o.plugin = (dir / "bin/plugin.so").string();
    for (const auto & f : {o.llama_bench, o.llama_batched_bench, o.real, o.plugin}) std::ofstream(f) << f;
    ASSERT_EQ(prepare_app_folder(o), "");
    std::ifstream copy(fs::path(app_folder(o)) / "llama-batched-bench");
    std::string text;
    std::getline(copy, text);
    EXPECT_EQ(text, o.llama_batched_bench);
    o.batched_npl.clear();
    ASSERT_EQ(prepare_app_folder(o), "");
    EXPECT_FALSE(fs::exists(fs::path(app_folder(o)) / "llama-batched-bench"));
    fs::remove_all(dir);
}

// real and standalone over three repetitions, standalone at `scale` of real's
// speed; B=8 is what the floors below are on.
std::vector<BRun> batched_runs(double scale) {
    std::vector<BRun> runs;
    for (int rep = 0; rep < 3; ++rep) {
        for (const char * cfg : {"real", "standalone"}) {
            double k = (std::string(cfg) == "real" ? 1.0 : scale) * (1 + 0.01 * rep);
            std::string err;
            auto got = runs_from_batched(batched_out({{1, {3100 * k, 290 * k}}, {8, {10900 * k, 1220 * k}}}),
                                         batched_inv(cfg, rep, {1, 8}), err);
            EXPECT_EQ(err, "");
            runs.insert(runs.end(), got.begin(), got.end());
        }
    }
    return runs;
}

const char * kBatchedFloors = R"({"floors": [
    {"name": "cuda/m/batchedB8-tg32/standalone", "kind": "cuda", "model": "m", "test": "batchedB8-tg32", "fa": 1,
     "config": "standalone", "min_ratio": 1.25},
    {"name": "cuda/m/batchedB8-pp128/standalone", "kind": "cuda", "model": "m", "test": "batchedB8-pp128", "fa": 1,
     "config": "standalone", "min_ratio": 1.30},
    {"name": "cuda/m/pp512/standalone", "kind": "cuda", "model": "m", "test": "pp512", "config": "standalone",
     "min_ratio": 1.0}]})";

Meta cuda_meta() {
    Meta m = host_meta();
    m.kind = "cuda";
    return m;
}

TEST(BenchGate, BatchedFloorsHoldAtTheAchievedRatioAndTripOnARegression) {
    auto floors = floors_of(kBatchedFloors);
    std::vector<BRun> runs = batched_runs(1.35);  // achieved: 1.35 for every batched test
    std::vector<Row> rows = aggregate(runs, "real");
    const Row * tg = find_row(rows, "standalone", "batchedB8-tg32");
    ASSERT_NE(tg, nullptr);
    EXPECT_NEAR(tg->ratio, 1.35, 1e-9);
    EXPECT_NEAR(tg->paired_ratio, 1.35, 1e-9);
    GateResult g = evaluate_gate(floors, rows, cuda_meta());
    EXPECT_TRUE(g.pass()) << (g.broken.empty() ? "" : g.broken[0]);
    EXPECT_EQ(g.held.size(), 2u);
    EXPECT_EQ(g.skipped.size(), 1u);  // pp512 was not run
    std::string md = to_markdown(cuda_meta(), rows);
    EXPECT_NE(md.find("| m | batchedB8-tg32 | 1 |"), std::string::npos) << md;

    // The same, read back from the results file.
    Meta back_meta;
    std::vector<BRun> back;
    ASSERT_EQ(read_results(json::parse(results_json(cuda_meta(), runs, rows).dump()), back_meta, back), "");
    EXPECT_TRUE(evaluate_gate(floors, aggregate(back, "real"), back_meta).pass());

    // A planted regression: standalone's batched decode 25% slower at every B.
    for (auto & r : runs) {
        if (r.config == "standalone" && r.test.find("-tg") != std::string::npos) r.ts /= 1.25;
    }
    g = evaluate_gate(floors, aggregate(runs, "real"), cuda_meta());
    ASSERT_EQ(g.broken.size(), 1u);
    EXPECT_EQ(g.broken[0].rfind("cuda/m/batchedB8-tg32/standalone:", 0), 0u) << g.broken[0];
    EXPECT_NE(g.broken[0].find("ratio 1.080 < floor 1.250"), std::string::npos) << g.broken[0];
    EXPECT_FALSE(g.pass());
}

TEST(BenchGate, FailedBatchedRunBreaksItsFloorAndIsReported) {
    std::vector<BRun> runs = batched_runs(1.35);
    // Repetition 1 of standalone crashed: its B=8 tests are failed runs, not zeros.
    runs.erase(std::remove_if(runs.begin(), runs.end(), [](const BRun & r) {
                   return r.config == "standalone" && r.rep == 1;
               }), runs.end());
    auto failed = failed_batched_runs(batched_inv("standalone", 1, {1, 8}), "llama-batched-bench killed by signal 11");
    runs.insert(runs.end(), failed.begin(), failed.end());
    std::vector<Row> rows = aggregate(runs, "real");
    const Row * tg = find_row(rows, "standalone", "batchedB8-tg32");
    EXPECT_EQ(tg->n, 2);
    EXPECT_EQ(tg->failed, 1);
    EXPECT_NEAR(tg->mean, 1220 * 1.35 * (1.00 + 1.02) / 2, 1e-6);  // the other two repetitions only
    GateResult g = evaluate_gate(floors_of(kBatchedFloors), rows, cuda_meta());
    ASSERT_EQ(g.broken.size(), 2u);
    EXPECT_NE(g.broken[0].find("failed in 1 of 3 runs (llama-batched-bench killed by signal 11)"), std::string::npos)
        << g.broken[0];
    std::string md = to_markdown(cuda_meta(), rows);
    EXPECT_NE(md.find("(1 failed) |"), std::string::npos) << md;
    EXPECT_NE(md.find("- standalone m batchedB8-tg32 fa1: 1 of 3 (llama-batched-bench killed by signal 11)"),
              std::string::npos) << md;
    EXPECT_NE(to_csv(cuda_meta(), runs).find("killed by signal 11"), std::string::npos);

    // Every run of a cell failed: the cell says FAILED, and so does the file read back.
    for (auto & r : runs) {
        if (r.config == "standalone" && r.test == "batchedB8-tg32") r.error = "exit 1", r.ts = NAN;
    }
    rows = aggregate(runs, "real");
    EXPECT_EQ(find_row(rows, "standalone", "batchedB8-tg32")->n, 0);
    md = to_markdown(cuda_meta(), rows);
    EXPECT_NE(md.find("| m | batchedB8-tg32 | 1 | 1232 ± 12.20 | FAILED |"), std::string::npos) << md;
    Meta back_meta;
    std::vector<BRun> back;
    json j = results_json(cuda_meta(), runs, rows);
    for (const auto & row : j["summary"]) {
        if (row["config"] == "standalone" && row["test"] == "batchedB8-tg32") {
            EXPECT_TRUE(row["mean_ts"].is_null()) << row.dump();
            EXPECT_EQ(row.value("failed", 0), 3) << row.dump();
        }
    }
    ASSERT_EQ(read_results(json::parse(j.dump()), back_meta, back), "");
    EXPECT_EQ(find_row(aggregate(back, "real"), "standalone", "batchedB8-tg32")->failed, 3);
    Chart c = gnuplot_chart(cuda_meta(), rows, "/t/d.dat", "/t/o.png");
    EXPECT_EQ(c.data.find("nan"), std::string::npos) << c.data;
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
