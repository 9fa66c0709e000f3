// The MUL_MAT tile kernels for packed IQ4_XS, Q3_K and Q2_K weights (Note
// [packed weights], packed.h), on the widths and "Ops" of mul_mat_x8_k.h
// (which this includes), and the table of the 256-bit packed tile kernels of
// one level. Like the other K formats they take the activation's
// 256-element groups (codes y, scale dy, int16 sums of every 16 codes).
//
// An IQ4_XS row of one super-block is
//     d * sum_j (ls_j - 32) * dot(v_j, y_j)
// over its 8 sub-blocks j of 32, v the signed IQ4_NL level (-127..113) of
// each nibble, ls_j 6 bits split over scales_l and scales_h. The levels are
// looked up 32 at a time (pshufb); the two forms of the product are at
// group_iq4_xs.
// A Q3_K row of one super-block is
//     d * (sum_k s_k * dot(c_k, y_k) - 4 * sum_k s_k * sum(y_k))
// over its 16 runs k of 16, c_k the unsigned 3-bit codes (value + 4), s_k the
// signed 6-bit scales: Q6_K's form with an offset of 4.
// A Q2_K row of one super-block is
//     d * sum_k sc_k * dot(c_k, y_k) - dmin * sum_k m_k * sum(y_k)
// with 4-bit sc_k and m_k: Q4_K's form on runs of 16.
// The float operations per row and super-block, in this order:
//     IQ4_XS, Q3_K: acc = fma(float(isum), d * dy, acc)  (Q3_K's isum less 4 * offset)
//     Q2_K: acc = fma(-float(mins), dmin * dy, acc); acc = fma(float(isum), d * dy, acc)
// so results do not depend on the level (tests/kernels/test_packed.cpp holds
// them to a sequential loop, bit for bit).
#pragma once

#include "kernels/common/quants.h"
#include "kernels/host/mul_mat_x8_k.h"

namespace standin::kernels::host::mm {

namespace {

// Block8 of IQ4_XS (packed.h): d[8], scales_h[8] (2 bytes a row), the
// scales_l word, 32 words of nibbles (word 4j + u: bytes 4u.. of sub-block
// j's 16, low nibbles elements 32j + 4u.., high ones 32j + 16 + 4u..).
struct X8IQ4_XS {
    static constexpr size_t kBlock8 = packed::kRows * 136;
    static constexpr size_t kHigh   = 2 * packed::kRows;
    static constexpr size_t kLow    = 4 * packed::kRows;
    static constexpr size_t kQuants = kLow + 32;
};

// Block8 of Q3_K (packed.h): 8 hmask words, 16 qs words, 3 scale words, d[8].
struct X8Q3_K {
    static constexpr size_t kBlock8 = packed::kRows * 110;
    static constexpr size_t kQs     = 8 * 32;
    static constexpr size_t kScales = kQs + 16 * 32;
    static constexpr size_t kD      = kScales + 3 * 32;
};

// Block8 of Q2_K (packed.h): 4 scale words, 16 qs words, d[8], dmin[8].
struct X8Q2_K {
    static constexpr size_t kBlock8 = packed::kRows * 84;
    static constexpr size_t kQs     = 4 * 32;
    static constexpr size_t kD      = kQs + 16 * 32;
    static constexpr size_t kDmin   = kD + 2 * packed::kRows;
};

// Bits [from, from + width) of every 32-bit lane of v, moved to bit `to` of
// the lane; every other bit cleared.
SI_X8_TARGET inline __m256i lane_field(__m256i v, int from, int width, int to) {
    const __m256i f = _mm256_and_si256(v, _mm256_set1_epi32(int32_t(((1u << width) - 1u) << from)));
    return to >= from ? _mm256_slli_epi32(f, to - from) : _mm256_srli_epi32(f, from - to);
}

// IQ4_XS's sub-block scales ls_j - 32 of the group's 8 rows as signed bytes:
// lane r of [0] holds row r's for sub-blocks 0..3, of [1] for 4..7. Low 4
// bits: nibble j of the lane's scales_l word; top 2: bits 2j, 2j + 1 of its
// scales_h.
SI_X8_TARGET inline void iq4_xs_scales(const uint8_t * blk, __m256i sc[2]) {
    const __m256i l = load_w(blk + X8IQ4_XS::kLow);
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(blk + X8IQ4_XS::kHigh)));
    sc[0] = sc[1] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
        const int at = 8 * (j % 4);  // byte j % 4 of the lane
        sc[j / 4] = _mm256_or_si256(sc[j / 4], _mm256_or_si256(lane_field(l, 4 * j, 4, at), lane_field(h, 2 * j, 2, at + 4)));
    }
    for (int k = 0; k < 2; ++k) sc[k] = _mm256_sub_epi8(sc[k], _mm256_set1_epi8(32));
}

// Two forms of the same integers. Where a lane sums a word of unsigned
// bytes up to 255 exactly (the VNNI level, Ops::sum_words), the levels are
// taken plus 128 and multiplied unsigned by signed, and 128 times each
// sub-block's scaled activation sum is taken off at the end, as Q6_K's
// offset of 32; at the AVX2 level, whose int16 pair sums would saturate on
// such bytes, signed by signed through |v| * (y * sign v), two more
// instructions per word and column: 1B pp64 on an AMD EPYC (Zen 4) at the
// VNNI level 171 t/s with the signed form, 225 with the offset.
template <class V>
SI_X8_TARGET void group_iq4_xs(const QTile & t, int64_t r0, int64_t cl0) {
    using I = typename V::I;
    k_group<V, X8IQ4_XS::kBlock8>(t, r0, cl0, [](const V & v, const uint8_t * blk, int64_t b, typename V::F * acc) SI_X8_TARGET {
        constexpr bool kOffset = V::sum_words(255) > 0;
        // Words summed before the scale applies: a sub-block's 8, or 1 where
        // int16 holds one word's pair sums only (Ops::sum_words of 127).
        constexpr int kRun = std::min(8, V::sum_words(127));
        __m256i raw[2];
        iq4_xs_scales(blk, raw);
        const I sc[2] = {V::lanes(raw[0]), V::lanes(raw[1])};
        const __m256i levels = level_table<X8IQ4_NL>(kOffset), m4 = _mm256_set1_epi8(0x0f);
        I isum[V::N] = {};
        sub_block_words<V, kRun>(
            [&](I * s, int j, int w) SI_X8_TARGET {
                // Activation word w: elements 4w.. of the sub-block, the low
                // nibbles of quant word 4j + w (w < 4) or the high ones of 4j + w - 4.
                const __m256i raw_q = load_w(blk + X8IQ4_XS::kQuants + 32 * (4 * j + w % 4));
                const __m256i nib   = _mm256_and_si256(w < 4 ? raw_q : _mm256_srli_epi16(raw_q, 4), m4);
                dot_values<kOffset>(v, s, _mm256_shuffle_epi8(levels, nib), 8 * b + j, w);
            },
            [&](const I * s, int j, int) SI_X8_TARGET {
                for (int i = 0; i < V::N; ++i) isum[i] = V::add_scaled(isum[i], s[i], sc[j / 4], j % 4);
            });
        const typename V::F d = V::halves(blk);
#pragma GCC unroll 4
        for (int i = 0; i < V::N; ++i) {
            I sum = isum[i];
            if constexpr (kOffset) {
                // ls_j - 32 twice against the sums of sub-block j's two runs.
                const I off = v.sums_dot([&](int j) SI_X8_TARGET { return V::pair16(sc[j / 4], j % 4, j % 4); }, i, b);
                sum = V::template less_shl<7>(sum, off);
            }
            acc[i] = V::fma(acc[i], sum, d, v.scale(i, b));
        }
    });
}

// The 3-bit codes (value + 4, 0..7) of 4 elements of 8 rows in Q3_K's
// sub-block j (32 elements, word w): field j % 4 of qs word 8 (j / 4) + w as
// the low 2 bits, bit j of hmask word w's bytes as bit 2. The 16-bit shifts
// bring each byte's own bits to the masked places.
SI_X8_TARGET inline __m256i q3_codes(const uint8_t * blk, int j, int w) {
    const __m256i qs = load_w(blk + X8Q3_K::kQs + 32 * (8 * (j / 4) + w));
    const __m256i hm = load_w(blk + 32 * w);
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * (j % 4)), _mm256_set1_epi8(3));
    const __m256i hb = j < 2 ? _mm256_slli_epi16(hm, 2 - j) : _mm256_srli_epi16(hm, j - 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hb, _mm256_set1_epi8(4)));
}

// Q3_K's 16 run scales s_k of the group's 8 rows as signed bytes, 4 runs a
// vector (lane r of [u]: row r's runs 4u..4u+3). Low 4 bits: the low (runs
// 0..7) or high (8..15) nibbles of scale words 0 and 1; top 2: bits 2u, 2u + 1
// of scale word 2's bytes.
SI_X8_TARGET inline void q3_scales(const uint8_t * blk, __m256i sc[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i w0 = load_w(blk + X8Q3_K::kScales), w1 = load_w(blk + X8Q3_K::kScales + 32);
    const __m256i w2 = load_w(blk + X8Q3_K::kScales + 64);
    const __m256i lo[4] = {_mm256_and_si256(w0, m4), _mm256_and_si256(w1, m4), _mm256_and_si256(_mm256_srli_epi16(w0, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(w1, 4), m4)};
    const __m256i hi[4] = {_mm256_slli_epi16(w2, 4), _mm256_slli_epi16(w2, 2), w2, _mm256_srli_epi16(w2, 2)};
    for (int u = 0; u < 4; ++u) {
        sc[u] = _mm256_sub_epi8(_mm256_or_si256(lo[u], _mm256_and_si256(hi[u], _mm256_set1_epi8(0x30))), _mm256_set1_epi8(32));
    }
}

// Q2_K's 2-bit codes of 4 elements of 8 rows in sub-block j, word w: field j % 4 of qs word 8 (j / 4) + w.
SI_X8_TARGET inline __m256i q2_codes(const uint8_t * blk, int j, int w) {
    const __m256i qs = load_w(blk + X8Q2_K::kQs + 32 * (8 * (j / 4) + w));
    return _mm256_and_si256(_mm256_srli_epi16(qs, 2 * (j % 4)), _mm256_set1_epi8(3));
}

// The two formats of group_runs16 (runs of 16 elements with a scale each):
// their block8, largest code, codes of word w of sub-block j, the run
// scales sc[4] (and for Q2_K the run mins mn[4]), 4 runs a vector, and the
// super-block's float step for one column: isum the scaled sums, corr the
// run scales (Q3_K) or mins (Q2_K) against the runs' activation sums.
struct KQ3_K {
    static constexpr size_t kBlock8  = X8Q3_K::kBlock8;
    static constexpr int    kMaxCode = 7;
    static constexpr bool   kMin     = false;
    SI_X8_TARGET static __m256i codes(const uint8_t * blk, int j, int w) { return q3_codes(blk, j, w); }
    SI_X8_TARGET static void scales(const uint8_t * blk, __m256i sc[4], __m256i *) { q3_scales(blk, sc); }
    template <class V>
    SI_X8_TARGET static typename V::F finish(const uint8_t * blk, typename V::F acc, typename V::I isum, typename V::I corr,
                                             typename V::F dy) {
        return V::fma(acc, V::template less_shl<2>(isum, corr), V::halves(blk + X8Q3_K::kD), dy);
    }
};

struct KQ2_K {
    static constexpr size_t kBlock8  = X8Q2_K::kBlock8;
    static constexpr int    kMaxCode = 3;
    static constexpr bool   kMin     = true;
    SI_X8_TARGET static __m256i codes(const uint8_t * blk, int j, int w) { return q2_codes(blk, j, w); }
    // Scale word u: byte k the scale (low nibble) and min (high) of run 4u + k.
    SI_X8_TARGET static void scales(const uint8_t * blk, __m256i sc[4], __m256i * mn) {
        const __m256i m4 = _mm256_set1_epi8(0x0f);
        for (int u = 0; u < 4; ++u) {
            const __m256i w = load_w(blk + 32 * u);
            sc[u] = _mm256_and_si256(w, m4);
            mn[u] = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
        }
    }
    template <class V>
    SI_X8_TARGET static typename V::F finish(const uint8_t * blk, typename V::F acc, typename V::I isum, typename V::I corr,
                                             typename V::F dy) {
        acc = V::fnma(acc, corr, V::halves(blk + X8Q2_K::kDmin), dy);
        return V::fma(acc, isum, V::halves(blk + X8Q2_K::kD), dy);
    }
};

template <class V, class K>
SI_X8_TARGET void group_runs16(const QTile & t, int64_t r0, int64_t cl0) {
    using I = typename V::I;
    k_group<V, K::kBlock8>(t, r0, cl0, [](const V & v, const uint8_t * blk, int64_t b, typename V::F * acc) SI_X8_TARGET {
        // Words of a 16-element run (its scale's reach) summed before the
        // scale applies: all 4 at every level (Ops::sum_words of 7 is 18).
        constexpr int kRun = std::min(4, V::sum_words(K::kMaxCode));
        __m256i raw_sc[4], raw_mn[4];
        K::scales(blk, raw_sc, raw_mn);
        I sc[4], mn[4];
        for (int u = 0; u < 4; ++u) {
            sc[u] = V::lanes(raw_sc[u]);
            if constexpr (K::kMin) mn[u] = V::lanes(raw_mn[u]);
        }
        I isum[V::N] = {};
        sub_block_words<V, kRun>(
            [&](I * s, int j, int w) SI_X8_TARGET {
                const I x = V::lanes(K::codes(blk, j, w));
#pragma GCC unroll 4
                for (int i = 0; i < V::N; ++i) s[i] = v.dot(s[i], x, i, 8 * b + j, w);
            },
            [&](const I * s, int j, int w0) SI_X8_TARGET {
                const int k = 2 * j + w0 / 4;  // the run
                for (int i = 0; i < V::N; ++i) isum[i] = V::add_scaled(isum[i], s[i], sc[k / 4], k % 4);
            });
#pragma GCC unroll 4
        for (int i = 0; i < V::N; ++i) {
            // Runs 2j and 2j + 1's scales (Q3_K) or mins (Q2_K) against their sums.
            const I corr = v.sums_dot(
                [&](int j) SI_X8_TARGET {
                    if constexpr (K::kMin) {
                        return V::pair16(mn[j / 2], 2 * (j % 2), 2 * (j % 2) + 1);
                    } else {
                        return V::pair16(sc[j / 2], 2 * (j % 2), 2 * (j % 2) + 1);
                    }
                },
                i, b);
            acc[i] = K::template finish<V>(blk, acc[i], isum[i], corr, v.scale(i, b));
        }
    });
}

struct BodyIQ4_XS {
    template <class V>
    SI_X8_TARGET static void run(const QTile & t, int64_t r0, int64_t cl0) { group_iq4_xs<V>(t, r0, cl0); }
};

struct BodyQ3_K {
    template <class V>
    SI_X8_TARGET static void run(const QTile & t, int64_t r0, int64_t cl0) { group_runs16<V, KQ3_K>(t, r0, cl0); }
};

struct BodyQ2_K {
    template <class V>
    SI_X8_TARGET static void run(const QTile & t, int64_t r0, int64_t cl0) { group_runs16<V, KQ2_K>(t, r0, cl0); }
};

// The packed types and the layout or super-block body each level's tile
// kernels take them with, stated once for every level (this file's x8_tile,
// mul_mat_x8_vnni.cpp's x8_tile_vnni): groups of 32, then super-blocks of 256.
#define SI_X8_GROUP_FORMATS(X) X(Q4_0, X8Q4_0) X(Q8_0, X8Q8_0) X(IQ4_NL, X8IQ4_NL) X(MXFP4, X8MXFP4)
#define SI_X8_SUPER_FORMATS(X)                                                                         \
    X(Q2_K, BodyQ2_K) X(Q3_K, BodyQ3_K) X(Q4_K, BodyQ4_K) X(Q5_K, BodyQ5_K) X(Q6_K, BodyQ6_K) \
    X(IQ4_XS, BodyIQ4_XS)

// The 256-bit packed tile kernels of one level.
template <class Ops>
QTileFn x8_tile(ggml_type type) {
    switch (type) {
#define SI_X(name, L) case GGML_TYPE_##name: return tile_x8<Ops, L>;
        SI_X8_GROUP_FORMATS(SI_X)
#undef SI_X
#define SI_X(name, Body) case GGML_TYPE_##name: return tile_x8_k<Ops, Body>;
        SI_X8_SUPER_FORMATS(SI_X)
#undef SI_X
        default: return nullptr;
    }
}

} // namespace

} // namespace standin::kernels::host::mm
