// Packed Q4_0/Q8_0 MUL_MAT tiles at the AVX-512 VNNI level (mul_mat_x8.h):
// vpdpbusd on 256-bit vectors multiplies 4 unsigned bytes by 4 signed bytes
// and adds them into each int32 lane in one instruction, where AVX2 needs
// maddubs, an int16 add and madd. The sums are exact (no saturation), the same
// integers as the AVX2 path, so results are bit-identical to it.
// Only reached when isa::level() says the CPU has it (mul_mat_x8.cpp).
//
// Test: tests/kernels/test_packed.cpp runs it against the AVX2 path where the
// CPU has VNNI.
#define SI_X8_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#include "kernels/host/mul_mat_x8.h"

namespace standin::kernels::host::mm {

namespace {

struct OpsVnni {
    SI_X8_TARGET static __m256i dot_u(__m256i s, __m256i x, __m256i y) { return _mm256_dpbusd_epi32(s, x, y); }
    SI_X8_TARGET static __m256i finish_u(__m256i s) { return s; }
    SI_X8_TARGET static __m256i dot_s(__m256i s, __m256i xa, __m256i x, __m256i y) {
        return _mm256_dpbusd_epi32(s, xa, _mm256_sign_epi8(y, x));
    }
    SI_X8_TARGET static __m256i finish_s(__m256i s) { return s; }
};

} // namespace

QTileFn x8_tile_vnni(ggml_type type) { return x8_tile<OpsVnni>(type); }

} // namespace standin::kernels::host::mm
