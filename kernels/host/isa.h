// Which instruction-set level the host kernels run at, chosen at run time
// from the CPU's features: one binary for every x86-64-v3 CPU.
//
// Every host kernel is built for x86-64-v3 (AVX2, FMA, F16C), the plugin's
// baseline (glue/entry.cpp refuses a CPU without it). Kernels with a faster
// variant for a higher level (the packed MUL_MAT kernels, mul_mat_x8*.cpp)
// compile that variant with a per-function target attribute and are picked
// through level(); a variant computes exactly what the baseline computes (the
// same integer sums and float operations), so results do not depend on the CPU.
#pragma once

namespace standin::kernels::host::isa {

enum class Level {
    avx2,         // x86-64-v3
    avx512_vnni,  // + AVX-512 F/BW/VL and VNNI (vpdpbusd on 256-bit vectors)
    avx512_amx,   // + AMX tiles with int8 products (several-column packed products)
};

// Whether the process's level is at least l.
bool at_least(Level l);

struct Features {
    bool avx2       = false;
    bool fma        = false;
    bool f16c       = false;
    bool avx512f    = false;
    bool avx512bw   = false;
    bool avx512vl   = false;
    bool avx512vnni = false;
    // AMX: the CPU's tiles and int8 products, and the OS's leave to use
    // them (Linux hands out the tile state per process on request).
    bool amx_tile   = false;
    bool amx_int8   = false;
    bool amx_os     = false;
};

// The features of this CPU, as the OS enables them (the compiler runtime
// checks XCR0 for the AVX-512 register state; for AMX, detect() asks Linux
// for the tile state once, which the whole process then holds).
Features detect();

// The best level a CPU with these features runs.
Level choose(const Features & f);

// The level the kernels use in this process: choose(detect()), unless force()d.
Level level();

// Makes the kernels use `l` (tests run every variant the CPU has this way).
// False, and nothing changes, when the CPU lacks it.
bool force(Level l);

const char * name(Level l);

} // namespace standin::kernels::host::isa
