#include "diag/config.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "diag/log.h"
#include "ggml.h"

extern char ** environ;

namespace standin::diag {

namespace {

using Warnings = std::vector<std::string>;

// Parses a whole decimal integer in [lo, hi]; anything else leaves `out` alone
// and records why.
void read_int(const char * name, const char * raw, long lo, long hi, int & out, Warnings & warnings) {
    errno = 0;
    char * end = nullptr;
    long v = std::strtol(raw, &end, 10);
    const bool bad_syntax = end == raw || *end != '\0' || errno == ERANGE;
    if (bad_syntax || v < lo || v > hi) {
        std::ostringstream msg;
        msg << name << "='" << raw << "' is " << (bad_syntax ? "not an integer" : "out of range")
            << " (expected " << lo << ".." << hi << "); using default " << out;
        warnings.push_back(msg.str());
        return;
    }
    out = static_cast<int>(v);
}

void read_bool(const char * name, const char * raw, bool & out, Warnings & warnings) {
    static const char * yes[] = {"1", "on", "true", "yes"};
    static const char * no[]  = {"0", "off", "false", "no"};
    for (const char * y : yes) {
        if (strcasecmp(raw, y) == 0) { out = true; return; }
    }
    for (const char * n : no) {
        if (strcasecmp(raw, n) == 0) { out = false; return; }
    }
    std::ostringstream msg;
    msg << name << "='" << raw << "' is not a boolean (expected 0/1, on/off, true/false); using default "
        << (out ? 1 : 0);
    warnings.push_back(msg.str());
}

// One of `names` (index into the enum E, in order); else a warning and the default.
template <typename E, size_t N>
void read_choice(const char * name, const char * raw, const char * const (&names)[N], E & out, Warnings & warnings) {
    for (size_t i = 0; i < N; ++i) {
        if (std::strcmp(raw, names[i]) == 0) {
            out = E(i);
            return;
        }
    }
    std::string list;
    for (size_t i = 0; i < N; ++i) list += (i ? "|" : "") + std::string(names[i]);
    warnings.push_back(std::string(name) + "='" + raw + "' is not one of " + list + "; using default " +
                       names[size_t(out)]);
}

const char * const kModeNames[] = {"auto", "standalone", "interpose"};
const char * const kMmqNames[]  = {"auto", "off", "all"};
const char * const kSplitNames[] = {"auto", "1", "2", "4"};
const char * const kHostIsaNames[] = {"auto", "avx2", "avx512-vnni", "avx512-amx"};

// True when `name` is what ggml_op_desc calls some node: an op, a unary op or
// a GLU op (perturb:OP matches nodes by that name).
bool is_op_desc(const char * name) {
    for (int i = 0; i < GGML_OP_COUNT; ++i) {
        if (std::strcmp(ggml_op_name(static_cast<ggml_op>(i)), name) == 0) return true;
    }
    for (int i = 0; i < GGML_UNARY_OP_COUNT; ++i) {
        if (std::strcmp(ggml_unary_op_name(static_cast<ggml_unary_op>(i)), name) == 0) return true;
    }
    for (int i = 0; i < GGML_GLU_OP_COUNT; ++i) {
        if (std::strcmp(ggml_glu_op_name(static_cast<ggml_glu_op>(i)), name) == 0) return true;
    }
    return false;
}

void read_fault(const char * name, const char * f, std::string & out, Warnings & warnings) {
    static const char * points[] = {"registry", "devices", "props", "backend", "alloc", "copy", "compute", "leak",
                                  "scratch"};
    bool known = false;
    for (const char * p : points) known = known || std::strcmp(p, f) == 0;
    // perturb:OP plants a wrong kernel for OP, decline:OP a gap in the op table.
    const bool per_op = std::strncmp(f, "perturb:", 8) == 0 || std::strncmp(f, "decline:", 8) == 0;
    if (per_op && !is_op_desc(f + 8)) {
        // A name no node has would plant nothing, silently.
        warnings.push_back(std::string(name) + "='" + f + "': '" + (f + 8) +
                           "' is not a ggml op name (as ggml_op_desc spells it, e.g. perturb:SOFT_MAX); ignored");
    } else if (known || per_op) {
        out = f;
    } else {
        warnings.push_back(std::string(name) + "='" + f + "' is not a fault point; ignored");
    }
}

const char * on_off(bool b) { return b ? "on" : "off"; }

// Note [config table]
// Every variable once: its name, how it is parsed into Config (given a
// non-empty value) and how the summary shows it (nullptr: never; entries
// that show only a non-default value test for it). parse_config, summary()
// and config_var_names() all walk this table; tests/diag/test_config.cpp
// checks that each name reaches a field and that the list has no strays.
struct Var {
    const char * name;
    void (*parse)(const char * name, const char * raw, Config & c, Warnings & w);
    void (*show)(const Config & c, std::ostream & s);
};

const Var kVars[] = {
    {"GGML_STANDIN_HOST_DEVICES", [](const char * n, const char * r, Config & c, Warnings & w) { read_int(n, r, 0, 8, c.host_devices, w); },
     [](const Config & c, std::ostream & s) { s << " host_devices=" << c.host_devices; }},
    {"GGML_STANDIN_THREADS", [](const char * n, const char * r, Config & c, Warnings & w) { read_int(n, r, 0, 512, c.threads, w); },
     [](const Config & c, std::ostream & s) { s << " threads=" << (c.threads == 0 ? std::string("auto") : std::to_string(c.threads)); }},
    {"GGML_STANDIN_CUDA", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.cuda, w); },
     [](const Config & c, std::ostream & s) { s << " cuda=" << on_off(c.cuda); }},
    {"GGML_OP_OFFLOAD_MIN_BATCH", [](const char * n, const char * r, Config & c, Warnings & w) { read_int(n, r, 0, INT_MAX, c.offload_min_batch, w); },
     [](const Config & c, std::ostream & s) { s << " offload_min_batch=" << c.offload_min_batch; }},
    {"GGML_STANDIN_DEBUG", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.debug, w); },
     [](const Config & c, std::ostream & s) { s << " debug=" << on_off(c.debug); }},
    {"GGML_STANDIN_SCORE", [](const char * n, const char * r, Config & c, Warnings & w) { read_int(n, r, 0, 1000000, c.score, w); },
     [](const Config & c, std::ostream & s) { s << " score=" << c.score; }},
    {"GGML_STANDIN_CUDA_GRAPHS", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.cuda_graphs, w); },
     [](const Config & c, std::ostream & s) { s << " cuda_graphs=" << on_off(c.cuda_graphs); }},
    {"GGML_STANDIN_CUBLAS", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.cublas, w); },
     [](const Config & c, std::ostream & s) { s << " cublas=" << on_off(c.cublas); }},
    {"GGML_STANDIN_FUSION", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.fusion, w); },
     [](const Config & c, std::ostream & s) { s << " fusion=" << on_off(c.fusion); }},
    {"GGML_STANDIN_MMQ", [](const char * n, const char * r, Config & c, Warnings & w) { read_choice(n, r, kMmqNames, c.mmq, w); },
     [](const Config & c, std::ostream & s) { if (c.mmq != Config::Mmq::auto_) s << " mmq=" << kMmqNames[int(c.mmq)]; }},
    {"GGML_STANDIN_PDL", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.pdl, w); },
     [](const Config & c, std::ostream & s) { if (!c.pdl) s << " pdl=off"; }},
    {"GGML_STANDIN_MMV_SPLIT", [](const char * n, const char * r, Config & c, Warnings & w) { read_choice(n, r, kSplitNames, c.mmv_split, w); },
     [](const Config & c, std::ostream & s) { if (c.mmv_split != Config::MmvSplit::auto_) s << " mmv_split=" << kSplitNames[int(c.mmv_split)]; }},
    {"GGML_STANDIN_CUDA_COMM", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.cuda_comm, w); },
     [](const Config & c, std::ostream & s) { if (c.cuda_comm) s << " cuda_comm=on"; }},
    {"GGML_STANDIN_CUDA_UNPROVEN", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.cuda_unproven, w); },
     [](const Config & c, std::ostream & s) { if (c.cuda_unproven) s << " cuda_unproven=on"; }},
    {"GGML_STANDIN_MODE", [](const char * n, const char * r, Config & c, Warnings & w) { read_choice(n, r, kModeNames, c.mode, w); },
     [](const Config & c, std::ostream & s) { s << " mode=" << kModeNames[int(c.mode)]; }},
    {"GGML_STANDIN_REAL", [](const char *, const char * r, Config & c, Warnings &) { c.real = r; },
     [](const Config & c, std::ostream & s) { if (!c.real.empty()) s << " real=" << c.real; }},
    {"GGML_STANDIN_LOCAL_OPS", [](const char *, const char * r, Config & c, Warnings &) { c.local_ops = r; },
     [](const Config & c, std::ostream & s) { if (c.local_ops != "none") s << " local_ops=" << c.local_ops; }},
    {"GGML_STANDIN_AUDIT", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.audit, w); },
     [](const Config & c, std::ostream & s) { if (c.audit) s << " audit=on"; }},
    {"GGML_STANDIN_CRASH_HANDLER", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.crash_handler, w); },
     [](const Config & c, std::ostream & s) { if (c.crash_handler) s << " crash_handler=on"; }},
    {"GGML_STANDIN_HOST_DISCRETE", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.host_discrete, w); },
     [](const Config & c, std::ostream & s) { if (c.host_discrete) s << " host_discrete=on"; }},
    {"GGML_STANDIN_HOST_REPACK", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.host_repack, w); },
     [](const Config & c, std::ostream & s) { if (!c.host_repack) s << " host_repack=off"; }},
    {"GGML_STANDIN_HOST_ISA", [](const char * n, const char * r, Config & c, Warnings & w) { read_choice(n, r, kHostIsaNames, c.host_isa, w); },
     [](const Config & c, std::ostream & s) { if (c.host_isa != Config::HostIsa::auto_) s << " host_isa=" << kHostIsaNames[int(c.host_isa)]; }},
    {"GGML_STANDIN_PROFILE", [](const char * n, const char * r, Config & c, Warnings & w) { read_bool(n, r, c.profile, w); },
     [](const Config & c, std::ostream & s) { if (c.profile) s << " profile=on"; }},
    {"GGML_STANDIN_FAULT", [](const char * n, const char * r, Config & c, Warnings & w) { read_fault(n, r, c.fault, w); },
     [](const Config & c, std::ostream & s) { if (!c.fault.empty()) s << " FAULT=" << c.fault; }},
    // Read by the tools (standin swarm, standind), not by the plugin.
    {"GGML_STANDIN_SWARM_SOCKET", nullptr, nullptr},
    {"GGML_STANDIN_SWARM_DB", nullptr, nullptr},
};

} // namespace

std::string Config::summary() const {
    std::ostringstream s;
    for (const Var & v : kVars) {
        if (v.show != nullptr) v.show(*this, s);
    }
    std::string out = s.str();
    return out.empty() ? out : out.substr(1);
}

Config parse_config(const EnvLookup & env) {
    Config c;
    for (const Var & v : kVars) {
        const char * raw = v.parse != nullptr ? env(v.name) : nullptr;
        if (raw != nullptr && *raw != '\0') v.parse(v.name, raw, c, c.warnings);
    }
    return c;
}

const std::vector<const char *> & config_var_names() {
    static const std::vector<const char *> names = [] {
        std::vector<const char *> n;
        for (const Var & v : kVars) n.push_back(v.name);
        return n;
    }();
    return names;
}

namespace {

// Unknown GGML_STANDIN_* variables: reported, they are probably typos.
void check_unknown_vars(Config & c) {
    for (char ** e = environ; e != nullptr && *e != nullptr; ++e) {
        if (std::strncmp(*e, "GGML_STANDIN_", 13) != 0) {
            continue;
        }
        std::string name(*e, std::strcspn(*e, "="));
        bool known = false;
        for (const char * k : config_var_names()) {
            known = known || name == k;
        }
        if (!known) {
            c.warnings.push_back("unknown variable " + name + " (ignored)");
        }
    }
}

void log_config(const Config & c) {
    for (const std::string & w : c.warnings) {
        SI_LOG_WARN("%s", w.c_str());
    }
    SI_LOG_INFO("%s", c.summary().c_str());
}

Config load_config() {
    Config c = parse_config([](const char * name) { return std::getenv(name); });
    check_unknown_vars(c);
    log_config(c);
    return c;
}

} // namespace

const Config & config() {
    // Function-local static: parsed on first use, from whichever thread, once.
    static const Config c = load_config();
    return c;
}

} // namespace standin::diag
