// Our block layouts and dequantisation against ggml's reference, which
// ggml-base exports (type traits to_float / from_float_ref, ggml_quantize_chunk):
// the same bytes must decode to bit-identical floats, and our quantizers
// must produce the reference's bytes. This file is compiled without
// FMA, like ggml-base, so the float operations match one for one.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"
#include "kernels/common/quants.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/isa.h"
#include "kernels/op_table.h"
#include "runtime/host/host_device.h"

using namespace standin;

namespace {

// ggml has no to_float/from_float_ref for F32 itself: a copy.
void ref_to_float(ggml_type t, const void * x, float * y, int64_t n) {
    if (t == GGML_TYPE_F32) {
        std::memcpy(y, x, size_t(n) * sizeof(float));
    } else {
        ggml_get_type_traits(t)->to_float(x, y, n);
    }
}

void ref_from_float(ggml_type t, const float * x, void * y, int64_t n) {
    if (t == GGML_TYPE_F32) {
        std::memcpy(y, x, size_t(n) * sizeof(float));
    } else {
        ggml_get_type_traits(t)->from_float_ref(x, y, n);
    }
}

const ggml_type kDecodable[] = {GGML_TYPE_F32,    GGML_TYPE_F16,    GGML_TYPE_BF16,  GGML_TYPE_Q4_0,
                                GGML_TYPE_Q4_1,   GGML_TYPE_Q5_0,   GGML_TYPE_Q5_1,  GGML_TYPE_Q8_0,
                                GGML_TYPE_Q4_K,   GGML_TYPE_Q5_K,   GGML_TYPE_Q6_K,  GGML_TYPE_Q2_K,
                                GGML_TYPE_Q3_K,   GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, GGML_TYPE_MXFP4,
                                GGML_TYPE_NVFP4,  GGML_TYPE_Q1_0,   GGML_TYPE_Q2_0,  GGML_TYPE_IQ2_XXS,
                                GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S,  GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S,
                                GGML_TYPE_IQ1_S,  GGML_TYPE_IQ1_M,  GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0};

// The types in integer form (Note [integer form], quants.h).
const ggml_type kIntForm[] = {GGML_TYPE_Q2_K,    GGML_TYPE_Q3_K,   GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS,
                              GGML_TYPE_MXFP4,   GGML_TYPE_NVFP4,  GGML_TYPE_Q1_0,   GGML_TYPE_Q2_0,
                              GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S,  GGML_TYPE_IQ3_XXS,
                              GGML_TYPE_IQ3_S,   GGML_TYPE_IQ1_S,  GGML_TYPE_IQ1_M,  GGML_TYPE_TQ1_0,
                              GGML_TYPE_TQ2_0};

// ggml's quantizer for nrows rows; IQ3_XXS/S need their grids initialised.
void quantize_rows(ggml_type t, const float * x, void * dst, int64_t nrows, int64_t n_per_row) {
    ggml_quantize_chunk(t, x, dst, 0, nrows, n_per_row, nullptr);
}

// ggml's IQ1 and IQ2 quantizers first build search tables over their grids
// (seconds each on one core), so the tests give those types random blocks
// with a finite half-precision scale instead of quantized weights.
bool quantizer_is_slow(ggml_type t) {
    return t == GGML_TYPE_IQ2_XXS || t == GGML_TYPE_IQ2_XS || t == GGML_TYPE_IQ2_S || t == GGML_TYPE_IQ1_S ||
           t == GGML_TYPE_IQ1_M;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float & f : v) f = u(rng);
    return v;
}

// Random bytes make every bit pattern of every field appear (scales, high bits,
// nibbles); only half-precision scales are kept finite so that the comparison
// is about our decoding, not about NaN propagation.
std::vector<uint8_t> random_blocks(ggml_type t, int64_t nblocks, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> bytes(size_t(nblocks) * ggml_type_size(t));
    for (uint8_t & b : bytes) b = uint8_t(rng());
    return bytes;
}

// nrows x n weights of type t: ggml's quantization of random floats, or, for
// the types of quantizer_is_slow, random blocks whose scale is set to 1/32
// (IQ1_M keeps its half-precision scale in the top nibbles of 4 words).
std::vector<uint8_t> weight_rows(ggml_type t, int64_t nrows, int64_t n, uint32_t seed) {
    const std::vector<float> w = random_floats(size_t(nrows * n), seed);
    if (t == GGML_TYPE_F32) {
        std::vector<uint8_t> bytes(w.size() * sizeof(float));
        std::memcpy(bytes.data(), w.data(), bytes.size());
        return bytes;
    }
    if (!quantizer_is_slow(t)) {
        std::vector<uint8_t> bytes(ggml_row_size(t, n) * size_t(nrows));
        quantize_rows(t, w.data(), bytes.data(), nrows, n);
        return bytes;
    }
    const int64_t nblocks = nrows * n / ggml_blck_size(t);
    std::vector<uint8_t> bytes = random_blocks(t, nblocks, seed);
    const uint16_t d = ggml_fp32_to_fp16(1.0f / 32);
    for (int64_t ib = 0; ib < nblocks; ++ib) {
        uint8_t * blk = bytes.data() + size_t(ib) * ggml_type_size(t);
        if (t == GGML_TYPE_IQ1_M) {
            uint8_t * sc = blk + 48;  // 32 bytes of qs, 16 of qh, then the scale words
            for (int i = 0; i < 4; ++i) sc[2 * i + 1] = uint8_t((sc[2 * i + 1] & 0x0f) | (((d >> (4 * i)) & 15) << 4));
        } else {
            std::memcpy(blk, &d, 2);
        }
    }
    return bytes;
}

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

void expect_same_floats(const std::vector<float> & ours, const std::vector<float> & ref, const char * what) {
    ASSERT_EQ(ours.size(), ref.size());
    for (size_t i = 0; i < ours.size(); ++i) {
        if (std::isnan(ref[i])) {
            ASSERT_TRUE(std::isnan(ours[i])) << what << " element " << i;
        } else {
            ASSERT_EQ(bits(ours[i]), bits(ref[i])) << what << " element " << i << ": " << ours[i] << " vs " << ref[i];
        }
    }
}

} // namespace

TEST(Quants, BlockSizesMatchGgml) {
    for (ggml_type t : kDecodable) {
        EXPECT_EQ(quant::block_elems(t), ggml_blck_size(t)) << ggml_type_name(t);
        EXPECT_EQ(size_t(quant::block_bytes(t)), ggml_type_size(t)) << ggml_type_name(t);
    }
    EXPECT_EQ(quant::block_elems(GGML_TYPE_Q8_K), 0);
    EXPECT_FALSE(quant::can_decode(GGML_TYPE_Q8_1));
}

TEST(Quants, RandomBytesDecodeLikeGgml) {
    for (ggml_type t : kDecodable) {
        const int64_t qk = ggml_blck_size(t);
        const int64_t nblocks = 64 * (qk == 1 ? 32 : 1);
        const int64_t n = nblocks * qk;
        std::vector<uint8_t> bytes = random_blocks(t, nblocks, 7u + uint32_t(t));
        std::vector<float> ref(static_cast<size_t>(n)), ours(static_cast<size_t>(n), -123.0f);
        ref_to_float(t, bytes.data(), ref.data(), n);
        ASSERT_TRUE(quant::to_f32_row(t, bytes.data(), ours.data(), n)) << ggml_type_name(t);
        expect_same_floats(ours, ref, ggml_type_name(t));
    }
}

// Relative squared error a format's quantizer stays under on uniform values:
// 1 or 2 bits per weight lose a quarter of the signal, FP4 and 3 bits a few percent.
double quantization_error_bound(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0:
        case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0:                        return 0.3;
        case GGML_TYPE_Q2_K:                                               return 0.08;
        case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ3_S:                      return 0.06;
        case GGML_TYPE_Q3_K: case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4:   return 0.03;
        default:                                                           return 0.01;
    }
}

// Blocks made by ggml's quantizer have the value ranges real weights have
// (random bytes give e.g. huge or infinite half scales).
TEST(Quants, QuantizedWeightsDecodeLikeGgml) {
    const int64_t n = 16 * 256;
    const std::vector<float> x = random_floats(size_t(n), 3);
    for (ggml_type t : kDecodable) {
        if (quantizer_is_slow(t)) continue;  // random blocks only (RandomBytesDecodeLikeGgml)
        std::vector<uint8_t> bytes(ggml_row_size(t, n));
        quantize_rows(t, x.data(), bytes.data(), 1, n);
        std::vector<float> ref(static_cast<size_t>(n)), ours(static_cast<size_t>(n));
        ref_to_float(t, bytes.data(), ref.data(), n);
        ASSERT_TRUE(quant::to_f32_row(t, bytes.data(), ours.data(), n));
        expect_same_floats(ours, ref, ggml_type_name(t));
        // And the decoded values are close to the input: the layouts are not
        // merely self-consistent but read the fields ggml wrote.
        double err = 0, sum = 0;
        for (int64_t i = 0; i < n; ++i) {
            err += (ours[size_t(i)] - x[size_t(i)]) * (ours[size_t(i)] - x[size_t(i)]);
            sum += x[size_t(i)] * x[size_t(i)];
        }
        EXPECT_LT(err / sum, quantization_error_bound(t)) << ggml_type_name(t);
    }
}

// ggml-cpu (libggml-cpu.so) holds the CPU backend's quantizers and dot
// products; it sits next to libggml-base, which the test links.
void * open_cpu_backend() {
    if (void * lib = dlopen("libggml-cpu.so", RTLD_NOW | RTLD_LOCAL)) {
        return lib;
    }
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&ggml_init), &info) == 0 || info.dli_fname == nullptr) {
        return nullptr;
    }
    std::string path = info.dli_fname;
    path = path.substr(0, path.find_last_of('/') + 1) + "libggml-cpu.so";
    return dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
}

// Inputs for the quantizers: mixed magnitudes, exact zeros, a zero block, and
// (odd seeds) values rounded to bfloat16, whose short mantissas make exact
// rounding ties common, so tie handling is really exercised.
std::vector<float> quantizer_input(int64_t n, uint32_t seed) {
    std::vector<float> x = random_floats(size_t(n), 100 + seed, -3.0f, 3.0f);
    for (int64_t i = 0; i < n; i += 7) x[size_t(i)] *= 1e-3f;
    for (int64_t i = 64; i < 96; ++i) x[size_t(i)] = 0.0f;
    x[200] = -0.0f;
    if (seed % 2) {
        for (float & f : x) f = ggml_bf16_to_fp32(ggml_fp32_to_bf16(f));
    }
    return x;
}

// Every encoder of quants_encode.h but Q8_0's (next test; those of
// quants_encode_k.h are in test_quants_k.cpp): the reference's bytes. Where
// ggml's IQ4_NL quantizer meets an all-zero block it stores zero as the scale
// and leaves the indices of the block before, so for IQ4_NL the blocks with a
// zero scale are compared as values only (all zeros either way).
TEST(Quants, QuantizersMatchReference) {
    for (ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q1_0,
                        GGML_TYPE_Q2_0, GGML_TYPE_MXFP4, GGML_TYPE_NVFP4, GGML_TYPE_TQ2_0, GGML_TYPE_IQ4_NL,
                        GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F32}) {
        ASSERT_TRUE(quant::can_encode(t)) << ggml_type_name(t);
        for (uint32_t seed = 0; seed < 4; ++seed) {
            const int64_t n = 4096;
            const std::vector<float> x = quantizer_input(n, seed);
            std::vector<uint8_t> ref(ggml_row_size(t, n)), ours(ref.size(), 0xAB);
            ref_from_float(t, x.data(), ref.data(), n);
            ASSERT_TRUE(quant::from_f32_row(t, x.data(), ours.data(), n));
            const size_t bs = ggml_type_size(t);
            for (size_t b = 0; b < ref.size() / bs; ++b) {
                const uint8_t * r = ref.data() + b * bs;
                if (t == GGML_TYPE_IQ4_NL && r[0] == 0 && r[1] == 0) continue;
                ASSERT_EQ(0, std::memcmp(ours.data() + b * bs, r, bs))
                    << ggml_type_name(t) << " seed " << seed << " block " << b;
            }
            std::vector<float> yr(static_cast<size_t>(n)), yo(static_cast<size_t>(n));
            ref_to_float(t, ref.data(), yr.data(), n);
            ref_to_float(t, ours.data(), yo.data(), n);
            for (int64_t i = 0; i < n; ++i) {  // == : a zero scale gives -0 under negative levels
                ASSERT_EQ(yr[size_t(i)], yo[size_t(i)]) << ggml_type_name(t) << " element " << i;
            }
        }
    }
    EXPECT_FALSE(quant::can_encode(GGML_TYPE_IQ2_XXS));  // decoded, never encoded
    float x[256] = {};
    uint8_t out[256];
    EXPECT_FALSE(quant::from_f32_row(GGML_TYPE_IQ3_S, x, out, 256));
}

// Q8_0 follows the CPU backend's quantizer (quants.h says why), which lives in
// libggml-cpu; the test binary finds it through its rpath.
TEST(Quants, Q8_0MatchesCpuBackend) {
    void * lib = open_cpu_backend();
    if (lib == nullptr) {
        GTEST_SKIP() << "libggml-cpu.so not found next to libggml-base";
    }
    using TraitsFn = const ggml_type_traits_cpu * (*)(ggml_type);
    using InitFn   = void (*)();
    auto traits = reinterpret_cast<TraitsFn>(dlsym(lib, "ggml_get_type_traits_cpu"));
    auto init   = reinterpret_cast<InitFn>(dlsym(lib, "ggml_cpu_init"));
    ASSERT_NE(traits, nullptr);
    ASSERT_NE(init, nullptr);
    init();
    const ggml_from_float_t cpu_q8_0 = traits(GGML_TYPE_Q8_0)->from_float;
    ASSERT_NE(cpu_q8_0, nullptr);
    size_t differs_from_ref = 0;
    for (uint32_t seed = 0; seed < 6; ++seed) {
        const int64_t n = 4096;
        const std::vector<float> x = quantizer_input(n, seed);
        std::vector<uint8_t> cpu(ggml_row_size(GGML_TYPE_Q8_0, n)), ours(cpu.size(), 0xAB), ref(cpu.size());
        cpu_q8_0(x.data(), cpu.data(), n);
        ASSERT_TRUE(quant::from_f32_row(GGML_TYPE_Q8_0, x.data(), ours.data(), n));
        ASSERT_EQ(0, std::memcmp(ours.data(), cpu.data(), cpu.size())) << "seed " << seed;
        // The reference differs at most by one step, on ties only.
        ref_from_float(GGML_TYPE_Q8_0, x.data(), ref.data(), n);
        for (size_t i = 0; i < ref.size(); ++i) {
            const int diff = int(int8_t(ours[i])) - int(int8_t(ref[i]));
            differs_from_ref += diff != 0;
            if (i % sizeof(quant::BlockQ8_0) >= 2) {
                ASSERT_LE(std::abs(diff), 1) << i;
            }
        }
    }
    EXPECT_LT(differs_from_ref, 200u);
    dlclose(lib);
}

TEST(Quants, KScaleUnpacking) {
    // Sub-block j's 6-bit scale and min, packed by hand.
    uint8_t s[12] = {};
    const int sc[8] = {1, 22, 33, 63, 5, 40, 17, 62};
    const int mn[8] = {63, 0, 9, 31, 48, 7, 60, 1};
    for (int j = 0; j < 4; ++j) {
        s[j]     = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = uint8_t(mn[j] | ((mn[j + 4] >> 4) << 6));
        s[j + 8] = uint8_t((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
    for (int j = 0; j < 8; ++j) {
        int a, b;
        quant::k_scale_min(s, j, a, b);
        EXPECT_EQ(a, sc[j]) << j;
        EXPECT_EQ(b, mn[j]) << j;
    }
}

// --- MUL_MAT (kernels/host/mul_mat*.cpp) ------------------------------------------
// Every weight type against a double-precision product of the dequantized
// weights, over shapes that reach every micro-kernel shape and tail: row counts
// not a multiple of 4, column counts 1..9 (4-, 2- and 1-column kernels) and K
// with a partial run of 8 blocks. Tolerance: the activations are quantized to
// int8 for block weights (NMSE about 1e-5), rounded to F16/BF16 under such
// weights, exact for F32.

namespace {

struct MatMulCase {
    ggml_type type;
    int64_t   K, M, N;
};

// patch, when given, edits the weight bytes before the product.
using WeightPatch = void (*)(std::vector<uint8_t> & weights);

double matmul_nmse(const MatMulCase & mc, uint32_t seed, std::vector<float> * out = nullptr, WeightPatch patch = nullptr) {
    ggml_init_params ip = {size_t(64) << 20, nullptr, false};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, mc.type, mc.K, mc.M);
    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, mc.K, mc.N);
    ggml_tensor * c = ggml_mul_mat(ctx, a, b);
    std::vector<uint8_t> w = weight_rows(mc.type, mc.M, mc.K, seed);
    if (patch != nullptr) patch(w);
    const std::vector<float> x = random_floats(size_t(mc.K * mc.N), seed + 1);
    std::memcpy(a->data, w.data(), w.size());
    std::memcpy(b->data, x.data(), x.size() * sizeof(float));
    EXPECT_TRUE(kernels::supports(rt::Kind::host, c));
    rt::host::HostStream stream{2};
    EXPECT_TRUE(kernels::host::mul_mat(stream, c));

    std::vector<float> deq(size_t(mc.K));
    double err = 0, ref2 = 0;
    for (int64_t m = 0; m < mc.M; ++m) {
        ref_to_float(mc.type, static_cast<const char *>(a->data) + m * a->nb[1], deq.data(), mc.K);
        for (int64_t n = 0; n < mc.N; ++n) {
            double r = 0;
            for (int64_t k = 0; k < mc.K; ++k) r += double(deq[size_t(k)]) * x[size_t(n * mc.K + k)];
            const double got = static_cast<const float *>(c->data)[n * mc.M + m];
            err += (got - r) * (got - r);
            ref2 += r * r;
        }
    }
    if (out) out->assign(static_cast<const float *>(c->data), static_cast<const float *>(c->data) + mc.M * mc.N);
    ggml_free(ctx);
    return err / ref2;
}

} // namespace

TEST(QuantMatMul, AllWeightTypesMatchDequantizedProduct) {
    for (ggml_type t : kDecodable) {
        const int64_t qk = ggml_blck_size(t);
        // 32-element formats: 11 blocks, one run of 8 and a tail of 3.
        const int64_t K  = qk == 256 ? 3 * 256 : 11 * std::max<int64_t>(qk, 32);
        const double  tol = ggml_is_quantized(t) ? 1e-4 : (t == GGML_TYPE_F32 ? 1e-12 : 1e-4);
        for (int64_t N : {1, 2, 3, 5, 9}) {
            const MatMulCase mc{t, K, 13, N};
            EXPECT_LT(matmul_nmse(mc, 40 + uint32_t(N)), tol) << ggml_type_name(t) << " N=" << N;
        }
    }
}

// Float weights with 48 or more columns take the panel kernels (mul_mat.cpp):
// a row count that leaves a partial panel, K over one panel depth (256) with
// a tail that is not a multiple of 8, column counts leaving 1..5 columns, and
// more columns than one task takes.
TEST(QuantMatMul, FloatPanelsMatchDoubleProduct) {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
        for (int64_t N : {48, 53, 100, 389}) {
            const MatMulCase mc{t, 300, 29, N};
            EXPECT_LT(matmul_nmse(mc, 60 + uint32_t(N)), t == GGML_TYPE_F32 ? 1e-12 : 1e-4) << ggml_type_name(t) << " N=" << N;
        }
    }
}

// For the 32-element formats the integer sums, the scales and the order of the
// float operations are those of ggml-cpu's vec_dot (Note [activation blocks]),
// so a matrix-vector product is bit-identical to it.
TEST(QuantMatMul, MatVecIdenticalToCpuBackend) {
    void * lib = open_cpu_backend();
    if (lib == nullptr) {
        GTEST_SKIP() << "libggml-cpu.so not found next to libggml-base";
    }
    using TraitsFn = const ggml_type_traits_cpu * (*)(ggml_type);
    auto traits = reinterpret_cast<TraitsFn>(dlsym(lib, "ggml_get_type_traits_cpu"));
    ASSERT_NE(traits, nullptr);
    reinterpret_cast<void (*)()>(dlsym(lib, "ggml_cpu_init"))();
    for (ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q5_0, GGML_TYPE_Q8_0}) {
        const MatMulCase mc{t, 4096 + 96, 9, 1};
        std::vector<float> ours;
        matmul_nmse(mc, 7, &ours);
        // The same inputs through ggml-cpu: quantize the activation row, vec_dot each weight row.
        std::vector<uint8_t> wq(ggml_row_size(t, mc.K) * size_t(mc.M));
        const std::vector<float> w = random_floats(size_t(mc.K * mc.M), 7);
        const std::vector<float> x = random_floats(size_t(mc.K), 8);
        ggml_quantize_chunk(t, w.data(), wq.data(), 0, mc.M, mc.K, nullptr);
        const auto * tr = traits(t);
        std::vector<uint8_t> xq(ggml_row_size(tr->vec_dot_type, mc.K));
        traits(tr->vec_dot_type)->from_float(x.data(), xq.data(), mc.K);
        for (int64_t m = 0; m < mc.M; ++m) {
            float ref = 0;
            tr->vec_dot(int(mc.K), &ref, 0, wq.data() + m * ggml_row_size(t, mc.K), 0, xq.data(), 0, 1);
            EXPECT_EQ(bits(ours[size_t(m)]), bits(ref)) << ggml_type_name(t) << " row " << m << ": " << ours[size_t(m)]
                                                       << " vs " << ref;
        }
    }
    dlclose(lib);
}

// The types in integer form meet ggml-cpu's own activation blocks (Q8_0 or
// Q8_K, by type) with the same integer sums, so a matrix-vector product
// matches its vec_dot up to the order of float additions (NMSE ~1e-13);
// activations rounded any other way would be off by about their own
// quantization error (~1e-5, QuantMatMul above).
TEST(QuantMatMul, IntFormMatVecMatchesCpuBackend) {
    void * lib = open_cpu_backend();
    if (lib == nullptr) {
        GTEST_SKIP() << "libggml-cpu.so not found next to libggml-base";
    }
    using TraitsFn = const ggml_type_traits_cpu * (*)(ggml_type);
    auto traits = reinterpret_cast<TraitsFn>(dlsym(lib, "ggml_get_type_traits_cpu"));
    ASSERT_NE(traits, nullptr);
    reinterpret_cast<void (*)()>(dlsym(lib, "ggml_cpu_init"))();
    for (ggml_type t : kIntForm) {
        const MatMulCase mc{t, 4096 + 256, 9, 1};
        std::vector<float> ours;
        matmul_nmse(mc, 11, &ours);
        const std::vector<uint8_t> wq = weight_rows(t, mc.M, mc.K, 11);
        const std::vector<float> x = random_floats(size_t(mc.K), 12);
        const auto * tr = traits(t);
        ASSERT_NE(tr->vec_dot, nullptr) << ggml_type_name(t);
        std::vector<uint8_t> xq(ggml_row_size(tr->vec_dot_type, mc.K));
        traits(tr->vec_dot_type)->from_float(x.data(), xq.data(), mc.K);
        double err = 0, ref2 = 0;
        for (int64_t m = 0; m < mc.M; ++m) {
            float ref = 0;
            tr->vec_dot(int(mc.K), &ref, 0, wq.data() + m * ggml_row_size(t, mc.K), 0, xq.data(), 0, 1);
            err += (double(ours[size_t(m)]) - ref) * (double(ours[size_t(m)]) - ref);
            ref2 += double(ref) * ref;
        }
        EXPECT_LT(err / ref2, 1e-11) << ggml_type_name(t);
    }
    dlclose(lib);
}

// The other types in integer form decode a row into its product block by
// block at one column (NVFP4 and Q1_0: mul_mat_qd_column.h, per level) and a
// row for all columns at several (mul_mat_qd.cpp's tile_int), with the same
// operations per column: column 0 of 5 against that column alone, bit for
// bit, at every level the CPU has. 13 rows take the one-column kernels' runs
// of rows side by side and single rows. NVFP4's weights carry every scale
// code (0x7F, read as 0, and the unread top bit among them): the one-column
// kernels read a table where the other path calls ue4m3_half.
void every_nvfp4_scale(std::vector<uint8_t> & w) {
    for (size_t b = 0; b < w.size() / sizeof(quant::BlockNVFP4); ++b) {
        for (size_t k = 0; k < 4; ++k) w[b * sizeof(quant::BlockNVFP4) + k] = uint8_t(4 * b + k);
    }
}

TEST(QuantMatMul, IntFormTypesSameBitsAloneAndAmongColumns) {
    namespace isa = kernels::host::isa;
    const isa::Level best = isa::choose(isa::detect());
    for (ggml_type t : {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, GGML_TYPE_MXFP4, GGML_TYPE_NVFP4,
                        GGML_TYPE_Q1_0, GGML_TYPE_Q2_0}) {
        const int64_t     K     = ggml_blck_size(t) == 256 ? 3 * 256 : 6 * 128;
        const WeightPatch patch = t == GGML_TYPE_NVFP4 ? every_nvfp4_scale : nullptr;
        for (isa::Level l : {isa::Level::avx2, isa::Level::avx512_vnni}) {
            if (!isa::force(l)) continue;
            std::vector<float> alone, among;
            matmul_nmse(MatMulCase{t, K, 13, 1}, 80, &alone, patch);
            matmul_nmse(MatMulCase{t, K, 13, 5}, 80, &among, patch);
            ASSERT_EQ(among.size(), 5 * alone.size());
            for (size_t m = 0; m < alone.size(); ++m) {
                EXPECT_EQ(bits(among[m]), bits(alone[m])) << ggml_type_name(t) << " " << isa::name(l) << " row " << m;
            }
        }
    }
    isa::force(best);
}

// The grid i-quants' and the ternary types' products at several columns
// decode a tile's rows into groups of 8 and take the activations in the
// level's form (mul_mat_x8_grid.h), one column decodes each row into its
// product (mul_mat_qd.cpp): the same integers and float steps, so the same
// bits at every column count and level. 117 rows are 8 row tiles, the last
// ending in a group of 5, so 130 columns take tiles of 128 columns and one
// of 2 (mul_mat.cpp's wide_tile_cols, 2 threads); 21 rows are 2 row
// tiles, so 130 columns fall back to tiles of 32. Every width of column
// run appears. Column 0 of each product against that column alone at the
// same level; every column against the first level's product.
TEST(QuantMatMul, GridTypesSameBitsAtEveryColumnCountAndLevel) {
    namespace isa = kernels::host::isa;
    const isa::Level best = isa::choose(isa::detect());
    for (ggml_type t : {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S,
                        GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0}) {
        for (int64_t M : {117, 21}) {
            // The column alone at each level the CPU has, once for every N.
            const isa::Level levels[3] = {isa::Level::avx2, isa::Level::avx512_vnni, isa::Level::avx512_amx};
            std::vector<float> alone_at[3];
            for (int li = 0; li < 3; ++li) {
                if (isa::force(levels[li])) matmul_nmse(MatMulCase{t, 3 * 256, M, 1}, 70, &alone_at[li]);
            }
            for (int64_t N : {2, 9, 130}) {
                std::vector<float> first;
                for (int li = 0; li < 3; ++li) {
                    if (!isa::force(levels[li])) continue;
                    const std::vector<float> & alone = alone_at[li];
                    std::vector<float> among;
                    EXPECT_LT(matmul_nmse(MatMulCase{t, 3 * 256, M, N}, 70, &among), 1e-4)
                        << ggml_type_name(t) << " M=" << M << " N=" << N;
                    ASSERT_EQ(among.size(), size_t(N) * alone.size());
                    for (size_t m = 0; m < alone.size(); ++m) {
                        EXPECT_EQ(bits(among[m]), bits(alone[m])) << ggml_type_name(t) << " M=" << M << " N=" << N << " row " << m;
                    }
                    if (first.empty()) {
                        first = among;
                    } else {
                        expect_same_floats(among, first, ggml_type_name(t));
                    }
                }
            }
        }
    }
    isa::force(best);
}
