// Per-op tables of `standin bench --ops` (see bench_ops.h).
#include "tools/standin/bench_ops.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

namespace standin::bench {

using nlohmann::json;

namespace {

std::string fmt(const char * f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), f, v);
    return buf;
}

} // namespace

std::string plan_ops(const PlanOptions & opt, const std::string & tbo, const std::vector<std::string> & ops,
                     const std::string & filter, std::vector<Invocation> & out) {
    out.clear();
    const bool  cuda = opt.kind == "cuda";
    std::string exe  = tbo.empty()
        ? (std::filesystem::path(opt.llama_bench).parent_path() / "test-backend-ops").string() : tbo;
    std::string op_list;
    for (const auto & o : ops) op_list += (op_list.empty() ? "" : ",") + o;
    const std::size_t nc = opt.configs.size();
    for (int rep = 0; rep < opt.reps; ++rep) {
        for (std::size_t k = 0; k < nc; ++k) {
            Invocation inv;
            inv.config    = opt.configs[(k + static_cast<std::size_t>(rep)) % nc];
            inv.rep       = rep;
            inv.test      = "ops";
            inv.env_unset = scrubbed_env();
            // Path mode for every standin configuration, host interposed too:
            // test-backend-ops takes the CPU-type STANDIN_CPU by name.
            inv.env_set   = path_mode_env(opt, inv.config);
            std::string dev;
            if (inv.config == "real") {
                dev = cuda ? "CUDA0" : "CPU";
            } else if (inv.config == "standalone") {
                dev = cuda ? "STANDIN_CUDA0" : "STANDIN_HOST0";
            } else if (inv.config == "interposed-none" || inv.config == "interposed-all") {
                dev = cuda ? "STANDIN_CUDA0" : "STANDIN_CPU";
            } else {
                return "unknown configuration '" + inv.config + "'";
            }
            inv.argv = {exe, "perf", "-b", dev, "-o", op_list};
            if (!filter.empty()) inv.argv.insert(inv.argv.end(), {"-p", filter});
            out.push_back(std::move(inv));
        }
    }
    return "";
}

std::vector<OpSample> parse_op_perf(const std::string & text, const std::string & config, int rep) {
    static const std::regex line(R"(^\s+([A-Z_0-9]+\(.*\)):\s+\d+ runs -\s+([0-9.]+) us/run)");
    std::vector<OpSample> out;
    std::istringstream    is(text);
    for (std::string l; std::getline(is, l);) {
        std::smatch m;
        if (std::regex_search(l, m, line)) out.push_back({config, m[1].str(), rep, std::stod(m[2].str())});
    }
    return out;
}

json ops_json(const std::vector<OpSample> & s) {
    json a = json::array();
    for (const auto & x : s) a.push_back({{"config", x.config}, {"case", x.op_case}, {"rep", x.rep}, {"us_per_run", x.us}});
    return a;
}

std::string read_ops_json(const json & j, std::vector<OpSample> & out) {
    out.clear();
    if (!j.is_array()) return "\"ops\" is not an array";
    for (const auto & x : j) {
        if (!x.contains("config") || !x.contains("case") || !x.contains("us_per_run")) return "an op sample without config/case/us_per_run";
        out.push_back({x["config"].get<std::string>(), x["case"].get<std::string>(), x.value("rep", 0),
                       x["us_per_run"].get<double>()});
    }
    return "";
}

std::string ops_markdown(const Meta & meta, const std::vector<OpSample> & s) {
    std::vector<std::string> cases;
    std::map<std::pair<std::string, std::string>, std::pair<double, int>> sum;  // (case, config) -> (sum, n)
    for (const auto & x : s) {
        if (std::find(cases.begin(), cases.end(), x.op_case) == cases.end()) cases.push_back(x.op_case);
        auto & v = sum[{x.op_case, x.config}];
        v.first += x.us, v.second += 1;
    }
    auto mean = [&](const std::string & c, const std::string & cfg) {
        auto it = sum.find({c, cfg});
        return it == sum.end() ? -1.0 : it->second.first / it->second.second;
    };
    std::ostringstream os;
    os << "## Ops (test-backend-ops perf)\n\nus/run, mean over the repetitions; (×): the reference's (`"
       << meta.reference << "`) time divided by this one (above 1: faster).\n\n| case |";
    for (const auto & c : meta.configs) os << " " << c << " |";
    os << "\n|---|";
    for (std::size_t i = 0; i < meta.configs.size(); ++i) os << "---:|";
    os << "\n";
    for (const auto & c : cases) {
        os << "| `" << c << "` |";
        double ref = mean(c, meta.reference);
        for (const auto & cfg : meta.configs) {
            double m = mean(c, cfg);
            if (m < 0) {
                os << " - |";
                continue;
            }
            os << " " << fmt("%.2f", m);
            if (cfg != meta.reference && ref > 0 && m > 0) os << " (" << fmt("%.2f", ref / m) << "×)";
            os << " |";
        }
        os << "\n";
    }
    return os.str();
}

} // namespace standin::bench
