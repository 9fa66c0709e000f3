// The MUL_MAT tile kernel for packed Q4_K weights (Note [packed weights],
// packed.h), over the same per-level "Ops" and SI_X8_TARGET as the 32-element
// formats' (mul_mat_x8.h, which this includes), and the table of packed tile
// kernels of one level.
//
// A Q4_K row of one super-block is
//     d * sum_j sc_j * dot(q_j, y_j) - dmin * sum_j m_j * sum(y_j)
// over its 8 sub-blocks j of 32 (6-bit sc_j and m_j, nibbles q_j), times the
// activation's scale dy (Note [activation blocks], vec_dot.h: 256-element
// groups). Per super-block, the group's 3 scale words are unpacked for its 8
// rows at once (lane r: the 4 scale or min bytes of sub-blocks 0..3 or 4..7 of
// row r). Per sub-block, its 8 quant words against the activation's 4 bytes
// broadcast give lane r row r's dot(q_j, y_j) (Ops::dot_u), and Ops::scale_k
// multiplies it by sc_j of each lane into int32. The minimum needs no weight
// work beyond the scales: m_j of each lane, as two int16, times two adjacent
// 16-element activation sums (Act::sums) by one madd is m_j * sum(y_j). Both
// sums are exact integers at every level; the float operations per row and
// super-block are
//     acc = fma(-float(mins), dmin * dy, acc); acc = fma(float(isum), d * dy, acc)
// (the order of mul_mat_q.cpp's unpacked kernel), so results do not depend on
// the level.
#pragma once

#include "kernels/host/mul_mat_x8.h"

namespace standin::kernels::host::mm {

namespace {

// Block8 of Q4_K (packed.h): d[8], dmin[8], the 3 scale words, the 32 quant words.
struct X8Q4_K {
    static constexpr size_t kBlock8 = packed::kRows * 144;
    static constexpr size_t kDmin   = 2 * packed::kRows;
    static constexpr size_t kScales = 4 * packed::kRows;
    static constexpr size_t kQuants = kScales + 3 * 32;
};

// The pshufb index that takes byte j (0..3) of every 32-bit lane to the
// lane's low int16, zero-extended, or, when `twice`, to both of its int16
// halves (a madd_epi16 multiplier); one 128-bit lane of it.
SI_X8_TARGET inline __m128i lane_byte_index(int j, bool twice) {
    auto at = [&](uint32_t k) {
        const uint32_t b = 4 * k + uint32_t(j);
        return int32_t((twice ? (0x8000u | b) << 16 : 0x80800000u) | 0x8000u | b);
    };
    return _mm_setr_epi32(at(0), at(1), at(2), at(3));
}

SI_X8_TARGET inline __m256i lane_byte(__m256i v, int j, bool twice) {
    return _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(lane_byte_index(j, twice)));
}

// A super-block's sub-block scales (sc) and mins (mn) of the group's 8 rows,
// unpacked from its 3 scale words: lane r of [0] holds row r's bytes for
// sub-blocks 0..3, of [1] for 4..7. Sub-blocks 0..3 take 6 bits of words 0
// (scales) and 1 (mins); 4..7 a nibble of word 2 and the top 2 bits of the
// bytes of words 0, 1 (quant::k_scale_min).
struct KScales {
    __m256i sc[2], mn[2];
};

SI_X8_TARGET inline KScales k_scales(const uint8_t * blk) {
    const __m256i m4  = _mm256_set1_epi8(0x0f);
    const __m256i m6  = _mm256_set1_epi8(0x3f);
    const __m256i top = _mm256_set1_epi8(0x30);
    const __m256i u0  = load_w(blk + X8Q4_K::kScales);
    const __m256i u1  = load_w(blk + X8Q4_K::kScales + 32);
    const __m256i u2  = load_w(blk + X8Q4_K::kScales + 64);
    KScales k;
    k.sc[0] = _mm256_and_si256(u0, m6);
    k.mn[0] = _mm256_and_si256(u1, m6);
    k.sc[1] = _mm256_or_si256(_mm256_and_si256(u2, m4), _mm256_and_si256(_mm256_srli_epi32(u0, 2), top));
    k.mn[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m4), _mm256_and_si256(_mm256_srli_epi32(u1, 2), top));
    return k;
}

// Group (8 rows from tile row r0) times the columns of a tile that the width
// V holds from tile column cl0: V::N accumulators, each 8 rows of one column
// (Q4KCols, 256-bit) or of two (mul_mat_x8_vnni.cpp, Note [column pairs]).
// One body for both, so both do the same integer operations in the same
// order; V::step is the float operations of the head of this file.
template <class V>
SI_X8_TARGET void group_q4_K(const QTile & t, int64_t r0, int64_t cl0) {
    using I = typename V::I;
    const uint8_t * g  = reinterpret_cast<const uint8_t *>(t.x) + r0 * int64_t(t.x_stride);
    const int64_t   nb = t.act.K / 256;
    const V         v(t, cl0);
    typename V::F   acc[V::N] = {};

    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * blk = g + b * int64_t(X8Q4_K::kBlock8);
        const typename V::Scales k = V::scales(k_scales(blk));
        const uint8_t * qw = blk + X8Q4_K::kQuants;
        I isum[V::N] = {};
        // Unrolled so that j, and with it every shift and shuffle mask, is a constant.
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            I s[V::N] = {};
#pragma GCC unroll 8
            for (int w = 0; w < 8; ++w) {
                const I x = V::nibbles(qw + 32 * (8 * (j / 2) + w), j % 2);
#pragma GCC unroll 4
                for (int i = 0; i < V::N; ++i) s[i] = v.dot(s[i], x, i, 8 * b + j, w);
            }
            for (int i = 0; i < V::N; ++i) isum[i] = V::add_scaled(isum[i], s[i], k, j);
        }
        const typename V::F d = V::halves(blk), dmin = V::halves(blk + X8Q4_K::kDmin);
#pragma GCC unroll 4
        for (int i = 0; i < V::N; ++i) acc[i] = V::step(acc[i], v.mins(k, i, b), isum[i], dmin, d, v.scale(i, b));
    }
    V::store(t, r0, cl0, acc);
}

// The 256-bit width: C columns, lane r row r.
template <class Ops, int C>
struct Q4KCols {
    using I      = __m256i;
    using F      = __m256;
    using Scales = KScales;
    static constexpr int N = C;
    Cols<C>         y;
    const int16_t * ys[C];  // the 16-element sums

    SI_X8_TARGET Q4KCols(const QTile & t, int64_t cl0) : y(t, cl0, 256) {
        for (int c = 0; c < C; ++c) ys[c] = t.act.sums + (t.c0 + cl0 + c) * (t.act.K / 2);
    }
    SI_X8_TARGET static KScales scales(const KScales & k) { return k; }
    SI_X8_TARGET static I nibbles(const uint8_t * p, bool high) {
        const I raw = load_w(p);
        return _mm256_and_si256(high ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0f));
    }
    // Word w of 32-element block b32 of column c against x, into s.
    SI_X8_TARGET I dot(I s, I x, int c, int64_t b32, int w) const {
        s = Ops::dot_u(s, x, bcast4(y.q[c] + 32 * b32 + 4 * w));
        chain(s);
        return s;
    }
    // isum + s times sub-block j's scales.
    SI_X8_TARGET static I add_scaled(I isum, I s, const KScales & k, int j) {
        return _mm256_add_epi32(isum, Ops::scale_k(s, k.sc[j / 4], j % 4));
    }
    // sum_j m_j * sum(y_j): sums 2j and 2j + 1 of 16 codes, one int32, meet m_j twice.
    SI_X8_TARGET I mins(const KScales & k, int c, int64_t b) const {
        I m = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            int32_t pair;
            std::memcpy(&pair, ys[c] + 16 * b + 2 * j, 4);
            m = _mm256_add_epi32(m, _mm256_madd_epi16(lane_byte(k.mn[j / 4], j % 4, true), _mm256_set1_epi32(pair)));
        }
        return m;
    }
    SI_X8_TARGET F scale(int c, int64_t b) const { return _mm256_set1_ps(y.d[c][b]); }
    SI_X8_TARGET static F halves(const uint8_t * p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    }
    // The super-block's float operations (mul_mat_x8_k.h's head).
    SI_X8_TARGET static F step(F acc, I mins, I isum, F dmin, F d, F dy) {
        acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dmin, dy), acc);
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, dy), acc);
    }
    SI_X8_TARGET static void store(const QTile & t, int64_t r0, int64_t cl0, const F * acc) {
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(t.out + (cl0 + c) * t.out_col_stride + r0, acc[c]);
    }
};

template <class Ops>
SI_X8_TARGET void tile_x8_q4_K(const QTile & t) {
    column_runs(t, [&](auto cols, int64_t r, int64_t c) SI_X8_TARGET { group_q4_K<Q4KCols<Ops, decltype(cols)::value>>(t, r, c); });
}

// The 256-bit packed tile kernels of one level.
template <class Ops>
QTileFn x8_tile(ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0: return tile_x8<Ops, X8Q4_0>;
        case GGML_TYPE_Q8_0: return tile_x8<Ops, X8Q8_0>;
        case GGML_TYPE_Q4_K: return tile_x8_q4_K<Ops>;
        default:             return nullptr;
    }
}

} // namespace

} // namespace standin::kernels::host::mm
