// The 512-bit width of the packed MUL_MAT kernels at the AVX-512 VNNI level
// (OpsVnni, KPairs, the column-pair loop), shared by the translation units
// of that level (mul_mat_x8_vnni.cpp, mul_mat_x8_grid_vnni.cpp), which
// define SI_X8_TARGET as that level's target and include mul_mat_x8_k.h first.
//
// Note [column pairs]
// Several activation columns (prompts) run on 512-bit vectors two columns at
// a time: lane 2r + p holds row r of column c + p. A group's weight word (4
// bytes of each of its 8 rows) is loaded once per block and each row's 4
// bytes duplicated into lanes 2r and 2r + 1; the two columns' activation
// codes are interleaved by word once per product, after their quantization
// (Act::qpair, mul_mat.cpp), so one 8-byte broadcast gives lane 2r + p its
// column's word (where a pair starts on an odd column of the product, two
// masked 4-byte broadcasts do). One vpdpbusd then does 8 rows by 2 columns,
// half the instructions of two 256-bit ones, and the pair's sums need no
// reduction: the final store separates the two columns. Measured on an AMD
// EPYC with AVX-512 (2 threads, llama-bench pp64 of 1B models, against the
// 256-bit kernels in the same session): Q4_0 330 against 235 t/s, Q8_0 about
// 250 against 194; with the pairs broadcast from the columns instead of the
// interleaved copy, 229 and 223. Q8_0's signed weights go through |x| and the
// activation negated where x < 0 (AVX-512 has no byte sign instruction; the
// same bytes as vpsignb gives); IQ4_NL's and MXFP4's levels are taken plus
// 128 as unsigned bytes, like Q4_0's nibbles with an offset. The super-block
// formats run the kernel bodies of mul_mat_x8_k.h and mul_mat_x8_lowbit.h
// on this width (KPairs): a sub-block's (Q6_K: a 16-element
// run's) sums times its scales by vpmulld, the activation sums for the
// minimum or offset broadcast as pairs like the codes; 1B Q4_K_M (its Q4_K
// matrices packed, the rest not) 255 against 150 t/s; 1B Q5_K_M on an AMD
// EPYC (Zen 4), pp64 with its Q5_K matrices packed against unpacked (its
// Q6_K ones packed both times), 197-201 against 97-111 t/s (the 256-bit
// kernels: 162 against 105).
// A column left over runs on the 256-bit kernel.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/host/mul_mat_x8_k.h"

namespace standin::kernels::host::mm {

namespace {

struct OpsVnni {
    SI_X8_TARGET static __m256i dot_u(__m256i s, __m256i x, __m256i y) { return _mm256_dpbusd_epi32(s, x, y); }
    SI_X8_TARGET static __m256i finish_u(__m256i s) { return s; }
    SI_X8_TARGET static __m256i dot_s(__m256i s, __m256i xa, __m256i x, __m256i y) {
        return _mm256_dpbusd_epi32(s, xa, _mm256_sign_epi8(y, x));
    }
    SI_X8_TARGET static __m256i finish_s(__m256i s) { return s; }
    SI_X8_TARGET static __m256i scale_k(__m256i s, __m256i sc, int j) { return _mm256_mullo_epi32(s, lane_byte32(sc, j)); }
    // dpbusd sums in int32 exactly: any run of a super-block's 64 words.
    static constexpr int sum_words(int) { return 64; }
};

SI_X8_TARGET inline void chain512(__m512i & v) { __asm__("" : "+v"(v)); }

// 8 bytes {column c word, column c + 1 word} (Act::qpair) to every lane pair.
SI_X8_TARGET inline __m512i bcast_pair(const int32_t * p) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

// Column c's 4 bytes at p0 to the even lanes, column c + 1's at p1 to the odd ones.
SI_X8_TARGET inline __m512i bcast_pair(const void * p0, const void * p1) {
    int32_t a, b;
    std::memcpy(&a, p0, 4);
    std::memcpy(&b, p1, 4);
    return _mm512_mask_set1_epi32(_mm512_set1_epi32(a), __mmask16(0xAAAA), b);
}

// A group's weight word with row r's 4 bytes in lanes 2r and 2r + 1.
SI_X8_TARGET inline __m512i dup_rows(__m512i dup, const uint8_t * p) {
    return _mm512_permutexvar_epi32(dup, _mm512_zextsi256_si512(load_w(p)));
}

// The 8 values at p (a group's 8 half-precision scales) in lanes 2r and 2r + 1.
SI_X8_TARGET inline __m512 dup_halves(__m512i dup, const uint8_t * p) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm512_permutexvar_ps(dup, _mm512_zextps256_ps512(v));
}

// The activation side of NP column pairs from tile column cl0, pair i being
// columns cl0 + 2i and cl0 + 2i + 1. The codes come from Act::qpair when it
// is there and the pairs start on an even column of the product, else word
// by word from the columns. `group`: the elements per activation scale.
template <int NP>
struct Pairs {
    Cols<2 * NP>    y;
    const int32_t * qp;
    int64_t         nb;  // 32-element blocks per column

    SI_X8_TARGET Pairs(const QTile & t, int64_t cl0, int64_t group) : y(t, cl0, group), nb(t.act.K / 32) {
        qp = t.act.qpair != nullptr && (t.c0 + cl0) % 2 == 0 ? t.act.qpair + (t.c0 + cl0) / 2 * nb * 16 : nullptr;
    }
    // Word w (0..7) of 32-element block b of pair i.
    SI_X8_TARGET __m512i codes(int i, int64_t b, int w) const {
        return qp != nullptr ? bcast_pair(qp + (i * nb + b) * 16 + 2 * w)
                             : bcast_pair(y.q[2 * i] + 32 * b + 4 * w, y.q[2 * i + 1] + 32 * b + 4 * w);
    }
    // The scale of activation group g of pair i.
    SI_X8_TARGET __m512 scale(int i, int64_t g) const {
        return _mm512_castsi512_ps(bcast_pair(y.d[2 * i] + g, y.d[2 * i + 1] + g));
    }
};

// The NP pairs' accumulators (lanes 2r + p) to the 8 rows of each column.
template <int NP>
SI_X8_TARGET void store_pairs(const QTile & t, int64_t r0, int64_t cl0, const __m512 * acc) {
    const __m512i even = _mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0);
    for (int i = 0; i < NP; ++i) {
        // Lanes 0..7: column c (even lanes), 8..15: column c + 1 (odd lanes).
        const __m512 v = _mm512_permutexvar_ps(even, acc[i]);
        _mm256_storeu_ps(t.out + (cl0 + 2 * i) * t.out_col_stride + r0, _mm512_castps512_ps256(v));
        _mm256_storeu_ps(t.out + (cl0 + 2 * i + 1) * t.out_col_stride + r0,
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    }
}

SI_X8_TARGET inline __m512i lane_dup() { return _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0); }

// Lane r of v in lanes 2r and 2r + 1.
SI_X8_TARGET inline __m512i dup_lanes(__m256i v) { return _mm512_permutexvar_epi32(lane_dup(), _mm512_zextsi256_si512(v)); }

// lane_bytes and lane_byte32 (mul_mat_x8_k.h) on 512 bits.
SI_X8_TARGET inline __m512i lane_bytes512(__m512i v, int lo, int hi) {
    return _mm512_srai_epi16(_mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(lane_bytes_index(lo, hi))), 8);
}

SI_X8_TARGET inline __m512i lane_byte32_512(__m512i v, int j) {
    return _mm512_srai_epi32(_mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(lane_bytes_index(j, j))), 24);
}

// The 512-bit width of the K-format bodies (mul_mat_x8_k.h): NP column
// pairs, lane 2r + p row r of the pair's column p; the same integer sums and
// float operations per lane as the 256-bit width, so the same bits.
template <int NP>
struct KPairs : Pairs<NP> {
    using I = __m512i;
    using F = __m512;
    static constexpr int N = NP;
    const int16_t * ys[2 * NP];  // the 16-element sums

    SI_X8_TARGET KPairs(const QTile & t, int64_t cl0) : Pairs<NP>(t, cl0, 256) {
        for (int c = 0; c < 2 * NP; ++c) ys[c] = t.act.sums + (t.c0 + cl0 + c) * (t.act.K / 2);
    }
    SI_X8_TARGET static I lanes(__m256i v) { return dup_lanes(v); }
    static constexpr int sum_words(int) { return 64; }  // dpbusd sums in int32 exactly
    SI_X8_TARGET I dot(I s, I x, int i, int64_t b32, int w) const {
        s = _mm512_dpbusd_epi32(s, x, this->codes(i, b32, w));
        chain512(s);
        return s;
    }
    // Signed codes as |x| and x: the activation negated where x < 0, as group_pairs does for Q8_0.
    SI_X8_TARGET I dot_s(I s, I xa, I x, int i, int64_t b32, int w) const {
        const I yv = this->codes(i, b32, w);
        s = _mm512_dpbusd_epi32(s, xa, _mm512_mask_sub_epi8(yv, _mm512_movepi8_mask(x), _mm512_setzero_si512(), yv));
        chain512(s);
        return s;
    }
    SI_X8_TARGET static I add_scaled(I isum, I s, I sc, int j) {
        return _mm512_add_epi32(isum, _mm512_mullo_epi32(s, lane_byte32_512(sc, j)));
    }
    SI_X8_TARGET static I pair16(I v, int lo, int hi) { return lane_bytes512(v, lo, hi); }
    template <class Mult>
    SI_X8_TARGET I sums_dot(Mult mult, int i, int64_t b) const {
        I m = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            const I sums = bcast_pair(ys[2 * i] + 16 * b + 2 * j, ys[2 * i + 1] + 16 * b + 2 * j);
            m = _mm512_dpwssd_epi32(m, mult(j), sums);
        }
        return m;
    }
    template <int S>
    SI_X8_TARGET static I less_shl(I isum, I off) { return _mm512_sub_epi32(isum, _mm512_slli_epi32(off, S)); }
    SI_X8_TARGET static F halves(const uint8_t * p) { return dup_halves(lane_dup(), p); }
    SI_X8_TARGET static F floats(const uint8_t * p) {
        return _mm512_permutexvar_ps(lane_dup(), _mm512_zextps256_ps512(_mm256_loadu_ps(reinterpret_cast<const float *>(p))));
    }
    SI_X8_TARGET static F fma(F acc, I isum, F d, F dy) {
        return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, dy), acc);
    }
    SI_X8_TARGET static F fnma(F acc, I m, F d, F dy) {
        return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(d, dy), acc);
    }
    SI_X8_TARGET static void store(const QTile & t, int64_t r0, int64_t cl0, const F * acc) {
        store_pairs<NP>(t, r0, cl0, acc);
    }
};

// Column runs of 8, 4 and 2 on 512-bit pairs, every group of the tile for
// each run (the run's activations stay in L1 while the weights stream past),
// then a column left over on the 256-bit kernel: pairs(np, r, c) runs np
// pairs, single(r, c) one column.
template <class PairFn, class SingleFn>
SI_X8_TARGET inline void pair_runs(const QTile & t, PairFn pairs, SingleFn single) {
    int64_t c = 0;
    auto runs = [&](auto np) SI_X8_TARGET {
        for (; c + 2 * decltype(np)::value <= t.ncols; c += 2 * decltype(np)::value) {
            for (int64_t r = 0; r < t.nrows; r += packed::kRows) pairs(np, r, c);
        }
    };
    runs(std::integral_constant<int, 4>{});
    runs(std::integral_constant<int, 2>{});
    runs(std::integral_constant<int, 1>{});
    for (; c < t.ncols; ++c) {
        for (int64_t r = 0; r < t.nrows; r += packed::kRows) single(r, c);
    }
}

// A K-format body (mul_mat_x8_k.h) on both widths.
template <class Body>
SI_X8_TARGET void tile_k_pairs(const QTile & t) {
    pair_runs(
        t, [&](auto np, int64_t r, int64_t c) SI_X8_TARGET { Body::template run<KPairs<decltype(np)::value>>(t, r, c); },
        [&](int64_t r, int64_t c) SI_X8_TARGET { Body::template run<KCols<OpsVnni, 1>>(t, r, c); });
}

} // namespace

} // namespace standin::kernels::host::mm
