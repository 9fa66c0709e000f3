// Batched decode in `standin bench` (--batched): one llama-batched-bench run per
// (configuration, model, fa, repetition) that covers every sequence count B,
// and the parser of its markdown table. Each B gives two tests, named like
// llama-bench's so that floors and ratios treat them alike:
//   batchedB<B>-pp<NPP>  S_PP t/s: prompt tokens of all B sequences per second
//   batchedB<B>-tg<NTG>  S_TG t/s: generated tokens of all B sequences per second
//
// Note [batched runs]: what the command line of llama-batched-bench must say,
// from the pinned llama.cpp (tools/batched-bench, common/arg.cpp).
// - Device and environment: target_of, as for llama-bench (bench_plan.h). The
//   common parser refuses CPU-type devices in -dev as llama-bench does, so the
//   host interposed configurations run a copy in the app folder, with -dev none.
// - -dev comes before -ngl. The -ngl handler loads every backend when none is
//   loaded yet (llama_supports_gpu_offload), and the -dev handler loads them all
//   again unconditionally; in the other order each backend, standin included,
//   is registered twice. With -dev none there is nothing to offload to and -ngl
//   is left out, as for llama-bench.
// - The common parser also reads LLAMA_ARG_* variables and config files
//   (/etc/llama.cpp/config.ini and $XDG_CONFIG_HOME/llama.cpp/config.ini), which
//   llama-bench ignores. The caller's LLAMA_ARG_* are removed, and
//   XDG_CONFIG_HOME points at a folder that is never created, so a user's config
//   cannot change what is measured. (The one under /etc is not avoidable.)
// - -c CTX: llama-batched-bench silently skips a B whose B*(NPP+NTG) cells do
//   not fit the context, so CTX = max B * (NPP + NTG), rounded up to a multiple
//   of 256 (llama.cpp pads n_ctx to 256 anyway, so the command shows the size it
//   uses). Each sequence has its own KV stream (the tool's default), of at least
//   CTX / max B >= NPP + NTG cells. A B missing from the table is a failed test.
// - -fa on|off (the common parser's spelling), -b 2048 -ub 512 (its defaults,
//   stated), -t as for llama-bench (it sets the batch threads too). The
//   --llama-bench-args are llama-bench's and are not passed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/standin/bench_plan.h"
#include "tools/standin/bench_report.h"

namespace standin::bench {

inline constexpr int kMaxBatchedSequences = 256;  // llama.cpp's LLAMA_MAX_SEQ: n_seq_max above it is refused
inline constexpr int kBatchedCtxAlign     = 256;

// "1,2,4,8" -> {1, 2, 4, 8}. Each a whole number from 1 to kMaxBatchedSequences,
// no repeats. "" or an error message.
std::string parse_batch_sizes(const std::string & text, std::vector<int> & out);

// Checks opt's batched settings (sequence counts, NPP, NTG). "" or an error.
std::string check_batched(const PlanOptions & opt);

// -c for the batched runs (Note [batched runs]).
int batched_context(const PlanOptions & opt);

std::string batched_test_name(int b, bool prompt, int tokens);  // batchedB8-pp128, batchedB8-tg32

// Fills inv.argv, inv.batch_sizes and the batched additions to inv.env_set /
// inv.env_unset (which already hold the target's and the scrubbed variables).
void configure_batched(const PlanOptions & opt, const Target & t, Invocation & inv);

// One line of llama-batched-bench's table.
struct BatchedLine {
    int    pp = 0, tg = 0, b = 0, n_kv = 0;
    double t_pp = 0, s_pp = 0, t_tg = 0, s_tg = 0, t = 0, s = 0;
};

// Reads llama-batched-bench's stdout (markdown): the settings line
// (`llama_batched_bench: n_kv_max = ..., flash_attn = ...`) into `settings`
// when present, and every well-formed table line. Returns "" or what was wrong
// (no table; a malformed line, which is left out).
std::string parse_batched_output(const std::string & text, std::vector<BatchedLine> & lines,
                                 nlohmann::json & settings);

// The runs of one batched invocation: two per requested B. A B whose line is
// missing, malformed or not a positive finite speed gives failed runs (Run::error)
// rather than a figure; `err` then says why ("" when every B was measured).
std::vector<Run> runs_from_batched(const std::string & text, const Invocation & inv, std::string & err);

// Two failed runs per requested B, for a run that did not finish.
std::vector<Run> failed_batched_runs(const Invocation & inv, const std::string & why);

} // namespace standin::bench
