#include "kernels/host/isa.h"

#include <atomic>

namespace standin::kernels::host::isa {

namespace {

std::atomic<int> & current() {
    static std::atomic<int> l{int(choose(detect()))};
    return l;
}

} // namespace

Features detect() {
    Features f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.avx2       = __builtin_cpu_supports("avx2");
    f.fma        = __builtin_cpu_supports("fma");
    f.f16c       = true;  // the x86-64-v3 baseline; GCC 12 has no "f16c" name here
    f.avx512f    = __builtin_cpu_supports("avx512f");
    f.avx512bw   = __builtin_cpu_supports("avx512bw");
    f.avx512vl   = __builtin_cpu_supports("avx512vl");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
#endif
    return f;
}

Level choose(const Features & f) {
    if (f.avx2 && f.fma && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni) {
        return Level::avx512_vnni;
    }
    return Level::avx2;
}

Level level() { return Level(current().load(std::memory_order_relaxed)); }

bool force(Level l) {
    if (int(l) > int(choose(detect()))) {
        return false;
    }
    current().store(int(l), std::memory_order_relaxed);
    return true;
}

const char * name(Level l) {
    switch (l) {
        case Level::avx2:        return "avx2";
        case Level::avx512_vnni: return "avx512-vnni";
    }
    return "?";
}

} // namespace standin::kernels::host::isa
