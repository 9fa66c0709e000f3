// Results of `standin bench`: aggregation, ratios to the reference, the gate,
// and the JSON/CSV/markdown/gnuplot writers. Pure functions over the runs, so
// a stored results file can be re-reported and re-gated (--from). llama-bench
// and llama-batched-bench runs (bench_batched.h) are alike here: a test name,
// a t/s figure, the tool's fields as a record. A failed batched test is a run
// with an error and no figure: its row says FAILED and a floor on it breaks.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace standin::bench {

// One test of one run: its JSON record plus where it came from.
struct Run {
    std::string    config, model, test;  // model: file name without .gguf; test: pp512 / tg128 / batchedB8-tg32
    int            fa = 0, rep = 0;
    double         ts = 0;               // tokens per second (the record's avg_ts); NaN when failed
    nlohmann::json record;               // the tool's fields as it printed them (and "error" when failed)
    std::string    error;                // non-empty: the test failed and has no figure
};

// One (config, model, test, fa) cell over the repetitions.
struct Row {
    std::string config, model, test;
    int         fa = 0, n = 0;           // n: successful runs; the figures are over these
    int         failed = 0;              // runs of this cell that failed
    std::string error;                   // the first failed run's error
    double      mean = 0, stddev = 0;
    // The upper quartile of the repetitions' t/s (nearest rank: with 9 runs the
    // 7th slowest; with 2 or 3, the fastest). On a shared machine, interference
    // is sporadic and large (a descheduled thread halves a run), so a fast run
    // is the steadiest figure; the quartile rather than the maximum, so that
    // one run that is fast by accident does not set it.
    double      q75 = 0;
    // q75 / the reference's q75; the gate uses it. NaN without a reference.
    double      ratio = std::numeric_limits<double>::quiet_NaN();
    // Median over repetitions of (t/s / the reference's t/s in the same
    // repetition): pairs runs that were close in time; cancels slow drifts.
    double      paired_ratio = std::numeric_limits<double>::quiet_NaN();
};

// Splits llama-bench's -o json array into runs (pp and tg are separate records).
std::vector<Run> runs_from_llama_bench(const nlohmann::json & records, const std::string & config,
                                       const std::string & model, int rep, std::string & err);

std::vector<Row> aggregate(const std::vector<Run> & runs, const std::string & reference);

struct Meta {
    std::string kind, reference, cpu_info, gpu_info, date;
    int         reps = 0;
    std::vector<std::string> configs;    // column order
    std::vector<std::string> notes;      // lines for the report (how the batched tests ran, ...)
};

nlohmann::json   results_json(const Meta & meta, const std::vector<Run> & runs, const std::vector<Row> & rows);
// Reads a file written by results_json; fills meta and runs. "" or an error.
std::string      read_results(const nlohmann::json & j, Meta & meta, std::vector<Run> & runs);
std::string      to_csv(const Meta & meta, const std::vector<Run> & runs);
std::string      to_markdown(const Meta & meta, const std::vector<Row> & rows);

// gnuplot input: a data file and a script that draws t/s and ratio panels into png_path.
struct Chart { std::string data, script; };
Chart            gnuplot_chart(const Meta & meta, const std::vector<Row> & rows, const std::string & data_path,
                               const std::string & png_path);

// --- the gate --------------------------------------------------------------
// A floor: for runs of `kind`, the (model, test, fa, config) cell must reach
// min_ratio (to the reference) and, on a GPU whose name contains `gpu`, min_ts.
// model and test may be "*"; fa -1 matches both.
struct Floor {
    std::string name, kind, model, test, config, gpu;
    int         fa = -1;
    double      min_ratio = -1, min_ts = -1;  // < 0: not checked
};

std::string parse_floors(const nlohmann::json & j, std::vector<Floor> & out);  // "" or an error

struct GateResult {
    std::vector<std::string> broken, held, skipped;  // one line each
    bool pass() const { return broken.empty() && !held.empty(); }
};

GateResult evaluate_gate(const std::vector<Floor> & floors, const std::vector<Row> & rows, const Meta & meta);

} // namespace standin::bench
