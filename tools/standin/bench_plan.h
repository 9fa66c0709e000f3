// The run matrix of `standin bench`: which command each configuration runs,
// with which environment, in which order. Pure (no processes, no files) except
// for prepare_app_folder, so --print-commands and the unit tests see exactly
// what a real run would execute.
//
// Configurations (Note [bench configurations]):
//   real            the real library alone. host: llama-bench -dev none (ggml-cpu
//                   from llama-bench's folder); cuda: -dev CUDA0 (ggml-cuda there).
//   standalone      GGML_BACKEND_PATH=plugin, -dev STANDIN_HOST0 / STANDIN_CUDA0.
//   interposed-none standin in front of the real library, every op forwarded,
//   interposed-all  or every op it supports on its own kernels (LOCAL_OPS).
//                   cuda: path mode, GGML_STANDIN_REAL=libggml-cuda.so,
//                   -dev STANDIN_CUDA0. host: llama-bench refuses CPU-type
//                   devices in -dev, and the interposed CPU device is CPU-type,
//                   so the host kind uses replace mode instead: an app folder
//                   with a copy of llama-bench, the real libggml-cpu.so and the
//                   plugin as libggml-cpu-standin.so; ggml's loader picks
//                   standin, which interposes that same real library (-dev none).
// The reference (default: real) and the interposed configurations thus run the
// same real library, so their ratio measures standin alone. llama-batched-bench
// (--batched; bench_batched.h) gets each configuration's device and environment
// from the same place, target_of: llama.cpp's common argument parser refuses
// CPU-type devices in -dev as llama-bench does, so its host interposed runs use
// the same app folder, which then also holds a copy of llama-batched-bench.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace standin::bench {

struct PlanOptions {
    std::string              kind = "host";          // host | cuda
    std::vector<std::string> configs;                // see above
    std::vector<std::string> models;                 // .gguf paths
    std::vector<int>         n_prompt{512};          // each a pp test
    std::vector<int>         n_gen{128};             // each a tg test
    std::vector<int>         fa{0, 1};
    int                      reps    = 3;
    int                      threads = 0;            // 0: llama-bench's default
    std::string              llama_bench;            // path
    std::string              plugin;                 // libggml-standin.so
    std::string              real;                   // real library for the interposed configs
    std::string              work;                   // scratch folder (app folder, logs)
    std::vector<std::string> extra;                  // more llama-bench arguments
    std::string              container_image;        // empty: run directly
    std::string              engine = "podman";      // docker | podman
    // Batched decode: one llama-batched-bench run per (configuration, model,
    // fa, repetition) covering every sequence count (bench_batched.h).
    std::vector<int>         batched_npl;            // sequence counts; empty: no batched runs
    int                      batched_npp = 128;      // prompt tokens per sequence
    int                      batched_ntg = 32;       // generated tokens per sequence
    std::string              llama_batched_bench;    // path
    std::vector<std::string> llama_arg_env;          // LLAMA_ARG_* names set in the caller's environment
};

struct Invocation {
    std::string config, model, model_name, test;     // test: "pp512", "tg128"; "batched" (several tests)
    int         n_prompt = 0, n_gen = 0, fa = 0, rep = 0;
    std::vector<int> batch_sizes;                    // llama-batched-bench's -npl; empty for llama-bench
    bool        batched() const { return !batch_sizes.empty(); }
    std::vector<std::string>                         argv;
    std::vector<std::pair<std::string, std::string>> env_set;
    std::vector<std::string>                         env_unset;
};

// How a configuration reaches its device, whatever the tool (Note [bench configurations]).
struct Target {
    std::string dev;                                 // -dev: none, CUDA0, STANDIN_HOST0, STANDIN_CUDA0
    bool        replace_mode = false;                // host interposed: run the tool's copy in the app folder
    std::vector<std::pair<std::string, std::string>> env_set;
};
// "" or an error message (an unknown configuration).
std::string target_of(const PlanOptions & opt, const std::string & config, Target & out);
// The file names of the tools' copies in the app folder.
inline constexpr const char * kLlamaBenchName   = "llama-bench";
inline constexpr const char * kBatchedBenchName = "llama-batched-bench";
// The tool to run for a target: `exe`, or its copy `name` in the app folder in replace mode.
std::string tool_path(const PlanOptions & opt, const Target & t, const std::string & exe, const char * name);
// Variables that choose which library a run loads: cleared for every run.
const std::vector<std::string> & scrubbed_env();
// standin's environment in path mode (GGML_BACKEND_PATH) for standalone and
// interposed-*; empty for real.
std::vector<std::pair<std::string, std::string>> path_mode_env(const PlanOptions & opt, const std::string & config);

const std::vector<std::string> & known_configs();
std::string model_name(const std::string & path);   // file name without .gguf
std::string real_library_default(const PlanOptions & opt);
std::string app_folder(const PlanOptions & opt);    // host replace-mode folder

// Fills `out` in run order: for each repetition, each model and test (the
// batched run last), every configuration once (their order rotated each
// repetition), so slow drifts of the machine hit all configurations alike.
// Returns "" or an error message.
std::string plan(const PlanOptions & opt, std::vector<Invocation> & out);

// Wraps an invocation in `ENGINE run` for container mode; the caller names it.
void containerize(const PlanOptions & opt, const std::string & name, Invocation & inv);

// A shell line that reproduces the invocation.
std::string format_command(const Invocation & inv);

// Creates the host replace-mode app folder (copies; llama-batched-bench too
// when batched runs are planned). "" or an error message.
std::string prepare_app_folder(const PlanOptions & opt);

} // namespace standin::bench
