// The integer product's weight formats (kernels/cuda/mmq_formats.cuh) and the
// decoders' parts (kernels/cuda/dequant.cuh), checked on the host: for random
// blocks of every format, each element rebuilt from codes() and scale() (as the
// tensor cores and the epilogue combine them), and each element a Part reads,
// equals quants.h's dequant() of the same block. Built by nvcc as a host
// program, so it runs in CI on a machine without a GPU. Prints
// "mmq formats: ok" and exits 0, or names the first mismatch and exits 1.
// Also the integer-form formats' device decoders (check_int_form).
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "kernels/common/quants.h"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/mmq_formats.cuh"
#include "kernels/cuda/weight_types.h"

using namespace standin;
namespace mq = standin::kernels::cuda::mmq;

namespace {

std::mt19937 rng(1234);

uint16_t random_half() {  // a finite, moderate scale of either sign
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    return num::f32_to_fp16(u(rng));
}

template <typename Block> void dequant_rows(const uint8_t * p, int blocks, int qk, float * y) {
    for (int b = 0; b < blocks; ++b) {
        Block blk;
        std::memcpy(&blk, p + b * sizeof(Block), sizeof(Block));
        quant::dequant(blk, y + b * qk);
    }
}

// Random bytes, then every half-precision scale field replaced by a finite value.
template <int T, typename Block> bool check(const char * name, std::initializer_list<int> half_offsets) {
    using F = mq::Fmt<T>;
    constexpr int kBlocks = F::kChunkBlocks, kElems = mq::chunk_elems<T>();
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<uint8_t> raw(kBlocks * sizeof(Block) + 4);
        for (auto & b : raw) b = uint8_t(rng());
        for (int b = 0; b < kBlocks; ++b) {
            for (int off : half_offsets) {
                const uint16_t h = random_half();
                std::memcpy(raw.data() + b * sizeof(Block) + off, &h, 2);
            }
        }
        std::vector<float> want(kElems);
        dequant_rows<Block>(raw.data(), kBlocks, F::kQK, want.data());
        for (int s = 0; s < kElems / 32; ++s) {
            float sc, mn;
            F::scale(raw.data(), s, sc, mn);
            uint32_t min_lo = 0, min_hi = 0;
            if constexpr (mq::kMinCodes<T>) F::min_codes(raw.data(), s, min_lo, min_hi);
            for (int t = 0; t < 4; ++t) {
                uint32_t lo, hi;
                F::codes(raw.data(), s, t, lo, hi);
                for (int i = 0; i < 8; ++i) {
                    const uint32_t word = i < 4 ? lo : hi;
                    const int code = int(int8_t(uint8_t(word >> (8 * (i % 4)))));
                    const int e = (i < 4 ? 0 : 16) + 4 * t + i % 4;  // element within the sub-block
                    float got;
                    if constexpr (F::kSplit16) {
                        got = (e < 16 ? sc : mn) * float(code);
                    } else if constexpr (mq::kMinCodes<T>) {
                        // The two integer products, each with its factor (Fmt<Q2_K>).
                        const int min_code = int(int8_t(uint8_t((i < 4 ? min_lo : min_hi) >> (8 * (i % 4)))));
                        got = sc * float(code) + mn * float(min_code);
                    } else {
                        got = sc * float(code) + mn;
                    }
                    const float w = want[32 * s + e];
                    if (std::fabs(got - w) > 1e-6f * (1.0f + std::fabs(w))) {
                        std::printf("mmq formats: FAIL %s trial %d sub-block %d element %d: %g, dequant %g\n", name,
                                    trial, s, e, got, w);
                        return false;
                    }
                }
            }
        }
    }
    std::printf("%s: every element of %d random chunks matches dequant\n", name, 200);
    return true;
}

// dequant.cuh's Part<T> (the 8-element pieces the decoding kernels and the
// cuBLAS path's F16 conversion read): every part of random blocks, at the two
// element offsets it names, equals dequant, and the parts cover the block once.
template <int T, typename Block> bool check_parts(const char * name, std::initializer_list<int> half_offsets) {
    using P = kernels::cuda::dq::Part<T>;
    static_assert(P::kBytes == int(sizeof(Block)), "block size");
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<uint8_t> raw(sizeof(Block) + 4);
        for (auto & b : raw) b = uint8_t(rng());
        for (int off : half_offsets) {
            const uint16_t h = random_half();
            std::memcpy(raw.data() + off, &h, 2);
        }
        std::vector<float> want(P::kQKb);
        dequant_rows<Block>(raw.data(), 1, P::kQKb, want.data());
        std::vector<int> hits(P::kQKb, 0);
        for (int part = 0; part < P::kParts; ++part) {
            float v[8];
            int a = -1, b = -1;
            P::get(raw.data(), part, v, a, b);
            for (int i = 0; i < 8; ++i) {
                const int e = i < 4 ? a + i : b + i - 4;
                const float w = want[size_t(e)];
                if (e < 0 || e >= P::kQKb || std::fabs(v[i] - w) > 1e-6f * (1.0f + std::fabs(w))) {
                    std::printf("mmq formats: FAIL %s part %d trial %d element %d: %g, dequant %g\n", name, part,
                                trial, e, v[i], w);
                    return false;
                }
                ++hits[size_t(e)];
            }
        }
        for (int e = 0; e < P::kQKb; ++e) {
            if (hits[size_t(e)] != 1) {
                std::printf("mmq formats: FAIL %s element %d read by %d parts\n", name, e, hits[size_t(e)]);
                return false;
            }
        }
    }
    std::printf("%s: every part of %d random blocks matches dequant\n", name, 200);
    return true;
}

// The integer-form formats (dequant.cuh's elem(), run_words() and
// run_dot(), the tiled and F16 decodes' run_to_f32): every element elem()
// reads of random rows of two blocks is bit-identical to dequant, every run's
// packed codes rebuild it through int_form_value, and run_dot equals the dot
// product of dequant's values with random activation codes (to float
// rounding: it sums exact integers, then scales).
std::set<int> & checked_int_forms() {
    static std::set<int> s;
    return s;
}

template <int T> bool check_int_form(const char * name, void (*fix)(uint8_t *)) {
    namespace dq = kernels::cuda::dq;
    checked_int_forms().insert(T);
    using Block = typename dq::IntForm<T>::B;
    constexpr int kQKb = Block::kElems, kRuns = kQKb / 16;
    static_assert(dq::kIntForm<T>, "an integer-form type");
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<uint8_t> raw(2 * sizeof(Block) + 4);
        for (auto & b : raw) b = uint8_t(rng());
        fix(raw.data());
        fix(raw.data() + sizeof(Block));
        std::vector<float> want(2 * kQKb);
        dequant_rows<Block>(raw.data(), 2, kQKb, want.data());
        const char * row = reinterpret_cast<const char *>(raw.data());
        for (int e = 0; e < 2 * kQKb; ++e) {
            const float got = dq::elem(T, row, e);
            if (std::memcmp(&got, &want[size_t(e)], sizeof(float)) != 0) {
                std::printf("mmq formats: FAIL %s elem trial %d element %d: %g, dequant %g\n", name, trial, e, got,
                            want[size_t(e)]);
                return false;
            }
        }
        for (int r = 0; r < kRuns; ++r) {
            const dq::RunWords w = dq::run_words<Block>(raw.data(), r);
            int a[4];
            double ref = 0.0, mag = 0.0;
            const float da = std::uniform_real_distribution<float>(0.001f, 0.1f)(rng);
            for (int l = 0; l < 16; ++l) {
                const int code = int(int8_t(uint8_t(uint32_t(w.w[l / 4]) >> (8 * (l % 4)))));
                const float v = quant::int_form_value<Block>(w.sc, code, w.mn), x = want[size_t(16 * r + l)];
                if (std::memcmp(&v, &x, sizeof(float)) != 0) {
                    std::printf("mmq formats: FAIL %s run_words trial %d run %d element %d: %g, dequant %g\n", name,
                                trial, r, l, v, x);
                    return false;
                }
                const int qa = int(rng() % 255) - 127;
                reinterpret_cast<uint8_t *>(a)[l] = uint8_t(int8_t(qa));
                ref += double(x) * double(qa) * double(da);
                mag += std::fabs(double(x) * double(qa) * double(da));
            }
            if (!std::isfinite(ref)) continue;  // an extreme random scale: nothing to compare
            const float got = dq::run_dot<Block>(w, a, da);
            if (std::fabs(double(got) - ref) > 1e-5 * mag + 1e-30) {
                std::printf("mmq formats: FAIL %s run_dot trial %d run %d: %.9g, want %.9g\n", name, trial, r, got,
                            ref);
                return false;
            }
        }
    }
    std::printf("%s: elem, run_words and run_dot of %d random blocks match dequant\n", name, 200);
    return true;
}

// A finite half-precision scale written at byte offset `off` of a block.
template <size_t kOff> void half_at(uint8_t * blk) {
    const uint16_t h = random_half();
    std::memcpy(blk + kOff, &h, 2);
}
template <size_t kOff, size_t kOff2> void halves_at(uint8_t * blk) {
    half_at<kOff>(blk);
    half_at<kOff2>(blk);
}
void no_fix(uint8_t *) {}
// MXFP4's E8M0 scale kept where 12 times it stays finite (2^-127 .. 2^32).
void mxfp4_fix(uint8_t * blk) { blk[offsetof(quant::BlockMXFP4, e)] = uint8_t(rng() % 160); }
// IQ1_M's half scale lives in the top nibbles of its four 16-bit scale words.
void iq1m_fix(uint8_t * blk) {
    const uint16_t h = random_half();
    uint8_t * sc = blk + offsetof(quant::BlockIQ1_M, scales);
    for (int i = 0; i < 4; ++i) sc[2 * i + 1] = uint8_t((sc[2 * i + 1] & 0x0f) | (((h >> (4 * i)) & 15) << 4));
}

bool check_int_forms() {
    using namespace quant;
    bool ok = true;
    ok &= check_int_form<GGML_TYPE_Q2_K>("int q2_k", halves_at<offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)>);
    ok &= check_int_form<GGML_TYPE_Q3_K>("int q3_k", half_at<offsetof(BlockQ3_K, d)>);
    ok &= check_int_form<GGML_TYPE_IQ4_NL>("int iq4_nl", half_at<offsetof(BlockIQ4_NL, d)>);
    ok &= check_int_form<GGML_TYPE_IQ4_XS>("int iq4_xs", half_at<offsetof(BlockIQ4_XS, d)>);
    ok &= check_int_form<GGML_TYPE_MXFP4>("int mxfp4", mxfp4_fix);
    ok &= check_int_form<GGML_TYPE_NVFP4>("int nvfp4", no_fix);
    ok &= check_int_form<GGML_TYPE_Q1_0>("int q1_0", half_at<offsetof(BlockQ1_0, d)>);
    ok &= check_int_form<GGML_TYPE_Q2_0>("int q2_0", half_at<offsetof(BlockQ2_0, d)>);
    ok &= check_int_form<GGML_TYPE_IQ2_XXS>("int iq2_xxs", half_at<offsetof(BlockIQ2_XXS, d)>);
    ok &= check_int_form<GGML_TYPE_IQ2_XS>("int iq2_xs", half_at<offsetof(BlockIQ2_XS, d)>);
    ok &= check_int_form<GGML_TYPE_IQ2_S>("int iq2_s", half_at<offsetof(BlockIQ2_S, d)>);
    ok &= check_int_form<GGML_TYPE_IQ3_XXS>("int iq3_xxs", half_at<offsetof(BlockIQ3_XXS, d)>);
    ok &= check_int_form<GGML_TYPE_IQ3_S>("int iq3_s", half_at<offsetof(BlockIQ3_S, d)>);
    ok &= check_int_form<GGML_TYPE_IQ1_S>("int iq1_s", half_at<offsetof(BlockIQ1_S, d)>);
    ok &= check_int_form<GGML_TYPE_IQ1_M>("int iq1_m", iq1m_fix);
    return ok;
}

// Every integer-form type of the CUDA list was checked above: a type added to
// weight_types.h without a check here fails.
bool all_int_forms_checked() {
    bool ok = true;
#define SI_X(name)                                                                  \
    if (checked_int_forms().count(GGML_TYPE_##name) == 0) {                         \
        std::printf("mmq formats: FAIL %s has no check_int_form\n", #name);        \
        ok = false;                                                                 \
    }
    SI_CUDA_INT_FORM_WEIGHT_TYPES(SI_X)
#undef SI_X
    return ok;
}

} // namespace

int main() {
    bool ok = true;
    ok &= check<GGML_TYPE_Q4_0, quant::BlockQ4_0>("q4_0", {0});
    ok &= check<GGML_TYPE_Q4_1, quant::BlockQ4_1>("q4_1", {0, 2});
    ok &= check<GGML_TYPE_Q5_0, quant::BlockQ5_0>("q5_0", {0});
    ok &= check<GGML_TYPE_Q5_1, quant::BlockQ5_1>("q5_1", {0, 2});
    ok &= check<GGML_TYPE_Q8_0, quant::BlockQ8_0>("q8_0", {0});
    ok &= check<GGML_TYPE_Q4_K, quant::BlockQ4_K>("q4_k", {0, 2});
    ok &= check<GGML_TYPE_Q5_K, quant::BlockQ5_K>("q5_k", {0, 2});
    ok &= check<GGML_TYPE_Q6_K, quant::BlockQ6_K>("q6_k", {208});
    ok &= check<GGML_TYPE_Q2_K, quant::BlockQ2_K>("q2_k", {80, 82});
    ok &= check<GGML_TYPE_Q3_K, quant::BlockQ3_K>("q3_k", {108});
    ok &= check<GGML_TYPE_IQ2_XXS, quant::BlockIQ2_XXS>("iq2_xxs", {0});
    ok &= check<GGML_TYPE_IQ2_XS, quant::BlockIQ2_XS>("iq2_xs", {0});
    ok &= check<GGML_TYPE_IQ2_S, quant::BlockIQ2_S>("iq2_s", {0});
    ok &= check<GGML_TYPE_IQ3_XXS, quant::BlockIQ3_XXS>("iq3_xxs", {0});
    ok &= check<GGML_TYPE_IQ3_S, quant::BlockIQ3_S>("iq3_s", {0});
    ok &= check<GGML_TYPE_IQ4_NL, quant::BlockIQ4_NL>("iq4_nl", {0});
    ok &= check<GGML_TYPE_IQ4_XS, quant::BlockIQ4_XS>("iq4_xs", {0});
    ok &= check<GGML_TYPE_MXFP4, quant::BlockMXFP4>("mxfp4", {});
    ok &= check_parts<GGML_TYPE_Q4_0, quant::BlockQ4_0>("part q4_0", {0});
    ok &= check_parts<GGML_TYPE_Q4_1, quant::BlockQ4_1>("part q4_1", {0, 2});
    ok &= check_parts<GGML_TYPE_Q5_0, quant::BlockQ5_0>("part q5_0", {0});
    ok &= check_parts<GGML_TYPE_Q5_1, quant::BlockQ5_1>("part q5_1", {0, 2});
    ok &= check_parts<GGML_TYPE_Q8_0, quant::BlockQ8_0>("part q8_0", {0});
    ok &= check_parts<GGML_TYPE_Q4_K, quant::BlockQ4_K>("part q4_k", {0, 2});
    ok &= check_parts<GGML_TYPE_Q5_K, quant::BlockQ5_K>("part q5_k", {0, 2});
    ok &= check_parts<GGML_TYPE_Q6_K, quant::BlockQ6_K>("part q6_k", {208});
    ok &= check_int_forms();
    ok &= all_int_forms_checked();
    std::printf(ok ? "mmq formats: ok\n" : "mmq formats: FAILED\n");
    return ok ? 0 : 1;
}
