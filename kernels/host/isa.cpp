#include "kernels/host/isa.h"

#include <atomic>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace standin::kernels::host::isa {

namespace {

std::atomic<int> & current() {
    static std::atomic<int> l{int(choose(detect()))};
    return l;
}

#if defined(__x86_64__)
// Linux (5.16 on) keeps the AMX tile data out of a process's register state
// until the process asks for it: arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA). Without it the first tile instruction faults. Asked
// once; the answer holds for every thread of the process.
bool amx_permitted() {
    static const bool ok = [] {
        constexpr long kReqXcompPerm = 0x1023;
        constexpr long kXtileData    = 18;
        return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
    }();
    return ok;
}
#endif

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
#if defined(__x86_64__)
    // CPUID leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8 (GCC 12's
    // __builtin_cpu_supports has no names for them).
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) != 0) {
        f.amx_tile = (d >> 24) & 1u;
        f.amx_int8 = (d >> 25) & 1u;
    }
    f.amx_os = f.amx_tile && f.amx_int8 && amx_permitted();
#endif
    return f;
}

Level choose(const Features & f) {
    if (f.avx2 && f.fma && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni) {
        return f.amx_tile && f.amx_int8 && f.amx_os ? Level::avx512_amx : Level::avx512_vnni;
    }
    return Level::avx2;
}

Level level() { return Level(current().load(std::memory_order_relaxed)); }

bool at_least(Level l) { return int(level()) >= int(l); }

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
        case Level::avx512_amx:  return "avx512-amx";
    }
    return "?";
}

} // namespace standin::kernels::host::isa
