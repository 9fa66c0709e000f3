// The shared conversions must round exactly like ggml's reference, which
// ggml-base exports: every half value, and a large sample of floats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "ggml.h"
#include "kernels/common/numerics.h"

using namespace standin::num;

namespace {
uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
} // namespace

TEST(Numerics, EveryHalfDecodesLikeGgml) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float ours = fp16_to_f32(uint16_t(h));
        const float ref  = ggml_fp16_to_fp32(ggml_fp16_t(h));
        if (std::isnan(ref)) {
            EXPECT_TRUE(std::isnan(ours)) << h;
        } else {
            ASSERT_EQ(bits(ours), bits(ref)) << "half 0x" << std::hex << h;
        }
    }
}

TEST(Numerics, FloatToHalfRoundsLikeGgml) {
    std::mt19937 rng(1);
    std::uniform_int_distribution<uint32_t> any;
    for (int i = 0; i < 2000000; ++i) {
        // Bias toward the half range, where rounding matters.
        uint32_t u = any(rng);
        if (i % 2) u = (u & 0x80000000u) | (((u >> 23) % 40 + 100) << 23) | (u & 0x7fffff);
        const float f = from_bits(u);
        if (std::isnan(f)) continue;
        ASSERT_EQ(f32_to_fp16(f), ggml_fp32_to_fp16(f)) << "float 0x" << std::hex << u;
    }
}

TEST(Numerics, HalfEdgeCases) {
    EXPECT_EQ(f32_to_fp16(65504.0f), 0x7bff);
    EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);      // rounds up to inf
    EXPECT_EQ(f32_to_fp16(5.9604645e-8f), 0x0001);  // smallest subnormal
    EXPECT_EQ(f32_to_fp16(2.9802322e-8f), 0x0000);  // exactly half of it: ties to even (0)
    EXPECT_EQ(f32_to_fp16(-0.0f), 0x8000);
    EXPECT_TRUE(std::isnan(fp16_to_f32(f32_to_fp16(NAN))));
}

TEST(Numerics, BfloatMatchesGgml) {
    std::mt19937 rng(2);
    std::uniform_int_distribution<uint32_t> any;
    for (int i = 0; i < 1000000; ++i) {
        const uint32_t u = any(rng);
        const float f = from_bits(u);
        const uint16_t ours = f32_to_bf16(f);
        const ggml_bf16_t ref = ggml_fp32_to_bf16(f);
        ASSERT_EQ(ours, ref.bits) << std::hex << u;
        if (!std::isnan(f)) {
            ASSERT_EQ(bits(bf16_to_f32(ours)), bits(ggml_bf16_to_fp32(ref)));
        }
    }
}

namespace {

// Values for the order-key tests: infinities, zeros of both signs, NaNs
// (the second one `nan2`), subnormals, extremes and ties, then 2000 more,
// random bits or repeats of those.
std::vector<float> order_test_values(uint32_t seed, float nan2) {
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> v = {1.0f, -0.0f, 0.0f, nan, -inf, inf, 1.0f, from_bits(1u), from_bits(0x80000001u),
                            -1.0f, nan2, 0.0f, -0.0f, 3.5f, -3.5f, std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(), std::numeric_limits<float>::min(), -inf, inf};
    std::mt19937 rng(seed);
    std::uniform_int_distribution<uint32_t> any;
    std::uniform_int_distribution<int> pick(0, 15);
    for (int i = 0; i < 2000; ++i) v.push_back(pick(rng) == 0 ? v[size_t(pick(rng))] : from_bits(any(rng)));
    return v;
}

// The indices of v in ARGSORT's order as the float comparison gives it: by
// value (falling when desc), equal values by rising index, NaN last.
std::vector<uint32_t> float_order(const std::vector<float> & v, bool desc) {
    std::vector<uint32_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0u);
    std::sort(idx.begin(), idx.end(), [&](uint32_t j, uint32_t i) {
        const bool nj = std::isnan(v[j]), ni = std::isnan(v[i]);
        if (nj || ni) return nj == ni ? j < i : ni;
        if (v[j] != v[i]) return desc ? v[j] > v[i] : v[j] < v[i];
        return j < i;
    });
    return idx;
}

} // namespace

// The fused MoE router's falling order (route.cu's descending ARGSORT takes
// the same order through sort_order_key): larger first, equal values (-0 and
// +0 among them) by rising index, NaN last. Sorting by falling_order_key must
// give exactly it.
TEST(Numerics, FallingOrderKeyIsTheDescendingArgsortOrder) {
    const std::vector<float> v = order_test_values(7u, std::numeric_limits<float>::quiet_NaN());
    std::vector<uint32_t> got(v.size());
    std::iota(got.begin(), got.end(), 0u);
    std::sort(got.begin(), got.end(),
              [&](uint32_t j, uint32_t i) { return falling_order_key(v[j], j) > falling_order_key(v[i], i); });
    EXPECT_EQ(got, float_order(v, true));
}

// ARGSORT's order in both directions (route.cpp, route.cu): by value, equal
// values (-0 and +0 among them) by rising index, NaN after every number.
// Sorting by sort_order_key must give exactly it, and its low word is the index.
TEST(Numerics, SortOrderKeyIsArgsortsOrderWithNaNLast) {
    const std::vector<float> v = order_test_values(11u, -std::numeric_limits<float>::quiet_NaN());
    for (const bool desc : {false, true}) {
        std::vector<uint32_t> got(v.size());
        std::iota(got.begin(), got.end(), 0u);
        const auto key = [&](uint32_t i) { return sort_order_key(v[i], i, desc); };
        std::sort(got.begin(), got.end(), [&](uint32_t j, uint32_t i) { return key(j) < key(i); });
        EXPECT_EQ(got, float_order(v, desc)) << (desc ? "desc" : "asc");
        for (uint32_t i = 0; i < v.size(); ++i) ASSERT_EQ(uint32_t(sort_order_key(v[i], i, desc)), i);
    }
}
