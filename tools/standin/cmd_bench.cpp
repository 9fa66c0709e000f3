// `standin bench`: llama-bench over a matrix of configurations (the real
// library alone, standin interposed with LOCAL_OPS none and all, standin
// standalone) x models x tests, one process per (configuration, test,
// repetition), interleaved so machine noise hits every configuration alike;
// with --batched, also one llama-batched-bench process per (configuration,
// model, fa, repetition). Writes bench.json, bench.csv, bench.md and bench.png
// (gnuplot) and, with --gate, checks the floors file. Exit codes: 0 ok, 1 a
// run or a write failed, 2 bad arguments, 3 a floor is broken, 128+N stopped
// by signal N. A failed llama-bench run stops the bench; a failed batched run
// (or test) is recorded as such, the bench goes on, and the report marks it.
//
// The matrix and commands: bench_plan.h; batched decode: bench_batched.h.
// Processes, signals and container cleanup: bench_process.h (Note [bench
// cleanup]). Figures: bench_report.h.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tools/standin/backends.h"
#include "tools/standin/bench_batched.h"
#include "tools/standin/bench_ops.h"
#include "tools/standin/bench_plan.h"
#include "tools/standin/bench_process.h"
#include "tools/standin/bench_report.h"
#include "tools/standin/commands.h"

extern char ** environ;

namespace standin::tools {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace standin::bench;

namespace {

std::string now_utc(const char * f) {
    std::time_t t = std::time(nullptr);
    std::tm     tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof(buf), f, &tm);
    return buf;
}

std::string hms(double s) {
    int t = static_cast<int>(s + 0.5);
    char buf[32];
    if (t >= 3600) std::snprintf(buf, sizeof(buf), "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else std::snprintf(buf, sizeof(buf), "%d:%02d", t / 60, t % 60);
    return buf;
}

// A bar with an ETA on a terminal; one plain line per run otherwise.
class Progress {
public:
    explicit Progress(std::size_t total) : total_(total), tty_(isatty(2) != 0), t0_(std::chrono::steady_clock::now()) {}
    // On a terminal, the bar names the run in progress.
    void start(std::size_t done, const std::string & what) {
        if (tty_) bar(done, "running " + what);
    }
    void step(std::size_t done, const std::string & what, double run_s) {
        if (tty_) {
            bar(done, what);
            if (done == total_) std::fputc('\n', stderr);
        } else {
            std::fprintf(stderr, "bench: %zu/%zu %s %.1f s (elapsed %s, ETA %s)\n", done, total_, what.c_str(), run_s,
                         hms(elapsed()).c_str(), hms(eta(done)).c_str());
        }
        std::fflush(stderr);
    }
    void interrupt_line() {
        if (tty_) std::fputc('\n', stderr);
    }

private:
    double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
    double eta(std::size_t done) const {
        return done ? elapsed() / static_cast<double>(done) * static_cast<double>(total_ - done) : 0;
    }
    void bar(std::size_t done, const std::string & what) {
        constexpr int kWidth = 30;
        int fill = static_cast<int>(kWidth * done / std::max<std::size_t>(total_, 1));
        std::fprintf(stderr, "\r[%s%s] %zu/%zu elapsed %s ETA %s  %s\033[K", std::string(fill, '#').c_str(),
                     std::string(kWidth - fill, '.').c_str(), done, total_, hms(elapsed()).c_str(),
                     done ? hms(eta(done)).c_str() : "?", what.c_str());
        std::fflush(stderr);
    }

    std::size_t total_;
    bool        tty_;
    std::chrono::steady_clock::time_point t0_;
};

std::string tail_of(const std::string & path, std::size_t lines) {
    std::ifstream f(path);
    std::vector<std::string> all;
    for (std::string l; std::getline(f, l);) all.push_back(l);
    std::string out;
    for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += "    " + all[i] + "\n";
    return out;
}

bool write_file(const fs::path & p, const std::string & text) {
    std::ofstream f(p);
    f << text;
    f.close();
    if (!f) std::fprintf(stderr, "bench: cannot write %s\n", p.c_str());
    return static_cast<bool>(f);
}

// Adds one run's figures (llama-bench JSON, llama-batched-bench's table or
// test-backend-ops perf lines). "" or an error; a batched run's tests that
// could not be read are added as failed runs.
std::string collect(const Invocation & inv, bool is_op, const std::string & out, Meta & meta, std::vector<Run> & runs,
                    std::vector<OpSample> & op_samples) {
    std::string err;
    if (inv.batched()) {
        std::vector<Run> got = runs_from_batched(out, inv, err);
        runs.insert(runs.end(), got.begin(), got.end());
        return err;
    }
    if (is_op) {
        std::vector<OpSample> s = parse_op_perf(out, inv.config, inv.rep);
        if (s.empty()) return "test-backend-ops printed no perf lines";
        op_samples.insert(op_samples.end(), s.begin(), s.end());
        return "";
    }
    json j = json::parse(out, nullptr, false);
    std::vector<Run> got = runs_from_llama_bench(j, inv.config, inv.model_name, inv.rep, err);
    for (const Run & g : got) {
        if (g.test != inv.test) err = "llama-bench ran " + g.test + ", expected " + inv.test;
    }
    if (!err.empty()) return err;
    if (meta.cpu_info.empty()) meta.cpu_info = got[0].record.value("cpu_info", "");
    // The reference's device name: what an absolute (per-GPU) floor is matched against.
    if (inv.config == meta.reference) meta.gpu_info = got[0].record.value("gpu_info", "");
    runs.insert(runs.end(), got.begin(), got.end());
    return "";
}

// A batched run's stdout that could not be read, kept beside its log.
void keep_output(const std::string & log, const std::string & out) {
    fs::path saved = fs::path(log).replace_extension(".out");
    if (write_file(saved, out)) std::fprintf(stderr, "  its output: %s\n", saved.c_str());
}

std::string what_of(const Invocation & inv, bool is_op) {
    if (is_op) return inv.config + " test-backend-ops perf";
    std::string test = inv.test;
    if (inv.batched()) {
        test = "batched B=";
        for (std::size_t i = 0; i < inv.batch_sizes.size(); ++i) {
            test += (i ? "," : "") + std::to_string(inv.batch_sizes[i]);
        }
    }
    return inv.config + " " + inv.model_name + " " + test + " fa" + std::to_string(inv.fa);
}

// The library a `real` run's ggml loader took (its "loaded CPU backend from"
// line, CUDA for --kind cuda), noted once per distinct path: on the host the
// reference is whichever ggml-cpu variant the loader scored best for this CPU
// among those beside llama-bench (the pinned build's one, or npm's several).
void note_real_library(const std::string & log, const std::string & kind, std::vector<std::string> & notes) {
    const std::string what = kind == "cuda" ? "CUDA" : "CPU";
    const std::string key = "loaded " + what + " backend from ";
    std::ifstream f(log);
    for (std::string line; std::getline(f, line);) {
        const auto at = line.find(key);
        if (at == std::string::npos) continue;
        const std::string note = "`real` loaded its " + what + " backend from " + line.substr(at + key.size()) + ".";
        if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
        return;
    }
}

// Runs the matrix. Returns 0, or the exit code (1 error, 128+N signal).
int run_matrix(const BenchOptions & o, const PlanOptions & po, std::vector<Invocation> & plan_list, Meta & meta,
               std::vector<Run> & runs, std::vector<OpSample> & op_samples) {
    ContainerJanitor janitor(po.engine);  // removes every container on every way out
    fs::path logs = fs::path(po.work) / "logs";
    std::error_code ec;
    fs::create_directories(logs, ec);
    std::vector<Invocation> op_list;
    if (!o.ops.empty()) {
        if (std::string e = plan_ops(po, o.test_backend_ops, o.ops, o.ops_filter, op_list); !e.empty()) {
            std::fprintf(stderr, "bench: %s\n", e.c_str());
            return 2;
        }
    }
    std::vector<Invocation *> all;
    for (auto & i : plan_list) all.push_back(&i);
    for (auto & i : op_list) all.push_back(&i);
    Progress progress(all.size());
    for (std::size_t idx = 0; idx < all.size(); ++idx) {
        if (int sig = pending_signal(); sig != 0) {
            progress.interrupt_line();
            std::fprintf(stderr, "bench: stopped by signal %d\n", sig);
            return 128 + sig;
        }
        Invocation & inv = *all[idx];
        const bool is_op = idx >= plan_list.size();
        const std::string what = what_of(inv, is_op);
        progress.start(idx, what);
        std::string name;
        if (!po.container_image.empty()) {
            name = janitor.next_name();
            containerize(po, name, inv);
            janitor.started(name);
        }
        ProcSpec spec;
        spec.argv        = inv.argv;
        spec.env_set     = inv.env_set;
        spec.env_unset   = inv.env_unset;
        spec.timeout_s   = o.timeout;
        spec.stderr_path = (logs / (std::to_string(idx) + "-" + inv.config + ".log")).string();
        auto t0          = std::chrono::steady_clock::now();
        ProcResult r     = run_process(spec);
        double run_s     = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!name.empty()) janitor.remove(name);
        if (r.interrupted != 0 || pending_signal() != 0) {
            int sig = r.interrupted ? r.interrupted : pending_signal();
            progress.interrupt_line();
            std::fprintf(stderr, "bench: stopped by signal %d; removing %zu container(s)\n", sig, janitor.live());
            return 128 + sig;
        }
        if (!r.ok()) {
            progress.interrupt_line();
            std::fprintf(stderr, "bench: %s: %s\n  command: %s\n  log %s ends with:\n%s", what.c_str(),
                         r.describe().c_str(), format_command(inv).c_str(), spec.stderr_path.c_str(),
                         tail_of(spec.stderr_path, 8).c_str());
            if (!inv.batched()) return 1;
            std::vector<Run> failed = failed_batched_runs(inv, "llama-batched-bench " + r.describe() + ", log " +
                                                                   spec.stderr_path);
            runs.insert(runs.end(), failed.begin(), failed.end());
            keep_output(spec.stderr_path, r.out);
            progress.step(idx + 1, what + " FAILED", run_s);
            continue;
        }
        if (inv.config == "real" && !is_op) note_real_library(spec.stderr_path, po.kind, meta.notes);
        std::string err = collect(inv, is_op, r.out, meta, runs, op_samples);
        if (!err.empty()) {
            progress.interrupt_line();
            std::fprintf(stderr, "bench: %s: %s\n  command: %s\n", what.c_str(), err.c_str(), format_command(inv).c_str());
            if (!inv.batched()) return 1;
            keep_output(spec.stderr_path, r.out);
        }
        progress.step(idx + 1, what, run_s);
    }
    return 0;
}

// JSON, CSV, markdown and (with gnuplot) the PNG. false when a file could not be written.
bool write_report(const fs::path & out, const Meta & meta, const std::vector<Run> & runs,
                  const std::vector<Row> & rows, const std::vector<OpSample> & ops, std::string & md) {
    std::error_code ec;
    fs::create_directories(out, ec);
    json j = results_json(meta, runs, rows);
    if (!ops.empty()) j["ops"] = ops_json(ops);
    md = to_markdown(meta, rows);
    if (!ops.empty()) md += "\n" + ops_markdown(meta, ops);
    bool ok = write_file(out / "bench.json", j.dump(2) + "\n") && write_file(out / "bench.csv", to_csv(meta, runs)) &&
              write_file(out / "bench.md", md);
    Chart c = gnuplot_chart(meta, rows, (out / "bench.dat").string(), (out / "bench.png").string());
    ok = ok && write_file(out / "bench.dat", c.data) && write_file(out / "bench.gp", c.script);
    ProcSpec gp;
    gp.argv           = {"gnuplot", (out / "bench.gp").string()};
    gp.stderr_path    = (out / "gnuplot.log").string();
    gp.timeout_s      = 60;
    gp.ignore_signals = true;
    ProcResult r = run_process(gp);
    if (fs::file_size(gp.stderr_path, ec) == 0 && !ec) fs::remove(gp.stderr_path, ec);  // nothing to say
    if (r.exit_code == 127 || r.spawn_failed) {
        std::fprintf(stderr, "bench: gnuplot is not installed (Debian: apt-get install gnuplot-nox): no bench.png; "
                             "JSON, CSV and markdown were written\n");
    } else if (!r.ok()) {
        std::fprintf(stderr, "bench: gnuplot %s (see %s): no bench.png\n", r.describe().c_str(), gp.stderr_path.c_str());
    }
    return ok;
}

int run_gate(const std::string & file, const std::vector<Row> & rows, const Meta & meta) {
    std::ifstream f(file);
    json j = json::parse(f, nullptr, false);
    std::vector<Floor> floors;
    std::string err = j.is_discarded() ? "not valid JSON" : parse_floors(j, floors);
    if (!err.empty()) {
        std::fprintf(stderr, "bench: gate file %s: %s\n", file.c_str(), err.c_str());
        return 2;
    }
    GateResult g = evaluate_gate(floors, rows, meta);
    for (const auto & s : g.held) std::printf("gate: held    %s\n", s.c_str());
    for (const auto & s : g.skipped) std::printf("gate: skipped %s\n", s.c_str());
    for (const auto & s : g.broken) std::printf("gate: BROKEN  %s\n", s.c_str());
    if (g.held.empty() && g.broken.empty()) {
        std::printf("gate: FAILED: no floor in %s applies to this run (kind %s)\n", file.c_str(), meta.kind.c_str());
        return 3;
    }
    if (!g.pass()) {
        std::printf("gate: FAILED: %zu floor(s) broken\n", g.broken.size());
        return 3;
    }
    std::printf("gate: passed (%zu floor check(s) held)\n", g.held.size());
    return 0;
}

// Names of the LLAMA_ARG_* variables set here: llama-batched-bench's parser
// would read them (Note [batched runs]).
std::vector<std::string> llama_arg_names() {
    std::vector<std::string> out;
    for (char ** e = environ; e && *e; ++e) {
        std::string kv = *e;
        if (kv.rfind("LLAMA_ARG_", 0) == 0) out.push_back(kv.substr(0, kv.find('=')));
    }
    std::sort(out.begin(), out.end());
    return out;
}

PlanOptions plan_options(const BenchOptions & o, const std::vector<int> & npl) {
    PlanOptions po;
    po.kind = o.kind, po.configs = o.configs, po.models = o.models, po.n_prompt = o.n_prompt, po.n_gen = o.n_gen;
    po.fa = o.fa, po.reps = o.reps, po.threads = o.threads, po.extra = o.extra;
    po.llama_bench = o.llama_bench.empty() ? std::string(STANDIN_GGML_BIN_DIR) + "/llama-bench" : o.llama_bench;
    po.plugin      = o.plugin.empty() ? default_plugin_path() : o.plugin;
    po.real        = o.real.empty() ? real_library_default(po) : o.real;
    po.work        = o.work;
    po.container_image = o.container, po.engine = o.engine;
    po.batched_npl = npl, po.batched_npp = o.batched_npp, po.batched_ntg = o.batched_ntg;
    po.llama_batched_bench = o.llama_batched_bench.empty()
                                 ? (fs::path(po.llama_bench).parent_path() / kBatchedBenchName).string()
                                 : o.llama_batched_bench;
    if (!npl.empty()) po.llama_arg_env = llama_arg_names();
    std::error_code ec;
    for (std::string * p : {&po.llama_bench, &po.plugin, &po.real, &po.llama_batched_bench, &po.work}) {
        *p = fs::absolute(*p, ec).string();
    }
    for (auto & m : po.models) m = fs::absolute(m, ec).string();
    return po;
}

} // namespace

CLI::App * add_bench_command(CLI::App & app, BenchOptions & o) {
    auto * b = app.add_subcommand("bench", "llama-bench over configurations x models x tests, interleaved; "
                                           "JSON/CSV/markdown/PNG report and an optional gate");
    b->add_option("--kind", o.kind, "Device kind: host or cuda")->capture_default_str()
        ->check(CLI::IsMember({"host", "cuda"}));
    // The job daemon passes the worker's device: it names the kind.
    b->add_option("--device", o.device, "STANDIN_HOST0 (kind host) or STANDIN_CUDA0 (kind cuda)")
        ->check(CLI::IsMember({"STANDIN_HOST0", "STANDIN_CUDA0"}));
    b->add_option("--configs", o.configs, "real, standalone, interposed-none, interposed-all")
        ->delimiter(',')->capture_default_str();
    b->add_option("--reference", o.reference, "Configuration the ratios are to")->capture_default_str();
    b->add_option("-m,--model", o.models, "GGUF model (repeat or comma-separate)")->delimiter(',');
    b->add_option("-p,--n-prompt", o.n_prompt, "Prompt sizes, each a pp test (0: none)")->delimiter(',')->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    b->add_option("-n,--n-gen", o.n_gen, "Generation lengths, each a tg test (0: none)")->delimiter(',')->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    b->add_option("--fa", o.fa, "Flash attention values, 0 and/or 1")->delimiter(',')->capture_default_str();
    b->add_option("-r,--reps", o.reps, "Repetitions (each runs every configuration once)")->capture_default_str()
        ->check(CLI::PositiveNumber);
    b->add_option("-t,--threads", o.threads, "-t of llama-bench and llama-batched-bench (0: their default)")
        ->check(CLI::NonNegativeNumber);
    b->add_option("--llama-bench-args", o.extra, "More llama-bench arguments, e.g. \"-ub,256\"")->delimiter(',');
    b->add_option("--llama-bench", o.llama_bench, "llama-bench to run (default: the pinned build's)");
    b->add_option("--test-backend-ops", o.test_backend_ops, "test-backend-ops for --ops (default: beside llama-bench)");
    b->add_option("--plugin", o.plugin, "libggml-standin.so");
    b->add_option("--real", o.real, "Real library for the interposed configurations (default: libggml-cpu.so or "
                                    "libggml-cuda.so beside llama-bench, the one `real` loads)");
    b->add_option("--batched", o.batched,
                                  "Also run llama-batched-bench at these sequence counts, e.g. 1,2,4,8,16,32 "
                                  "(tests batchedB<B>-pp<NPP>, batchedB<B>-tg<NTG>)");
    b->add_option("--batched-npp", o.batched_npp, "Prompt tokens per sequence for --batched")->capture_default_str()
        ->check(CLI::PositiveNumber);
    b->add_option("--batched-ntg", o.batched_ntg, "Generated tokens per sequence for --batched")->capture_default_str()
        ->check(CLI::PositiveNumber);
    b->add_option("--llama-batched-bench", o.llama_batched_bench, "llama-batched-bench for --batched (default: beside llama-bench)");
    b->add_option("--ops", o.ops, "Also time these ops with test-backend-ops perf (per-op tables)")->delimiter(',');
    b->add_option("--ops-filter", o.ops_filter, "test-backend-ops -p REGEX for --ops");
    b->add_option("--out", o.out, "Report folder (default: bench-<UTC time>)");
    b->add_option("--work", o.work, "Scratch folder: logs, app folder (default: OUT/work)");
    b->add_option("--gate", o.gate, "Floors file: exit 3 and name each broken floor");
    b->add_option("--from", o.from, "Re-report (and re-gate) a bench.json instead of running");
    b->add_option("--timeout", o.timeout, "Seconds one run may take")->capture_default_str()->check(CLI::PositiveNumber);
    b->add_flag("--print-commands", o.print_commands, "Print the commands in run order and exit");
    b->add_option("--container", o.container, "Run each benchmark in a container of this image");
    b->add_option("--engine", o.engine, "Container engine: docker or podman")->capture_default_str()
        ->check(CLI::IsMember({"docker", "podman"}));
    return b;
}

namespace {

// Lines for the report on how the batched tests ran.
std::vector<std::string> batched_notes(const PlanOptions & po) {
    if (po.batched_npl.empty()) return {};
    const std::string npp = std::to_string(po.batched_npp), ntg = std::to_string(po.batched_ntg);
    std::vector<std::string> n = {
        "`batchedB<B>-pp" + npp + "`, `batchedB<B>-tg" + ntg + "`: llama-batched-bench with B sequences of " + npp +
        " prompt and " + ntg + " generated tokens each (-c " + std::to_string(batched_context(po)) +
        " -b 2048 -ub 512), one run per configuration, model, fa and repetition; t/s of all B sequences together "
        "(its S_PP and S_TG)."};
    if (fs::path(po.llama_batched_bench).parent_path() != fs::path(po.llama_bench).parent_path()) {
        n.push_back("llama-batched-bench (" + po.llama_batched_bench + ") is not beside llama-bench: its `real` runs "
                    "load the libraries beside it, the interposed ones " + po.real + ".");
    }
    if (!po.extra.empty()) n.push_back("--llama-bench-args apply to llama-bench only, not to the batched runs.");
    return n;
}

// Plans the matrix, then prints it (--print-commands) or runs it. Returns the
// exit code; `report` says whether the report comes next.
int plan_and_run(const BenchOptions & o, const fs::path & out, Meta & meta, std::vector<Run> & runs,
                 std::vector<OpSample> & op_samples, bool & report) {
    report = false;
    BenchOptions oo = o;
    if (oo.work.empty()) oo.work = (out / "work").string();
    std::vector<int> npl;
    if (o.batched) {
        if (std::string e = parse_batch_sizes(*o.batched, npl); !e.empty()) {
            std::fprintf(stderr, "bench: --batched: %s\n", e.c_str());
            return 2;
        }
    }
    PlanOptions po = plan_options(oo, npl);
    std::vector<Invocation> list;
    if (std::string e = plan(po, list); !e.empty()) {
        std::fprintf(stderr, "bench: %s\n", e.c_str());
        return 2;
    }
    meta.kind = po.kind, meta.reference = o.reference, meta.reps = o.reps, meta.configs = po.configs;
    meta.date  = now_utc("%Y-%m-%d %H:%M UTC");
    meta.notes = batched_notes(po);
    if (std::find(po.configs.begin(), po.configs.end(), o.reference) == po.configs.end()) {
        std::fprintf(stderr, "bench: reference '%s' is not among --configs: no ratios\n", o.reference.c_str());
    }
    const bool host_app = po.kind == "host" && std::any_of(po.configs.begin(), po.configs.end(), [](auto & c) {
        return c.rfind("interposed-", 0) == 0;
    });
    if (o.print_commands) {
        if (host_app) {
            std::string batched = npl.empty() ? "" : ", " + po.llama_batched_bench;
            std::printf("# app folder %s: copies of %s%s, %s and %s (as libggml-cpu-standin.so)\n",
                        app_folder(po).c_str(), po.llama_bench.c_str(), batched.c_str(), po.real.c_str(),
                        po.plugin.c_str());
        }
        std::vector<Invocation> ops;
        if (!o.ops.empty()) plan_ops(po, o.test_backend_ops, o.ops, o.ops_filter, ops);
        list.insert(list.end(), ops.begin(), ops.end());
        for (auto & inv : list) {
            if (!po.container_image.empty()) containerize(po, "standin-bench-NAME", inv);
            std::printf("%s\n", format_command(inv).c_str());
        }
        return 0;
    }
    for (const auto & m : po.models) {
        if (!fs::exists(m)) {
            std::fprintf(stderr, "bench: no model at %s\n", m.c_str());
            return 2;
        }
    }
    if (!npl.empty() && access(po.llama_batched_bench.c_str(), X_OK) != 0) {
        std::fprintf(stderr, "bench: --batched: no llama-batched-bench at %s (give its path with "
                             "--llama-batched-bench; the pinned CPU build does not build it)\n",
                     po.llama_batched_bench.c_str());
        return 2;
    }
    // The app folder holds copies of the llama tools, the real library and the
    // plugin: scratch, removed on every way out of here (the logs stay).
    struct RemoveApp {
        std::string dir;
        ~RemoveApp() {
            std::error_code ec;
            if (!dir.empty()) fs::remove_all(dir, ec);
        }
    } remove_app{host_app ? app_folder(po) : std::string()};
    if (host_app) {
        if (std::string e = prepare_app_folder(po); !e.empty()) {
            std::fprintf(stderr, "bench: %s\n", e.c_str());
            return 1;
        }
    }
    report = true;
    return run_matrix(oo, po, list, meta, runs, op_samples);
}

int bench_main(const BenchOptions & o) {
    Meta meta;
    std::vector<Run> runs;
    std::vector<OpSample> op_samples;
    fs::path out = o.out.empty() ? fs::path("bench-" + now_utc("%Y%m%d-%H%M%S")) : fs::path(o.out);
    if (!o.from.empty()) {
        std::ifstream f(o.from);
        json j = json::parse(f, nullptr, false);
        std::string err = j.is_discarded() ? "not valid JSON" : read_results(j, meta, runs);
        if (err.empty() && j.contains("ops")) err = read_ops_json(j["ops"], op_samples);
        if (!err.empty()) {
            std::fprintf(stderr, "bench: %s: %s\n", o.from.c_str(), err.c_str());
            return 2;
        }
    } else {
        bool report = false;
        int  rc     = plan_and_run(o, out, meta, runs, op_samples, report);
        if (!report || rc != 0) return rc;
    }
    std::vector<Row> rows = aggregate(runs, meta.reference);
    std::string md;
    if (!write_report(out, meta, runs, rows, op_samples, md)) return 1;
    std::printf("%s\nbench: wrote %s/bench.{json,csv,md,png}\n", md.c_str(), out.c_str());
    int rc = o.gate.empty() ? 0 : run_gate(o.gate, rows, meta);
    const auto failed = std::count_if(runs.begin(), runs.end(), [](const Run & r) { return !r.error.empty(); });
    if (failed > 0) {
        std::fprintf(stderr, "bench: %ld test(s) failed; the report marks them (FAILED, or \"N failed\" beside a "
                             "figure)\n", static_cast<long>(failed));
        if (rc == 0) rc = 1;
    }
    return rc;
}

} // namespace

int cmd_bench(const BenchOptions & opt) {
    BenchOptions o = opt;
    if (!o.device.empty()) o.kind = o.device == "STANDIN_CUDA0" ? "cuda" : "host";
    install_signal_handlers();
    // Caught here so that the stack unwinds and every container is removed
    // (an uncaught exception may terminate without unwinding).
    try {
        return bench_main(o);
    } catch (const std::exception & e) {
        std::fprintf(stderr, "bench: %s\n", e.what());
        return 1;
    }
}

} // namespace standin::tools
