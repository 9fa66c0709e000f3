// Per-op tables for `standin bench --ops`: test-backend-ops perf on each
// configuration's device, interleaved by repetition like the llama-bench runs.
// Devices: real = CPU / CUDA0 (the library beside test-backend-ops);
// standalone = STANDIN_HOST0 / STANDIN_CUDA0; interposed-* = STANDIN_CPU /
// STANDIN_CUDA0 in path mode (test-backend-ops, unlike llama-bench, accepts a
// CPU-type device by name, so no app folder is needed).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/standin/bench_plan.h"
#include "tools/standin/bench_report.h"

namespace standin::bench {

struct OpSample {
    std::string config, op_case;  // op_case: test-backend-ops' case line, e.g. ADD(type=f32,ne=[...])
    int         rep = 0;
    double      us  = 0;          // microseconds per run
};

// Fills `out` with one test-backend-ops perf run per (repetition, configuration).
// tbo empty: test-backend-ops beside opt.llama_bench. "" or an error message.
std::string plan_ops(const PlanOptions & opt, const std::string & tbo, const std::vector<std::string> & ops,
                     const std::string & filter, std::vector<Invocation> & out);

// The "CASE: N runs - X us/run" lines of test-backend-ops perf output.
std::vector<OpSample> parse_op_perf(const std::string & text, const std::string & config, int rep);

nlohmann::json ops_json(const std::vector<OpSample> & s);
std::string    read_ops_json(const nlohmann::json & j, std::vector<OpSample> & out);  // "" or an error
// One row per case: mean us/run per configuration, and the reference's time
// divided by it (above 1: faster than the reference).
std::string    ops_markdown(const Meta & meta, const std::vector<OpSample> & s);

} // namespace standin::bench
