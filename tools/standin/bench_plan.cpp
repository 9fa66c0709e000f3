// The run matrix of `standin bench` (Note [bench configurations] in bench_plan.h).
#include "tools/standin/bench_plan.h"

#include "tools/standin/bench_batched.h"

#include <algorithm>
#include <filesystem>
#include <set>

namespace standin::bench {

namespace fs = std::filesystem;

namespace {

// Variables that would change which library a run loads: cleared for every
// run, then set per configuration, so the caller's shell cannot leak into one.
const std::vector<std::string> kScrubbed = {"GGML_BACKEND_PATH", "GGML_STANDIN_REAL", "GGML_STANDIN_LOCAL_OPS",
                                            "GGML_STANDIN_MODE"};

std::string parent_dir(const std::string & p) { return fs::path(p).parent_path().string(); }

bool interposed(const std::string & config) { return config == "interposed-none" || config == "interposed-all"; }

std::string local_ops(const std::string & config) { return config == "interposed-none" ? "none" : "all"; }

// The llama-bench command of one configuration.
void configure_llama_bench(const PlanOptions & opt, const Target & t, Invocation & inv) {
    inv.argv = {tool_path(opt, t, opt.llama_bench, kLlamaBenchName), "-m", inv.model, "-r", "1", "-o", "json", "-p",
                std::to_string(inv.n_prompt), "-n", std::to_string(inv.n_gen), "-fa", std::to_string(inv.fa),
                "-dev", t.dev};
    if (t.dev != "none") {
        inv.argv.insert(inv.argv.end(), {"-ngl", "99"});
    }
    if (opt.threads > 0) {
        inv.argv.insert(inv.argv.end(), {"-t", std::to_string(opt.threads)});
    }
    inv.argv.insert(inv.argv.end(), opt.extra.begin(), opt.extra.end());
}

std::string shell_quote(const std::string & s) {
    if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%")
                          == std::string::npos) {
        return s;
    }
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

} // namespace

const std::vector<std::string> & scrubbed_env() { return kScrubbed; }

std::vector<std::pair<std::string, std::string>> path_mode_env(const PlanOptions & opt, const std::string & config) {
    if (config == "standalone") return {{"GGML_BACKEND_PATH", opt.plugin}, {"GGML_STANDIN_MODE", "standalone"}};
    if (!interposed(config)) return {};
    return {{"GGML_BACKEND_PATH", opt.plugin}, {"GGML_STANDIN_MODE", "interpose"}, {"GGML_STANDIN_REAL", opt.real},
            {"GGML_STANDIN_LOCAL_OPS", local_ops(config)}};
}

std::string target_of(const PlanOptions & opt, const std::string & config, Target & out) {
    const bool cuda = opt.kind == "cuda";
    out = Target{};
    if (config == "real") {
        out.dev = cuda ? "CUDA0" : "none";
    } else if (config == "standalone") {
        out.env_set = path_mode_env(opt, config);
        out.dev     = cuda ? "STANDIN_CUDA0" : "STANDIN_HOST0";
    } else if (interposed(config) && cuda) {
        out.env_set = path_mode_env(opt, config);
        out.dev     = "STANDIN_CUDA0";
    } else if (interposed(config)) {
        // Replace mode: ggml's loader finds the plugin in the app folder.
        out.replace_mode = true;
        out.env_set      = {{"GGML_STANDIN_LOCAL_OPS", local_ops(config)}};
        out.dev          = "none";
    } else {
        return "unknown configuration '" + config + "' (known: real, standalone, interposed-none, interposed-all)";
    }
    return "";
}

std::string tool_path(const PlanOptions & opt, const Target & t, const std::string & exe, const char * name) {
    return t.replace_mode ? (fs::path(app_folder(opt)) / name).string() : exe;
}

const std::vector<std::string> & known_configs() {
    static const std::vector<std::string> k = {"real", "standalone", "interposed-none", "interposed-all"};
    return k;
}

std::string model_name(const std::string & path) {
    fs::path p(path);
    return p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
}

std::string real_library_default(const PlanOptions & opt) {
    return (fs::path(parent_dir(opt.llama_bench)) / (opt.kind == "cuda" ? "libggml-cuda.so" : "libggml-cpu.so"))
        .string();
}

std::string app_folder(const PlanOptions & opt) { return (fs::path(opt.work) / "app-host").string(); }

std::string plan(const PlanOptions & opt, std::vector<Invocation> & out) {
    out.clear();
    if (opt.kind != "host" && opt.kind != "cuda") return "--kind must be host or cuda, not '" + opt.kind + "'";
    if (opt.configs.empty() || opt.models.empty()) return "no configuration or no model to run";
    if (opt.reps < 1) return "--reps must be at least 1";
    std::set<std::string> names;
    for (const auto & m : opt.models) {
        if (!names.insert(model_name(m)).second) return "two models named '" + model_name(m) + "'";
    }
    struct Test { int p, n; bool batched; };
    std::vector<Test> tests;
    for (int p : opt.n_prompt) if (p > 0) tests.push_back({p, 0, false});
    for (int n : opt.n_gen) if (n > 0) tests.push_back({0, n, false});
    if (!opt.batched_npl.empty()) {
        if (std::string e = check_batched(opt); !e.empty()) return e;
        tests.push_back({opt.batched_npp, opt.batched_ntg, true});
    }
    if (tests.empty()) return "no pp, tg or batched test (all sizes are 0)";
    const std::size_t nc = opt.configs.size();
    for (int rep = 0; rep < opt.reps; ++rep) {
        for (const auto & model : opt.models) {
            for (const Test & t : tests) {
                for (int fa : opt.fa) {
                    for (std::size_t k = 0; k < nc; ++k) {
                        Invocation inv;
                        inv.config     = opt.configs[(k + static_cast<std::size_t>(rep)) % nc];
                        inv.model      = model;
                        inv.model_name = model_name(model);
                        inv.n_prompt   = t.p;
                        inv.n_gen      = t.n;
                        inv.test       = t.batched ? "batched"
                                         : t.p > 0 ? "pp" + std::to_string(t.p) : "tg" + std::to_string(t.n);
                        inv.fa         = fa;
                        inv.rep        = rep;
                        Target target;
                        if (std::string e = target_of(opt, inv.config, target); !e.empty()) return e;
                        inv.env_unset = kScrubbed;
                        inv.env_set   = target.env_set;
                        if (t.batched) configure_batched(opt, target, inv);
                        else configure_llama_bench(opt, target, inv);
                        out.push_back(std::move(inv));
                    }
                }
            }
        }
    }
    return "";
}

void containerize(const PlanOptions & opt, const std::string & name, Invocation & inv) {
    // Every file a run reads is mounted read-only at its own path, so the
    // command line stays the same inside; the image supplies only the OS.
    std::set<std::string> dirs = {parent_dir(inv.argv[0]), parent_dir(opt.llama_bench), parent_dir(inv.model)};
    if (!opt.plugin.empty()) dirs.insert(parent_dir(opt.plugin));
    if (!opt.real.empty()) dirs.insert(parent_dir(opt.real));
    std::vector<std::string> a = {opt.engine, "run", "--rm", "--name", name, "--network", "none"};
    for (const auto & d : dirs) {
        if (!d.empty()) a.insert(a.end(), {"-v", d + ":" + d + ":ro"});
    }
    for (const auto & [k, v] : inv.env_set) a.insert(a.end(), {"-e", k + "=" + v});
    if (opt.kind == "cuda") {
        if (opt.engine == "docker") a.insert(a.end(), {"--gpus", "all"});
        else a.insert(a.end(), {"--device", "nvidia.com/gpu=all"});
    }
    a.push_back(opt.container_image);
    a.insert(a.end(), inv.argv.begin(), inv.argv.end());
    inv.argv = std::move(a);
    inv.env_set.clear();
}

std::string format_command(const Invocation & inv) {
    std::string s;
    if (!inv.env_unset.empty() || !inv.env_set.empty()) {
        s = "env";
        for (const auto & k : inv.env_unset) {
            bool set = std::any_of(inv.env_set.begin(), inv.env_set.end(), [&](auto & kv) { return kv.first == k; });
            if (!set) s += " -u " + k;
        }
        for (const auto & [k, v] : inv.env_set) s += " " + shell_quote(k + "=" + v);
        s += " ";
    }
    for (std::size_t i = 0; i < inv.argv.size(); ++i) s += (i ? " " : "") + shell_quote(inv.argv[i]);
    return s;
}

std::string prepare_app_folder(const PlanOptions & opt) {
    std::error_code ec;
    fs::path app = app_folder(opt);
    fs::remove_all(app, ec);
    fs::create_directories(app, ec);
    if (ec) return "cannot create " + app.string() + ": " + ec.message();
    // Copies, not links: ggml's loader scans the folder of the resolved executable.
    std::vector<std::pair<std::string, std::string>> files = {
        {opt.llama_bench, kLlamaBenchName},
        {opt.real, fs::path(opt.real).filename().string()},
        {opt.plugin, "libggml-cpu-standin.so"},
    };
    if (!opt.batched_npl.empty()) files.emplace_back(opt.llama_batched_bench, kBatchedBenchName);
    for (const auto & [from, to] : files) {
        fs::copy_file(from, app / to, fs::copy_options::overwrite_existing, ec);
        if (ec) return "cannot copy " + from + " to " + (app / to).string() + ": " + ec.message();
    }
    return "";
}

} // namespace standin::bench
