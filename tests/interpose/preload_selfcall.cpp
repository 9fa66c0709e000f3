// An application linked to ggml-cpu (GGML_BACKEND_DL=OFF), run with
// libggml-standin.so preloaded: the self-call hazard of Note [preload mode].
//
// ggml-cpu calls its own ggml_backend_cpu_reg() through the PLT (from
// ggml_backend_cpu_init and its repack buffer type), so with standin preloaded
// those calls reach standin too. They must get the real registry: otherwise
// the real library stores standin's device in its own objects. Checked here:
//  - the application's ggml_backend_cpu_reg() is standin's (STANDIN_CPU);
//  - a backend made by the real ggml_backend_cpu_init() carries the real
//    device (CPU), not standin's;
//  - the real library's extra buffer types name the real device, and standin's
//    wrappers of them name standin's device.
// Usage: preload_selfcall preloaded|plain. Prints one line per check; exit 1 on
// any failure.
#include <cstdio>
#include <cstring>

#include "ggml-backend.h"
#include "ggml-cpu.h"

namespace {

int g_failures = 0;

void check(bool ok, const char * what, const char * got) {
    std::printf("%s: %s (%s)\n", ok ? "ok  " : "FAIL", what, got != nullptr ? got : "null");
    g_failures += ok ? 0 : 1;
}

using extra_bufts_t = ggml_backend_buffer_type_t * (*)(ggml_backend_dev_t);

// The extra buffer types a registry offers for `dev`, each checked to belong to `dev`.
void check_extra_bufts(ggml_backend_reg_t reg, ggml_backend_dev_t dev, const char * who) {
    auto fn = reinterpret_cast<extra_bufts_t>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
    if (fn == nullptr) {
        check(false, "extra buffer types offered", who);
        return;
    }
    int n = 0;
    for (ggml_backend_buffer_type_t * b = fn(dev); b != nullptr && *b != nullptr; ++b, ++n) {
        ggml_backend_dev_t d = ggml_backend_buft_get_device(*b);
        char what[160];
        std::snprintf(what, sizeof what, "%s extra buffer type %s belongs to %s", who, ggml_backend_buft_name(*b),
                      ggml_backend_dev_name(dev));
        check(d == dev, what, d != nullptr ? ggml_backend_dev_name(d) : "no device");
    }
    std::printf("info: %d extra buffer type(s) from %s\n", n, who);
}

} // namespace

int main(int argc, char ** argv) {
    const bool preloaded = argc > 1 && std::strcmp(argv[1], "preloaded") == 0;
    const char * want_reg = preloaded ? "STANDIN" : "CPU";
    const char * want_dev = preloaded ? "STANDIN_CPU" : "CPU";

    ggml_backend_reg_t reg = ggml_backend_cpu_reg();
    check(reg != nullptr && std::strcmp(ggml_backend_reg_name(reg), want_reg) == 0,
          "the application's ggml_backend_cpu_reg()", reg ? ggml_backend_reg_name(reg) : nullptr);
    if (reg == nullptr || ggml_backend_reg_dev_count(reg) != 1) {
        std::printf("FAIL: expected one device\n");
        return 1;
    }
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
    check(std::strcmp(ggml_backend_dev_name(dev), want_dev) == 0, "its device", ggml_backend_dev_name(dev));

    // The real library's own constructor: its backend must carry its own device.
    ggml_backend_t real_backend = ggml_backend_cpu_init();
    ggml_backend_dev_t real_dev = real_backend ? ggml_backend_get_device(real_backend) : nullptr;
    check(real_dev != nullptr && std::strcmp(ggml_backend_dev_name(real_dev), "CPU") == 0,
          "ggml_backend_cpu_init() inside ggml-cpu sees the real device", real_dev ? ggml_backend_dev_name(real_dev) : nullptr);
    ggml_backend_reg_t real_reg = real_dev ? ggml_backend_dev_backend_reg(real_dev) : nullptr;
    check(real_reg != nullptr && std::strcmp(ggml_backend_reg_name(real_reg), "CPU") == 0,
          "the real device's registry is the real one", real_reg ? ggml_backend_reg_name(real_reg) : nullptr);
    check(preloaded == (real_reg != reg), preloaded ? "the application's registry is not the real one"
                                                    : "without standin the registry is the real one",
          ggml_backend_reg_name(reg));

    if (real_reg != nullptr) {
        check_extra_bufts(real_reg, real_dev, "the real library's");
    }
    check_extra_bufts(reg, dev, "the application's registry's");

    // A backend made through the application's registry is standin's.
    ggml_backend_t b = ggml_backend_dev_init(dev, nullptr);
    check(b != nullptr && std::strcmp(ggml_backend_name(b), preloaded ? "STANDIN_CPU" : "CPU") == 0,
          "a backend from the application's device", b ? ggml_backend_name(b) : nullptr);
    if (b != nullptr) {
        ggml_backend_free(b);
    }
    if (real_backend != nullptr) {
        ggml_backend_free(real_backend);
    }
    std::printf("%s\n", g_failures == 0 ? "preload self-call: ok" : "preload self-call: FAILED");
    return g_failures == 0 ? 0 : 1;
}
