// MUL_MAT tile kernels for the weight types in integer form (Note [integer
// form], quants.h: Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4, NVFP4, Q1_0, Q2_0,
// TQ1_0, TQ2_0 and the grid i-quants of quants_iq.h) against int8
// activations (Note [activation blocks], vec_dot.h), where their weights
// are not packed (packed.h).
//
// tile_int: each weight row of a tile is decoded once into int8 values and
// per-16 scales (and mins), then serves every activation column of the tile:
// per 32 elements one maddubs/madd integer dot product (signed weights
// through the abs/sign identity x*y = |x| * (y * sign x)) leaves the sums of
// the two 16-element runs in lanes 0..3 and 4..7, which are scaled by the
// runs' scales in f32 and, per activation group, by the group's scale. The
// minimum of Q2_K is one more product of the mins with the activation's
// 16-element sums. At one column NVFP4, Q1_0 and Q2_0 take the kernels of
// mul_mat_qd_column.h (one per level, rows side by side), the others
// dot_row_int.
// tile_grid: the grid i-quants and the ternary types (grid_decode.h), whose
// run scales are a super-block factor times small integers, keep those
// integers and sum a super-block exactly before one float step; one column
// here, several in mul_mat_x8_grid.h.
// The integer sums are those of ggml-cpu's vec_dot for these types, so results
// differ from it only by the order of float additions.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o MUL_MAT; tests/kernels/test_quants.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/common/quants.h"
#include "kernels/host/grid_decode.h"
#include "kernels/host/isa.h"
#define SI_X8_TARGET
#include "kernels/host/mul_mat_qd_column.h"
#include "kernels/host/vec_dot.h"

namespace standin::kernels::host::mm {

// The one-column kernels at the AVX-512 VNNI level (mul_mat_qd_vnni.cpp).
void column_nvfp4_vnni(const QTile & t);
void column_q1_0_vnni(const QTile & t);
void column_q2_0_vnni(const QTile & t);

namespace {

using namespace standin::quant;

// One weight row in integer form: K values; per 32 elements the 8 lane scales
// [s0 s0 s0 s0 s1 s1 s1 s1] of its two runs; per 16 elements the run's min.
struct DecodedRow {
    std::vector<int8_t> q;
    std::vector<float>  sv;
    std::vector<float>  mn;
};

inline __m256i load32(const void * p) { return _mm256_loadu_si256(static_cast<const __m256i *>(p)); }
inline void    store32(void * p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i *>(p), v); }

inline void put_lanes(float * sv, float s0, float s1) {
    _mm256_storeu_ps(sv, _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(s0)), _mm_set1_ps(s1), 1));
}

// --- block decoders ---------------------------------------------------------------
// decode_block(b, q, sv, mn): the block's kElems values into q, the lane scales
// of each 32 of them into sv, the run mins into mn (kMin only). The AVX2 ones
// are quants.h's decode_run restated on vectors (the tests hold both to
// ggml's dequantize); the scalar one serves any type without them.

template <class B>
void decode_block(const B & b, int8_t * q, float * sv, float * mn) {
    for (int r = 0; r < B::kElems / 16; r += 2) {
        float sc0 = 0.0f, sc1 = 0.0f, mn0 = 0.0f, mn1 = 0.0f;
        decode_run(b, r, q + 16 * r, sc0, mn0);
        decode_run(b, r + 1, q + 16 * (r + 1), sc1, mn1);
        put_lanes(sv + 4 * r, sc0, sc1);
        if constexpr (B::kMin) mn[r] = mn0, mn[r + 1] = mn1;
    }
}

// A 16-entry level table in both 128-bit halves, for pshufb.
struct Levels {
    alignas(32) int8_t v[32];
};
template <bool kFp4>
constexpr Levels make_levels() {
    Levels t{};
    for (int i = 0; i < 32; ++i) t.v[i] = int8_t(kFp4 ? e2m1_twice(i % 16) : iq4nl_level(i % 16));
    return t;
}
constexpr Levels kIq4Levels = make_levels<false>();
constexpr Levels kFp4Levels = make_levels<true>();

// 16 bytes of nibbles: low nibbles (elements 0..15), then high ones, looked up.
inline __m256i nibble_levels(const uint8_t * qs, const Levels & lv) {
    const __m128i  x  = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
    const __m128i  m4 = _mm_set1_epi8(0x0f);
    const __m256i idx = _mm256_insertf128_si256(_mm256_castsi128_si256(_mm_and_si128(x, m4)),
                                                _mm_and_si128(_mm_srli_epi16(x, 4), m4), 1);
    return _mm256_shuffle_epi8(_mm256_load_si256(reinterpret_cast<const __m256i *>(lv.v)), idx);
}

void decode_block(const BlockIQ4_NL & b, int8_t * q, float * sv, float *) {
    store32(q, nibble_levels(b.qs, kIq4Levels));
    const float d = half(b.d);
    put_lanes(sv, d, d);
}

void decode_block(const BlockMXFP4 & b, int8_t * q, float * sv, float *) {
    store32(q, nibble_levels(b.qs, kFp4Levels));
    const float d = e8m0_half(b.e);
    put_lanes(sv, d, d);
}

void decode_block(const BlockIQ4_XS & b, int8_t * q, float * sv, float *) {
    const float d = half(b.d);
    for (int ib = 0; ib < 8; ++ib) {
        store32(q + 32 * ib, nibble_levels(b.qs + 16 * ib, kIq4Levels));
        const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((b.scales_h >> (2 * ib)) & 3) << 4);
        const float s = d * float(ls - 32);
        put_lanes(sv + 8 * ib, s, s);
    }
}

// NVFP4: 32 elements are two runs of 16, i.e. bytes qs[0..7] (low nibbles,
// then high ones) and qs[8..15] likewise.
void decode_block(const BlockNVFP4 & b, int8_t * q, float * sv, float *) {
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m256i lv = _mm256_load_si256(reinterpret_cast<const __m256i *>(kFp4Levels.v));
    for (int c = 0; c < 2; ++c) {
        const __m128i x  = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b.qs + 16 * c));
        const __m128i lo = _mm_and_si128(x, m4), hi = _mm_and_si128(_mm_srli_epi16(x, 4), m4);
        const __m256i idx = _mm256_insertf128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi64(lo, hi)),
                                                    _mm_unpackhi_epi64(lo, hi), 1);
        store32(q + 32 * c, _mm256_shuffle_epi8(lv, idx));
        put_lanes(sv + 8 * c, ue4m3_half(b.d[2 * c]), ue4m3_half(b.d[2 * c + 1]));
    }
}

// Q2_K/Q3_K: the 32 elements 32j.. are 2-bit field j % 4 of the 32 bytes qs[32 * (j / 4)..].
inline __m256i k_field2(const uint8_t * qs, int j) {
    return _mm256_and_si256(_mm256_srli_epi16(load32(qs + 32 * (j / 4)), 2 * (j % 4)), _mm256_set1_epi8(3));
}

void decode_block(const BlockQ2_K & b, int8_t * q, float * sv, float * mn) {
    const float d = half(b.d), dmin = half(b.dmin);
    for (int j = 0; j < 8; ++j) {
        store32(q + 32 * j, k_field2(b.qs, j));
        put_lanes(sv + 8 * j, d * float(b.scales[2 * j] & 15), d * float(b.scales[2 * j + 1] & 15));
    }
    for (int r = 0; r < 16; ++r) mn[r] = dmin * float(b.scales[r] >> 4);
}

void decode_block(const BlockQ3_K & b, int8_t * q, float * sv, float *) {
    const float   d  = half(b.d);
    const __m256i hm = load32(b.hmask);
    for (int j = 0; j < 8; ++j) {
        // Bit j of hmask[l] set: the value as is; clear: minus 4.
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, j), _mm256_set1_epi8(1));
        store32(q + 32 * j, _mm256_sub_epi8(_mm256_or_si256(k_field2(b.qs, j), _mm256_slli_epi16(hb, 2)),
                                            _mm256_set1_epi8(4)));
        float sc[2];
        for (int h = 0; h < 2; ++h) {
            const int r  = 2 * j + h;
            const int lo = r < 8 ? b.scales[r] & 15 : b.scales[r - 8] >> 4;
            const int hi = (b.scales[8 + r % 4] >> (2 * (r / 4))) & 3;
            sc[h] = d * float((lo | (hi << 4)) - 32);
        }
        put_lanes(sv + 8 * j, sc[0], sc[1]);
    }
}

// Q1_0: bit l of the 32-bit word at qs + 4c is element 32c + l: +1 set, -1 clear.
void decode_block(const BlockQ1_0 & b, int8_t * q, float * sv, float *) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
    const float   d   = _cvtsh_ss(b.d);  // F16C: exact, as half()
    for (int c = 0; c < 4; ++c) {
        int32_t word;
        std::memcpy(&word, b.qs + 4 * c, 4);
        const __m256i v   = _mm256_shuffle_epi8(_mm256_set1_epi32(word), spread);
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
        store32(q + 32 * c, _mm256_sub_epi8(_mm256_and_si256(set, _mm256_set1_epi8(2)), _mm256_set1_epi8(1)));
        put_lanes(sv + 8 * c, d, d);
    }
}

// Q2_0: element 4i + f of a 32 is 2-bit field f of byte i of qs + 8c, minus 1:
// the four fields of the 8 bytes, interleaved back into element order.
void decode_block(const BlockQ2_0 & b, int8_t * q, float * sv, float *) {
    const __m128i m2 = _mm_set1_epi8(3);
    const float   d  = half(b.d);
    for (int c = 0; c < 2; ++c) {
        const __m128i x  = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(b.qs + 8 * c));
        const __m128i f0 = _mm_and_si128(x, m2), f1 = _mm_and_si128(_mm_srli_epi16(x, 2), m2);
        const __m128i f2 = _mm_and_si128(_mm_srli_epi16(x, 4), m2), f3 = _mm_and_si128(_mm_srli_epi16(x, 6), m2);
        const __m128i a01 = _mm_unpacklo_epi8(f0, f1), a23 = _mm_unpacklo_epi8(f2, f3);
        const __m256i v = _mm256_insertf128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(a01, a23)),
                                                  _mm_unpackhi_epi16(a01, a23), 1);
        store32(q + 32 * c, _mm256_sub_epi8(v, _mm256_set1_epi8(1)));
        put_lanes(sv + 8 * c, d, d);
    }
}

// --- one column of NVFP4 and Q1_0 (mul_mat_qd_column.h) ------------------------------

// NVFP4: the block's 32 bytes of nibbles with qwords 1 and 2 swapped, so
// that unpacking the low and high nibbles by qword gives elements 0..31 and
// 32..63 in order (decode_block's layout), looked up as signed levels.
struct ColumnNVFP4 {
    using Block = BlockNVFP4;
    static constexpr int kRows = 4;
    static __m256 block(const BlockNVFP4 & b, const int8_t * y, const float * dy, __m256 acc) {
        const __m256i m4   = _mm256_set1_epi8(0x0f);
        const __m256i lv   = _mm256_load_si256(reinterpret_cast<const __m256i *>(kFp4Levels.v));
        const __m256i ones = _mm256_set1_epi16(1);
        const __m256i x    = _mm256_permute4x64_epi64(load32(b.qs), 0xD8);
        const __m256i lo = _mm256_and_si256(x, m4), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
        const __m256i idx[2] = {_mm256_unpacklo_epi64(lo, hi), _mm256_unpackhi_epi64(lo, hi)};
        for (int c = 0; c < 2; ++c) {
            const __m256i w = _mm256_shuffle_epi8(lv, idx[c]);
            const __m256i p =
                _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(load32(y + 32 * c), w)), ones);
            const __m256  s = _mm256_set_m128(_mm_broadcast_ss(&kUe4m3Half.v[b.d[2 * c + 1]]),
                                              _mm_broadcast_ss(&kUe4m3Half.v[b.d[2 * c]]));
            acc = group_step(acc, p, s, dy + c);
        }
        return acc;
    }
};

// Q1_0: the codes negated where their bit is clear, summed against ones.
// Two rows side by side: 2048 x 8192, one column, 2 threads on a Zen 4,
// 293-304 us against 326-329 with four.
struct ColumnQ1_0 {
    using Block = BlockQ1_0;
    static constexpr int kRows = 2;
    static __m256 block(const BlockQ1_0 & b, const int8_t * y, const float * dy, __m256 acc) {
        const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
        const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
        const __m256  d   = _mm256_set1_ps(_cvtsh_ss(b.d));
        for (int c = 0; c < 4; ++c) {
            int32_t word;
            std::memcpy(&word, b.qs + 4 * c, 4);
            const __m256i v   = _mm256_shuffle_epi8(_mm256_set1_epi32(word), spread);
            const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), _mm256_setzero_si256());
            const __m256i ys  = _mm256_sub_epi8(_mm256_xor_si256(load32(y + 32 * c), neg), neg);
            const __m256i p   = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), ys), _mm256_set1_epi16(1));
            acc = group_step(acc, p, d, dy + c);
        }
        return acc;
    }
};

// Q2_0: the 2-bit codes (value + 1) in element order, multiplied unsigned,
// and the activation's pair sums taken off before the pairs are added.
// Dword lane l of v is bytes 4l'..4l'+3 of the 8 (l' = l / 4 + 4 * (l >= 4))
// shifted by 2 (l % 4): byte l' of that dword holds field l % 4 of byte l'
// in its low 2 bits, and the shuffle puts it at element 4l' + l % 4.
struct ColumnQ2_0 {
    using Block = BlockQ2_0;
    static constexpr int kRows = 4;
    static __m256 block(const BlockQ2_0 & b, const int8_t * y, const float * dy, __m256 acc) {
        const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        const __m256i shift  = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
        const __m256i order  = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                                0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        const __m256  d = _mm256_set1_ps(_cvtsh_ss(b.d));
        for (int c = 0; c < 2; ++c) {
            const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(b.qs + 8 * c));
            const __m256i v = _mm256_srlv_epi32(_mm256_permutevar8x32_epi32(_mm256_castsi128_si256(x), spread), shift);
            const __m256i q = _mm256_and_si256(_mm256_shuffle_epi8(v, order), _mm256_set1_epi8(3));
            const __m256i yv = load32(y + 32 * c);
            const __m256i pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(q, yv), _mm256_maddubs_epi16(_mm256_set1_epi8(1), yv));
            acc = group_step(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)), d, dy + c);
        }
        return acc;
    }
};

// The one-column kernels of the types that have them, per level.
template <class B>
struct Column {
    static constexpr bool kHas = false;
};
template <>
struct Column<BlockNVFP4> {
    static constexpr bool kHas = true;
    using Avx2 = ColumnNVFP4;
    static constexpr QTileFn kVnni = column_nvfp4_vnni;
};
template <>
struct Column<BlockQ1_0> {
    static constexpr bool kHas = true;
    using Avx2 = ColumnQ1_0;
    static constexpr QTileFn kVnni = column_q1_0_vnni;
};

template <>
struct Column<BlockQ2_0> {
    static constexpr bool kHas = true;
    using Avx2 = ColumnQ2_0;
    static constexpr QTileFn kVnni = column_q2_0_vnni;
};

template <class B>
void decode_row(const B * x, int64_t K, DecodedRow & row) {
    row.q.resize(size_t(K));
    row.sv.resize(size_t(K / 4));
    row.mn.resize(B::kMin ? size_t(K / 16) : 0);
    for (int64_t ib = 0; ib < K / B::kElems; ++ib) {
        decode_block(x[ib], row.q.data() + ib * B::kElems, row.sv.data() + ib * (B::kElems / 4),
                     B::kMin ? row.mn.data() + ib * (B::kElems / 16) : nullptr);
    }
}

// Groups [g0, g1) of a decoded row times C activation columns from tile
// column cl0, into acc: q, sv and mn hold the row's values, lane scales and
// mins from element g0 * G on.
template <class B, int G, int C>
void dot_groups(const QTile & t, const int8_t * q, const float * sv, const float * mn, int64_t g0, int64_t g1,
                int64_t cl0, __m256 * acc) {
    const int64_t K = t.act.K;
    const int8_t *  yq[C];
    const float *   yd[C];
    const int16_t * ybs[C];
    for (int c = 0; c < C; ++c) {
        const int64_t col = t.c0 + cl0 + c;
        yq[c]  = t.act.q + col * K;
        yd[c]  = t.act.d + col * (K / G);
        ybs[c] = t.act.sums + col * (K / 2);
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t g = g0; g < g1; ++g) {
        __m256 gacc[C];
        for (int c = 0; c < C; ++c) gacc[c] = _mm256_setzero_ps();
        for (int64_t k = g * G; k < (g + 1) * G; k += 32) {
            const int64_t at = k - g0 * G;
            const __m256i w  = load32(q + at);
            const __m256i wa = _mm256_abs_epi8(w);
            const __m256  s  = _mm256_loadu_ps(sv + at / 4);
            for (int c = 0; c < C; ++c) {
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(load32(yq[c] + k), w)), ones);
                gacc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, gacc[c]);
            }
        }
        for (int c = 0; c < C; ++c) {
            const __m256 dy = _mm256_set1_ps(yd[c][g]);
            if constexpr (B::kMin) {
                static_assert(G == kQK_K, "a minimum needs the 16-element sums of the 256 activation format");
                const __m256i bs = load32(ybs[c] + 16 * g);
                const __m256  lo = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(bs)));
                const __m256  hi = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(bs, 1)));
                const float * m  = mn + 16 * (g - g0);
                const __m256 mins = _mm256_fmadd_ps(lo, _mm256_loadu_ps(m), _mm256_mul_ps(hi, _mm256_loadu_ps(m + 8)));
                gacc[c] = _mm256_sub_ps(gacc[c], mins);
            }
            acc[c] = _mm256_fmadd_ps(gacc[c], dy, acc[c]);
        }
    }
}

// Row `row` times C activation columns starting at tile column cl0.
template <class B, int G, int C>
void dot_cols(const QTile & t, const DecodedRow & row, int64_t r, int64_t cl0) {
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    dot_groups<B, G, C>(t, row.q.data(), row.sv.data(), row.mn.data(), 0, t.act.K / G, cl0, acc);
    for (int c = 0; c < C; ++c) t.out[(cl0 + c) * t.out_col_stride + r] = hsum(acc[c]);
}

// One column of the types without a kernel in mul_mat_qd_column.h: each
// block decoded into a buffer of one block and multiplied at once, dot_cols'
// operations in its order (the same bits), without a row's worth of decoded
// values written and read back.
// 2048 x 8192 on a Zen 4 (2 threads), one column: Q1_0 (which has its own
// kernel since, as Q2_0 has) 567-568 us against 700-760.
template <class B, int G>
float dot_row_int(const QTile & t, const B * x) {
    static_assert(B::kElems % G == 0, "a block holds whole activation groups");
    constexpr int64_t kGroups = B::kElems / G;
    alignas(32) int8_t q[B::kElems];
    alignas(32) float  sv[B::kElems / 4];
    alignas(32) float  mn[B::kMin ? B::kElems / 16 : 1];
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < t.act.K / B::kElems; ++ib) {
        decode_block(x[ib], q, sv, mn);
        dot_groups<B, G, 1>(t, q, sv, mn, ib * kGroups, (ib + 1) * kGroups, 0, &acc);
    }
    return hsum(acc);
}

template <class B, int G>
void tile_int(const QTile & t) {
    if (t.ncols == 1) {
        if constexpr (Column<B>::kHas) {
            (isa::at_least(isa::Level::avx512_vnni) ? Column<B>::kVnni : tile_column<typename Column<B>::Avx2>)(t);
        } else {
            for (int64_t r = 0; r < t.nrows; ++r) t.out[r] = dot_row_int<B, G>(t, reinterpret_cast<const B *>(t.x + r * t.x_stride));
        }
        return;
    }
    thread_local DecodedRow row;
    for (int64_t r = 0; r < t.nrows; ++r) {
        decode_row(reinterpret_cast<const B *>(t.x + r * t.x_stride), t.act.K, row);
        int64_t c = 0;
        for (; c + 4 <= t.ncols; c += 4) dot_cols<B, G, 4>(t, row, r, c);
        for (; c < t.ncols; ++c) dot_cols<B, G, 1>(t, row, r, c);
    }
}

// --- the grid i-quants and the ternary types (grid_decode.h) --------------------------
// One column: a row is decoded straight into its product with the column
// (DotSink): nothing is stored and read back. Per 32 elements maddubs of the
// magnitudes and y with the values' signs, madd with the run multipliers;
// per super-block the integer lanes summed and one float step,
// acc = fma(float(isum), f * dy, acc), which is the step of the
// several-column kernels (mul_mat_x8_grid.h) for each row, so a column's
// results are the same bits either way.
// Measured on an AMD EPYC (Zen 4), 2 threads, `standin matmul --type iq3_s
// --m 2048 --k 8192 --n 1`: 1.07-1.11 ms, against 1.27-1.36 with the row
// decoded into a buffer first (ggml-cpu built here: 1.06).

// A super-block's 16 run multipliers of 32 elements [m0 x 8, m1 x 8] as int16.
inline __m256i run_multipliers(int m0, int m1) {
    return _mm256_setr_m128i(_mm_set1_epi16(int16_t(m0)), _mm_set1_epi16(int16_t(m1)));
}

struct DotSink {
    static constexpr bool kGather = false;  // grid words one by one (decode_grid of IQ3_XXS)
    const int8_t * y;  // the column's 256 codes of this super-block
    __m256i        mag = _mm256_setzero_si256(), sgn = _mm256_setzero_si256(), isum = _mm256_setzero_si256();
    float          f = 0.0f;
    void block(float factor) {
        f = factor;
        isum = _mm256_setzero_si256();
    }
    void values(int, __m256i m, __m256i s) { mag = m, sgn = s; }
    void runs(int ib, int m0, int m1) { runs(ib, run_multipliers(m0, m1)); }
    void runs(int ib, __m256i mult) {
        const __m256i p = _mm256_maddubs_epi16(mag, _mm256_sign_epi8(load32(y + 32 * ib), sgn));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, mult));
    }
};

// v[i]'s 8 int32 lanes summed, in lane i.
inline __m256i hsum8_i32(const __m256i v[8]) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// The float steps of one row and column over nsb super-blocks:
// sb(g, isum, step) gives super-block g's integer lanes and its f * dy. The
// lanes of 8 super-blocks are added together at once, then their steps run
// in order, acc = fma(sum, step, acc). With one horizontal sum and a scalar
// convert per super-block the grid product ran 8-15% slower (IQ3_S 2048 x
// 8192 on a Zen 4: 1.12-1.44 ms against 1.03-1.05), presumably as the longer
// tail of each super-block held back the decoding of the next.
template <class SuperBlock>
float row_steps(int64_t nsb, SuperBlock sb) {
    float acc = 0.0f;
    for (int64_t g0 = 0; g0 < nsb; g0 += 8) {
        const int n = int(std::min<int64_t>(8, nsb - g0));
        __m256i isum[8];
        alignas(32) float step[8], sum[8];
        for (int i = 0; i < 8; ++i) {
            isum[i] = _mm256_setzero_si256();
            if (i < n) sb(g0 + i, isum[i], step[i]);
        }
        _mm256_store_ps(sum, _mm256_cvtepi32_ps(hsum8_i32(isum)));
        for (int i = 0; i < n; ++i) acc = std::fma(sum[i], step[i], acc);
    }
    return acc;
}

// A grid row times one activation column (codes y, scales dy).
template <class B>
float dot_row_grid(const B * x, const int8_t * y, const float * dy, int64_t K) {
    DotSink sink;
    return row_steps(K / kQK_K, [&](int64_t g, __m256i & isum, float & step) {
        sink.y = y + g * kQK_K;
        decode_grid(x[g], sink);
        isum = sink.isum;
        step = sink.f * dy[g];
    });
}

// A ternary row times one column: the codes (value + 1) multiplied as
// unsigned bytes, no sign instruction, and the column's sum over the
// super-block taken off (the activation's 16-element sums): the integers of
// DotSink's form, so the same bits, as the float steps are.
// 2048 x 8192 on a Zen 4 (2 threads), one column: TQ1_0 0.47-0.59 ms, TQ2_0
// 170-195 us, against 0.56 ms and 312 us through DotSink.
template <class B>
float dot_row_ternary(const B * x, const int8_t * y, const int16_t * ys, const float * dy, int64_t K) {
    const __m256i ones = _mm256_set1_epi16(1);
    return row_steps(K / kQK_K, [&](int64_t g, __m256i & isum, float & step) {
        // int16 pair sums: 8 words of 2 * 2 * 127 at most.
        __m256i c[8];
        ternary_codes(x[g], c);
        __m256i p = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ++ib) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c[ib], load32(y + g * kQK_K + 32 * ib)));
        isum = _mm256_sub_epi32(_mm256_madd_epi16(p, ones), _mm256_madd_epi16(load32(ys + 16 * g), ones));
        step = half(x[g].d) * dy[g];
    });
}

template <class B>
void tile_grid(const QTile & t) {
    if (t.ncols > 1) {
        x8_grid_tile_for(kGridType<B>)(t);
        return;
    }
    const int64_t K = t.act.K;
    for (int64_t r = 0; r < t.nrows; ++r) {
        const B * x = reinterpret_cast<const B *>(t.x + r * t.x_stride);
        if constexpr (kTernary<B>) {
            t.out[r] = dot_row_ternary(x, t.act.q + t.c0 * K, t.act.sums + t.c0 * (K / 2), t.act.d + t.c0 * (K / kQK_K), K);
        } else {
            t.out[r] = dot_row_grid(x, t.act.q + t.c0 * K, t.act.d + t.c0 * (K / kQK_K), K);
        }
    }
}

// The grid formats take tile_grid, the rest of the integer form tile_int.
template <class B, int G>
QTileFn int_form_tile() {
    if constexpr (kGridBlock<B>) {
        static_assert(G == kQK_K, "the grid formats are super-blocks of 256 with 256-element activation groups");
        return tile_grid<B>;
    } else {
        return tile_int<B, G>;
    }
}

} // namespace

QTileFn qtile_int_form_for(ggml_type type) {
    switch (type) {
#define SI_X(type, Block, group) case type: return int_form_tile<Block, group>();
        SI_QUANT_INT_FORM_TYPES(SI_X)
#undef SI_X
        default: return nullptr;
    }
}

} // namespace standin::kernels::host::mm
