// A "real library" that misbehaves on purpose, for the interposition fault
// tests. Which way it misbehaves is chosen at build time:
//   FAKE_NO_SYMBOL    no ggml_backend_init at all (not a ggml backend)
//   FAKE_API_VERSION  a registry of another API version
//   FAKE_NULL         ggml_backend_init returns NULL
//   FAKE_ABORT        ggml_backend_init aborts
//   FAKE_CTOR_ABORT   the library's constructor aborts, inside dlopen
#include <cstdlib>

#include "ggml-backend-impl.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

#ifndef FAKE_NO_SYMBOL
namespace {
const char * fake_name(ggml_backend_reg_t) { return "FAKE"; }
size_t fake_count(ggml_backend_reg_t) { return 0; }
ggml_backend_dev_t fake_get(ggml_backend_reg_t, size_t) { return nullptr; }
ggml_backend_reg fake_reg = {GGML_BACKEND_API_VERSION - 1, {fake_name, fake_count, fake_get, nullptr}, nullptr};
} // namespace

FAKE_EXPORT ggml_backend_reg_t ggml_backend_init(void) {
#if defined(FAKE_API_VERSION)
    return &fake_reg;
#elif defined(FAKE_NULL)
    return nullptr;
#elif defined(FAKE_ABORT)
    std::abort();
#elif defined(FAKE_CTOR_ABORT)
    return nullptr;  // never reached: the constructor below ran first
#else
#error "choose a FAKE_* behaviour"
#endif
}
#else
FAKE_EXPORT int fake_real_library_marker(void) { return 42; }
#endif

#ifdef FAKE_CTOR_ABORT
__attribute__((constructor)) static void fake_constructor_aborts() { std::abort(); }
#endif
