// The two symbols ggml's loader looks up in a backend module. Only the module
// target compiles this file; tests reach the registry through glue::registry().
#include <cstdio>
#include <string>

#include "diag/config.h"
#include "glue/base_link.h"
#include "glue/glue.h"
#include "interpose/loader.h"

// The module is built with hidden visibility; these two are its whole interface.
#define SI_EXPORT __attribute__((visibility("default")))

namespace {

// Note [ggml-base binding]: nothing of ggml may run before this. No ggml log
// callback is reachable when it fails, so the reason goes to stderr.
bool bound(const void * caller) {
    std::string why;
    if (standin::glue::bind_ggml_base(caller, &why)) {
        return true;
    }
    std::fprintf(stderr, "standin: cannot bind to ggml-base: %s\n", why.c_str());
    return false;
}

} // namespace

extern "C" {

// noinline: the return address must be the caller's, in ggml's loader.
SI_EXPORT __attribute__((noinline)) ggml_backend_reg_t ggml_backend_init(void);
SI_EXPORT __attribute__((noinline)) int ggml_backend_score(void);

ggml_backend_reg_t ggml_backend_init(void) {
    try {
        if (!bound(__builtin_return_address(0))) {
            return nullptr;
        }
        return standin::glue::registry();
    } catch (...) {
        // Nothing may escape into the C loader; a null reg is refused cleanly.
        return nullptr;
    }
}

int ggml_backend_score(void) {
    try {
        if (!bound(__builtin_return_address(0))) {
            return 0;
        }
        standin::glue::pin_module();  // after the binding: it may log
#ifdef STANDIN_HOST_NEEDS_X86_V3
        // The host kernels are built for x86-64-v3; on an older CPU, decline to
        // load (ggml logs that the backend is not supported) rather than crash.
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c")) {
            return 0;
        }
#endif
        // Replace mode: outscore the real variants beside us so ggml loads us instead.
        const int replace = standin::interpose::replace_mode_score();
        return replace >= 0 ? replace : standin::diag::config().score;
    } catch (...) {
        return 0;
    }
}

} // extern "C"
