// The MUL_MAT tile kernels for packed Q4_K, Q5_K and Q6_K weights (Note
// [packed weights], packed.h), over the same per-level "Ops" and
// SI_X8_TARGET as the 32-element formats' (mul_mat_x8.h, which this
// includes), and the table of packed tile kernels of one level. All take
// the activation's 256-element groups (Note [activation blocks], vec_dot.h):
// codes y, scale dy, and the int16 sums of every 16 codes (Act::sums).
//
// A Q4_K row of one super-block is
//     d * sum_j sc_j * dot(q_j, y_j) - dmin * sum_j m_j * sum(y_j)
// over its 8 sub-blocks j of 32 (6-bit sc_j and m_j, nibbles q_j), times dy.
// Per super-block, the group's 3 scale words are unpacked for its 8 rows at
// once (lane r: the 4 scale or min bytes of sub-blocks 0..3 or 4..7 of row
// r). Per sub-block, its 8 quant words against the activation's 4 bytes
// broadcast give lane r row r's dot(q_j, y_j) (Ops::dot_u), and Ops::scale_k
// multiplies it by sc_j of each lane into int32. The minimum needs no weight
// work beyond the scales: m_j of each lane, as two int16, times two adjacent
// 16-element activation sums by one madd is m_j * sum(y_j).
// A Q5_K row is Q4_K's with 5-bit codes q_j: the nibble and, as bit 4, a bit
// of the qh word that serves word w of all 8 sub-blocks; everything else is
// Q4_K's (one body, group_k_min).
// A Q6_K row of one super-block is
//     d * (sum_k sc_k * dot(q_k, y_k) - 32 * sum_k sc_k * sum(y_k))
// over its 16 runs k of 16 elements (int8 sc_k, 6-bit codes q_k 0..63 for
// the values q_k - 32). The codes of 8 rows are put together from a ql and a
// qh word per 4 elements; a run's 4 words give each lane's dot(q_k, y_k),
// multiplied by sc_k as Q4_K's sub-blocks are; the offset is Q4_K's minimum
// with the two int16 of a lane being sc_2j and sc_2j+1.
// Every sum is an exact integer at every level; the float operations per row
// and super-block are, in the order of mul_mat_q.cpp's unpacked kernels,
//     Q4_K, Q5_K: acc = fma(-float(mins), dmin * dy, acc); acc = fma(float(isum), d * dy, acc)
//     Q6_K: acc = fma(float(isum - 32 * offset), d * dy, acc)
// so results do not depend on the level.
#pragma once

#include <algorithm>

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

// Block8 of Q5_K (packed.h): Q4_K's d, dmin and scale words at the same
// offsets (k_scales reads either), then 8 qh words, then the 32 quant words.
struct X8Q5_K {
    static constexpr size_t kBlock8 = packed::kRows * 176;
    static constexpr size_t kQh     = X8Q4_K::kQuants;
    static constexpr size_t kQuants = kQh + 8 * 32;
};

// Block8 of Q6_K (packed.h): 32 ql words, 16 qh words, 4 scale words, d[8].
struct X8Q6_K {
    static constexpr size_t kBlock8 = packed::kRows * 210;
    static constexpr size_t kQh     = 32 * 32;
    static constexpr size_t kScales = kQh + 16 * 32;
    static constexpr size_t kD      = kScales + 4 * 32;
};

// The pshufb index that takes bytes lo and hi (0..3) of every 32-bit lane to
// the high bytes of its low and high int16, zeros below them; one 128-bit
// lane of it. An arithmetic shift of each int16 by 8 then leaves the two
// bytes sign-extended (a madd_epi16 multiplier), one of each int32 by 24 byte
// hi sign-extended. Q4_K's 6-bit fields read the same signed or not.
SI_X8_TARGET inline __m128i lane_bytes_index(int lo, int hi) {
    auto at = [&](uint32_t k) {
        return int32_t(((4 * k + uint32_t(hi)) << 24) | 0x00800000u | ((4 * k + uint32_t(lo)) << 8) | 0x80u);
    };
    return _mm_setr_epi32(at(0), at(1), at(2), at(3));
}

// Bytes lo and hi of every lane of v as the lane's two int16, sign-extended.
SI_X8_TARGET inline __m256i lane_bytes(__m256i v, int lo, int hi) {
    return _mm256_srai_epi16(_mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(lane_bytes_index(lo, hi))), 8);
}

// Byte j of every lane of v as the lane's int32, sign-extended.
SI_X8_TARGET inline __m256i lane_byte32(__m256i v, int j) {
    return _mm256_srai_epi32(_mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(lane_bytes_index(j, j))), 24);
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

// A Q4_K quant word's nibbles (low or high), 4 codes of 8 rows.
SI_X8_TARGET inline __m256i q4_codes(const uint8_t * p, bool high) {
    const __m256i raw = load_w(p);
    return _mm256_and_si256(high ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0f));
}

// The 5-bit codes of 4 elements of 8 rows in Q5_K's sub-block j: the nibbles
// of quant word q as Q4_K's, and bit j of each byte of qh word h moved to bit
// 4. After the 16-bit shift by 4 - j (-3..4), bit 4 of each byte is bit j of
// that same byte, so the mask takes nothing from its neighbour.
SI_X8_TARGET inline __m256i q5_codes(const uint8_t * q, const uint8_t * h, int j) {
    const __m256i raw = load_w(h);
    const __m256i hb  = j < 4 ? _mm256_slli_epi16(raw, 4 - j) : _mm256_srli_epi16(raw, j - 4);
    return _mm256_or_si256(q4_codes(q, j % 2), _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
}

// The two formats of group_k_min: their block8's size, their largest code
// (it bounds how many words the 256-bit level may sum in int16,
// Ops::sum_words), and word w (0..7) of sub-block j's codes.
struct KQ4_K {
    static constexpr size_t kBlock8  = X8Q4_K::kBlock8;
    static constexpr int    kMaxCode = 15;
    SI_X8_TARGET static __m256i codes(const uint8_t * blk, int j, int w) {
        return q4_codes(blk + X8Q4_K::kQuants + 32 * (8 * (j / 2) + w), j % 2);
    }
};

struct KQ5_K {
    static constexpr size_t kBlock8  = X8Q5_K::kBlock8;
    static constexpr int    kMaxCode = 31;
    SI_X8_TARGET static __m256i codes(const uint8_t * blk, int j, int w) {
        return q5_codes(blk + X8Q5_K::kQuants + 32 * (8 * (j / 2) + w), blk + X8Q5_K::kQh + 32 * w, j);
    }
};

// The 6-bit codes of 4 elements of 8 rows in run t (0..3) of a Q6_K half:
// the low (t < 2) or high nibbles of the ql word, bits 2t, 2t + 1 of the qh
// word's bytes above them.
SI_X8_TARGET inline __m256i q6_codes(const uint8_t * ql, const uint8_t * qh, int t) {
    const __m256i l  = load_w(ql);
    const __m256i h  = load_w(qh);
    const __m256i lo = _mm256_and_si256(t < 2 ? l : _mm256_srli_epi16(l, 4), _mm256_set1_epi8(0x0f));
    const __m256i hi = t == 0 ? _mm256_slli_epi16(h, 4) : t == 1 ? _mm256_slli_epi16(h, 2) : t == 2 ? h : _mm256_srli_epi16(h, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
}

// The kernel bodies: a group (8 rows from tile row r0) times the columns of
// a tile that the width V holds from tile column cl0, V::N accumulators, each
// 8 rows of one column (KCols, 256-bit) or of two (KPairs,
// mul_mat_x8_pairs.h, Note [column pairs]). One body per format for both
// widths, so both do the same integer operations and the float operations of
// the head of this file in the same order. V::lanes puts a 256-bit vector
// of 8 rows into the width's lanes.
// The frame of both bodies: the group's super-blocks in order, each handed to
// sb(v, blk, b, acc) (its block8 at blk, its index b, the accumulators),
// then the store.
template <class V, size_t kBlock8, class SuperBlock>
SI_X8_TARGET inline void k_group(const QTile & t, int64_t r0, int64_t cl0, SuperBlock sb) {
    const uint8_t * g = reinterpret_cast<const uint8_t *>(t.x) + r0 * int64_t(t.x_stride);
    const V         v(t, cl0);
    typename V::F   acc[V::N] = {};
    for (int64_t b = 0; b < t.act.K / 256; ++b) sb(v, g + b * int64_t(kBlock8), b, acc);
    V::store(t, r0, cl0, acc);
}

// The word loop of a super-block: its 8 sub-blocks j of 8 words, in runs
// of kRun words from w0 whose sums s (one per column) start at zero;
// word(s, j, w) adds word w of sub-block j into s, scaled(s, j, w0) takes a
// run's sums. Unrolled, so that j and w, and with them every shift and
// shuffle mask, are constants.
template <class V, int kRun, class Word, class Scaled>
SI_X8_TARGET inline void sub_block_words(Word word, Scaled scaled) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
#pragma GCC unroll 8
        for (int w0 = 0; w0 < 8; w0 += kRun) {
            typename V::I s[V::N] = {};
#pragma GCC unroll 8
            for (int w = w0; w < w0 + kRun; ++w) word(s, j, w);
            scaled(s, j, w0);
        }
    }
}

// Word w of 32-element block b32 against every column of the width, for
// signed values `val` of 8 rows: stored plus 128 and multiplied as unsigned
// bytes where kOffset (the caller takes 128 times the activation sums off),
// else as |val| against the activation with val's signs.
template <bool kOffset, class V>
SI_X8_TARGET inline void dot_values(const V & v, typename V::I * s, __m256i val, int64_t b32, int w) {
    if constexpr (kOffset) {
        const typename V::I x = V::lanes(val);
#pragma GCC unroll 4
        for (int i = 0; i < V::N; ++i) s[i] = v.dot(s[i], x, i, b32, w);
    } else {
        const typename V::I x = V::lanes(val), xa = V::lanes(_mm256_abs_epi8(val));
#pragma GCC unroll 4
        for (int i = 0; i < V::N; ++i) s[i] = v.dot_s(s[i], xa, x, i, b32, w);
    }
}

// Q4_K and Q5_K (K, one of KQ4_K and KQ5_K).
template <class V, class K>
SI_X8_TARGET void group_k_min(const QTile & t, int64_t r0, int64_t cl0) {
    using I = typename V::I;
    k_group<V, K::kBlock8>(t, r0, cl0, [](const V & v, const uint8_t * blk, int64_t b, typename V::F * acc) SI_X8_TARGET {
        // Words of a sub-block summed before its scale applies: all 8, but
        // for Q5_K's codes at the 256-bit level 4 (Ops::sum_words).
        constexpr int kRun = std::min(8, V::sum_words(K::kMaxCode));
        const KScales k = k_scales(blk);
        const I sc[2] = {V::lanes(k.sc[0]), V::lanes(k.sc[1])};
        const I mn[2] = {V::lanes(k.mn[0]), V::lanes(k.mn[1])};
        I isum[V::N] = {};
        sub_block_words<V, kRun>(
            [&](I * s, int j, int w) SI_X8_TARGET {
                const I x = V::lanes(K::codes(blk, j, w));
#pragma GCC unroll 4
                for (int i = 0; i < V::N; ++i) s[i] = v.dot(s[i], x, i, 8 * b + j, w);
            },
            [&](const I * s, int j, int) SI_X8_TARGET {
                for (int i = 0; i < V::N; ++i) isum[i] = V::add_scaled(isum[i], s[i], sc[j / 4], j % 4);
            });
        const typename V::F d = V::halves(blk), dmin = V::halves(blk + X8Q4_K::kDmin);
#pragma GCC unroll 4
        for (int i = 0; i < V::N; ++i) {
            // m_j twice against the sums of sub-block j's two runs.
            const I mins = v.sums_dot([&](int j) SI_X8_TARGET { return V::pair16(mn[j / 4], j % 4, j % 4); }, i, b);
            acc[i] = V::fma(V::fnma(acc[i], mins, dmin, v.scale(i, b)), isum[i], d, v.scale(i, b));
        }
    });
}

// Note [Q6_K prefetch]
// A Q6_K body prefetches the whole block8 kQ6Ahead super-blocks ahead into
// L2 (prefetcht1). Measured on an AMD EPYC (Zen 4), one column from memory
// (8192x2048, 2 threads): unprefetched 870 us, as slow with only the ql
// lines or only the qh and scale lines prefetched, so the hardware
// prefetchers fetch next to nothing of this block8's three streams (Q5_K's,
// read in address order, needs no help: 190 us); unpacked Q6_K 280 us. The
// whole next block8 by prefetcht0 gave 490-680 us, and 330-630 at 2 to 6
// ahead: presumably those prefetches hold the L1's few miss buffers, too few
// lines in flight to cover the memory's latency. By prefetcht1: 1 ahead
// 430-500 us, 2 ahead about 310, 4 to 8 ahead 220-250 (Q5_K's bytes per
// second), at both levels; 64 columns 4.7 against 5.0 ms. Past the group a
// prefetch reads the next group's block8s (groups are consecutive), past the
// tensor nothing that can fault (a prefetch never faults).
constexpr int64_t kQ6Ahead = 4;

template <class V>
SI_X8_TARGET void group_q6_K(const QTile & t, int64_t r0, int64_t cl0) {
    using I = typename V::I;
    k_group<V, X8Q6_K::kBlock8>(t, r0, cl0, [](const V & v, const uint8_t * blk, int64_t b, typename V::F * acc) SI_X8_TARGET {
        prefetch_block8<X8Q6_K::kBlock8, kQ6Ahead * X8Q6_K::kBlock8>(blk);  // Note [Q6_K prefetch]
        I sc[4];  // lane r: row r's scales 4u..4u+3
        for (int u = 0; u < 4; ++u) sc[u] = V::lanes(load_w(blk + X8Q6_K::kScales + 32 * u));
        // Words of a 16-element run (its scale's reach) summed before the
        // scale applies: 4, or 2 at the 256-bit level (Ops::sum_words).
        constexpr int kRun = std::min(4, V::sum_words(63));
        I isum[V::N] = {};
        // s[i] += word w of sub-block j (run t of half h, packed.h) times column i.
        auto word = [&](I * s, int h, int t, int w) SI_X8_TARGET {
            const I x = V::lanes(q6_codes(blk + 32 * (16 * h + 8 * (t % 2) + w), blk + X8Q6_K::kQh + 32 * (8 * h + w), t));
#pragma GCC unroll 4
            for (int i = 0; i < V::N; ++i) s[i] = v.dot(s[i], x, i, 8 * b + 4 * h + t, w);
        };
        // isum += s times the scale of run k (words w0.. of sub-block k / 2).
        auto scaled = [&](const I * s, int k) SI_X8_TARGET {
            for (int i = 0; i < V::N; ++i) isum[i] = V::add_scaled(isum[i], s[i], sc[k / 4], k % 4);
        };
        // Both orders unrolled, so that every shift and shuffle mask is a
        // constant; the integer sums are exact, so their order is free.
        if constexpr (V::N == 1) {
            // One column (one pair at 512 bits, Note [column pairs]): word w
            // of the 4 sub-blocks of a half at once, so ql words 16h + w
            // (t = 0, 2) and 16h + 8 + w (t = 1, 3) and qh word 8h + w are
            // each loaded once, every stream in address order; s[t] holds
            // run 2(4h + t) + w0 / 4. With Note [Q6_K prefetch]'s prefetch
            // 220-250 us, against 250-310 in the sub-block order below.
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
                for (int w0 = 0; w0 < 8; w0 += kRun) {
                    I s[4][1] = {};
#pragma GCC unroll 4
                    for (int w = w0; w < w0 + kRun; ++w) {
#pragma GCC unroll 4
                        for (int t = 0; t < 4; ++t) word(s[t], h, t, w);
                    }
#pragma GCC unroll 4
                    for (int t = 0; t < 4; ++t) scaled(s[t], 2 * (4 * h + t) + w0 / 4);
                }
            }
        } else {
            // Several columns: sub-block by sub-block, one run's sums per
            // column live. In the order above, 4 runs' sums for each of 4
            // columns take all 16 registers of the 256-bit level and spill:
            // AVX2 pp64 of 1B Q6_K 121 against 140 t/s in this order.
            sub_block_words<V, kRun>([&](I * s, int j, int w) SI_X8_TARGET { word(s, j / 4, j % 4, w); },
                                     [&](const I * s, int j, int w0) SI_X8_TARGET { scaled(s, 2 * j + w0 / 4); });
        }
        const typename V::F d = V::halves(blk + X8Q6_K::kD);
#pragma GCC unroll 4
        for (int i = 0; i < V::N; ++i) {
            // sc_2j and sc_2j+1 against the sums of sub-block j's two runs.
            const I off = v.sums_dot([&](int j) SI_X8_TARGET { return V::pair16(sc[j / 2], 2 * (j % 2), 2 * (j % 2) + 1); }, i, b);
            acc[i] = V::fma(acc[i], V::template less_shl<5>(isum[i], off), d, v.scale(i, b));
        }
    });
}

// The 256-bit width: C columns, lane r row r.
template <class Ops, int C>
struct KCols {
    using I = __m256i;
    using F = __m256;
    static constexpr int N = C;
    Cols<C>         y;
    const int16_t * ys[C];  // the 16-element sums

    SI_X8_TARGET KCols(const QTile & t, int64_t cl0) : y(t, cl0, 256) {
        for (int c = 0; c < C; ++c) ys[c] = t.act.sums + (t.c0 + cl0 + c) * (t.act.K / 2);
    }
    SI_X8_TARGET static I lanes(__m256i v) { return v; }
    static constexpr int sum_words(int max_code) { return Ops::sum_words(max_code); }
    // Word w of 32-element block b32 of column c against x, into s.
    SI_X8_TARGET I dot(I s, I x, int c, int64_t b32, int w) const {
        s = Ops::dot_u(s, x, bcast4(y.q[c] + 32 * b32 + 4 * w));
        chain(s);
        return s;
    }
    // dot for signed codes x, given as |x| (xa) and x: xa against the
    // activation bytes with x's signs (x * y = |x| * (y * sign x)).
    SI_X8_TARGET I dot_s(I s, I xa, I x, int c, int64_t b32, int w) const {
        s = Ops::dot_u(s, xa, _mm256_sign_epi8(bcast4(y.q[c] + 32 * b32 + 4 * w), x));
        chain(s);
        return s;
    }
    // isum + s times the signed byte j of each lane of sc.
    SI_X8_TARGET static I add_scaled(I isum, I s, I sc, int j) { return _mm256_add_epi32(isum, Ops::scale_k(s, sc, j)); }
    SI_X8_TARGET static I pair16(I v, int lo, int hi) { return lane_bytes(v, lo, hi); }
    // sum_j mult(j) . (sums 2j, 2j + 1 of 16 codes), mult(j) two int16 a lane.
    template <class Mult>
    SI_X8_TARGET I sums_dot(Mult mult, int c, int64_t b) const {
        I m = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            int32_t pair;
            std::memcpy(&pair, ys[c] + 16 * b + 2 * j, 4);
            m = _mm256_add_epi32(m, _mm256_madd_epi16(mult(j), _mm256_set1_epi32(pair)));
        }
        return m;
    }
    // isum - off * 2^S (the offset of codes stored as value + 2^S).
    template <int S>
    SI_X8_TARGET static I less_shl(I isum, I off) { return _mm256_sub_epi32(isum, _mm256_slli_epi32(off, S)); }
    SI_X8_TARGET F scale(int c, int64_t b) const { return _mm256_set1_ps(y.d[c][b]); }
    SI_X8_TARGET static F halves(const uint8_t * p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    }
    SI_X8_TARGET static F floats(const uint8_t * p) { return _mm256_loadu_ps(reinterpret_cast<const float *>(p)); }
    // acc + float(isum) * (d * dy), and acc - float(m) * (d * dy).
    SI_X8_TARGET static F fma(F acc, I isum, F d, F dy) {
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, dy), acc);
    }
    SI_X8_TARGET static F fnma(F acc, I m, F d, F dy) {
        return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(d, dy), acc);
    }
    SI_X8_TARGET static void store(const QTile & t, int64_t r0, int64_t cl0, const F * acc) {
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(t.out + (cl0 + c) * t.out_col_stride + r0, acc[c]);
    }
};

// The bodies as types, for the tile functions of either width.
struct BodyQ4_K {
    template <class V>
    SI_X8_TARGET static void run(const QTile & t, int64_t r0, int64_t cl0) { group_k_min<V, KQ4_K>(t, r0, cl0); }
};

struct BodyQ5_K {
    template <class V>
    SI_X8_TARGET static void run(const QTile & t, int64_t r0, int64_t cl0) { group_k_min<V, KQ5_K>(t, r0, cl0); }
};

struct BodyQ6_K {
    template <class V>
    SI_X8_TARGET static void run(const QTile & t, int64_t r0, int64_t cl0) { group_q6_K<V>(t, r0, cl0); }
};

template <class Ops, class Body>
SI_X8_TARGET void tile_x8_k(const QTile & t) {
    column_runs(t, [&](auto cols, int64_t r, int64_t c) SI_X8_TARGET {
        Body::template run<KCols<Ops, decltype(cols)::value>>(t, r, c);
    });
}

} // namespace

} // namespace standin::kernels::host::mm
