// The super-block quantizers (kernels/common/quants_encode_k.h: Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, IQ4_XS) against ggml-base's reference ones, which are
// what ggml-cpu's SET_ROWS and CPY call: the same bytes for every block,
// over random rows and blocks built to reach the quantizers' special paths.
// This file is compiled without FMA, like ggml-base; the host kernels, built
// with it, are held to the same bytes by test-backend-ops (SET_ROWS, CPY).
// Also: the op table claims these destinations on the host only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml.h"
#include "kernels/common/quants.h"
#include "kernels/op_table.h"

using namespace standin;

namespace {

const ggml_type kSuperBlockEncoded[] = {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,
                                        GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS};

constexpr int kQK_K = 256;

// One 256-element block per case: each reaches a different path of the
// searches (all-zero runs and blocks, a minimum above zero, scales below
// half precision's range, exact rounding ties, one value dominating).
enum Case {
    kMixed,        // uniform in [-3, 3], every 7th value a thousand times smaller
    kZero,         // all zeros (and one -0)
    kTiny,         // |x| ~ 1e-9: scales under half precision's smallest subnormal
    kBelowEps,     // |x| ~ 1e-17: every run taken as zero
    kOutlier,      // +-0.01 and one value of 1000
    kNegative,     // negative only
    kOffset,       // 5 + u: the minimum above zero, held at zero
    kConstant,     // one value throughout (max == min)
    kTies,         // bfloat16-rounded values: short mantissas, frequent ties
    kHalfZero,     // the first 128 zero, the rest random
    kSigns,        // +-1 exactly
    kLarge,        // |x| ~ 1e6
    kSparse,       // one nonzero value per run of 16
    kWide,         // uniform in [-150, 150], the range of test-backend-ops' CPY
    kCases
};

const char * case_name(int c) {
    static const char * names[] = {"mixed",    "zero",  "tiny",  "below_eps", "outlier", "negative", "offset",
                                   "constant", "ties",  "half_zero", "signs", "large",    "sparse", "wide"};
    return names[c];
}

std::vector<float> case_block(int c, std::mt19937 & rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(kQK_K);
    for (float & f : x) f = u(rng);
    switch (c) {
        case kMixed:
            for (int i = 0; i < kQK_K; ++i) x[i] *= (i % 7 == 0) ? 3e-3f : 3.0f;
            break;
        case kZero:
            for (float & f : x) f = 0.0f;
            x[37] = -0.0f;
            break;
        case kTiny:
            for (float & f : x) f *= 1e-9f;
            break;
        case kBelowEps:
            for (float & f : x) f *= 1e-17f;
            break;
        case kOutlier:
            for (float & f : x) f *= 0.01f;
            x[std::uniform_int_distribution<int>(0, kQK_K - 1)(rng)] = 1000.0f;
            break;
        case kNegative:
            for (float & f : x) f = -std::fabs(f);
            break;
        case kOffset:
            for (float & f : x) f = 5.0f + std::fabs(f);
            break;
        case kConstant:
            for (float & f : x) f = 0.75f;
            break;
        case kTies:
            for (float & f : x) f = ggml_bf16_to_fp32(ggml_fp32_to_bf16(2.0f * f));
            break;
        case kHalfZero:
            for (int i = 0; i < kQK_K / 2; ++i) x[i] = 0.0f;
            break;
        case kSigns:
            for (float & f : x) f = f < 0.0f ? -1.0f : 1.0f;
            break;
        case kLarge:
            for (float & f : x) f *= 1e6f;
            break;
        case kSparse:
            for (int i = 0; i < kQK_K; ++i) x[i] = i % 16 == 5 ? x[i] : 0.0f;
            break;
        case kWide:
            for (float & f : x) f *= 150.0f;
            break;
        default:
            break;
    }
    return x;
}

// Rows of kCases blocks, one per case, for a few seeds.
std::vector<float> case_row(uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<float> row;
    for (int c = 0; c < kCases; ++c) {
        const std::vector<float> b = case_block(c, rng);
        row.insert(row.end(), b.begin(), b.end());
    }
    return row;
}

} // namespace

TEST(QuantsK, SuperBlockQuantizersMatchReference) {
    for (ggml_type t : kSuperBlockEncoded) {
        ASSERT_TRUE(quant::can_encode(t)) << ggml_type_name(t);
        const size_t bs = ggml_type_size(t);
        for (uint32_t seed = 0; seed < 4; ++seed) {
            const std::vector<float> x = case_row(seed);
            const int64_t n = int64_t(x.size());
            std::vector<uint8_t> ref(ggml_row_size(t, n)), ours(ref.size(), 0xAB);
            ggml_get_type_traits(t)->from_float_ref(x.data(), ref.data(), n);
            ASSERT_TRUE(quant::from_f32_row(t, x.data(), ours.data(), n)) << ggml_type_name(t);
            for (int c = 0; c < kCases; ++c) {
                const uint8_t * r = ref.data() + size_t(c) * bs;
                const uint8_t * o = ours.data() + size_t(c) * bs;
                size_t first = bs;
                for (size_t k = 0; k < bs && first == bs; ++k) {
                    if (r[k] != o[k]) first = k;
                }
                EXPECT_EQ(first, bs) << ggml_type_name(t) << " seed " << seed << " case " << case_name(c)
                                     << ": first differing byte " << first;
            }
        }
    }
}

// Larger random rows: the bulk of what a KV cache or a CPY meets.
TEST(QuantsK, RandomRowsMatchReference) {
    const int64_t n = 64 * kQK_K;
    for (ggml_type t : kSuperBlockEncoded) {
        for (uint32_t seed = 0; seed < 3; ++seed) {
            std::mt19937 rng(900 + seed);
            std::normal_distribution<float> g(0.0f, seed == 2 ? 40.0f : 1.0f);
            std::vector<float> x(static_cast<size_t>(n));
            for (float & f : x) f = g(rng);
            if (seed == 1) {
                for (float & f : x) f = ggml_fp16_to_fp32(ggml_fp32_to_fp16(f));
            }
            std::vector<uint8_t> ref(ggml_row_size(t, n)), ours(ref.size(), 0xAB);
            ggml_get_type_traits(t)->from_float_ref(x.data(), ref.data(), n);
            ASSERT_TRUE(quant::from_f32_row(t, x.data(), ours.data(), n));
            const size_t bs = ggml_type_size(t);
            for (size_t b = 0; b < ref.size() / bs; ++b) {
                ASSERT_EQ(0, std::memcmp(ours.data() + b * bs, ref.data() + b * bs, bs))
                    << ggml_type_name(t) << " seed " << seed << " block " << b;
            }
        }
    }
}

// The rounding every search step goes through: ties to even, and the
// reference's wrap outside its range rather than undefined behaviour.
TEST(QuantsK, RoundHalfEven) {
    EXPECT_EQ(quant::enc::round_half_even(0.5f), 0);
    EXPECT_EQ(quant::enc::round_half_even(1.5f), 2);
    EXPECT_EQ(quant::enc::round_half_even(2.5f), 2);
    EXPECT_EQ(quant::enc::round_half_even(-2.5f), -2);
    EXPECT_EQ(quant::enc::round_half_even(-3.5f), -4);
    EXPECT_EQ(quant::enc::round_half_even(2.4999998f), 2);
    EXPECT_EQ(quant::enc::round_half_even(-4194303.0f), -4194303);
    EXPECT_EQ(quant::enc::round_half_even(std::nanf("")), 0);
}

// SET_ROWS and CPY from floats into these types: the host claims them (its
// kernels encode through from_f32_row); the CUDA device encodes blocks of 32
// only and must not (cuda_encodes, op_table.cpp).
TEST(QuantsK, HostClaimsSuperBlockDestinationsCudaDoesNot) {
    ggml_init_params ip = {size_t(1) << 20, nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    ASSERT_NE(ctx, nullptr);
    for (ggml_type t : kSuperBlockEncoded) {
        ggml_tensor * dst = ggml_new_tensor_2d(ctx, t, 512, 6);
        ggml_tensor * src = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 512, 3);
        ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 3);
        ggml_tensor * src16 = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 512, 6);
        const ggml_tensor * nodes[] = {ggml_set_rows(ctx, dst, src, idx), ggml_cpy(ctx, src16, dst)};
        for (const ggml_tensor * node : nodes) {
            EXPECT_TRUE(kernels::supports(rt::Kind::host, node)) << ggml_op_name(node->op) << " " << ggml_type_name(t);
            EXPECT_FALSE(kernels::supports(rt::Kind::cuda, node)) << ggml_op_name(node->op) << " " << ggml_type_name(t);
        }
    }
    ggml_free(ctx);
}
