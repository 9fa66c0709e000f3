// The super-block types whose values are small integers under one float
// factor per super-block and small integer multipliers per run of 16: the
// grid i-quants (quants_iq.h: IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S) and the ternary TQ1_0 and TQ2_0 (values -1, 0, 1, multipliers 1),
// decoded 32 int8 values at a time on AVX2 for the host's MUL_MAT kernels:
// one column decodes a row straight into its product (mul_mat_qd.cpp),
// several decode a tile's rows once into groups of 8 (mul_mat_x8_grid.h).
// The scalar decoders of quants.h and quants_iq.h are the reference
// (tests/kernels/test_quants.cpp holds the products to ggml-cpu's).
// Internal linkage throughout: the file is included by translation units of
// different instruction-set levels (isa.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/quants.h"

namespace standin::kernels::host::mm {

namespace {

using namespace standin::quant;

// These types ("grid" types below) and their blocks, stated once:
// kGridType and the kernels' dispatch derive from it.
#define SI_HOST_GRID_TYPES(X)                                                                                  \
    X(GGML_TYPE_IQ2_XXS, BlockIQ2_XXS) X(GGML_TYPE_IQ2_XS, BlockIQ2_XS) X(GGML_TYPE_IQ2_S, BlockIQ2_S)   \
    X(GGML_TYPE_IQ3_XXS, BlockIQ3_XXS) X(GGML_TYPE_IQ3_S, BlockIQ3_S) X(GGML_TYPE_IQ1_S, BlockIQ1_S)     \
    X(GGML_TYPE_IQ1_M, BlockIQ1_M) X(GGML_TYPE_TQ1_0, BlockTQ1_0) X(GGML_TYPE_TQ2_0, BlockTQ2_0)

// The ggml type of a grid block, GGML_TYPE_COUNT for any other block.
template <class B>
constexpr ggml_type kGridType = GGML_TYPE_COUNT;
#define SI_X(type, Block) \
    template <>           \
    constexpr ggml_type kGridType<Block> = type;
SI_HOST_GRID_TYPES(SI_X)
#undef SI_X

template <class B>
constexpr bool kGridBlock = kGridType<B> != GGML_TYPE_COUNT;

// The largest byte of a grid table: the largest magnitude of its values
// (the signs are applied apart).
template <class T, size_t N>
constexpr int max_grid_byte(const T (&table)[N]) {
    int m = 0;
    for (size_t i = 0; i < N; ++i) {
        for (size_t j = 0; j < sizeof(T); ++j) {
            const int b = int((uint64_t(table[i]) >> (8 * j)) & 0xffu);
            m = b > m ? b : m;
        }
    }
    return m;
}

// The largest |value| a block type decodes to: it bounds how many products
// an int16 lane may sum (mul_mat_x8_grid.h). IQ1's values are 8 g +- 1 with
// g in {-1, 0, 1} (iq1_values), so at most 9; the ternary types' 1.
template <class B>
constexpr int kGridMax = std::is_same_v<B, BlockIQ2_XXS> ? max_grid_byte(grid::kIq2xxs)
                       : std::is_same_v<B, BlockIQ2_XS>  ? max_grid_byte(grid::kIq2xs)
                       : std::is_same_v<B, BlockIQ2_S>   ? max_grid_byte(grid::kIq2s)
                       : std::is_same_v<B, BlockIQ3_XXS> ? max_grid_byte(grid::kIq3xxs)
                       : std::is_same_v<B, BlockIQ3_S>   ? max_grid_byte(grid::kIq3s)
                       : std::is_same_v<B, BlockIQ1_S> || std::is_same_v<B, BlockIQ1_M> ? 9
                                                                                         : 1;

// Signs as bytes of +1 and -1, the second operand of a byte sign
// instruction (vpsignb): grid magnitudes or activations take them.
// A 7-bit sign index (IQ2_XXS, IQ2_XS, IQ3_XXS: its 8 sign bits, the
// eighth of even parity) as the 8 bytes of one word, looked up whole: the
// table lookup costs one load per 8 elements where the bits spread into
// bytes cost a broadcast, a shuffle, an and and a compare per 32.
struct SignBytes {
    uint64_t v[128];
};
constexpr SignBytes make_sign_bytes() {
    SignBytes t{};
    for (uint32_t i = 0; i < 128; ++i) {
        const uint32_t bits = signs_of_index(i);
        for (int j = 0; j < 8; ++j) t.v[i] |= uint64_t(((bits >> j) & 1u) ? 0xffu : 0x01u) << (8 * j);
    }
    return t;
}
constexpr SignBytes kSignBytes = make_sign_bytes();

inline __m256i words4(uint64_t w0, uint64_t w1, uint64_t w2, uint64_t w3) {
    return _mm256_setr_epi64x(int64_t(w0), int64_t(w1), int64_t(w2), int64_t(w3));
}

// The sign bytes of four 7-bit indices at bits 0, 7, 14 and 21 of a.
inline __m256i index_signs(uint32_t a) {
    return words4(kSignBytes.v[a & 127u], kSignBytes.v[(a >> 7) & 127u], kSignBytes.v[(a >> 14) & 127u],
                  kSignBytes.v[(a >> 21) & 127u]);
}

// The sign bytes of 32 raw sign bits (IQ2_S, IQ3_S: bit j, element j negative).
inline __m256i bit_signs(uint32_t bits) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
    const __m256i v   = _mm256_shuffle_epi8(_mm256_set1_epi32(int32_t(bits)), spread);
    return _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(1));
}

// A super-block's 32 grid indices (one per 8 elements), computed on
// vectors and stored, then read back one by one for the table loads:
// computed per index from the bytes that hold their bits they took 5 to 7
// scalar instructions each, most of a one-column product's instructions
// (IQ1_M: 509 per super-block, 240 of them scalar).
struct GridIdx {
    alignas(32) uint16_t v[32];
    void put(int k, __m256i idx16) { _mm256_store_si256(reinterpret_cast<__m256i *>(v + k), idx16); }
};

// 16 indices k0..k0+15: the low bytes lo (8 bits each) or'ed with the high
// bits hi (already at bits 8.. of each word).
inline __m256i idx_words(const uint8_t * lo, __m256i hi) {
    return _mm256_or_si256(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(lo))), hi);
}

// A super-block's 16 run multipliers 2 n + 1 from the n of each run (byte
// k: run k), in both 128-bit halves, for run_pair.
inline __m256i odd_multipliers(__m128i n) {
    return _mm256_broadcastsi128_si256(_mm_add_epi8(_mm_add_epi8(n, n), _mm_set1_epi8(1)));
}

// The multipliers of runs 2 ib and 2 ib + 1 as int16, 8 each (the sinks'
// runs(ib, m)): one shuffle where building them from two integers took five
// instructions. Indices from 0x80 have bit 7 set and give zero bytes.
inline __m256i run_pair(__m256i mults, int ib) {
    const __m256i at = _mm256_setr_epi8(0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128,
                                        1, -128, 1, -128, 1, -128, 1, -128, 1, -128, 1, -128, 1, -128, 1, -128);
    return _mm256_shuffle_epi8(mults, _mm256_add_epi8(at, _mm256_set1_epi8(int8_t(2 * ib))));
}

// IQ2_XS's and IQ2_S's: a nibble a run, run 2 ib the low one of scales[ib].
inline __m256i nibble_multipliers(const uint8_t * scales) {
    const __m128i s  = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(scales));
    const __m128i m4 = _mm_set1_epi8(15);
    return odd_multipliers(_mm_unpacklo_epi8(_mm_and_si128(s, m4), _mm_and_si128(_mm_srli_epi16(s, 4), m4)));
}

// IQ1's 8 values of grid entry i & 2047 with the shift sign of bit 11 (set:
// -1, else +1), 8 g +- 1 for grid bytes g in {-1, 0, 1}, as one word: the
// lookup gives the values, where the grid word cost a shift, a mask and an
// add per 32 elements, and the shift's sign a broadcast, a compare and an or.
struct Iq1Values {
    uint64_t v[4096];
};
constexpr Iq1Values make_iq1_values() {
    Iq1Values t{};
    for (int i = 0; i < 4096; ++i) {
        const uint64_t g = grid::kIq1s[i & 2047];
        for (int j = 0; j < 8; ++j) {
            const int gb = int(int8_t(uint8_t(g >> (8 * j))));
            t.v[i] |= uint64_t(uint8_t(int8_t(8 * gb + ((i & 2048) ? -1 : 1)))) << (8 * j);
        }
    }
    return t;
}
constexpr Iq1Values kIq1Values = make_iq1_values();

// The grid formats' run scales are a block factor f times odd integers m
// ((0.5 + s) * 0.25 = (2s + 1) / 8 and the like): decode_grid hands a sink
// (DotSink, which takes a column's product at once, mul_mat_qd.cpp, or
// X8GridSink, which stores a row of a group, mul_mat_x8_grid.h)
// sink.block(f), then per 32 elements their values as magnitudes and sign
// bytes, value = sign(mag, sgn) (sink.values(ib, mag, sgn): a product takes
// mag against the activation with sgn's signs, no value formed), and the
// multipliers of their two runs (sink.runs(ib, m0, m1), or as run_pair's
// vector sink.runs(ib, m) where the decoder has them all in one), in that
// order.

template <class Sink>
void decode_grid(const BlockIQ2_XXS & b, Sink & sink) {
    sink.block(half(b.d) * 0.125f);
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t * g  = b.qs + 8 * ib;
        const uint32_t  a1 = load_u32_le(g + 4);
        sink.values(ib, words4(iq2xxs_grid(g[0]), iq2xxs_grid(g[1]), iq2xxs_grid(g[2]), iq2xxs_grid(g[3])),
                    index_signs(a1));
        const int m = 2 * int(a1 >> 28) + 1;
        sink.runs(ib, m, m);
    }
}

template <class Sink>
void decode_grid(const BlockIQ2_XS & b, Sink & sink) {
    sink.block(half(b.d) * 0.125f);
    const __m256i mults = nibble_multipliers(b.scales);
    for (int ib = 0; ib < 8; ++ib) {
        const uint16_t * v = b.qs + 4 * ib;
        const __m256i w = words4(iq2xs_grid(v[0] & 511), iq2xs_grid(v[1] & 511), iq2xs_grid(v[2] & 511),
                                 iq2xs_grid(v[3] & 511));
        sink.values(ib, w, words4(kSignBytes.v[v[0] >> 9], kSignBytes.v[v[1] >> 9], kSignBytes.v[v[2] >> 9], kSignBytes.v[v[3] >> 9]));
        sink.runs(ib, run_pair(mults, ib));
    }
}

// Unrolled where it measured faster (IQ2_S, IQ1_S, IQ1_M: their per-run
// scale shifts and high-bit fields become constants): one column of 2048 x
// 8192 on a Zen 4, IQ2_S 0.78-0.79 ms against 0.98-1.02, IQ1_M 0.87 against
// 1.13; IQ2_XS ran 0.98 against 0.76 unrolled, IQ2_XXS, IQ3_* and the
// ternary types the same either way.
template <class Sink>
void decode_grid(const BlockIQ2_S & b, Sink & sink) {
    sink.block(half(b.d) * 0.125f);
    const __m256i mults = nibble_multipliers(b.scales);
    // Index k's bits 8 and 9: bits 2 (k % 4) of qh[k / 4], each byte spread
    // over 4 words and shifted up by a multiply.
    GridIdx gi;
    int64_t qh8;
    std::memcpy(&qh8, b.qh, 8);
    const __m256i qh = _mm256_set1_epi64x(qh8);
    const __m256i up = _mm256_setr_epi16(256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4);
    for (int k = 0; k < 32; k += 16) {
        const int     h      = k / 4;
        const __m256i spread = _mm256_setr_epi8(h, -1, h, -1, h, -1, h, -1, h + 1, -1, h + 1, -1, h + 1, -1, h + 1, -1,
                                                h + 2, -1, h + 2, -1, h + 2, -1, h + 2, -1, h + 3, -1, h + 3, -1, h + 3, -1, h + 3, -1);
        const __m256i hi = _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(qh, spread), up), _mm256_set1_epi16(0x300));
        gi.put(k, idx_words(b.qs + k, hi));
    }
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
        const uint16_t * g = gi.v + 4 * ib;
        const __m256i w = words4(iq2s_grid(g[0]), iq2s_grid(g[1]), iq2s_grid(g[2]), iq2s_grid(g[3]));
        sink.values(ib, w, bit_signs(load_u32_le(b.qs + kQK_K / 8 + 4 * ib)));
        sink.runs(ib, run_pair(mults, ib));
    }
}

// IQ3: 8 grid words of 4 bytes per 32 elements, gathered.
template <class Sink>
void decode_grid(const BlockIQ3_XXS & b, Sink & sink) {
    sink.block(half(b.d) * 0.25f);
    const int * grid = reinterpret_cast<const int *>(grid::kIq3xxs);
    for (int ib = 0; ib < 8; ++ib) {
        const uint32_t a = load_u32_le(b.qs + kQK_K / 4 + 4 * ib);
        const uint8_t * q = b.qs + 8 * ib;
        // Gathered for a sink that decodes rows for many columns, word by word
        // for the one-column product (Sink::kGather): 2048 x 8192 on a Zen 4,
        // one column 0.83-0.86 ms against 1.03-1.06 gathered, 64 columns
        // 5.2-5.5 ms gathered against 6.1-6.5 word by word. IQ3_S gathers in
        // both: word by word it took 1.24-1.33 ms at one column against 1.03.
        __m256i w;
        if constexpr (Sink::kGather) {
            w = _mm256_i32gather_epi32(grid, _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(q))), 4);
        } else {
            w = _mm256_setr_epi32(grid[q[0]], grid[q[1]], grid[q[2]], grid[q[3]], grid[q[4]], grid[q[5]], grid[q[6]], grid[q[7]]);
        }
        sink.values(ib, w, index_signs(a));
        const int m = 2 * int(a >> 28) + 1;
        sink.runs(ib, m, m);
    }
}

template <class Sink>
void decode_grid(const BlockIQ3_S & b, Sink & sink) {
    sink.block(half(b.d));
    const int * grid = reinterpret_cast<const int *>(grid::kIq3s);
    for (int ib = 0; ib < 8; ++ib) {
        // Bit k of qh[ib] is the ninth bit of index k.
        const __m256i hi  = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.qh[ib]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                                             _mm256_set1_epi32(1));
        const __m256i idx = _mm256_or_si256(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(b.qs + 8 * ib))),
                                            _mm256_slli_epi32(hi, 8));
        sink.values(ib, _mm256_i32gather_epi32(grid, idx, 4), bit_signs(load_u32_le(b.signs + 4 * ib)));
        const int m = 1 + 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 15);
        sink.runs(ib, m, m);
    }
}

template <class Sink>
void decode_grid(const BlockIQ1_S & b, Sink & sink) {
    sink.block(half(b.d) * 0.125f);
    // Index k's bits 8..10: bits 3 (k % 4).. of qh[k / 4]; bit 11 the shift's
    // sign, bit 15 of it. Each qh word spread over 4 words, the fields moved
    // to bits 8..10 by multiplies (the last down by 1, a high-half multiply).
    GridIdx gi;
    const __m256i qh  = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b.qh)));
    const __m256i up  = _mm256_setr_epi16(256, 32, 4, 0, 256, 32, 4, 0, 256, 32, 4, 0, 256, 32, 4, 0);
    const __m256i dn  = _mm256_setr_epi16(0, 0, 0, -32768, 0, 0, 0, -32768, 0, 0, 0, -32768, 0, 0, 0, -32768);
    // Both runs of 32 elements ib take bits 12..14 of qh[ib].
    const __m256i mults = odd_multipliers(_mm_shuffle_epi8(_mm_and_si128(_mm_srli_epi16(_mm256_castsi256_si128(qh), 12), _mm_set1_epi16(7)),
                                                           _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14)));
    for (int k = 0; k < 32; k += 16) {
        const int     h      = k / 2;  // the byte of qh[k / 4]
        const __m256i spread = _mm256_setr_epi8(h, h + 1, h, h + 1, h, h + 1, h, h + 1, h + 2, h + 3, h + 2, h + 3, h + 2, h + 3, h + 2, h + 3,
                                                h + 4, h + 5, h + 4, h + 5, h + 4, h + 5, h + 4, h + 5, h + 6, h + 7, h + 6, h + 7, h + 6, h + 7, h + 6, h + 7);
        const __m256i w  = _mm256_shuffle_epi8(qh, spread);
        const __m256i hi = _mm256_and_si256(_mm256_or_si256(_mm256_mullo_epi16(w, up), _mm256_mulhi_epu16(w, dn)), _mm256_set1_epi16(0x700));
        gi.put(k, idx_words(b.qs + k, _mm256_or_si256(hi, _mm256_and_si256(_mm256_srli_epi16(w, 4), _mm256_set1_epi16(0x800)))));
    }
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
        const uint16_t * g = gi.v + 4 * ib;
        const __m256i v = words4(kIq1Values.v[g[0]], kIq1Values.v[g[1]], kIq1Values.v[g[2]], kIq1Values.v[g[3]]);
        sink.values(ib, _mm256_abs_epi8(v), v);
        sink.runs(ib, run_pair(mults, ib));
    }
}

template <class Sink>
void decode_grid(const BlockIQ1_M & b, Sink & sink) {
    uint16_t sw[4];
    for (int i = 0; i < 4; ++i) sw[i] = uint16_t(b.scales[2 * i] | (b.scales[2 * i + 1] << 8));
    sink.block(half(uint16_t((sw[0] >> 12) | ((sw[1] >> 8) & 0x00f0) | ((sw[2] >> 4) & 0x0f00) | (sw[3] & 0xf000))) * 0.125f);
    // Index k's bits 8..11 (the shift's sign the last): nibble k % 2 of
    // qh[k / 2], the nibbles interleaved into order and under the low bytes.
    // Run k's multiplier field: bits 3 (k % 4).. of sw[k / 4]. Qword j of f
    // holds the scale words shifted down by 3 j; run 4 u + j is its word u.
    int64_t sc8;
    std::memcpy(&sc8, b.scales, 8);
    const __m256i f = _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x(sc8), _mm256_setr_epi64x(0, 3, 6, 9)),
                                       _mm256_set1_epi16(7));
    const __m256i at = _mm256_setr_epi8(0, 8, -1, -1, 2, 10, -1, -1, 4, 12, -1, -1, 6, 14, -1, -1,
                                        -1, -1, 0, 8, -1, -1, 2, 10, -1, -1, 4, 12, -1, -1, 6, 14);
    const __m256i fk = _mm256_shuffle_epi8(f, at);
    const __m256i mults = odd_multipliers(_mm_or_si128(_mm256_castsi256_si128(fk), _mm256_extracti128_si256(fk, 1)));
    GridIdx gi;
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b.qh));
    const __m128i m4 = _mm_set1_epi8(15);
    const __m128i lo = _mm_and_si128(qh, m4), hi = _mm_and_si128(_mm_srli_epi16(qh, 4), m4);
    const __m128i n[2] = {_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi)};
    for (int h = 0; h < 2; ++h) {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b.qs + 16 * h));
        gi.put(16 * h, _mm256_setr_m128i(_mm_unpacklo_epi8(q, n[h]), _mm_unpackhi_epi8(q, n[h])));
    }
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
        const uint16_t * g = gi.v + 4 * ib;
        const __m256i v = words4(kIq1Values.v[g[0]], kIq1Values.v[g[1]], kIq1Values.v[g[2]], kIq1Values.v[g[3]]);
        sink.values(ib, _mm256_abs_epi8(v), v);
        sink.runs(ib, run_pair(mults, ib));
    }
}

// --- the ternary types ---------------------------------------------------------------
// Values -1, 0, 1 under the half-precision d of the super-block: the factor
// d, every run multiplier 1.

// Bytes b times bytes p, each modulo 256: the even bytes' products are the
// low bytes of the int16 products, the odd bytes' the high bytes of the
// odd bytes times p's odd bytes shifted up.
inline __m256i mul_bytes(__m256i b, __m256i p) {
    const __m256i odd = _mm256_set1_epi16(int16_t(0xff00));
    const __m256i lo  = _mm256_mullo_epi16(b, p);
    const __m256i hi  = _mm256_mullo_epi16(_mm256_srli_epi16(b, 8), _mm256_and_si256(p, odd));
    return _mm256_blendv_epi8(lo, hi, odd);
}

// TQ1_0's base-3 digits: digit n of byte x is (uint8(x * 3^n) * 3) >> 8
// (ternary_digit, quants.h). p holds each byte's 3^n.
// The digit of each byte f = x * 3^n (mod 256): with g = f - 1 (0 for f =
// 0), avg(g, avg(g, 0)) is about 3 g / 4 and its top 2 bits are the digit,
// for every byte (ctest HostSimd.TernaryDigitsOfEveryByteAreQuantsH): 5
// instructions where two compares against 86 and 171 took 6. TQ1_0 2048 x
// 8192, one column on a Zen 4: 354-357 us against 389-399 (VNNI level),
// 354-367 against 377-387 (AVX2).
inline __m256i ternary_digit_of(__m256i f) {
    const __m256i g = _mm256_subs_epu8(f, _mm256_set1_epi8(1));
    const __m256i t = _mm256_avg_epu8(g, _mm256_avg_epu8(g, _mm256_setzero_si256()));
    return _mm256_and_si256(_mm256_srli_epi16(t, 6), _mm256_set1_epi8(3));
}

inline __m256i ternary_digits(__m256i x, __m256i p) { return ternary_digit_of(mul_bytes(x, p)); }

template <class B>
constexpr bool kTernary = std::is_same_v<B, BlockTQ1_0> || std::is_same_v<B, BlockTQ2_0>;

// The codes (value + 1: 0, 1, 2) of a ternary block, c[ib] those of
// elements 32 ib... TQ1_0's element order (decode_run, quants.h): 32n + m
// digit n of qs[m] (n < 5), 160 + 16n + m digit n of qs[32 + m], 240 + 4n + j
// digit n of qh[j].
inline void ternary_codes(const BlockTQ1_0 & b, __m256i c[8]) {
    // qs[0..31] times 3^n (mod 256) by tripling, two byte adds a digit:
    // TQ1_0 2048 x 8192, one column on a Zen 4, 478-499 us against 494-767
    // with a byte multiply per digit.
    __m256i f = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs));
    for (int n = 0; n < 5; ++n) {
        c[n] = ternary_digit_of(f);
        f = _mm256_add_epi8(f, _mm256_add_epi8(f, f));
    }
    // Digits 0 and 1, 2 and 3 of qs[32..47]; digit 4 of them and the 4 digits of qh.
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b.qs + 32));
    uint32_t h;
    std::memcpy(&h, b.qh, 4);
    c[5] = ternary_digits(_mm256_setr_m128i(q1, q1), _mm256_setr_m128i(_mm_set1_epi8(1), _mm_set1_epi8(3)));
    c[6] = ternary_digits(_mm256_setr_m128i(q1, q1), _mm256_setr_m128i(_mm_set1_epi8(9), _mm_set1_epi8(27)));
    c[7] = ternary_digits(_mm256_setr_m128i(q1, _mm_set1_epi32(int32_t(h))),
                          _mm256_setr_m128i(_mm_set1_epi8(81), _mm_setr_epi32(0x01010101, 0x03030303, 0x09090909, 0x1b1b1b1b)));
}

// TQ2_0: the 32 elements 32 ib.. are 2-bit field ib % 4 of the 32 bytes qs[32 * (ib / 4)..].
inline void ternary_codes(const BlockTQ2_0 & b, __m256i c[8]) {
    for (int ib = 0; ib < 8; ++ib) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs + 32 * (ib / 4)));
        c[ib] = _mm256_and_si256(_mm256_srli_epi16(w, 2 * (ib % 4)), _mm256_set1_epi8(3));
    }
}

template <class Sink, class B, std::enable_if_t<kTernary<B>, int> = 0>
void decode_grid(const B & b, Sink & sink) {
    sink.block(half(b.d));
    __m256i c[8];
    ternary_codes(b, c);
    for (int ib = 0; ib < 8; ++ib) {
        const __m256i v = _mm256_sub_epi8(c[ib], _mm256_set1_epi8(1));
        sink.values(ib, _mm256_abs_epi8(v), v);
        sink.runs(ib, 1, 1);
    }
}

} // namespace

} // namespace standin::kernels::host::mm
