// The registry: standin's entry into ggml. Built on first use (never from a
// global constructor: ggml's own registry is a function-local static too, and
// touching it from a constructor runs into initialisation order).
#include <dlfcn.h>

#include <deque>
#include <mutex>

#include "diag/config.h"
#include "diag/crash.h"
#include "diag/log.h"
#include "glue/glue.h"
#include "interpose/audit.h"
#include "interpose/loader.h"
#include "interpose/router.h"
#include "interpose/wrap.h"
#include "kernels/host/isa.h"
#include "runtime/ownership.h"

namespace standin::glue {

namespace {

struct RegContext {
    // deque: stable addresses, the ABI hands out pointers into it.
    std::deque<DeviceContext> devices;
};

const char * reg_get_name(ggml_backend_reg_t) { return "STANDIN"; }

size_t reg_get_device_count(ggml_backend_reg_t reg) {
    return static_cast<RegContext *>(reg->context)->devices.size();
}

ggml_backend_dev_t reg_get_device(ggml_backend_reg_t reg, size_t index) {
    auto * ctx = static_cast<RegContext *>(reg->context);
    if (index >= ctx->devices.size()) {
        SI_LOG_ERROR("device index %zu out of range (%zu devices)", index, ctx->devices.size());
        return nullptr;
    }
    return &ctx->devices[index].device;
}

void set_n_threads(ggml_backend_t backend, int n_threads) {
    if (backend == nullptr || !rt::Ownership::instance().is_ours(backend, rt::ObjKind::backend)) {
        SI_LOG_WARN("not a standin backend; ignored");
        return;
    }
    if (n_threads < 1) {
        SI_LOG_WARN("n_threads=%d is not positive; ignored", n_threads);
        return;
    }
    backend_ctx(backend).stream->set_threads(n_threads);
}

// Why interposition was not used, when it was asked for (features "FALLBACK").
std::string & fallback_reason() {
    static std::string r;
    return r;
}

ggml_backend_feature * get_features(ggml_backend_reg_t) {
    static const std::string config_summary = diag::config().summary();
    static ggml_backend_feature features[] = {
        {"STANDIN", "1"},
        {"CUDA", rt::cuda_compiled() ? "1" : "0"},
        {"MODE", "standalone"},
        {"FALLBACK", fallback_reason().c_str()},
        {"CONFIG", config_summary.c_str()},
        {nullptr, nullptr},
    };
    return features;
}

const char * audit_text() {
    static std::string text;
    text = interpose::audit::report().text();
    return text.c_str();
}

void * reg_get_proc_address(ggml_backend_reg_t, const char * name) {
    if (name == nullptr) {
        return nullptr;
    }
    const std::string n(name);
    if (n == "ggml_backend_set_n_threads") {
        return reinterpret_cast<void *>(&set_n_threads);
    }
    if (n == "ggml_backend_get_features") {
        return reinterpret_cast<void *>(&get_features);
    }
    if (n == "ggml_backend_standin_audit") {
        return reinterpret_cast<void *>(&audit_text);
    }
    return comm_proc(name);  // tensor split: the all-reduce across our devices
}

const ggml_backend_reg_i reg_iface = {
    /* .get_name         = */ reg_get_name,
    /* .get_device_count = */ reg_get_device_count,
    /* .get_device       = */ reg_get_device,
    /* .get_proc_address = */ reg_get_proc_address,
};

// The names of a registry's devices, comma-separated, for the mode line.
std::string device_names(ggml_backend_reg_t reg) {
    std::string names;
    for (size_t i = 0; i < reg->iface.get_device_count(reg); ++i) {
        ggml_backend_dev_t d = reg->iface.get_device(reg, i);
        names += (i == 0 ? "" : ",") + std::string(d->iface.get_name(d));
    }
    return names.empty() ? "none" : names;
}

std::string device_name(const rt::Device & d) {
    switch (d.kind()) {
        case rt::Kind::host: return "STANDIN_HOST" + std::to_string(d.ordinal());
        case rt::Kind::cuda: return "STANDIN_CUDA" + std::to_string(d.ordinal());
        case rt::Kind::sycl: return "STANDIN_SYCL" + std::to_string(d.ordinal());
    }
    return "STANDIN_UNKNOWN";
}


// GGML_STANDIN_HOST_ISA: the host kernels' level (kernels/host/isa.h), logged once.
void choose_host_isa(const diag::Config & cfg) {
    namespace isa = kernels::host::isa;
    using HostIsa = diag::Config::HostIsa;
    static_assert(int(HostIsa::avx2) - 1 == int(isa::Level::avx2) &&
                      int(HostIsa::avx512_vnni) - 1 == int(isa::Level::avx512_vnni) &&
                      int(HostIsa::avx512_amx) - 1 == int(isa::Level::avx512_amx),
                  "GGML_STANDIN_HOST_ISA's choices after auto are the levels in order");
    if (cfg.host_isa != diag::Config::HostIsa::auto_) {
        const isa::Level want = isa::Level(int(cfg.host_isa) - 1);
        if (!isa::force(want)) {
            SI_LOG_WARN("GGML_STANDIN_HOST_ISA=%s: this CPU lacks it; host kernels stay at %s", isa::name(want),
                        isa::name(isa::level()));
        }
    }
    SI_LOG_INFO("host kernels: %s", isa::name(isa::level()));
}

// Builds the registry and its devices; called once.
ggml_backend_reg * build_registry() {
    if (diag::config().crash_handler) {
        diag::install_crash_handler("standalone");
    }
    static ggml_backend_reg reg{};
    {
        const diag::Config & cfg = diag::config();
        auto * ctx = new RegContext;
        reg = ggml_backend_reg{GGML_BACKEND_API_VERSION, reg_iface, ctx};
        rt::Ownership::instance().add(&reg, rt::ObjKind::reg, rt::Owner::ours, nullptr, true);

        rt::EnumerateOptions opts;
        opts.host_devices = cfg.host_devices;
        opts.host_threads = cfg.threads;
        opts.cuda         = cfg.cuda;
        static const std::vector<rt::Device *> none;
        const auto & found = cfg.fault_at("devices") ? none : rt::enumerate_devices(opts);
        for (rt::Device * d : found) {
            DeviceContext & dc = ctx->devices.emplace_back();
            dc.rt          = d;
            dc.config      = &cfg;
            dc.name        = device_name(*d);
            dc.description = d->description();
            dc.pci_bus_id  = d->pci_bus_id();
            init_device(dc, &reg);
        }
        if (cfg.host_devices > 0) {
            choose_host_isa(cfg);
        }
        interpose::audit::set_mode("standalone");
        // Note [mode line]
        SI_LOG_INFO("standin standalone mode: %zu device(s) %s%s", ctx->devices.size(), device_names(&reg).c_str(),
                    rt::cuda_compiled() ? "" : " (built without CUDA)");
    }
    return &reg;
}


// Note [mode line]
// Whatever way standin was brought in, it says in one INFO line (through the
// host's log callback) which mode took effect, over what, with which devices:
//   standin standalone mode: 1 device(s) STANDIN_HOST0
//   standin path mode: interposing /x/libggml-cpu.so (GGML_STANDIN_REAL): 1 device(s) STANDIN_CPU; local ops: none
//   standin replace mode: interposing /x/libggml-cpu-haswell.so (...): 1 device(s) CPU; local ops: none
//   standin preload mode: interposing /x/libggml-cpu.so (preloaded over ggml_backend_cpu_reg): ...
// A fallback adds a warning before the standalone line, saying why; a preload
// that cannot apply (an application loading its backends as modules) warns
// instead (interpose/preload.cpp).

// How the caller reached the real library: which mode line, which names.
enum class Route { path, replace, preload };

const char * route_name(Route r) {
    switch (r) {
        case Route::path:    return "path";
        case Route::replace: return "replace";
        case Route::preload: return "preload";
    }
    return "?";
}

// The tail shared by every interposed mode: a real library is loaded (or, in
// preload mode, adopted), now wrap it.
ggml_backend_reg * interposed_registry(const interpose::RealLibrary & lib, Route route, const std::string & why) {
    const diag::Config & cfg = diag::config();
    std::string warnings;
    interpose::set_local_ops(interpose::parse_local_ops(cfg.local_ops, warnings));
    if (!warnings.empty()) {
        SI_LOG_WARN("GGML_STANDIN_LOCAL_OPS: %s", warnings.c_str());
    }
    interpose::audit::set_mode(lib.mode);
    // Note [interposed names] (interpose/objects.cpp).
    ggml_backend_reg * reg = interpose::make_registry(
        lib, route == Route::replace ? interpose::Names::real : interpose::Names::prefixed);
    if (cfg.crash_handler) {
        diag::install_crash_handler("interposed");
    }
    SI_LOG_INFO("standin %s mode: interposing %s (%s): %zu device(s) %s; local ops: %s", route_name(route),
                lib.path.c_str(), why.c_str(), reg->iface.get_device_count(reg), device_names(reg).c_str(),
                cfg.local_ops.c_str());
    return reg;
}

// The real registration function the application is linked to, in preload
// mode (Note [preload mode]); null otherwise.
struct PreloadRequest {
    interpose::RegFn real   = nullptr;
    const char *     symbol = nullptr;
};

// Interposed when a real library is configured or found and loads (or, in
// preload mode, is adopted); otherwise (or when it fails, with one log line
// saying why) standalone.
ggml_backend_reg * choose_registry(const PreloadRequest & preload) {
    const diag::Config & cfg = diag::config();
    if (cfg.fault_at("registry")) {
        SI_LOG_ERROR("fault injected (GGML_STANDIN_FAULT=registry): no registry");
        return nullptr;
    }
    if (cfg.audit) {
        interpose::audit::enable_at_exit();
    }
    if (const auto bases = interpose::audit::loaded_ggml_bases(); bases.size() > 1) {
        // Two ggml runtimes: the real library and the application may not
        // share state (Note [ggml-base binding] in glue/base_link.h).
        SI_LOG_WARN("%zu copies of ggml-base are loaded in this process (%s and %s); give every library the same one",
                    bases.size(), bases[0].c_str(), bases[1].c_str());
    }
    if (cfg.crash_handler) {
        diag::install_crash_handler("starting");
    }
    if (cfg.mode == diag::Config::Mode::standalone) {
        return build_registry();
    }
    if (preload.real != nullptr) {
        interpose::RealLibrary lib = interpose::adopt_linked_library(preload.real, preload.symbol);
        if (!lib.ok()) {
            fallback_reason() = std::string(interpose::load_error_name(lib.error)) + ": " + lib.detail;
            SI_LOG_WARN("cannot interpose (%s); falling back to standalone", fallback_reason().c_str());
            return build_registry();
        }
        return interposed_registry(lib, Route::preload, std::string("preloaded over ") + preload.symbol);
    }
    std::string why;
    const std::string path = interpose::locate_real_library(cfg.real, why);
    if (path.empty() && cfg.mode == diag::Config::Mode::auto_) {
        return build_registry();
    }
    interpose::RealLibrary lib = interpose::load_real_library(path);
    if (!lib.ok()) {
        fallback_reason() = std::string(interpose::load_error_name(lib.error)) + ": " +
                            (path.empty() ? why : lib.detail);
        SI_LOG_WARN("cannot interpose (%s); falling back to standalone", fallback_reason().c_str());
        return build_registry();
    }
    // locate_real_library answers GGML_STANDIN_REAL first; any other path is
    // the replace-mode discovery beside this module.
    return interposed_registry(lib, cfg.real.empty() ? Route::replace : Route::path, why);
}

// One registry per process, whichever entry point asks first: ggml_backend_init
// (path and replace mode) or a preloaded registration function. A module that
// is both preloaded and named by GGML_BACKEND_PATH hands ggml the same
// registry twice, which ggml's registry ignores the second time.
std::once_flag g_registry_once;
ggml_backend_reg * g_registry = nullptr;
const char * g_preload_symbol = nullptr;  // set when preload mode built it

} // namespace

// Note [module pinned]
// From the first call into it (a score or a registry), this module stays
// mapped until the process ends, whatever the host does with its handle.
// The registry and its devices live as long as the process (as every ggml
// backend's do) and the device runtimes they start keep running code here;
// and a second copy loaded after the first was unmapped crashed in its first
// call on the H200 machine (glue.plugin.reload: ggml's loader scores a module
// by opening and closing it, then opens it again). With the module pinned,
// every later open returns the first copy. Built into a program instead (the
// unit tests), there is nothing to pin.
void pin_module() {
    static std::once_flag once;
    std::call_once(once, [] {
        Dl_info info{};
        if (dladdr(reinterpret_cast<const void *>(&pin_module), &info) == 0 || info.dli_fname == nullptr) return;
        // RTLD_NOLOAD: only the copy already mapped; RTLD_NODELETE: never unmapped.
        if (dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) == nullptr) {
            SI_LOG_DEBUG("module not pinned (%s): not a loaded module", info.dli_fname);
        }
    });
}

ggml_backend_reg_t registry() {
    std::call_once(g_registry_once, [] {
        pin_module();
        g_registry = choose_registry({});
    });
    return g_registry;
}

ggml_backend_reg_t registry_preloaded(ggml_backend_reg_t (*real)(), const char * symbol, const char ** built_for) {
    std::call_once(g_registry_once, [&] {
        // Standalone never stands in for a real library: the application keeps
        // its real backend, standin's own devices come through GGML_BACKEND_PATH.
        pin_module();
        const bool standalone = diag::config().mode == diag::Config::Mode::standalone;
        g_registry = choose_registry(standalone ? PreloadRequest{} : PreloadRequest{real, symbol});
        g_preload_symbol = standalone ? nullptr : symbol;
    });
    *built_for = g_preload_symbol;
    return g_registry;
}

} // namespace standin::glue
