// Packed weights (kernels/host/packed.h, Note [packed weights]) and their
// kernels (mul_mat_x8*.cpp), and the choice of instruction-set level
// (kernels/host/isa.h).
//
// The packed MUL_MAT must give, per row, exactly the float operations of a
// sequential block loop acc = fma(float(isum), d_w * d_y, acc) over the same
// int8 activations (the order of ggml-cpu's interleaved Q4_0 kernel; Q4_K
// and Q5_K: the minimum's term first, Q6_K: the offset inside the integer
// sum, mul_mat_x8_k.h), at every level the CPU has;
// every other reader of a packed weight must see the original rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "ggml.h"
#include "kernels/common/numerics.h"
#include "kernels/common/quants.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/isa.h"
#include "kernels/host/packed.h"
#include "kernels/host/vec_dot.h"
#include "runtime/host/host_device.h"

using namespace standin;
namespace packed = kernels::host::packed;
namespace isa    = kernels::host::isa;

namespace {

const ggml_type kPackable[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_IQ4_NL, GGML_TYPE_MXFP4, GGML_TYPE_Q2_K,
                               GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS};

// The super-block formats, whose packed kernels take 256-element activation groups.
const ggml_type kSuperBlock[] = {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,
                                 GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS};

// n blocks of type t, in elements.
int64_t blocks(ggml_type t, int64_t n) { return n * ggml_blck_size(t); }

std::vector<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float & f : v) f = u(rng);
    return v;
}

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

struct Ctx {
    ggml_context * ctx;
    Ctx() {
        ggml_init_params ip = {size_t(64) << 20, nullptr, false};
        ctx = ggml_init(ip);
    }
    ~Ctx() { ggml_free(ctx); }
};

// A weight tensor (K x M x ne2) of random quantized rows; packed if asked.
ggml_tensor * weights(ggml_context * ctx, ggml_type t, int64_t K, int64_t M, int64_t ne2, uint32_t seed, bool pack) {
    ggml_tensor * a = ggml_new_tensor_3d(ctx, t, K, M, ne2);
    const std::vector<float> w = random_floats(size_t(K * M * ne2), seed);
    std::vector<char> plain(ggml_nbytes(a));
    ggml_quantize_chunk(t, w.data(), plain.data(), 0, M * ne2, K, nullptr);
    if (pack) {
        EXPECT_TRUE(packed::can_pack(a));
        packed::pack(a, plain.data(), a->data);
        EXPECT_EQ(packed::packed_of(a), packed::layout_for(t));
    } else {
        std::memcpy(a->data, plain.data(), plain.size());
    }
    return a;
}

ggml_tensor * activations(ggml_context * ctx, int64_t K, int64_t N, int64_t ne2, uint32_t seed) {
    ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, N, ne2);
    const std::vector<float> x = random_floats(size_t(K * N * ne2), seed);
    std::memcpy(b->data, x.data(), ggml_nbytes(b));
    return b;
}

std::vector<float> run_mul_mat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    ggml_tensor * c = ggml_mul_mat(ctx, a, b);
    rt::host::HostStream stream{2};
    EXPECT_TRUE(kernels::host::mul_mat(stream, c));
    const float * p = static_cast<const float *>(c->data);
    return std::vector<float>(p, p + ggml_nelements(c));
}

// An activation column in the 256-element format: codes, scales, 16-element sums.
struct Act256 {
    std::vector<int8_t>  q;
    std::vector<float>   d;
    std::vector<int16_t> bs;
    Act256(const float * x, int64_t K) : q(size_t(K)), d(size_t(K / 256)), bs(size_t(K / 16)) {
        kernels::host::mm::quantize_act_256(x, K, q.data(), d.data(), bs.data());
    }
};

// The sequential reference for one output: row `row` of the plain weights
// (original layout) against activation column x. K formats: super-block b
// (blk) updates acc as sb(blk, y, b, acc) says, in order.
template <class Block, class SuperBlock>
float sequential_dot_k(const char * row, const float * x, int64_t K, SuperBlock sb) {
    const Act256 y(x, K);
    float acc = 0.0f;
    for (int64_t b = 0; b < K / 256; ++b) acc = sb(reinterpret_cast<const Block *>(row)[b], y, size_t(b), acc);
    return acc;
}

// Q4_K and Q5_K: element k of sub-block j has the code code(blk, j, k), and
// sub-block j the 6-bit scale and minimum j of the 12 packed bytes.
template <class Block, class Code>
float sequential_dot_k_min(const char * row, const float * x, int64_t K, Code code) {
    return sequential_dot_k<Block>(row, x, K, [&](const Block & blk, const Act256 & y, size_t b, float acc) {
        int32_t isum = 0, mins = 0;
        for (size_t j = 0; j < 8; ++j) {
            int sc, m;
            quant::k_scale_min(blk.scales, int(j), sc, m);
            int32_t dot = 0;
            for (size_t k = 0; k < 32; ++k) dot += code(blk, j, k) * y.q[256 * b + 32 * j + k];
            isum += sc * dot;
            mins += m * (y.bs[16 * b + 2 * j] + y.bs[16 * b + 2 * j + 1]);
        }
        const float dy = y.d[b];
        acc = std::fma(-float(mins), num::fp16_to_f32(blk.dmin) * dy, acc);
        return std::fma(float(isum), num::fp16_to_f32(blk.d) * dy, acc);
    });
}

// The nibble of element k of sub-block j: sub-blocks 2i and 2i + 1 share the
// 32 bytes qs[32i..], low and high nibbles.
template <class Block>
int k_nibble(const Block & blk, size_t j, size_t k) {
    const uint8_t byte = blk.qs[32 * (j / 2) + k];
    return j % 2 ? byte >> 4 : byte & 15;
}

float sequential_dot_q4_K(const char * row, const float * x, int64_t K) {
    return sequential_dot_k_min<quant::BlockQ4_K>(row, x, K, k_nibble<quant::BlockQ4_K>);
}

// Q5_K from ggml's definition of the block: Q4_K's nibble, and as its fifth
// bit bit j of qh[k].
float sequential_dot_q5_K(const char * row, const float * x, int64_t K) {
    return sequential_dot_k_min<quant::BlockQ5_K>(row, x, K, [](const quant::BlockQ5_K & blk, size_t j, size_t k) {
        return k_nibble(blk, j, k) | (((blk.qh[k] >> j) & 1) << 4);
    });
}

// Q6_K from ggml's definition of the block: element 128h + l (l < 128) has
// its low 4 bits in ql[64h + l % 64] (high nibble for l >= 64) and its top 2
// at bit 2 * (l / 32) of qh[32h + l % 32]; scale l / 16 of the half.
float sequential_dot_q6_K(const char * row, const float * x, int64_t K) {
    return sequential_dot_k<quant::BlockQ6_K>(row, x, K, [](const quant::BlockQ6_K & blk, const Act256 & y, size_t b, float acc) {
        int32_t isum = 0, off = 0;
        for (size_t k = 0; k < 16; ++k) {
            int32_t dot = 0;
            for (size_t e = 0; e < 16; ++e) {
                const size_t i = 16 * k + e, h = i / 128, l = i % 128;
                const uint8_t lo = blk.ql[64 * h + l % 64];
                const int code = ((l < 64 ? lo : lo >> 4) & 15) | (((blk.qh[32 * h + l % 32] >> (2 * (l / 32))) & 3) << 4);
                dot += code * y.q[256 * b + i];
            }
            isum += blk.scales[k] * dot;
            off += blk.scales[k] * y.bs[16 * b + k];
        }
        return std::fma(float(isum - 32 * off), num::fp16_to_f32(blk.d) * y.d[b], acc);
    });
}

// IQ4_XS from ggml's definition of the block: element 32j + l (l < 16) is
// the level of the low nibble of qs[16j + l], 32j + 16 + l of the high one;
// sub-block j's scale the nibble j % 2 of scales_l[j / 2] with bits 2j, 2j + 1
// of scales_h above it, less 32.
float sequential_dot_iq4_xs(const char * row, const float * x, int64_t K) {
    return sequential_dot_k<quant::BlockIQ4_XS>(row, x, K, [](const quant::BlockIQ4_XS & blk, const Act256 & y, size_t b, float acc) {
        int32_t isum = 0;
        for (size_t j = 0; j < 8; ++j) {
            const int ls = ((blk.scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((blk.scales_h >> (2 * j)) & 3) << 4);
            int32_t dot = 0;
            for (size_t l = 0; l < 32; ++l) {
                const uint8_t byte = blk.qs[16 * j + l % 16];
                dot += quant::iq4nl_level(l < 16 ? byte & 15 : byte >> 4) * y.q[256 * b + 32 * j + l];
            }
            isum += (ls - 32) * dot;
        }
        return std::fma(float(isum), num::fp16_to_f32(blk.d) * y.d[b], acc);
    });
}

// Q3_K from ggml's definition of the block: element e has its low 2 bits in
// field (e % 128) / 32 of qs[32 (e / 128) + e % 32] and, as bit 2, bit e / 32
// of hmask[e % 32] (clear: the value less 4); run k's 6-bit scale (less 32)
// has its low 4 bits in nibble k / 8 of scales[k % 8] and its top 2 at bits
// 2 (k / 4) of scales[8 + k % 4].
float sequential_dot_q3_K(const char * row, const float * x, int64_t K) {
    return sequential_dot_k<quant::BlockQ3_K>(row, x, K, [](const quant::BlockQ3_K & blk, const Act256 & y, size_t b, float acc) {
        int32_t isum = 0, off = 0;
        for (size_t k = 0; k < 16; ++k) {
            const int sc = (((blk.scales[k % 8] >> (4 * (k / 8))) & 15) | (((blk.scales[8 + k % 4] >> (2 * (k / 4))) & 3) << 4)) - 32;
            int32_t dot = 0;
            for (size_t e = 16 * k; e < 16 * k + 16; ++e) {
                const int code = ((blk.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3) | (((blk.hmask[e % 32] >> (e / 32)) & 1) << 2);
                dot += code * y.q[256 * b + e];
            }
            isum += sc * dot;
            off += sc * y.bs[16 * b + k];
        }
        return std::fma(float(isum - 4 * off), num::fp16_to_f32(blk.d) * y.d[b], acc);
    });
}

// Q2_K from ggml's definition of the block: element e's code is field
// (e % 128) / 32 of qs[32 (e / 128) + e % 32]; run k's scale the low nibble
// of scales[k], its minimum the high one.
float sequential_dot_q2_K(const char * row, const float * x, int64_t K) {
    return sequential_dot_k<quant::BlockQ2_K>(row, x, K, [](const quant::BlockQ2_K & blk, const Act256 & y, size_t b, float acc) {
        int32_t isum = 0, mins = 0;
        for (size_t k = 0; k < 16; ++k) {
            int32_t dot = 0;
            for (size_t e = 16 * k; e < 16 * k + 16; ++e) {
                dot += ((blk.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3) * y.q[256 * b + e];
            }
            isum += (blk.scales[k] & 15) * dot;
            mins += (blk.scales[k] >> 4) * y.bs[16 * b + k];
        }
        const float dy = y.d[b];
        acc = std::fma(-float(mins), num::fp16_to_f32(blk.dmin) * dy, acc);
        return std::fma(float(isum), num::fp16_to_f32(blk.d) * dy, acc);
    });
}

float sequential_dot(ggml_type t, const char * row, const float * x, int64_t K) {
    switch (t) {
        case GGML_TYPE_Q2_K:   return sequential_dot_q2_K(row, x, K);
        case GGML_TYPE_Q3_K:   return sequential_dot_q3_K(row, x, K);
        case GGML_TYPE_Q4_K:   return sequential_dot_q4_K(row, x, K);
        case GGML_TYPE_Q5_K:   return sequential_dot_q5_K(row, x, K);
        case GGML_TYPE_Q6_K:   return sequential_dot_q6_K(row, x, K);
        case GGML_TYPE_IQ4_XS: return sequential_dot_iq4_xs(row, x, K);
        default:               break;
    }
    std::vector<int8_t>  q(static_cast<size_t>(K));
    std::vector<float>   d(size_t(K / 32)), s(size_t(K / 32));
    std::vector<int16_t> p8(size_t(K / 2));
    std::vector<int32_t> q8(size_t(K / 32));
    kernels::host::mm::quantize_act_32(x, K, q.data(), d.data(), s.data(), p8.data(), q8.data());
    float acc = 0.0f;
    for (int64_t b = 0; b < K / 32; ++b) {
        int32_t isum = 0;
        float   dw;
        // Element j (< 16) of a nibble block is the low nibble of qs[j], j + 16 the high one.
        auto nibbles = [&](const uint8_t * qs, auto value) {
            for (int j = 0; j < 16; ++j) {
                isum += value(qs[j] & 15) * q[size_t(32 * b + j)] + value(qs[j] >> 4) * q[size_t(32 * b + 16 + j)];
            }
        };
        if (t == GGML_TYPE_Q4_0) {
            const auto & blk = reinterpret_cast<const quant::BlockQ4_0 *>(row)[b];
            dw = num::fp16_to_f32(blk.d);
            nibbles(blk.qs, [](int n) { return n - 8; });
        } else if (t == GGML_TYPE_IQ4_NL) {
            const auto & blk = reinterpret_cast<const quant::BlockIQ4_NL *>(row)[b];
            dw = num::fp16_to_f32(blk.d);
            nibbles(blk.qs, quant::iq4nl_level);
        } else if (t == GGML_TYPE_MXFP4) {
            // Twice the E2M1 value, against half the E8M0 scale 2^(e - 127).
            const auto & blk = reinterpret_cast<const quant::BlockMXFP4 *>(row)[b];
            dw = std::ldexp(1.0f, int(blk.e) - 128);
            nibbles(blk.qs, quant::e2m1_twice);
        } else {
            const auto & blk = reinterpret_cast<const quant::BlockQ8_0 *>(row)[b];
            dw = num::fp16_to_f32(blk.d);
            for (int j = 0; j < 32; ++j) isum += blk.qs[j] * q[size_t(32 * b + j)];
        }
        acc = std::fma(float(isum), dw * d[size_t(b)], acc);
    }
    return acc;
}

// Runs fn once at every level this CPU has, then restores the default.
template <class Fn>
void at_every_level(Fn fn) {
    const isa::Level best = isa::choose(isa::detect());
    for (isa::Level l : {isa::Level::avx2, isa::Level::avx512_vnni, isa::Level::avx512_amx}) {
        if (!isa::force(l)) continue;
        fn(l);
    }
    isa::force(best);
}

} // namespace

TEST(HostIsa, ChoosesByFeatures) {
    isa::Features f;
    EXPECT_EQ(isa::choose(f), isa::Level::avx2);
    f.avx2 = f.fma = f.f16c = true;
    EXPECT_EQ(isa::choose(f), isa::Level::avx2);
    f.avx512f = f.avx512bw = f.avx512vl = true;
    EXPECT_EQ(isa::choose(f), isa::Level::avx2);  // AVX-512 without VNNI: nothing to gain here
    f.avx512vnni = true;
    EXPECT_EQ(isa::choose(f), isa::Level::avx512_vnni);
    f.amx_tile = f.amx_int8 = true;
    EXPECT_EQ(isa::choose(f), isa::Level::avx512_vnni);  // tiles the OS has not granted
    f.amx_os = true;
    EXPECT_EQ(isa::choose(f), isa::Level::avx512_amx);
    f.amx_int8 = false;
    EXPECT_EQ(isa::choose(f), isa::Level::avx512_vnni);
    f.amx_int8 = true;
    f.avx512vl = false;  // the 256-bit forms need VL
    EXPECT_EQ(isa::choose(f), isa::Level::avx2);
}

TEST(HostIsa, ForceRefusesWhatTheCpuLacks) {
    const isa::Level best = isa::choose(isa::detect());
    EXPECT_EQ(isa::level(), best);
    EXPECT_TRUE(isa::force(isa::Level::avx2));
    EXPECT_EQ(isa::level(), isa::Level::avx2);
    EXPECT_EQ(isa::force(isa::Level::avx512_vnni), best >= isa::Level::avx512_vnni);
    EXPECT_EQ(isa::force(isa::Level::avx512_amx), best == isa::Level::avx512_amx);
    EXPECT_TRUE(isa::force(best));
    EXPECT_EQ(isa::level(), best);
}

TEST(Packed, OnlyWholeGroupsOfDenseRowsPack) {
    Ctx c;
    EXPECT_TRUE(packed::can_pack(ggml_new_tensor_2d(c.ctx, GGML_TYPE_Q4_0, 64, 16)));
    EXPECT_TRUE(packed::can_pack(ggml_new_tensor_3d(c.ctx, GGML_TYPE_Q8_0, 64, 8, 3)));
    EXPECT_TRUE(packed::can_pack(ggml_new_tensor_2d(c.ctx, GGML_TYPE_Q4_K, 512, 8)));
    EXPECT_TRUE(packed::can_pack(ggml_new_tensor_2d(c.ctx, GGML_TYPE_Q5_K, 512, 8)));
    EXPECT_TRUE(packed::can_pack(ggml_new_tensor_2d(c.ctx, GGML_TYPE_Q6_K, 512, 8)));
    EXPECT_TRUE(packed::can_pack(ggml_new_tensor_2d(c.ctx, GGML_TYPE_IQ4_XS, 512, 8)));
    EXPECT_TRUE(packed::can_pack(ggml_new_tensor_2d(c.ctx, GGML_TYPE_MXFP4, 64, 8)));
    EXPECT_FALSE(packed::can_pack(ggml_new_tensor_2d(c.ctx, GGML_TYPE_NVFP4, 512, 8)));
    EXPECT_FALSE(packed::can_pack(ggml_new_tensor_2d(c.ctx, GGML_TYPE_Q5_K, 512, 12)));
    EXPECT_FALSE(packed::can_pack(ggml_new_tensor_2d(c.ctx, GGML_TYPE_Q4_0, 64, 12)));
    EXPECT_FALSE(packed::can_pack(ggml_new_tensor_2d(c.ctx, GGML_TYPE_Q4_1, 64, 16)));
    EXPECT_FALSE(packed::can_pack(ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 64, 16)));
    ggml_tensor * t = ggml_new_tensor_2d(c.ctx, GGML_TYPE_Q4_0, 64, 32);
    EXPECT_FALSE(packed::can_pack(ggml_view_2d(c.ctx, t, 64, 16, t->nb[1], 0)));
}

TEST(Packed, RoundTripAndPartialReads) {
    for (ggml_type t : kPackable) {
        Ctx c;
        ggml_tensor * a = ggml_new_tensor_3d(c.ctx, t, blocks(t, 3), 16, 2);
        std::vector<char> plain(ggml_nbytes(a));
        std::mt19937 rng(5);
        for (char & b : plain) b = char(rng());
        packed::pack(a, plain.data(), a->data);
        EXPECT_NE(std::memcmp(a->data, plain.data(), plain.size()), 0) << "the layout moves bytes";
        std::vector<char> back(plain.size());
        packed::read_plain(a, 0, back.size(), back.data());
        EXPECT_EQ(std::memcmp(back.data(), plain.data(), plain.size()), 0) << ggml_type_name(t);
        // Ranges starting and ending inside blocks and rows.
        for (size_t off : {size_t(0), size_t(1), size_t(17), size_t(a->nb[1] - 3), size_t(9 * a->nb[1] + 5)}) {
            for (size_t n : {size_t(1), size_t(33), size_t(a->nb[1] + 7)}) {
                std::vector<char> part(n);
                packed::read_plain(a, off, n, part.data());
                EXPECT_EQ(std::memcmp(part.data(), plain.data() + off, n), 0) << ggml_type_name(t) << " " << off << "+" << n;
            }
        }
        std::vector<char> row(a->nb[1]);
        packed::read_row(a, 13, 1, 0, row.data());
        EXPECT_EQ(std::memcmp(row.data(), plain.data() + 13 * a->nb[1] + a->nb[2], row.size()), 0);
        packed::unpack_in_place(a);
        EXPECT_EQ(packed::packed_of(a), nullptr);
        EXPECT_EQ(std::memcmp(a->data, plain.data(), plain.size()), 0) << ggml_type_name(t);
        // Packing in place gives the same bytes as packing a copy.
        std::vector<char> copy_packed(plain.size());
        packed::pack(a, plain.data(), copy_packed.data());
        a->extra = nullptr;  // a's own memory still holds the original bytes
        packed::pack_in_place(a);
        EXPECT_EQ(packed::packed_of(a), packed::layout_for(t));
        EXPECT_EQ(std::memcmp(a->data, copy_packed.data(), plain.size()), 0) << ggml_type_name(t);
    }
}

// A buffer cleared to one byte value (ggml's memset_tensor, buffer clears)
// must read the same in either layout: the layout only moves bytes.
TEST(Packed, OneByteValueReadsTheSameEitherWay) {
    for (ggml_type t : kPackable) {
        Ctx c;
        ggml_tensor * a = ggml_new_tensor_2d(c.ctx, t, blocks(t, 2), 16);
        const std::vector<char> plain(ggml_nbytes(a), char(0x5a));
        packed::pack(a, plain.data(), a->data);
        EXPECT_EQ(std::memcmp(a->data, plain.data(), plain.size()), 0) << ggml_type_name(t);
    }
}

// Row counts of one and several groups and tiles (16 rows), column counts over
// the 4-, 2- and 1-column kernels, a batch broadcast over dim 2.
TEST(Packed, MatMulIsTheSequentialBlockLoop) {
    at_every_level([](isa::Level l) {
        for (ggml_type t : kPackable) {
            for (int64_t M : {8, 24, 40}) {
                for (int64_t N : {1, 2, 3, 4, 5, 7, 9}) {
                    Ctx c;
                    const int64_t K = ggml_blck_size(t) == 256 ? 3 * 256 : 11 * 32;
                    ggml_tensor * a  = weights(c.ctx, t, K, M, 2, uint32_t(M + N), false);
                    ggml_tensor * ap = weights(c.ctx, t, K, M, 2, uint32_t(M + N), true);
                    ggml_tensor * b  = activations(c.ctx, K, N, 4, uint32_t(7 * N));
                    const std::vector<float> got = run_mul_mat(c.ctx, ap, b);
                    for (int64_t i2 = 0; i2 < 4; ++i2) {
                        for (int64_t n = 0; n < N; ++n) {
                            const float * x = static_cast<const float *>(b->data) + (i2 * N + n) * K;
                            for (int64_t m = 0; m < M; ++m) {
                                const char * row = static_cast<const char *>(a->data) + m * a->nb[1] + (i2 / 2) * a->nb[2];
                                const float ref = sequential_dot(t, row, x, K);
                                ASSERT_EQ(bits(got[size_t((i2 * N + n) * M + m)]), bits(ref))
                                    << isa::name(l) << " " << ggml_type_name(t) << " M=" << M << " N=" << N << " i2=" << i2
                                    << " m=" << m << " n=" << n;
                            }
                        }
                    }
                }
            }
        }
    });
}

// Prompt-sized products: column counts around the AMX kernels' 16 (Note
// [AMX tiles], mul_mat_x8_amx.cpp) and the driver's 32-column tiles, row
// counts whose last tile has 8 rows, an odd block count (the kernels take
// blocks in pairs) and weights broadcast over dim 2.
TEST(Packed, MatMulWideIsTheSequentialBlockLoop) {
    at_every_level([](isa::Level l) {
        for (ggml_type t : kPackable) {
            for (int64_t M : {16, 40}) {
                for (int64_t N : {16, 17, 33, 48}) {
                    Ctx c;
                    const int64_t K = ggml_blck_size(t) == 256 ? 3 * 256 : 13 * 32;
                    ggml_tensor * a  = weights(c.ctx, t, K, M, 1, uint32_t(3 * M + N), false);
                    ggml_tensor * ap = weights(c.ctx, t, K, M, 1, uint32_t(3 * M + N), true);
                    ggml_tensor * b  = activations(c.ctx, K, N, 2, uint32_t(5 * N));
                    const std::vector<float> got = run_mul_mat(c.ctx, ap, b);
                    for (int64_t i2 = 0; i2 < 2; ++i2) {
                        for (int64_t n = 0; n < N; ++n) {
                            const float * x = static_cast<const float *>(b->data) + (i2 * N + n) * K;
                            for (int64_t m = 0; m < M; ++m) {
                                const float ref = sequential_dot(t, static_cast<const char *>(a->data) + m * a->nb[1], x, K);
                                ASSERT_EQ(bits(got[size_t((i2 * N + n) * M + m)]), bits(ref))
                                    << isa::name(l) << " " << ggml_type_name(t) << " M=" << M << " N=" << N << " i2=" << i2
                                    << " m=" << m << " n=" << n;
                            }
                        }
                    }
                }
            }
        }
    });
}

// The extremes of the super-block formats against activation codes of
// +-127: the first group's rows with every code and scale at its largest
// magnitude (Q4_K: nibbles 15 and 6-bit scales and minimums 63; Q5_K: the
// same with every qh bit set, codes 31; Q6_K: codes 63, int8 scales -128;
// Q3_K: codes 7, scales -32; Q2_K: codes 3, scales and minimums 15; IQ4_XS:
// level -127, scales -32), the other rows random block bytes, which reach
// every scale pattern and high bit. The AVX2 kernels sum products in int16:
// Q4_K a sub-block's 16 * 15 * 127 per lane, Q5_K half a sub-block's
// 8 * 31 * 127, Q6_K two words' 4 * 63 * 127, IQ4_XS one word's 2 * 127 * 127,
// which must not saturate, and signed scales must be sign-extended.
void fill_extremes(ggml_type t, void * data, int64_t n_blocks, int64_t n_full) {
    std::mt19937 rng(9);
    auto fill = [&](auto & bytes, bool full, uint8_t max) {
        for (auto & v : bytes) v = full ? max : static_cast<std::remove_reference_t<decltype(v)>>(rng());
    };
    for (int64_t i = 0; i < n_blocks; ++i) {
        const bool     full = i < n_full;
        const uint16_t d    = num::f32_to_fp16(0.01f * float(1 + i % 5));
        const uint16_t dmin = num::f32_to_fp16(0.02f * float(1 + i % 3));
        auto k_min = [&](auto & blk) {  // Q4_K's fields, which Q5_K and Q2_K have too
            fill(blk.qs, full, 0xff);
            fill(blk.scales, full, 0xff);
            blk.d    = d;
            blk.dmin = dmin;
        };
        switch (t) {
            case GGML_TYPE_Q2_K: k_min(static_cast<quant::BlockQ2_K *>(data)[i]); break;
            case GGML_TYPE_Q3_K: {
                auto & blk = static_cast<quant::BlockQ3_K *>(data)[i];
                fill(blk.qs, full, 0xff);
                fill(blk.hmask, full, 0xff);
                fill(blk.scales, full, 0x00);
                blk.d = d;
                break;
            }
            case GGML_TYPE_Q4_K: k_min(static_cast<quant::BlockQ4_K *>(data)[i]); break;
            case GGML_TYPE_Q5_K: {
                auto & blk = static_cast<quant::BlockQ5_K *>(data)[i];
                k_min(blk);
                fill(blk.qh, full, 0xff);
                break;
            }
            case GGML_TYPE_Q6_K: {
                auto & blk = static_cast<quant::BlockQ6_K *>(data)[i];
                fill(blk.ql, full, 0xff);
                fill(blk.qh, full, 0xff);
                fill(blk.scales, full, 0x80);
                blk.d = d;
                break;
            }
            default: {
                auto & blk = static_cast<quant::BlockIQ4_XS *>(data)[i];
                fill(blk.qs, full, 0x00);
                fill(blk.scales_l, full, 0x00);
                blk.scales_h = full ? 0 : uint16_t(rng());
                blk.d        = d;
                break;
            }
        }
    }
}

TEST(Packed, MatMulKFormatExtremes) {
    at_every_level([](isa::Level l) {
        for (ggml_type t : kSuperBlock) {
            Ctx c;
            const int64_t K = 2 * 256, M = 16, N = 33;  // 32 columns on AMX tiles where the CPU has them
            ggml_tensor * a  = ggml_new_tensor_2d(c.ctx, t, K, M);
            ggml_tensor * ap = ggml_new_tensor_2d(c.ctx, t, K, M);
            fill_extremes(t, a->data, M * K / 256, 8 * K / 256);
            packed::pack(ap, a->data, ap->data);
            ggml_tensor * b = activations(c.ctx, K, N, 1, 3);
            float * x = static_cast<float *>(b->data);
            for (int64_t k = 0; k < K; ++k) {
                x[k]     = 1.0f;   // codes +127
                x[K + k] = -1.0f;  // codes -127
            }
            const std::vector<float> got = run_mul_mat(c.ctx, ap, b);
            for (int64_t n = 0; n < N; ++n) {
                for (int64_t m = 0; m < M; ++m) {
                    const float ref = sequential_dot(t, static_cast<const char *>(a->data) + m * a->nb[1], x + n * K, K);
                    ASSERT_EQ(bits(got[size_t(n * M + m)]), bits(ref)) << isa::name(l) << " " << ggml_type_name(t) << " m=" << m << " n=" << n;
                }
            }
        }
    });
}

// MXFP4's scales over the whole E8M0 range the products meet, the
// subnormal halves of e = 0 and 1 included, and every nibble: random block
// bytes, e from 100 to 155 in even rows and from 0 to 3 in odd ones, whose
// products are then as small as floats go.
TEST(Packed, MatMulMxfp4EveryScale) {
    at_every_level([](isa::Level l) {
        Ctx c;
        const int64_t K = 8 * 32, M = 16, N = 5;
        ggml_tensor * a  = ggml_new_tensor_2d(c.ctx, GGML_TYPE_MXFP4, K, M);
        ggml_tensor * ap = ggml_new_tensor_2d(c.ctx, GGML_TYPE_MXFP4, K, M);
        std::mt19937 rng(17);
        auto * blk = static_cast<quant::BlockMXFP4 *>(a->data);
        for (int64_t i = 0; i < M * K / 32; ++i) {
            for (uint8_t & v : blk[i].qs) v = uint8_t(rng());
            blk[i].e = uint8_t((i / (K / 32)) % 2 ? rng() % 4 : 100 + rng() % 56);  // odd rows: the smallest scales only
        }
        packed::pack(ap, a->data, ap->data);
        ggml_tensor * b = activations(c.ctx, K, N, 1, 5);
        const std::vector<float> got = run_mul_mat(c.ctx, ap, b);
        for (int64_t n = 0; n < N; ++n) {
            for (int64_t m = 0; m < M; ++m) {
                const float ref = sequential_dot(GGML_TYPE_MXFP4, static_cast<const char *>(a->data) + m * a->nb[1],
                                                 static_cast<const float *>(b->data) + n * K, K);
                ASSERT_EQ(bits(got[size_t(n * M + m)]), bits(ref)) << isa::name(l) << " m=" << m << " n=" << n;
            }
        }
    });
}

// The same products as the kernels for the original layout, to their float
// rounding (they add a row's blocks in another order).
TEST(Packed, MatMulMatchesUnpackedKernels) {
    for (ggml_type t : kPackable) {
        Ctx c;
        const int64_t K = 4096 + blocks(t, 3), M = 48, N = 6;
        ggml_tensor * a  = weights(c.ctx, t, K, M, 1, 3, false);
        ggml_tensor * ap = weights(c.ctx, t, K, M, 1, 3, true);
        ggml_tensor * b  = activations(c.ctx, K, N, 1, 4);
        const std::vector<float> ref = run_mul_mat(c.ctx, a, b), got = run_mul_mat(c.ctx, ap, b);
        double err = 0, ref2 = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            err += double(got[i] - ref[i]) * double(got[i] - ref[i]);
            ref2 += double(ref[i]) * double(ref[i]);
        }
        EXPECT_LT(err / ref2, 1e-12) << ggml_type_name(t);
    }
}

// Views: whole groups are read packed, any other cut through restored rows;
// both must equal the same view of the original layout.
TEST(Packed, ViewsOfPackedWeights) {
    for (ggml_type t : kPackable) {
        Ctx c;
        const int64_t K = std::max<int64_t>(8 * 32, blocks(t, 4)), M = 48;
        ggml_tensor * a  = weights(c.ctx, t, K, M, 1, 11, false);
        ggml_tensor * ap = weights(c.ctx, t, K, M, 1, 11, true);
        ggml_tensor * b  = activations(c.ctx, K, 3, 1, 12);
        ggml_tensor * bh = activations(c.ctx, K / 2, 3, 1, 13);
        struct Cut {
            int64_t ne0, ne1;
            size_t  offs;
            bool    native;
        };
        const size_t bs = ggml_type_size(t);
        for (const Cut & cut : {Cut{K, 16, 8 * a->nb[1], true}, Cut{K, 16, 3 * a->nb[1], false},
                                Cut{K, 12, 8 * a->nb[1], false}, Cut{K / 2, 16, 2 * bs + 8 * a->nb[1], false}}) {
            ggml_tensor * v  = ggml_view_2d(c.ctx, a, cut.ne0, cut.ne1, a->nb[1], cut.offs);
            ggml_tensor * vp = ggml_view_2d(c.ctx, ap, cut.ne0, cut.ne1, ap->nb[1], cut.offs);
            EXPECT_EQ(packed::is_native(vp), cut.native) << cut.offs;
            ggml_tensor * y = cut.ne0 == K ? b : bh;
            const std::vector<float> ref = run_mul_mat(c.ctx, v, y), got = run_mul_mat(c.ctx, vp, y);
            for (size_t i = 0; i < ref.size(); ++i) {
                ASSERT_NEAR(got[i], ref[i], 1e-4f * (1.0f + std::fabs(ref[i]))) << ggml_type_name(t) << " cut " << cut.offs << " " << i;
            }
        }
    }
}

TEST(Packed, GetRowsAndCopiesReadOriginalRows) {
    for (ggml_type t : kPackable) {
        Ctx c;
        const int64_t K = blocks(t, 4), M = 24;
        ggml_tensor * a  = weights(c.ctx, t, K, M, 1, 21, false);
        ggml_tensor * ap = weights(c.ctx, t, K, M, 1, 21, true);
        ggml_tensor * idx = ggml_new_tensor_1d(c.ctx, GGML_TYPE_I32, 5);
        const int32_t rows[5] = {0, 23, 7, 8, 15};
        std::memcpy(idx->data, rows, sizeof(rows));
        rt::host::HostStream stream{2};
        ggml_tensor * g  = ggml_get_rows(c.ctx, a, idx);
        ggml_tensor * gp = ggml_get_rows(c.ctx, ap, idx);
        ASSERT_TRUE(kernels::host::get_rows(stream, g));
        ASSERT_TRUE(kernels::host::get_rows(stream, gp));
        EXPECT_EQ(std::memcmp(g->data, gp->data, ggml_nbytes(g)), 0) << ggml_type_name(t);

        // Decode to F32 and a same-type copy.
        for (ggml_type dt : {GGML_TYPE_F32, t}) {
            ggml_tensor * d  = ggml_cpy(c.ctx, a, ggml_new_tensor_2d(c.ctx, dt, K, M));
            ggml_tensor * dp = ggml_cpy(c.ctx, ap, ggml_new_tensor_2d(c.ctx, dt, K, M));
            ASSERT_TRUE(kernels::host::copy(stream, d));
            ASSERT_TRUE(kernels::host::copy(stream, dp));
            EXPECT_EQ(std::memcmp(d->data, dp->data, ggml_nbytes(d)), 0) << ggml_type_name(t) << " -> " << ggml_type_name(dt);
        }
    }
}

TEST(Packed, MulMatIdReadsPackedExperts) {
    for (ggml_type t : kPackable) {
        Ctx c;
        const int64_t K = blocks(t, 4), M = 16, n_as = 4, n_used = 2, n_tok = 3;
        ggml_tensor * as  = weights(c.ctx, t, K, M, n_as, 31, false);
        ggml_tensor * asp = weights(c.ctx, t, K, M, n_as, 31, true);
        ggml_tensor * b   = activations(c.ctx, K, n_used, n_tok, 32);
        ggml_tensor * ids = ggml_new_tensor_2d(c.ctx, GGML_TYPE_I32, n_used, n_tok);
        const int32_t e[6] = {3, 0, 1, 3, 2, 2};
        std::memcpy(ids->data, e, sizeof(e));
        rt::host::HostStream stream{2};
        ggml_tensor * r  = ggml_mul_mat_id(c.ctx, as, b, ids);
        ggml_tensor * rp = ggml_mul_mat_id(c.ctx, asp, b, ids);
        ASSERT_TRUE(kernels::host::mul_mat_id(stream, r));
        ASSERT_TRUE(kernels::host::mul_mat_id(stream, rp));
        const float * x = static_cast<const float *>(r->data);
        const float * y = static_cast<const float *>(rp->data);
        for (int64_t i = 0; i < ggml_nelements(r); ++i) {
            ASSERT_NEAR(y[i], x[i], 1e-4f * (1.0f + std::fabs(x[i]))) << ggml_type_name(t) << " " << i;
        }
    }
}
