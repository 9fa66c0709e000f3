// The plugin's binding to the host's ggml-base (Note [ggml-base binding] in
// base_link.h). Only the module compiles this file.
//
// Each listed function gets a trampoline of one indirect jump through its
// slot, so arguments (varargs included) pass through untouched and the call
// costs one predictable branch. The trampolines are hidden: the module exports
// none of them, so in preload mode (LD_PRELOAD puts the module first in the
// global scope) they never interpose on the application's own calls into
// ggml. Before binding, every slot points at unbound(), which says so and
// aborts: a call before an entry point ran is an internal error.
#include "glue/base_link.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "glue/base_symbols.h"
#include "interpose/audit.h"

extern "C" {

__attribute__((visibility("hidden"), noreturn)) void standin_base_unbound() {
    static const char msg[] = "standin: a ggml-base function was called before the plugin bound to ggml-base\n";
    (void) !write(STDERR_FILENO, msg, sizeof msg - 1);
    abort();
}

#define SI_BASE_SLOT(name) \
    __attribute__((visibility("hidden"))) void * standin_slot_##name = reinterpret_cast<void *>(&standin_base_unbound);
SI_GGML_BASE_SYMBOLS(SI_BASE_SLOT)
#undef SI_BASE_SLOT

} // extern "C"

#if defined(__x86_64__)
#define SI_BASE_TRAMPOLINE(name)                                                            \
    asm(".text\n.p2align 4\n.globl " #name "\n.hidden " #name "\n.type " #name ",@function\n" #name \
        ":\n\tendbr64\n\tjmp *standin_slot_" #name "(%rip)\n.size " #name ",.-" #name "\n");
#elif defined(__aarch64__)
#define SI_BASE_TRAMPOLINE(name)                                                               \
    asm(".text\n.p2align 2\n.globl " #name "\n.hidden " #name "\n.type " #name ",%function\n" #name   \
        ":\n\tadrp x16, standin_slot_" #name "\n\tldr x16, [x16, :lo12:standin_slot_" #name "]\n\tbr x16\n" \
        ".size " #name ",.-" #name "\n");
#else
#error "glue/base_link.cpp: no trampoline for this architecture"
#endif
SI_GGML_BASE_SYMBOLS(SI_BASE_TRAMPOLINE)
#undef SI_BASE_TRAMPOLINE

namespace standin::glue {

namespace {

struct Slot {
    const char * name;
    void **      slot;
};

#define SI_BASE_ENTRY(name) {#name, &standin_slot_##name},
const Slot kSlots[] = {SI_GGML_BASE_SYMBOLS(SI_BASE_ENTRY)};
#undef SI_BASE_ENTRY

std::mutex  g_mutex;
bool        g_bound = false;
std::string g_bound_file;

// Every function from one handle's lookup scope, or the first one missing.
bool resolve_all(void * handle, std::vector<void *> & out, std::string & missing) {
    out.clear();
    for (const Slot & s : kSlots) {
        void * p = dlsym(handle, s.name);
        if (p == nullptr) {
            missing = s.name;
            return false;
        }
        out.push_back(p);
    }
    return true;
}

// The lookup scope of the object holding `caller`: its own symbols, then its
// dependencies, breadth first, as the dynamic linker bound that object. For
// the main program, the global scope.
void * caller_scope(const void * caller) {
    Dl_info info{};
    if (caller != nullptr && dladdr(caller, &info) != 0 && info.dli_fname != nullptr && info.dli_fname[0] != '\0') {
        if (void * h = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY)) {
            return h;
        }
    }
    return dlopen(nullptr, RTLD_LAZY);
}

std::string file_of(void * fn) {
    Dl_info info{};
    return dladdr(fn, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "";
}

} // namespace

bool bind_ggml_base(const void * caller, std::string * why) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_bound) {
        return true;
    }
    std::vector<void *> fns;
    std::string missing;
    bool ok = false;
    if (void * h = caller_scope(caller)) {
        ok = resolve_all(h, fns, missing);
        dlclose(h);  // only drops the reference NOLOAD / dlopen(NULL) took
    }
    if (!ok) {
        // A caller outside ggml's reach (a test program calling the entry
        // point by hand): the one ggml-base in the process, if there is one.
        const std::vector<std::string> bases = interpose::audit::loaded_ggml_bases();
        if (bases.size() == 1) {
            if (void * h = dlopen(bases[0].c_str(), RTLD_NOLOAD | RTLD_LAZY)) {
                ok = resolve_all(h, fns, missing);
                dlclose(h);
            }
        } else if (why != nullptr) {
            *why = bases.empty() ? "no ggml-base is loaded in this process (missing " + missing + ")"
                                 : std::to_string(bases.size()) + " ggml-base copies are loaded and the caller " +
                                       "reaches none of them";
            return false;
        }
    }
    if (!ok) {
        if (why != nullptr) *why = "the loaded ggml-base has no " + missing + " (another ggml version?)";
        return false;
    }
    for (size_t i = 0; i < fns.size(); ++i) {
        *kSlots[i].slot = fns[i];
    }
    g_bound_file = file_of(fns[0]);
    g_bound = true;
    return true;
}

const std::string & bound_ggml_base() { return g_bound_file; }

} // namespace standin::glue
