#include "diag/config.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "diag/log.h"

extern char ** environ;

namespace standin::diag {

namespace {

// Parses a whole decimal integer in [lo, hi]; anything else leaves `out` alone
// and records why.
void read_int(const EnvLookup & env, const char * name, long lo, long hi, int & out,
              std::vector<std::string> & warnings) {
    const char * raw = env(name);
    if (raw == nullptr || *raw == '\0') {
        return;
    }
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

void read_bool(const EnvLookup & env, const char * name, bool & out, std::vector<std::string> & warnings) {
    const char * raw = env(name);
    if (raw == nullptr || *raw == '\0') {
        return;
    }
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

} // namespace

std::string Config::summary() const {
    std::ostringstream s;
    s << "host_devices=" << host_devices << " threads=" << (threads == 0 ? std::string("auto") : std::to_string(threads))
      << " cuda=" << (cuda ? "on" : "off") << " offload_min_batch=" << offload_min_batch
      << " debug=" << (debug ? "on" : "off") << " score=" << score
      << " cuda_graphs=" << (cuda_graphs ? "on" : "off") << " cublas=" << (cublas ? "on" : "off")
      << " fusion=" << (fusion ? "on" : "off") << " mode="
      << (mode == Mode::standalone ? "standalone" : mode == Mode::interpose ? "interpose" : "auto");
    if (!real.empty()) s << " real=" << real;
    if (local_ops != "none") s << " local_ops=" << local_ops;
    if (audit) s << " audit=on";
    if (crash_handler) s << " crash_handler=on";
    if (host_discrete) s << " host_discrete=on";
    if (profile) s << " profile=on";
    if (!fault.empty()) s << " FAULT=" << fault;
    return s.str();
}

Config parse_config(const EnvLookup & env) {
    Config c;
    read_int(env, "GGML_STANDIN_HOST_DEVICES", 0, 8, c.host_devices, c.warnings);
    read_bool(env, "GGML_STANDIN_HOST_DISCRETE", c.host_discrete, c.warnings);
    read_int(env, "GGML_STANDIN_THREADS", 0, 512, c.threads, c.warnings);
    read_bool(env, "GGML_STANDIN_CUDA", c.cuda, c.warnings);
    read_int(env, "GGML_OP_OFFLOAD_MIN_BATCH", 0, INT_MAX, c.offload_min_batch, c.warnings);
    read_bool(env, "GGML_STANDIN_DEBUG", c.debug, c.warnings);
    read_int(env, "GGML_STANDIN_SCORE", 0, 1000000, c.score, c.warnings);
    read_bool(env, "GGML_STANDIN_CUDA_GRAPHS", c.cuda_graphs, c.warnings);
    read_bool(env, "GGML_STANDIN_CUBLAS", c.cublas, c.warnings);
    read_bool(env, "GGML_STANDIN_FUSION", c.fusion, c.warnings);
    read_bool(env, "GGML_STANDIN_PROFILE", c.profile, c.warnings);
    if (const char * m = env("GGML_STANDIN_MODE"); m != nullptr && *m != '\0') {
        const std::string v(m);
        if (v == "auto") c.mode = Config::Mode::auto_;
        else if (v == "standalone") c.mode = Config::Mode::standalone;
        else if (v == "interpose") c.mode = Config::Mode::interpose;
        else c.warnings.push_back("GGML_STANDIN_MODE='" + v + "' is not one of auto|standalone|interpose; using default auto");
    }
    if (const char * r = env("GGML_STANDIN_REAL"); r != nullptr) c.real = r;
    if (const char * l = env("GGML_STANDIN_LOCAL_OPS"); l != nullptr && *l != '\0') c.local_ops = l;
    read_bool(env, "GGML_STANDIN_AUDIT", c.audit, c.warnings);
    read_bool(env, "GGML_STANDIN_CRASH_HANDLER", c.crash_handler, c.warnings);
    if (const char * f = env("GGML_STANDIN_FAULT"); f != nullptr && *f != '\0') {
        static const char * points[] = {"registry", "devices", "props", "backend", "alloc", "copy", "compute", "leak"};
        bool known = false;
        for (const char * p : points) known = known || std::strcmp(p, f) == 0;
        known = known || (std::strncmp(f, "perturb:", 8) == 0 && f[8] != '\0');  // perturb:OP
        if (known) {
            c.fault = f;
        } else {
            c.warnings.push_back(std::string("GGML_STANDIN_FAULT='") + f + "' is not a fault point; ignored");
        }
    }
    return c;
}

const std::vector<const char *> & config_var_names() {
    static const std::vector<const char *> names = {
        "GGML_STANDIN_HOST_DEVICES", "GGML_STANDIN_THREADS", "GGML_STANDIN_CUDA",
        "GGML_OP_OFFLOAD_MIN_BATCH", "GGML_STANDIN_DEBUG",   "GGML_STANDIN_SCORE",
        "GGML_STANDIN_MODE",         "GGML_STANDIN_REAL",    "GGML_STANDIN_LOCAL_OPS",
        "GGML_STANDIN_AUDIT",        "GGML_STANDIN_SWARM_SOCKET", "GGML_STANDIN_SWARM_DB",
        "GGML_STANDIN_CRASH_HANDLER", "GGML_STANDIN_FAULT",  "GGML_STANDIN_HOST_DISCRETE",
        "GGML_STANDIN_CUDA_GRAPHS",  "GGML_STANDIN_CUBLAS",  "GGML_STANDIN_PROFILE",
    };
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
