// The integer product's weight formats (kernels/cuda/mmq_formats.cuh) and the
// decoders' parts (kernels/cuda/dequant.cuh), checked on the host: for random
// blocks of every format, each element rebuilt from codes() and scale() (as the
// tensor cores and the epilogue combine them), and each element a Part reads,
// equals quants.h's dequant() of the same block. Built by nvcc as a host
// program, so it runs in CI on a machine without a GPU. Prints
// "mmq formats: ok" and exits 0, or names the first mismatch and exits 1.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/common/quants.h"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/mmq_formats.cuh"

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
    ok &= check_parts<GGML_TYPE_Q4_0, quant::BlockQ4_0>("part q4_0", {0});
    ok &= check_parts<GGML_TYPE_Q4_1, quant::BlockQ4_1>("part q4_1", {0, 2});
    ok &= check_parts<GGML_TYPE_Q5_0, quant::BlockQ5_0>("part q5_0", {0});
    ok &= check_parts<GGML_TYPE_Q5_1, quant::BlockQ5_1>("part q5_1", {0, 2});
    ok &= check_parts<GGML_TYPE_Q8_0, quant::BlockQ8_0>("part q8_0", {0});
    ok &= check_parts<GGML_TYPE_Q4_K, quant::BlockQ4_K>("part q4_k", {0, 2});
    ok &= check_parts<GGML_TYPE_Q5_K, quant::BlockQ5_K>("part q5_k", {0, 2});
    ok &= check_parts<GGML_TYPE_Q6_K, quant::BlockQ6_K>("part q6_k", {208});
    std::printf(ok ? "mmq formats: ok\n" : "mmq formats: FAILED\n");
    return ok ? 0 : 1;
}
