// The host kernels' vector helpers against the scalar definitions they
// stand for (kernels/common/quants.h), exhaustively where the input is a
// byte. Built with the host kernels' -march (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#if defined(STANDIN_HOST_NEEDS_X86_V3)

#include <cstdint>

#include "kernels/common/quants.h"
#include "kernels/host/grid_decode.h"

namespace {

using namespace standin::kernels::host::mm;

// TQ1_0's digits by ternary_digit_of (byte averages) for every byte and
// digit, as ternary_codes forms them (the byte times 3^n, mod 256).
TEST(HostSimd, TernaryDigitsOfEveryByteAreQuantsH) {
    for (int n = 0; n < 5; ++n) {
        int p = 1;
        for (int i = 0; i < n; ++i) p *= 3;
        for (int x0 = 0; x0 < 256; x0 += 32) {
            alignas(32) uint8_t f[32], d[32];
            for (int i = 0; i < 32; ++i) f[i] = uint8_t((x0 + i) * p);
            _mm256_store_si256(reinterpret_cast<__m256i *>(d),
                               ternary_digit_of(_mm256_load_si256(reinterpret_cast<const __m256i *>(f))));
            for (int i = 0; i < 32; ++i) {
                ASSERT_EQ(int(d[i]), standin::quant::ternary_digit(uint8_t(x0 + i), n)) << "byte " << x0 + i << " digit " << n;
            }
        }
    }
}

} // namespace

#endif
