// Batched decode in `standin bench` (see bench_batched.h, Note [batched runs]).
#include "tools/standin/bench_batched.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

namespace standin::bench {

using nlohmann::json;

namespace {

// The column titles of llama-batched-bench's table, in its order.
const std::vector<std::string> kColumns = {"PP", "TG", "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s",
                                           "S t/s"};

std::string trim(const std::string & s) {
    std::size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The cells between the first and the last '|' of a table line, trimmed.
std::vector<std::string> cells_of(const std::string & line) {
    std::vector<std::string> out;
    std::size_t first = line.find('|'), last = line.rfind('|');
    if (first == std::string::npos || last == first) return out;
    std::stringstream is(line.substr(first + 1, last - first - 1));
    for (std::string c; std::getline(is, c, '|');) out.push_back(trim(c));
    return out;
}

bool to_int(const std::string & s, int & v) {
    const char * end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, v);
    return ec == std::errc() && p == end && !s.empty();
}

// strtod, so that the "inf" and "nan" printf writes are read as such (and then
// refused as speeds by the caller, with the value in the message).
bool to_double(const std::string & s, double & v) {
    if (s.empty()) return false;
    char * end = nullptr;
    v = std::strtod(s.c_str(), &end);
    return end == s.c_str() + s.size();
}

bool parse_line(const std::vector<std::string> & c, BatchedLine & l) {
    return c.size() == kColumns.size() && to_int(c[0], l.pp) && to_int(c[1], l.tg) && to_int(c[2], l.b) &&
           to_int(c[3], l.n_kv) && to_double(c[4], l.t_pp) && to_double(c[5], l.s_pp) && to_double(c[6], l.t_tg) &&
           to_double(c[7], l.s_tg) && to_double(c[8], l.t) && to_double(c[9], l.s);
}

// "llama_batched_bench: n_kv_max = 8192, n_batch = 2048, ..." -> {"n_kv_max": 8192, ...}
void parse_settings(const std::string & line, json & settings) {
    std::stringstream is(line.substr(line.find("n_kv_max")));
    for (std::string item; std::getline(is, item, ',');) {
        std::size_t eq = item.find('=');
        int v = 0;
        if (eq != std::string::npos && to_int(trim(item.substr(eq + 1)), v)) settings[trim(item.substr(0, eq))] = v;
    }
}

Run base_run(const Invocation & inv, int b, bool prompt) {
    Run r;
    r.config = inv.config, r.model = inv.model_name, r.fa = inv.fa, r.rep = inv.rep;
    r.test   = batched_test_name(b, prompt, prompt ? inv.n_prompt : inv.n_gen);
    r.record = {{"tool", "llama-batched-bench"}, {"pp", inv.n_prompt}, {"tg", inv.n_gen}, {"pl", b},
                {"flash_attn", inv.fa}};
    return r;
}

Run failed_run(const Invocation & inv, int b, bool prompt, const std::string & why) {
    Run r = base_run(inv, b, prompt);
    r.ts = std::numeric_limits<double>::quiet_NaN();  // never a figure, even where the error is overlooked
    r.error = why;
    r.record["error"] = why;
    return r;
}

std::string fmt_g(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
}

} // namespace

std::string parse_batch_sizes(const std::string & text, std::vector<int> & out) {
    out.clear();
    if (trim(text).empty()) return "no sequence count (expected a list such as 1,2,4,8)";
    std::stringstream is(text);
    std::set<int> seen;
    for (std::string item; std::getline(is, item, ',');) {
        std::string t = trim(item);
        int v = 0;
        if (t.empty()) return "an empty entry in '" + text + "'";
        if (!to_int(t, v)) return "'" + t + "' is not a whole number";
        if (v < 1 || v > kMaxBatchedSequences) {
            return "sequence count " + t + " is outside 1.." + std::to_string(kMaxBatchedSequences);
        }
        if (!seen.insert(v).second) return "sequence count " + t + " is given twice";
        out.push_back(v);
    }
    if (!text.empty() && text.back() == ',') return "an empty entry in '" + text + "'";
    return "";
}

std::string check_batched(const PlanOptions & opt) {
    if (opt.batched_npl.empty()) return "";
    std::set<int> seen;
    for (int b : opt.batched_npl) {
        if (b < 1 || b > kMaxBatchedSequences || !seen.insert(b).second) {
            return "--batched: sequence counts must be distinct, from 1 to " + std::to_string(kMaxBatchedSequences);
        }
    }
    if (opt.batched_npp < 1 || opt.batched_ntg < 1) return "--batched-npp and --batched-ntg must be at least 1";
    const std::int64_t cells = std::int64_t{kMaxBatchedSequences} * (std::int64_t{opt.batched_npp} + opt.batched_ntg);
    if (cells > std::numeric_limits<int>::max() / 2) return "--batched-npp + --batched-ntg is too large";
    return "";
}

int batched_context(const PlanOptions & opt) {
    int max_b = opt.batched_npl.empty() ? 1 : *std::max_element(opt.batched_npl.begin(), opt.batched_npl.end());
    int cells = max_b * (opt.batched_npp + opt.batched_ntg);
    return (cells + kBatchedCtxAlign - 1) / kBatchedCtxAlign * kBatchedCtxAlign;
}

std::string batched_test_name(int b, bool prompt, int tokens) {
    return "batchedB" + std::to_string(b) + (prompt ? "-pp" : "-tg") + std::to_string(tokens);
}

void configure_batched(const PlanOptions & opt, const Target & t, Invocation & inv) {
    inv.batch_sizes = opt.batched_npl;
    std::string npl;
    for (int b : opt.batched_npl) npl += (npl.empty() ? "" : ",") + std::to_string(b);
    inv.argv = {tool_path(opt, t, opt.llama_batched_bench, kBatchedBenchName), "-m", inv.model, "-dev", t.dev};
    if (t.dev != "none") {
        inv.argv.insert(inv.argv.end(), {"-ngl", "99"});  // after -dev: Note [batched runs]
    }
    inv.argv.insert(inv.argv.end(), {"-fa", inv.fa ? "on" : "off", "-c", std::to_string(batched_context(opt)),
                                     "-b", "2048", "-ub", "512", "-npp", std::to_string(inv.n_prompt),
                                     "-ntg", std::to_string(inv.n_gen), "-npl", npl});
    if (opt.threads > 0) {
        inv.argv.insert(inv.argv.end(), {"-t", std::to_string(opt.threads)});
    }
    inv.env_unset.insert(inv.env_unset.end(), opt.llama_arg_env.begin(), opt.llama_arg_env.end());
    inv.env_set.emplace_back("XDG_CONFIG_HOME", (std::filesystem::path(opt.work) / "no-llama-config").string());
}

std::string parse_batched_output(const std::string & text, std::vector<BatchedLine> & lines, json & settings) {
    lines.clear();
    settings = json::object();
    std::vector<std::string> problems;
    bool header = false;  // every '|' line after the header is a table line
    std::istringstream is(text);
    for (std::string line; std::getline(is, line);) {
        std::string t = trim(line);
        if (!header && t.find("n_kv_max = ") != std::string::npos) {
            parse_settings(t, settings);
            continue;
        }
        if (t.empty() || t[0] != '|') continue;
        std::vector<std::string> c = cells_of(t);
        if (c == kColumns) {
            header = true;
            continue;
        }
        if (!header) continue;
        if (std::all_of(c.begin(), c.end(), [](const std::string & x) {
                return !x.empty() && x.find_first_not_of('-') == std::string::npos;
            })) {
            continue;  // the |---|---| line
        }
        BatchedLine l;
        if (parse_line(c, l)) lines.push_back(l);
        else problems.push_back("malformed table line '" + t + "'");
    }
    if (!header) {
        problems.push_back("llama-batched-bench printed no results table (no '| PP | TG | B | N_KV | ...' header)");
    }
    std::string err;
    for (const auto & p : problems) err += (err.empty() ? "" : "; ") + p;
    return err;
}

std::vector<Run> runs_from_batched(const std::string & text, const Invocation & inv, std::string & err) {
    std::vector<BatchedLine> lines;
    json settings;
    err = parse_batched_output(text, lines, settings);
    auto add_problem = [&](const std::string & p) { err += (err.empty() ? "" : "; ") + p; };
    if (settings.contains("flash_attn") && settings["flash_attn"] != inv.fa) {
        std::string why = "ran with flash_attn = " + settings["flash_attn"].dump() + ", expected " +
                          std::to_string(inv.fa);
        add_problem(why);
        return failed_batched_runs(inv, why);
    }
    std::vector<Run> out;
    for (int b : inv.batch_sizes) {
        std::vector<const BatchedLine *> found;
        for (const auto & l : lines) {
            if (l.b == b && l.pp == inv.n_prompt && l.tg == inv.n_gen) found.push_back(&l);
        }
        if (found.size() != 1) {
            std::string why = found.empty() ? "no table line for B=" + std::to_string(b)
                                            : std::to_string(found.size()) + " table lines for B=" + std::to_string(b);
            add_problem(why);
            out.push_back(failed_run(inv, b, true, why));
            out.push_back(failed_run(inv, b, false, why));
            continue;
        }
        const BatchedLine & l = *found[0];
        for (bool prompt : {true, false}) {
            const double ts = prompt ? l.s_pp : l.s_tg;
            if (!std::isfinite(ts) || ts <= 0) {
                std::string why = std::string(prompt ? "S_PP" : "S_TG") + " t/s is " + fmt_g(ts) + " for B=" +
                                  std::to_string(b);
                add_problem(why);
                out.push_back(failed_run(inv, b, prompt, why));
                continue;
            }
            Run r = base_run(inv, b, prompt);
            for (const auto & [k, v] : settings.items()) {
                if (k != "flash_attn") r.record[k] = v;
            }
            r.record.update({{"n_kv", l.n_kv}, {"t_pp", l.t_pp}, {"speed_pp", l.s_pp}, {"t_tg", l.t_tg},
                             {"speed_tg", l.s_tg}, {"t", l.t}, {"speed", l.s}, {"avg_ts", ts},
                             {"samples_ts", json::array({ts})}});
            r.ts = ts;
            out.push_back(std::move(r));
        }
    }
    return out;
}

std::vector<Run> failed_batched_runs(const Invocation & inv, const std::string & why) {
    std::vector<Run> out;
    for (int b : inv.batch_sizes) {
        out.push_back(failed_run(inv, b, true, why));
        out.push_back(failed_run(inv, b, false, why));
    }
    return out;
}

} // namespace standin::bench
