// Aggregation, the gate and the writers of `standin bench` (see bench_report.h).
#include "tools/standin/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace standin::bench {

using nlohmann::json;

namespace {

using Key = std::tuple<std::string, std::string, int>;  // model, test, fa

// Nearest-rank quantile: the smallest value with at least q of the values at or below it.
double quantile(std::vector<double> v, double q) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    std::size_t rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size(), std::max<std::size_t>(rank, 1)) - 1];
}

double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string fmt(const char * f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), f, v);
    return buf;
}

// t/s with about four significant digits.
std::string fmt_ts(double v) {
    return v >= 1000 ? fmt("%.0f", v) : v >= 100 ? fmt("%.1f", v) : v >= 10 ? fmt("%.2f", v) : fmt("%.3f", v);
}

std::string csv_cell(const json & v) {
    std::string s;
    if (v.is_string()) s = v.get<std::string>();
    else if (v.is_array()) {
        for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ";" : "") + (v[i].is_string() ? v[i].get<std::string>() : v[i].dump());
    } else if (!v.is_null()) s = v.dump();
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

bool matches(const std::string & pattern, const std::string & value) { return pattern == "*" || pattern == value; }

std::string floor_name(const Floor & f) {
    if (!f.name.empty()) return f.name;
    return f.kind + "/" + f.model + "/" + f.test + "/fa" + (f.fa < 0 ? std::string("*") : std::to_string(f.fa)) + "/" +
           f.config;
}

} // namespace

std::vector<Run> runs_from_llama_bench(const json & records, const std::string & config, const std::string & model,
                                       int rep, std::string & err) {
    std::vector<Run> out;
    if (!records.is_array() || records.empty()) {
        err = "llama-bench printed no JSON records";
        return out;
    }
    for (const auto & r : records) {
        if (!r.is_object() || !r.contains("avg_ts") || !r.contains("n_prompt") || !r.contains("n_gen")) {
            err = "llama-bench record without avg_ts/n_prompt/n_gen";
            return {};
        }
        Run run;
        run.config = config, run.model = model, run.rep = rep, run.record = r;
        int p = r["n_prompt"].get<int>(), g = r["n_gen"].get<int>();
        run.test = p > 0 && g > 0 ? "pp" + std::to_string(p) + "+tg" + std::to_string(g)
                   : p > 0        ? "pp" + std::to_string(p)
                                  : "tg" + std::to_string(g);
        run.fa = r.value("flash_attn", 0);
        run.ts = r["avg_ts"].get<double>();
        out.push_back(std::move(run));
    }
    return out;
}

std::vector<Row> aggregate(const std::vector<Run> & runs, const std::string & reference) {
    // Cells in first-seen order, so tables follow the order the runs were planned in.
    std::vector<std::pair<std::string, Key>> order;
    std::map<std::pair<std::string, Key>, std::vector<const Run *>> cells;
    std::map<std::pair<Key, int>, double> ref_ts;  // (cell, rep) -> reference t/s
    std::map<Key, std::vector<double>> ref_all;
    for (const Run & r : runs) {
        auto k = std::make_pair(r.config, Key{r.model, r.test, r.fa});
        if (!cells.count(k)) order.push_back(k);
        cells[k].push_back(&r);
        if (r.config == reference && r.error.empty()) {
            ref_ts[{k.second, r.rep}] = r.ts;
            ref_all[k.second].push_back(r.ts);
        }
    }
    std::vector<Row> rows;
    for (const auto & k : order) {
        std::vector<const Run *> v;  // the successful runs
        Row row;
        row.config = k.first;
        std::tie(row.model, row.test, row.fa) = k.second;
        for (const Run * r : cells[k]) {
            if (r->error.empty()) v.push_back(r);
            else if (row.failed++ == 0) row.error = r->error;
        }
        row.n = static_cast<int>(v.size());
        if (v.empty()) {
            row.mean = row.stddev = row.q75 = NAN;
            rows.push_back(row);
            continue;
        }
        std::vector<double> ts;
        for (const Run * r : v) row.mean += r->ts, ts.push_back(r->ts);
        row.q75 = quantile(ts, 0.75);
        row.mean /= row.n;
        double ss = 0;
        for (const Run * r : v) ss += (r->ts - row.mean) * (r->ts - row.mean);
        row.stddev = row.n > 1 ? std::sqrt(ss / (row.n - 1)) : 0;
        std::vector<double> ratios;
        for (const Run * r : v) {
            auto it = ref_ts.find({k.second, r->rep});
            if (it != ref_ts.end() && it->second > 0) ratios.push_back(r->ts / it->second);
        }
        row.paired_ratio = median(ratios);
        if (auto it = ref_all.find(k.second); it != ref_all.end()) {
            double ref = quantile(it->second, 0.75);
            if (ref > 0) row.ratio = row.q75 / ref;
        }
        rows.push_back(row);
    }
    return rows;
}

json results_json(const Meta & meta, const std::vector<Run> & runs, const std::vector<Row> & rows) {
    json j = {{"format", "standin-bench-1"}, {"kind", meta.kind}, {"reference", meta.reference},
              {"configs", meta.configs}, {"reps", meta.reps}, {"date", meta.date},
              {"cpu_info", meta.cpu_info}, {"gpu_info", meta.gpu_info}};
    j["runs"] = json::array();
    for (const Run & r : runs) {
        json rec = r.record;
        rec["config"] = r.config, rec["model_name"] = r.model, rec["test"] = r.test, rec["rep"] = r.rep;
        if (!r.error.empty()) rec["error"] = r.error;
        j["runs"].push_back(rec);
    }
    if (!meta.notes.empty()) j["notes"] = meta.notes;
    j["summary"] = json::array();
    auto num = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
    for (const Row & r : rows) {
        json row = {{"config", r.config}, {"model", r.model}, {"test", r.test}, {"fa", r.fa}, {"n", r.n},
                    {"mean_ts", num(r.mean)}, {"stddev_ts", num(r.stddev)}, {"q75_ts", num(r.q75)},
                    {"ratio", num(r.ratio)}, {"paired_ratio", num(r.paired_ratio)}};
        if (r.failed > 0) row["failed"] = r.failed, row["error"] = r.error;
        j["summary"].push_back(row);
    }
    return j;
}

std::string read_results(const json & j, Meta & meta, std::vector<Run> & runs) {
    if (!j.is_object() || j.value("format", "") != "standin-bench-1" || !j.contains("runs")) {
        return "not a standin bench results file (format standin-bench-1)";
    }
    meta.kind      = j.value("kind", "");
    meta.reference = j.value("reference", "real");
    meta.reps      = j.value("reps", 0);
    meta.date      = j.value("date", "");
    meta.cpu_info  = j.value("cpu_info", "");
    meta.gpu_info  = j.value("gpu_info", "");
    meta.configs   = j.value("configs", std::vector<std::string>{});
    meta.notes     = j.value("notes", std::vector<std::string>{});
    runs.clear();
    for (const auto & rec : j["runs"]) {
        Run r;
        r.config = rec.value("config", ""), r.model = rec.value("model_name", ""), r.test = rec.value("test", "");
        r.fa = rec.value("flash_attn", 0), r.rep = rec.value("rep", 0), r.ts = rec.value("avg_ts", 0.0);
        r.error = rec.value("error", "");
        if (!r.error.empty()) r.ts = NAN;
        r.record = rec;
        for (const char * k : {"config", "model_name", "test", "rep"}) r.record.erase(k);
        if (r.config.empty() || r.model.empty() || r.test.empty()) return "a run without config/model_name/test";
        runs.push_back(std::move(r));
    }
    return "";
}

std::string to_csv(const Meta & meta, const std::vector<Run> & runs) {
    std::vector<std::string> fields;  // llama-bench's, in the order it prints them
    std::set<std::string>    seen;
    for (const Run & r : runs) {
        for (const auto & [k, v] : r.record.items()) {
            (void) v;
            if (seen.insert(k).second) fields.push_back(k);
        }
    }
    // nlohmann::json sorts object keys; llama-bench's order is lost, the set is kept.
    std::ostringstream os;
    os << "kind,config,rep,model_name,test";
    for (const auto & f : fields) os << "," << f;
    os << "\n";
    for (const Run & r : runs) {
        os << csv_cell(meta.kind) << "," << csv_cell(r.config) << "," << r.rep << "," << csv_cell(r.model) << ","
           << csv_cell(r.test);
        for (const auto & f : fields) os << "," << (r.record.contains(f) ? csv_cell(r.record[f]) : "");
        os << "\n";
    }
    return os.str();
}

std::string to_markdown(const Meta & meta, const std::vector<Row> & rows) {
    std::map<std::pair<std::string, Key>, const Row *> at;
    std::vector<Key> keys;
    for (const Row & r : rows) {
        Key k{r.model, r.test, r.fa};
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
        at[{r.config, k}] = &r;
    }
    std::ostringstream os;
    os << "# standin bench (" << meta.kind << ")\n\n";
    os << "- date: " << meta.date << "; repetitions: " << meta.reps << "\n";
    if (!meta.cpu_info.empty()) os << "- CPU: " << meta.cpu_info << "\n";
    if (!meta.gpu_info.empty()) os << "- device: " << meta.gpu_info << "\n";
    for (const auto & n : meta.notes) os << "- " << n << "\n";
    os << "- t/s: mean ± standard deviation over the repetitions. Ratio (×): the upper quartile of the "
          "repetitions' t/s divided by the reference's (`" << meta.reference << "`); in brackets, the median over "
          "repetitions of t/s divided by the reference's t/s in the same repetition.\n\n";
    os << "| model | test | fa |";
    for (const auto & c : meta.configs) os << " " << c << " |";
    os << "\n|---|---|---|";
    for (std::size_t i = 0; i < meta.configs.size(); ++i) os << "---:|";
    os << "\n";
    for (const Key & k : keys) {
        os << "| " << std::get<0>(k) << " | " << std::get<1>(k) << " | " << std::get<2>(k) << " |";
        for (const auto & c : meta.configs) {
            auto it = at.find({c, k});
            if (it == at.end()) {
                os << " - |";
                continue;
            }
            const Row & r = *it->second;
            if (r.n == 0) {
                os << " FAILED |";
                continue;
            }
            os << " " << fmt_ts(r.mean) << " ± " << fmt_ts(r.stddev);
            if (c != meta.reference && !std::isnan(r.ratio)) {
                os << " (" << fmt("%.2f", r.ratio) << "× [" << fmt("%.2f", r.paired_ratio) << "])";
            }
            if (r.failed > 0) os << " (" << r.failed << " failed)";
            os << " |";
        }
        os << "\n";
    }
    bool first = true;
    for (const Row & r : rows) {
        if (r.failed == 0) continue;
        os << (first ? "\nFailed runs (no figure; a floor on the cell breaks):\n\n" : "") << "- " << r.config << " "
           << r.model << " " << r.test << " fa" << r.fa << ": " << r.failed << " of " << r.failed + r.n << " ("
           << r.error << ")\n";
        first = false;
    }
    return os.str();
}

Chart gnuplot_chart(const Meta & meta, const std::vector<Row> & rows, const std::string & data_path,
                    const std::string & png_path) {
    // Data: one line per (model, test, fa); per configuration mean, stddev, ratio.
    std::vector<Key> keys;
    std::map<std::pair<std::string, Key>, const Row *> at;
    for (const Row & r : rows) {
        Key k{r.model, r.test, r.fa};
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
        at[{r.config, k}] = &r;
    }
    std::ostringstream d;
    d << "# label";
    for (const auto & c : meta.configs) d << " " << c << "_mean " << c << "_sd " << c << "_ratio";
    d << "\n";
    for (const Key & k : keys) {
        d << "\"" << std::get<0>(k) << "\\n" << std::get<1>(k) << " fa" << std::get<2>(k) << "\"";
        for (const auto & c : meta.configs) {
            auto it = at.find({c, k});
            if (it == at.end() || it->second->n == 0) d << " NaN NaN NaN";
            else d << " " << it->second->mean << " " << it->second->stddev << " "
                   << (std::isnan(it->second->ratio) ? std::string("NaN") : fmt("%.4f", it->second->ratio));
        }
        d << "\n";
    }
    double lowest = 1e30;
    for (const Row & r : rows) {
        if (r.mean > 0) lowest = std::min(lowest, r.mean);
    }
    if (lowest == 1e30) lowest = 1;
    std::ostringstream s;
    s << "set terminal pngcairo size " << std::max(900, 160 * static_cast<int>(keys.size()) + 300)
      << ",1000 font 'sans,10'\n"
      << "set output '" << png_path << "'\n"
      << "set multiplot layout 2,1 title 'standin bench (" << meta.kind << "), " << meta.date << "'\n"
      << "set style data histogram\nset style fill solid 0.85 border -1\nset key outside right top\n"
      << "set grid ytics\nset xtics noenhanced\nset key noenhanced\nset bmargin 4\n"
      << "set style histogram errorbars gap 2 lw 1\nset logscale y\nset ylabel 'tokens/s (log scale)'\n"
      << "set yrange [" << fmt("%g", lowest / 2) << ":*]\n"  // an error bar below zero would stretch the axis
      << "set title 'throughput: mean and standard deviation over " << meta.reps << " repetitions'\n"
      << "plot ";
    // gnuplot gives up on a series without one valid point (a configuration
    // whose every run failed, ratios without a reference): those are left out.
    auto series = [&](bool ratio) {
        std::vector<std::size_t> out;
        for (std::size_t i = 0; i < meta.configs.size(); ++i) {
            if (std::any_of(rows.begin(), rows.end(), [&](const Row & r) {
                    return r.config == meta.configs[i] && r.n > 0 && (!ratio || !std::isnan(r.ratio));
                })) {
                out.push_back(i);
            }
        }
        return out;
    };
    const auto ts_series = series(false), ratio_series = series(true);
    for (std::size_t i : ts_series) {
        s << (i != ts_series[0] ? ", " : "") << "'" << data_path << "' using " << 2 + 3 * i << ":" << 3 + 3 * i
          << (i == ts_series[0] ? ":xtic(1)" : "") << " title '" << meta.configs[i] << "'";
    }
    if (ts_series.empty()) s << "1 with lines notitle";
    s << "\nunset logscale y\nset style histogram clustered gap 2\nset yrange [0:*]\n"
      << "set ylabel 'ratio to " << meta.reference << "'\n"
      << "set title 'ratio to " << meta.reference << ": upper quartiles of t/s (1 = same speed)'\n"
      << "plot ";
    for (std::size_t i : ratio_series) {
        s << "'" << data_path << "' using " << 4 + 3 * i << (i == ratio_series[0] ? ":xtic(1)" : "") << " title '"
          << meta.configs[i] << "', ";
    }
    s << "1 with lines dt 2 lc 'black' notitle\nunset multiplot\n";
    return {d.str(), s.str()};
}

std::string parse_floors(const json & j, std::vector<Floor> & out) {
    out.clear();
    if (!j.is_object() || !j.contains("floors") || !j["floors"].is_array()) return "expected {\"floors\": [...]}";
    for (const auto & f : j["floors"]) {
        Floor fl;
        try {
            fl.name      = f.value("name", "");
            fl.kind      = f.at("kind").get<std::string>();
            fl.model     = f.at("model").get<std::string>();
            fl.test      = f.at("test").get<std::string>();
            fl.config    = f.at("config").get<std::string>();
            fl.fa        = f.value("fa", -1);
            fl.min_ratio = f.value("min_ratio", -1.0);
            fl.min_ts    = f.value("min_ts", -1.0);
            fl.gpu       = f.value("gpu", "");
        } catch (const json::exception & e) {
            return "floor " + f.dump() + ": " + e.what();
        }
        if (fl.min_ratio < 0 && fl.min_ts < 0) return "floor " + floor_name(fl) + " has neither min_ratio nor min_ts";
        out.push_back(fl);
    }
    return "";
}

GateResult evaluate_gate(const std::vector<Floor> & floors, const std::vector<Row> & rows, const Meta & meta) {
    GateResult g;
    for (const Floor & f : floors) {
        const std::string name = floor_name(f);
        if (f.kind != meta.kind) continue;  // another device kind's floor
        bool any = false;
        for (const Row & r : rows) {
            if (r.config != f.config || !matches(f.model, r.model) || !matches(f.test, r.test) ||
                (f.fa >= 0 && f.fa != r.fa)) {
                continue;
            }
            any = true;
            const std::string cell = r.model + " " + r.test + " fa" + std::to_string(r.fa) + " " + r.config;
            if (r.failed > 0) {
                g.broken.push_back(name + ": " + cell + " failed in " + std::to_string(r.failed) + " of " +
                                   std::to_string(r.failed + r.n) + " runs (" + r.error + ")");
                continue;
            }
            if (f.min_ratio >= 0) {
                if (std::isnan(r.ratio)) {
                    g.broken.push_back(name + ": " + cell + " has no ratio (reference '" + meta.reference +
                                       "' has no successful run of it)");
                } else if (r.ratio < f.min_ratio) {
                    g.broken.push_back(name + ": " + cell + " ratio " + fmt("%.3f", r.ratio) + " < floor " +
                                       fmt("%.3f", f.min_ratio) + " (" + fmt_ts(r.mean) + " t/s)");
                } else {
                    g.held.push_back(name + ": " + cell + " ratio " + fmt("%.3f", r.ratio) + " >= " + fmt("%.3f", f.min_ratio));
                }
            }
            if (f.min_ts >= 0) {
                if (!f.gpu.empty() && meta.gpu_info.find(f.gpu) == std::string::npos) {
                    g.skipped.push_back(name + ": t/s floor is for GPU '" + f.gpu + "', this is '" + meta.gpu_info + "'");
                } else if (r.mean < f.min_ts) {
                    g.broken.push_back(name + ": " + cell + " " + fmt_ts(r.mean) + " t/s < floor " + fmt_ts(f.min_ts) + " t/s");
                } else {
                    g.held.push_back(name + ": " + cell + " " + fmt_ts(r.mean) + " t/s >= " + fmt_ts(f.min_ts));
                }
            }
        }
        if (!any) g.skipped.push_back(name + ": not measured in this run");
    }
    return g;
}

} // namespace standin::bench
