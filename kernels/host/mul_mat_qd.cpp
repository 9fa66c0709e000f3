// MUL_MAT tile kernel for the weight types in integer form (Note [integer
// form], quants.h: Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4, NVFP4, Q1_0, Q2_0,
// TQ1_0, TQ2_0 and the grid i-quants of quants_iq.h)
// against int8 activations (Note [activation blocks], vec_dot.h).
//
// Each weight row of a tile is decoded once into int8 values and per-16
// scales (and mins), then serves every activation column of the tile: per 32
// elements one maddubs/madd integer dot product (signed weights through the
// abs/sign identity x*y = |x| * (y * sign x)) leaves the sums of the two
// 16-element runs in lanes 0..3 and 4..7, which are scaled by the runs' scales
// in f32 and, per activation group, by the group's scale. The minimum of Q2_K
// is one more product of the mins with the activation's 16-element sums.
// The grid i-quants, whose run scales are a block factor times small odd
// integers, keep those integers instead and sum a super-block exactly before
// one float step (tile_grid).
// The integer sums are those of ggml-cpu's vec_dot for these types, so results
// differ from it only by the order of float additions.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o MUL_MAT; tests/kernels/test_quants.cpp.
#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/common/quants.h"
#include "kernels/host/vec_dot.h"

namespace standin::kernels::host::mm {

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

void decode_block(const BlockTQ2_0 & b, int8_t * q, float * sv, float *) {
    const float d = half(b.d);
    for (int j = 0; j < 8; ++j) {
        store32(q + 32 * j, _mm256_sub_epi8(k_field2(b.qs, j), _mm256_set1_epi8(1)));
        put_lanes(sv + 8 * j, d, d);
    }
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
    const float   d   = half(b.d);
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

// --- grid i-quants (quants_iq.h) ----------------------------------------------------
// 32 grid bytes (4 words of 8) get the signs of a 32-bit mask (bit j: element j negative).

struct SignTable {
    uint8_t v[128];
};
constexpr SignTable make_signs() {
    SignTable t{};
    for (uint32_t i = 0; i < 128; ++i) t.v[i] = uint8_t(signs_of_index(i));
    return t;
}
constexpr SignTable kSigns = make_signs();

inline __m256i bit_mask_bytes(uint32_t bits) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
    const __m256i v   = _mm256_shuffle_epi8(_mm256_set1_epi32(int32_t(bits)), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

inline __m256i apply_signs(__m256i v, uint32_t signs) {
    return _mm256_sign_epi8(v, _mm256_or_si256(bit_mask_bytes(signs), _mm256_set1_epi8(1)));
}

inline __m256i words4(uint64_t w0, uint64_t w1, uint64_t w2, uint64_t w3) {
    return _mm256_setr_epi64x(int64_t(w0), int64_t(w1), int64_t(w2), int64_t(w3));
}

// The grid formats' run scales are a block factor f times odd integers m
// ((0.5 + s) * 0.25 = (2s + 1) / 8 and the like): decode_grid hands a sink
// (IntSink, which stores a decoded row, or DotSink, which takes a column's
// product at once) sink.block(f), then per 32 elements their int8 values
// (sink.values(ib, v)) and the multipliers of their two runs
// (sink.runs(ib, m0, m1)), in that order.

template <class Sink>
void decode_grid(const BlockIQ2_XXS & b, Sink & sink) {
    sink.block(half(b.d) * 0.125f);
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t * g  = b.qs + 8 * ib;
        const uint32_t  a1 = load_u32_le(g + 4);
        uint32_t signs = 0;
        for (int l = 0; l < 4; ++l) signs |= uint32_t(kSigns.v[(a1 >> (7 * l)) & 127u]) << (8 * l);
        const __m256i v = words4(iq2xxs_grid(g[0]), iq2xxs_grid(g[1]), iq2xxs_grid(g[2]), iq2xxs_grid(g[3]));
        sink.values(ib, apply_signs(v, signs));
        const int m = 2 * int(a1 >> 28) + 1;
        sink.runs(ib, m, m);
    }
}

template <class Sink>
void decode_grid(const BlockIQ2_XS & b, Sink & sink) {
    sink.block(half(b.d) * 0.125f);
    for (int ib = 0; ib < 8; ++ib) {
        const uint16_t * v = b.qs + 4 * ib;
        uint32_t signs = 0;
        for (int l = 0; l < 4; ++l) signs |= uint32_t(kSigns.v[v[l] >> 9]) << (8 * l);
        const __m256i w = words4(iq2xs_grid(v[0] & 511), iq2xs_grid(v[1] & 511), iq2xs_grid(v[2] & 511),
                                 iq2xs_grid(v[3] & 511));
        sink.values(ib, apply_signs(w, signs));
        sink.runs(ib, 2 * (b.scales[ib] & 15) + 1, 2 * (b.scales[ib] >> 4) + 1);
    }
}

template <class Sink>
void decode_grid(const BlockIQ2_S & b, Sink & sink) {
    sink.block(half(b.d) * 0.125f);
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t * g = b.qs + 4 * ib;
        const int       h = b.qh[ib];
        const __m256i w = words4(iq2s_grid(g[0] | ((h << 8) & 0x300)), iq2s_grid(g[1] | ((h << 6) & 0x300)),
                                 iq2s_grid(g[2] | ((h << 4) & 0x300)), iq2s_grid(g[3] | ((h << 2) & 0x300)));
        sink.values(ib, apply_signs(w, load_u32_le(b.qs + kQK_K / 8 + 4 * ib)));
        sink.runs(ib, 2 * (b.scales[ib] & 15) + 1, 2 * (b.scales[ib] >> 4) + 1);
    }
}

// IQ3: 8 grid words of 4 bytes per 32 elements, gathered.
template <class Sink>
void decode_grid(const BlockIQ3_XXS & b, Sink & sink) {
    sink.block(half(b.d) * 0.25f);
    const int * grid = reinterpret_cast<const int *>(grid::kIq3xxs);
    for (int ib = 0; ib < 8; ++ib) {
        const uint32_t a = load_u32_le(b.qs + kQK_K / 4 + 4 * ib);
        uint32_t signs = 0;
        for (int l = 0; l < 4; ++l) signs |= uint32_t(kSigns.v[(a >> (7 * l)) & 127u]) << (8 * l);
        const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(b.qs + 8 * ib)));
        sink.values(ib, apply_signs(_mm256_i32gather_epi32(grid, idx, 4), signs));
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
        sink.values(ib, apply_signs(_mm256_i32gather_epi32(grid, idx, 4), load_u32_le(b.signs + 4 * ib)));
        const int m = 1 + 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 15);
        sink.runs(ib, m, m);
    }
}

// IQ1: grid bytes -1, 0, 1 become 8 * byte +- 1 (the shift's sign per group of 8).
inline __m256i iq1_values(__m256i w, __m256i delta) {
    const __m256i x8 = _mm256_and_si256(_mm256_slli_epi16(w, 3), _mm256_set1_epi8(int8_t(0xf8)));
    return _mm256_add_epi8(x8, delta);
}

template <class Sink>
void decode_grid(const BlockIQ1_S & b, Sink & sink) {
    sink.block(half(b.d) * 0.125f);
    for (int ib = 0; ib < 8; ++ib) {
        const uint32_t  hb = b.qh[ib];
        const uint8_t * g  = b.qs + 4 * ib;
        const __m256i w = words4(iq1s_grid(int(g[0] | ((hb & 7u) << 8))), iq1s_grid(int(g[1] | (((hb >> 3) & 7u) << 8))),
                                 iq1s_grid(int(g[2] | (((hb >> 6) & 7u) << 8))), iq1s_grid(int(g[3] | (((hb >> 9) & 7u) << 8))));
        sink.values(ib, iq1_values(w, _mm256_set1_epi8((hb & 0x8000u) ? -1 : 1)));
        const int m = 2 * int((hb >> 12) & 7u) + 1;
        sink.runs(ib, m, m);
    }
}

template <class Sink>
void decode_grid(const BlockIQ1_M & b, Sink & sink) {
    uint16_t sw[4];
    for (int i = 0; i < 4; ++i) sw[i] = uint16_t(b.scales[2 * i] | (b.scales[2 * i + 1] << 8));
    sink.block(half(uint16_t((sw[0] >> 12) | ((sw[1] >> 8) & 0x00f0) | ((sw[2] >> 4) & 0x0f00) | (sw[3] & 0xf000))) * 0.125f);
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t * g = b.qs + 4 * ib;
        const int h0 = b.qh[2 * ib], h1 = b.qh[2 * ib + 1];
        const __m256i w = words4(iq1s_grid(g[0] | ((h0 & 7) << 8)), iq1s_grid(g[1] | ((h0 & 0x70) << 4)),
                                 iq1s_grid(g[2] | ((h1 & 7) << 8)), iq1s_grid(g[3] | ((h1 & 0x70) << 4)));
        const auto delta = [](int bit) { return bit ? int64_t(-1) : int64_t(0x0101010101010101ll); };
        const __m256i dl = _mm256_setr_epi64x(delta(h0 & 0x08), delta(h0 & 0x80), delta(h1 & 0x08), delta(h1 & 0x80));
        sink.values(ib, iq1_values(w, dl));
        const int sc = sw[ib / 2] >> (6 * (ib % 2));
        sink.runs(ib, 2 * (sc & 7) + 1, 2 * ((sc >> 3) & 7) + 1);
    }
}

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

// Row `row` times C activation columns starting at tile column cl0.
template <class B, int G, int C>
void dot_cols(const QTile & t, const DecodedRow & row, int64_t r, int64_t cl0) {
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
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t g = 0; g < K / G; ++g) {
        __m256 gacc[C];
        for (int c = 0; c < C; ++c) gacc[c] = _mm256_setzero_ps();
        for (int64_t k = g * G; k < (g + 1) * G; k += 32) {
            const __m256i w  = load32(row.q.data() + k);
            const __m256i wa = _mm256_abs_epi8(w);
            const __m256  sv = _mm256_loadu_ps(row.sv.data() + k / 4);
            for (int c = 0; c < C; ++c) {
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(load32(yq[c] + k), w)), ones);
                gacc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sv, gacc[c]);
            }
        }
        for (int c = 0; c < C; ++c) {
            const __m256 dy = _mm256_set1_ps(yd[c][g]);
            if constexpr (B::kMin) {
                static_assert(G == kQK_K, "a minimum needs the 16-element sums of the 256 activation format");
                const __m256i bs = load32(ybs[c] + 16 * g);
                const __m256  lo = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(bs)));
                const __m256  hi = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(bs, 1)));
                const float * mn = row.mn.data() + 16 * g;
                const __m256 mins = _mm256_fmadd_ps(lo, _mm256_loadu_ps(mn), _mm256_mul_ps(hi, _mm256_loadu_ps(mn + 8)));
                gacc[c] = _mm256_sub_ps(gacc[c], mins);
            }
            acc[c] = _mm256_fmadd_ps(gacc[c], dy, acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) t.out[(cl0 + c) * t.out_col_stride + r] = hsum(acc[c]);
}

template <class B, int G>
void tile_int(const QTile & t) {
    thread_local DecodedRow row;
    for (int64_t r = 0; r < t.nrows; ++r) {
        decode_row(reinterpret_cast<const B *>(t.x + r * t.x_stride), t.act.K, row);
        int64_t c = 0;
        for (; c + 4 <= t.ncols; c += 4) dot_cols<B, G, 4>(t, row, r, c);
        for (; c < t.ncols; ++c) dot_cols<B, G, 1>(t, row, r, c);
    }
}

// --- the grid i-quants with integer scales --------------------------------------------
// A grid row decoded once per tile: its int8 values, per 32 elements the 16
// int16 multipliers [m0 x 8, m1 x 8] of its two runs (the madd that widens
// maddubs' pair sums applies them: pairs 0..7 are run 0's elements, 8..15 run
// 1's), and per super-block the factor f. Per super-block and column the
// integer sums stay exact and meet one float multiply-add, f * dy, as the
// packed kernels' do, where the float kernel converts and scales every 32
// elements: 1B IQ3_S on an AMD EPYC (Zen 4), 2 threads, pp64 94 against 83 t/s
// (tg32 13.0 against 12.4; ggml-cpu's zen4 variant 131 and 15.7).
struct GridRow {
    std::vector<int8_t>  q;
    std::vector<int16_t> m;
    std::vector<float>   f;
    std::vector<int32_t> corr;  // Note [offset activations]: 8 lanes per super-block
};

// A super-block's 16 run multipliers of 32 elements [m0 x 8, m1 x 8] as int16.
inline __m256i run_multipliers(int m0, int m1) {
    return _mm256_setr_m128i(_mm_set1_epi16(int16_t(m0)), _mm_set1_epi16(int16_t(m1)));
}

struct IntSink {
    int8_t *  q;
    int16_t * m;
    float *   f;
    void block(float factor) const { *f = factor; }
    void values(int ib, __m256i v) const { store32(q + 32 * ib, v); }
    void runs(int ib, int m0, int m1) const { store32(m + 16 * ib, run_multipliers(m0, m1)); }
};

// One column's product with a super-block as it is decoded (decoding: a row
// meets one column, so nothing is stored and read back): per 32 elements
// maddubs of |q| and y * sign q, madd with the multipliers, which are the
// integers dot_cols_grid gets, in the same lanes; and the super-block's
// factor for the caller's float step.
struct DotSink {
    const int8_t * y;  // the column's 256 codes of this super-block
    __m256i        v = _mm256_setzero_si256(), isum = _mm256_setzero_si256();
    float          f = 0.0f;
    void block(float factor) {
        f = factor;
        isum = _mm256_setzero_si256();
    }
    void values(int, __m256i x) { v = x; }
    void runs(int ib, int m0, int m1) {
        const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(load32(y + 32 * ib), v));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, run_multipliers(m0, m1)));
    }
};

// A grid row times one activation column (codes y, scales dy), decoded and
// multiplied in one pass, with dot_cols_grid's float steps.
template <class B>
float dot_row_grid(const B * x, const int8_t * y, const float * dy, int64_t K) {
    __m256 acc = _mm256_setzero_ps();
    DotSink sink;
    for (int64_t g = 0; g < K / kQK_K; ++g) {
        sink.y = y + g * kQK_K;
        decode_grid(x[g], sink);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sink.isum), _mm256_set1_ps(sink.f * dy[g]), acc);
    }
    return hsum(acc);
}

template <class B>
void decode_grid_row(const B * x, int64_t K, GridRow & row) {
    row.q.resize(size_t(K));
    row.m.resize(size_t(K / 2));
    row.f.resize(size_t(K / kQK_K));
    for (int64_t ib = 0; ib < K / kQK_K; ++ib) {
        IntSink sink{row.q.data() + ib * kQK_K, row.m.data() + ib * (kQK_K / 2), row.f.data() + ib};
        decode_grid(x[ib], sink);
    }
}

// Row `row` times C activation columns from tile column cl0: per super-block
// isum = sum of m * dot(q, y) over its runs (maddubs of y + 128, `yu`: the
// tile's columns with their sign bits flipped, and q; madd with the
// multipliers), less the row's correction `corr` (Note [offset activations]),
// then acc = fma(float(isum), f * dy, acc).
template <int C>
void dot_cols_grid(const QTile & t, const GridRow & row, int64_t r, int64_t cl0, const int8_t * yu) {
    const int64_t K = t.act.K;
    const int8_t * yq[C];
    const float *  yd[C];
    for (int c = 0; c < C; ++c) {
        yq[c] = yu + (cl0 + c) * K;
        yd[c] = t.act.d + (t.c0 + cl0 + c) * (K / kQK_K);
    }
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t g = 0; g < K / kQK_K; ++g) {
        __m256i isum[C];
        for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
        for (int64_t k = g * kQK_K; k < (g + 1) * kQK_K; k += 32) {
            const __m256i w = load32(row.q.data() + k);
            const __m256i m = load32(row.m.data() + k / 2);
            for (int c = 0; c < C; ++c) {
                isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(load32(yq[c] + k), w), m));
            }
        }
        const __m256i corr = load32(row.corr.data() + 8 * g);
        for (int c = 0; c < C; ++c) {
            isum[c] = _mm256_sub_epi32(isum[c], corr);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(row.f[size_t(g)] * yd[c][g]), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) t.out[(cl0 + c) * t.out_col_stride + r] = hsum(acc[c]);
}

// Note [offset activations]
// Several columns take the activations as unsigned bytes y + 128, so maddubs
// multiplies them with the signed grid values directly, and each product
// costs no sign instruction (nor |q| per chunk): per lane, sum m (y + 128) q
// = sum m y q + 128 sum m q, and the second sum is a property of the row
// alone, `corr` (8 lanes per super-block, computed once per row by the same
// maddubs and madd with 128 as the unsigned side). The difference is exactly
// the integers of the signed form (maddubs of |q| and y * sign q, which one
// column takes: DotSink), so results are the same bits either way.
// maddubs stays inside int16: a pair is at most 2 * 255 * 62 (62: the largest
// grid value, IQ3_XXS's) = 31620.
// Measured on an AMD EPYC (Zen 4), 2 threads, `standin matmul --type iq3_s
// --n 64`, two runs each against the signed form (rows decoded first in both):
// 2048 x 8192 11.6 / 11.6 ms against 12.2 / 12.2, 8192 x 2048 10.4 / 11.1
// against 11.8 / 11.8; llama-bench pp64 of 1B IQ3_S 97-103 against 93-98 t/s
// (ggml-cpu built here: 11.0 ms for the first product).
void grid_row_correction(GridRow & row, int64_t K) {
    row.corr.resize(size_t(K / 32));
    const __m256i c128 = _mm256_set1_epi8(int8_t(0x80));
    for (int64_t g = 0; g < K / kQK_K; ++g) {
        __m256i s = _mm256_setzero_si256();
        for (int64_t k = g * kQK_K; k < (g + 1) * kQK_K; k += 32) {
            const __m256i p = _mm256_maddubs_epi16(c128, load32(row.q.data() + k));
            s = _mm256_add_epi32(s, _mm256_madd_epi16(p, load32(row.m.data() + k / 2)));
        }
        store32(row.corr.data() + 8 * g, s);
    }
}

template <class B>
void tile_grid(const QTile & t) {
    const int64_t K = t.act.K;
    // One column (decoding): each row decoded into its product at once
    // (dot_row_grid; the README's host figures). More columns share each
    // row's decoding below, which is most of the work.
    if (t.ncols == 1) {
        for (int64_t r = 0; r < t.nrows; ++r) {
            t.out[r] = dot_row_grid(reinterpret_cast<const B *>(t.x + r * t.x_stride), t.act.q + t.c0 * K,
                                    t.act.d + t.c0 * (K / kQK_K), K);
        }
        return;
    }
    thread_local std::vector<GridRow> rows;
    // Every row of the tile decoded first, then each group of columns meets
    // all of them: a group's activations (4 x K bytes) stay in L1 while the
    // decoded rows come from L2, where row by row the tile's 32 columns
    // (32 x K bytes) came through L2 for every row. Each (row, column) sum is
    // computed as before, so results are unchanged. Measured on an AMD EPYC
    // (Zen 4), 2 threads, `standin matmul --type iq3_s --n 64`, two runs each:
    // 2048 x 8192 11.9 / 11.5 ms against 13.5 / 12.1 row by row, 8192 x 2048
    // 12.5 / 11.4 against 12.9 / 12.0 (llama-bench pp64 of 1B IQ3_S within
    // its run-to-run spread: 93-98 against 88-98 t/s).
    if (rows.size() < size_t(t.nrows)) rows.resize(size_t(t.nrows));
    for (int64_t r = 0; r < t.nrows; ++r) {
        decode_grid_row(reinterpret_cast<const B *>(t.x + r * t.x_stride), K, rows[size_t(r)]);
        grid_row_correction(rows[size_t(r)], K);
    }
    // The tile's columns as y + 128 (Note [offset activations]).
    thread_local std::vector<int8_t> yu;
    yu.resize(size_t(t.ncols * K));
    const __m256i flip = _mm256_set1_epi8(int8_t(0x80));
    for (int64_t c = 0; c < t.ncols; ++c) {
        const int8_t * src = t.act.q + (t.c0 + c) * K;
        for (int64_t k = 0; k < K; k += 32) store32(yu.data() + c * K + k, _mm256_xor_si256(load32(src + k), flip));
    }
    int64_t c = 0;
    for (; c + 4 <= t.ncols; c += 4) {
        for (int64_t r = 0; r < t.nrows; ++r) dot_cols_grid<4>(t, rows[size_t(r)], r, c, yu.data());
    }
    for (; c < t.ncols; ++c) {
        for (int64_t r = 0; r < t.nrows; ++r) dot_cols_grid<1>(t, rows[size_t(r)], r, c, yu.data());
    }
}

// The grid i-quants (quants_iq.h), which decode_grid decodes.
template <class B>
constexpr bool kGridBlock = std::is_same_v<B, BlockIQ2_XXS> || std::is_same_v<B, BlockIQ2_XS> ||
                            std::is_same_v<B, BlockIQ2_S> || std::is_same_v<B, BlockIQ3_XXS> ||
                            std::is_same_v<B, BlockIQ3_S> || std::is_same_v<B, BlockIQ1_S> || std::is_same_v<B, BlockIQ1_M>;

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
