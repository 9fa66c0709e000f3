// `standin probe`: walks standin's boot sequence one step at a time, the way a
// host application meets it, prints each step's result and time, stops at the
// first failure with its cause, and exits with a code that names the step:
//   10 load  11 registry  12 devices  13 props  14 backend  15 alloc
//   16 copy  17 compute  18 free       (0: every step passed, 2: bad usage)
// The crash handler is on, so a crash inside a step is reported with it.
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diag/crash.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "tools/standin/backends.h"
#include "tools/standin/commands.h"
#include "tools/standin/probe_ops.h"

namespace standin::tools {

namespace {

struct Step {
    const char * name;
    int          code;
};
constexpr Step kLoad{"load", 10}, kRegistry{"registry", 11}, kDevices{"devices", 12}, kProps{"props", 13},
    kBackend{"backend", 14}, kAlloc{"alloc", 15}, kCopy{"copy", 16}, kCompute{"compute", 17}, kFree{"free", 18};

class Probe {
public:
    explicit Probe(bool json) : json_(json) {}

    // Runs one step; false (and the exit code recorded) when it failed.
    bool step(const Step & s, const std::function<std::string(std::string &)> & body) {
        const auto t0 = std::chrono::steady_clock::now();
        std::string detail;
        std::string error = body(detail);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const bool ok = error.empty();
        report_.push_back({{"step", s.name}, {"ok", ok}, {"ms", ms}, {"detail", ok ? detail : error}});
        if (!json_) {
            std::printf("%-9s %-4s %9.2f ms  %s\n", s.name, ok ? "ok" : "FAIL", ms, (ok ? detail : error).c_str());
            std::fflush(stdout);
        }
        if (!ok) {
            exit_code_ = s.code;
            failed_    = s.name;
        }
        return ok;
    }

    int finish() {
        if (json_) {
            nlohmann::json j = {{"steps", report_}, {"exit_code", exit_code_}, {"failed_step", failed_}};
            std::printf("%s\n", j.dump(2).c_str());
        } else if (exit_code_ != 0) {
            std::printf("probe stopped at step '%s' (exit %d)\n", failed_.c_str(), exit_code_);
        } else {
            std::printf("probe: every step passed\n");
        }
        return exit_code_;
    }

private:
    bool           json_;
    nlohmann::json report_ = nlohmann::json::array();
    int            exit_code_ = 0;
    std::string    failed_;
};

} // namespace

int cmd_probe(const ProbeOptions & opt) {
    if (!opt.mode.empty()) {
        // The plugin reads its configuration when it starts: set it first.
        setenv("GGML_STANDIN_MODE", opt.mode == "interpose" ? "interpose" : "standalone", 1);
    }
    setenv("GGML_STANDIN_CRASH_HANDLER", "1", 1);
    diag::install_crash_handler("probe");
    Probe p(opt.json);

    void * handle = nullptr;
    ggml_backend_reg_t reg = nullptr;
    ggml_backend_dev_t dev = nullptr;
    ggml_backend_t backend = nullptr;
    std::vector<ggml_backend_buffer_t> buffers;

    bool ok = p.step(kLoad, [&](std::string & d) -> std::string {
        handle = dlopen(opt.plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle == nullptr) {
            const char * e = dlerror();
            return std::string("dlopen: ") + (e ? e : "failed");
        }
        if (dlsym(handle, "ggml_backend_init") == nullptr) return "no ggml_backend_init in " + opt.plugin;
        auto score = reinterpret_cast<int (*)()>(dlsym(handle, "ggml_backend_score"));
        if (score != nullptr && score() == 0) return "ggml_backend_score() is 0: the plugin declines to load here";
        d = opt.plugin + (score ? " (score " + std::to_string(score()) + ")" : "");
        return {};
    });
    ok = ok && p.step(kRegistry, [&](std::string & d) -> std::string {
        auto init = reinterpret_cast<ggml_backend_reg_t (*)()>(dlsym(handle, "ggml_backend_init"));
        reg = init();
        if (reg == nullptr) return "ggml_backend_init returned NULL (see the log above)";
        ggml_backend_register(reg);
        d = std::string(ggml_backend_reg_name(reg)) + ", mode " + reg_feature(reg, "MODE");
        const std::string fb = reg_feature(reg, "FALLBACK");
        if (!fb.empty()) d += " (interposition failed: " + fb + ")";
        if (opt.mode == "interpose" && reg_feature(reg, "MODE") != "interposed") {
            return "interposed mode was asked for but the plugin booted standalone: " + fb;
        }
        return {};
    });
    ok = ok && p.step(kDevices, [&](std::string & d) -> std::string {
        const size_t n = ggml_backend_reg_dev_count(reg);
        if (n == 0) return "the registry has no device";
        for (size_t i = 0; i < n; ++i) {
            ggml_backend_dev_t c = ggml_backend_reg_dev_get(reg, i);
            d += (i ? ", " : "") + std::string(ggml_backend_dev_name(c));
            if (dev == nullptr && (opt.device.empty() || opt.device == ggml_backend_dev_name(c))) dev = c;
        }
        if (dev == nullptr) return "no device named " + opt.device + " (found: " + d + ")";
        return {};
    });
    ok = ok && p.step(kProps, [&](std::string & d) -> std::string {
        ggml_backend_dev_props props;
        ggml_backend_dev_get_props(dev, &props);
        if (props.name == nullptr || props.description == nullptr) return "props without a name or description";
        if (props.memory_total == 0) return std::string(props.name) + " reports no memory";
        d = std::string(props.name) + ": " + props.description + ", " +
            std::to_string(props.memory_free >> 20) + " of " + std::to_string(props.memory_total >> 20) + " MiB free";
        return {};
    });
    ok = ok && p.step(kBackend, [&](std::string & d) -> std::string {
        backend = ggml_backend_dev_init(dev, nullptr);
        if (backend == nullptr) return std::string("could not init a backend on ") + ggml_backend_dev_name(dev);
        d = ggml_backend_name(backend);
        return {};
    });
    ok = ok && p.step(kAlloc, [&](std::string & d) -> std::string {
        for (ggml_backend_buffer_type_t buft : {ggml_backend_dev_buffer_type(dev), ggml_backend_dev_host_buffer_type(dev)}) {
            if (buft == nullptr) continue;
            ggml_backend_buffer_t b = ggml_backend_buft_alloc_buffer(buft, 1 << 20);
            if (b == nullptr) return std::string("1 MiB from ") + ggml_backend_buft_name(buft) + " failed";
            buffers.push_back(b);
            d += (d.empty() ? "" : ", ") + std::string(ggml_backend_buft_name(buft));
        }
        return {};
    });
    ok = ok && p.step(kCopy, [&](std::string & d) -> std::string {
        return probe_copy(buffers, d);
    });
    ok = ok && p.step(kCompute, [&](std::string & d) -> std::string {
        return probe_compute(backend, dev, opt.ggml_bin_dir, d);
    });
    if (!ok) {
        // Release what was made, quietly: the failed step is the report.
        for (ggml_backend_buffer_t b : buffers) ggml_backend_buffer_free(b);
        if (backend != nullptr) ggml_backend_free(backend);
        return p.finish();
    }
    p.step(kFree, [&](std::string & d) -> std::string {
        for (ggml_backend_buffer_t b : buffers) ggml_backend_buffer_free(b);
        buffers.clear();
        if (backend != nullptr) ggml_backend_free(backend);
        backend = nullptr;
        auto audit = reinterpret_cast<const char * (*)()>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_standin_audit"));
        if (audit == nullptr) return "no audit proc";
        d = audit();
        if (d.find("leaks=0;") == std::string::npos || d.find("(clean)") == std::string::npos) return "after freeing everything: " + d;
        return {};
    });
    return p.finish();
}

} // namespace standin::tools
