// The registration functions standin defines for preload mode (Note [preload
// mode] in preload.h). Only the module compiles this file.
//
// Loaded as a module instead (path or replace mode: ggml dlopens it
// RTLD_LOCAL), these definitions are not in the global scope, so no other
// library binds to them and nothing reaches them unless a program looks them
// up in this module's handle by name; even then a call only returns the
// process's one registry or the real function's own result
// (interpose/preload.cpp), never a second registry.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "glue/base_link.h"
#include "glue/glue.h"
#include "interpose/preload.h"

#define SI_EXPORT __attribute__((visibility("default")))

// The backends whose registration function standin can stand in for, one
// line each: X(name) defines ggml_backend_<name>_reg. __builtin_return_address
// is read here, in the exported frame itself (the noinline keeps it a frame of
// its own), to tell the real library's self-calls from the application's.
#define SI_PRELOAD_BACKENDS(X) \
    X(cpu)                     \
    X(cuda)                    \
    X(sycl)                    \
    X(vulkan)

// Note [ggml-base binding]: bound from the caller's scope before anything
// else; if that fails the real function answers, as if standin were absent.
#define SI_PRELOAD_DEFINE(name)                                                                          \
    extern "C" SI_EXPORT __attribute__((noinline)) ggml_backend_reg_t ggml_backend_##name##_reg(void) {   \
        const void * caller = __builtin_return_address(0);                                               \
        if (!bind_or_warn(caller)) {                                                                     \
            auto real = reinterpret_cast<ggml_backend_reg_t (*)()>(dlsym(RTLD_NEXT, __func__));          \
            return real != nullptr ? real() : nullptr;                                                   \
        }                                                                                                \
        return standin::interpose::preload::entry("ggml_backend_" #name "_reg", &ggml_backend_##name##_reg, \
                                                  caller, &standin::glue::registry_preloaded);           \
    }

namespace {

bool bind_or_warn(const void * caller) {
    std::string why;
    if (standin::glue::bind_ggml_base(caller, &why)) {
        return true;
    }
    std::fprintf(stderr, "standin: cannot bind to ggml-base (%s); preload mode is off\n", why.c_str());
    return false;
}

} // namespace

SI_PRELOAD_BACKENDS(SI_PRELOAD_DEFINE)

#undef SI_PRELOAD_DEFINE
