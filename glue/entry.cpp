// The two symbols ggml's loader looks up in a backend module. Only the module
// target compiles this file; tests reach the registry through glue::registry().
#include "diag/config.h"
#include "glue/glue.h"
#include "interpose/loader.h"

// The module is built with hidden visibility; these two are its whole interface.
#define SI_EXPORT __attribute__((visibility("default")))

extern "C" {

SI_EXPORT ggml_backend_reg_t ggml_backend_init(void);
SI_EXPORT int ggml_backend_score(void);

ggml_backend_reg_t ggml_backend_init(void) {
    try {
        return standin::glue::registry();
    } catch (...) {
        // Nothing may escape into the C loader; a null reg is refused cleanly.
        return nullptr;
    }
}

int ggml_backend_score(void) {
    try {
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
