// Preload mode (Note [preload mode] in preload.h): who is calling, and which
// registry that caller gets.
#include "interpose/preload.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "diag/config.h"
#include "diag/log.h"
#include "interpose/audit.h"
#include "interpose/wrap.h"

namespace standin::interpose::preload {

namespace {

// Set while this thread builds the registry: a registration call made then
// comes from inside the real library (or from standin itself), never from the
// application, and must not wait on the registry being built.
thread_local bool t_building = false;

// Base address of this module, to tell standin's own frames apart.
const void * self_base() {
    static const void * base = [] {
        Dl_info info{};
        return dladdr(reinterpret_cast<void *>(&self_base), &info) != 0 ? info.dli_fbase : nullptr;
    }();
    return base;
}

void warn_passed_through(const char * symbol, const char * owner) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
        if (owner != nullptr) {
            SI_LOG_WARN("standin already stands in for %s in this process; %s is passed through unchanged", owner,
                        symbol);
        } else {
            SI_LOG_WARN("standin's registry in this process is not a preload one (GGML_STANDIN_MODE=standalone, or "
                        "loaded through ggml_backend_init first); %s is passed through unchanged", symbol);
        }
    }
}

// Note [mode line] (glue/reg.cpp): preloaded into an application that loads
// its backends as modules, standin has nothing to stand in for. It says so
// once, and an audit asked for still reports at exit (mode=none, unless a
// registry is built later, through GGML_BACKEND_PATH, and names its own mode).
void note_module_application(const char * symbol) {
    static std::atomic<bool> said{false};
    if (said.exchange(true)) {
        return;
    }
    SI_LOG_WARN("standin is preloaded, but this application loads its backends as modules (%s was called from a "
                "module's ggml_backend_init): preload mode does not apply here; path and replace mode do", symbol);
    if (diag::config().audit) {
        if (current_registry() == nullptr) {
            audit::set_mode("none");
        }
        audit::enable_at_exit();
    }
}

} // namespace

void * own_definition(const void * address, const char * symbol) {
    Dl_info caller{};
    if (address == nullptr || dladdr(address, &caller) == 0 || caller.dli_fname == nullptr ||
        caller.dli_fbase == self_base()) {
        return nullptr;
    }
    // RTLD_NOLOAD: only an object that is already mapped; the handle's scope is
    // that object and its dependencies, never the global scope where standin is.
    void * handle = dlopen(caller.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) {
        return nullptr;  // e.g. the main program, which is not a backend library
    }
    void * def = dlsym(handle, symbol);
    dlclose(handle);
    Dl_info where{};
    // Found in a dependency (libggml.so calling libggml-cpu.so) is not a self-call.
    if (def == nullptr || dladdr(def, &where) == 0 || where.dli_fbase != caller.dli_fbase) {
        return nullptr;
    }
    return def;
}

void * only_local_definition(const char * symbol) {
    std::vector<std::string> names;
    dl_iterate_phdr(
        [](dl_phdr_info * info, size_t, void * out) {
            if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
                static_cast<std::vector<std::string> *>(out)->emplace_back(info->dlpi_name);
            }
            return 0;
        },
        &names);
    void * found = nullptr;
    for (const std::string & name : names) {
        void * handle = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
        if (handle == nullptr) {
            continue;
        }
        void * def = dlsym(handle, symbol);
        dlclose(handle);
        Dl_info where{};
        if (def == nullptr || dladdr(def, &where) == 0 || where.dli_fbase == self_base() ||
            where.dli_fname == nullptr || name != where.dli_fname || def == found) {
            continue;  // none, standin's own, or found through a dependency
        }
        if (found != nullptr) {
            return nullptr;  // two libraries define it: no way to tell which one called
        }
        found = def;
    }
    return found;
}

ggml_backend_reg * entry(const char * symbol, RegFn self, const void * return_address, BuildFn build) {
    try {
        // 1. A real library calling its own registration function: its own
        // registry, so it only ever sees its own objects.
        if (void * own = own_definition(return_address, symbol); own != nullptr && own != reinterpret_cast<void *>(self)) {
            return reinterpret_cast<RegFn>(own)();
        }
        // A real library standin itself is loading (path or replace mode while
        // preloaded): its ggml_backend_init tail-calls this, from standin's loader.
        if (void * h = initialising_handle(); h != nullptr) {
            Dl_info where{}, lib{};
            void * def = dlsym(h, symbol);
            void * init = dlsym(h, "ggml_backend_init");
            if (def != nullptr && init != nullptr && dladdr(def, &where) != 0 && dladdr(init, &lib) != 0 &&
                where.dli_fbase == lib.dli_fbase) {
                return reinterpret_cast<RegFn>(def)();
            }
        }
        // 2. The application: the real function is the next definition after
        // this module in the global scope.
        auto real = reinterpret_cast<RegFn>(dlsym(RTLD_NEXT, symbol));
        if (real == nullptr) {
            // No global definition: the application is not linked to this
            // backend, so the call came from a backend module ggml dlopened
            // RTLD_LOCAL, through a tail call (its ggml_backend_init is
            // `jmp ggml_backend_<name>_reg@plt`, so the return address is
            // ggml's loader). That module's own definition is the answer.
            if (void * local = only_local_definition(symbol)) {
                note_module_application(symbol);
                return reinterpret_cast<RegFn>(local)();
            }
            SI_LOG_ERROR("%s called, but no library defines it but standin (or several do)", symbol);
            return nullptr;
        }
        if (t_building) {
            return real();
        }
        const char * built_for = nullptr;
        t_building = true;
        ggml_backend_reg * reg = build(real, symbol, &built_for);
        t_building = false;
        // One interposed registry per process: the first backend that asks
        // (or the one GGML_BACKEND_PATH brought in first) is the one standin
        // stands in for; any other is left to its real library.
        if (built_for != nullptr && std::strcmp(built_for, symbol) == 0) {
            return reg;
        }
        warn_passed_through(symbol, built_for);
        return real();
    } catch (...) {
        t_building = false;
        return nullptr;  // nothing may escape into C; ggml ignores a null registry
    }
}

} // namespace standin::interpose::preload
