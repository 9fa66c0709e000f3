// MUL_MAT tiles on AMX for the super-block formats (256 elements a
// super-block): the packed Q4_K, Q5_K, Q6_K, Q3_K, Q2_K and IQ4_XS (layouts
// in packed.h), and the grid i-quants and ternary types once their tile has
// decoded them (mul_mat_x8_grid.h). What the tiles are and why the results
// are the other levels' bits: Note [AMX tiles] in mul_mat_x8_amx.cpp.
//
// Note [AMX super-blocks]
// A super-block of these formats sums, for each of its runs (16 or 32
// elements), a small integer scale s times the run's dot product of codes
// and activation codes, and for some a minimum or offset term (the Notes at
// the top of mul_mat_x8_k.h and mul_mat_x8_lowbit.h). On tiles the scales
// need no step per run: each scale is written in small digits, s = sum_i
// e_i * base^i, such that every code times a digit fits a byte, and the
// panel holds, per digit, the codes times that digit. One tile of int32 per
// digit (and one for a minimum, whose bytes are the run's minimum itself)
// then sums a whole super-block against the activations, two runs of 32
// codes (64 bytes) per product, and sum_i base^i * C_i is exactly the
// integer the other levels sum. Each super-block then takes their float
// steps, in their order. Per format:
//   Q4_K, Q5_K: sc = lo + 8 hi (3-bit digits; codes up to 31: at most 217,
//     unsigned), and mn * sum(y): tiles lo, hi, min; acc = fma(-float(min),
//     dmin * dy, acc); acc = fma(float(lo + 8 hi), d * dy, acc).
//   Q6_K: values v = q - 32 in -32..31, int8 scales in balanced base 7
//     (digits -3..3, so |v e| <= 96): 3 tiles; acc = fma(float(C0 + 7 C1 +
//     49 C2), d * dy, acc), C0 + 7 C1 + 49 C2 being isum - 32 * offset.
//   Q3_K: values v = c - 4 in -4..3, 6-bit signed scales in balanced base 9
//     (digits -4..4): 2 tiles; isum - 4 * offset = C0 + 9 C1.
//   Q2_K: codes 0..3 times 4-bit scales (at most 45) and the 4-bit minimums:
//     2 tiles, Q4_K's float steps with hi = 0.
//   IQ4_XS: levels -127..113 times the scales ls - 32 (-32..31) in balanced
//     base 3 (digits -1..1): 4 tiles; C0 + 3 C1 + 9 C2 + 27 C3.
//   The grid types (decoded): values up to 62 in magnitude, run multipliers
//     up to 31 in balanced base 5: 3 tiles; C0 + 5 C1 + 25 C2.
// Tile registers: C i for digit (or minimum) tile i (0..3), A 3 and 4 in
// turn where 3 C tiles or fewer leave 3 free (else 4), B 5, 6, 7 in turn.
// Measured on the Intel Xeon (2 threads, `standin matmul --m 8192 --k 2048
// --rotate 2`), us, VNNI -> AMX at 32 / 64 / 128 columns: Q4_K 1974 / 3903 /
// 7821 -> 1550 / 2410 / 3976; Q5_K 2369 / 4684 / 9337 -> 1505 / 2258 / 4135;
// Q6_K 2644 / 5827 / 10572 -> 2225 / 2677 / 4603 (the others: README).
//
// Only reached when isa::level() says the CPU and the OS allow it (isa.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define SI_X8_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-int8")))
#include "kernels/host/mul_mat_x8_amx.h"
#include "kernels/host/mul_mat_x8_grid.h"

namespace standin::kernels::host::mm {

namespace {

constexpr int kChunk = kTileRows * 64;  // a B tile: 2 runs of 32 codes, 16 rows
using CTiles = int32_t[4][kTileCols * kTileRows];

// Every tile 16 rows of 64 bytes (C: 16 columns x 16 int32; A: 16 columns x
// 64 codes; B: 16 rows of 4 codes x 16 weight rows).
constexpr TileConfig super_config() {
    TileConfig c{};
    c.palette = 1;
    for (int i = 0; i < 8; ++i) {
        c.rows[i]  = 16;
        c.colsb[i] = 64;
    }
    return c;
}

// 16 rows from two groups' 8-row vectors.
SI_X8_TARGET inline __m512i rows16(__m256i g0, __m256i g1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(g0), g1, 1);
}

// Per-row bytes held 4 to a lane (a group's scale words, 8 rows a vector):
// byte k % 4 of vectors v0[k / 4] (group 0) and v1[k / 4] (group 1),
// sign-extended, as 16 rows' int32 lanes.
SI_X8_TARGET inline __m512i row_byte(const __m256i * v0, const __m256i * v1, int k) {
    return rows16(lane_byte32(v0[k / 4], k % 4), lane_byte32(v1[k / 4], k % 4));
}

// The 4 words at p (a block8's run scales or multipliers, runs 4u..4u+3 in word u).
SI_X8_TARGET inline void load_words4(const uint8_t * p, __m256i * w) {
    for (int u = 0; u < 4; ++u) w[u] = load_w(p + 32 * u);
}

// A signed int32 lane value in both 16-bit halves of the lane.
SI_X8_TARGET inline __m512i halves16(__m512i x) {
    return _mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(x, 16));
}

// A lane value (0..255) in every byte of the lane.
SI_X8_TARGET inline __m512i bytes8(__m512i x) { return _mm512_mullo_epi32(x, _mm512_set1_epi32(0x01010101)); }

// Each byte of v times its row's factor f (in both 16-bit halves of the
// row's lane), for products that fit a byte: unsigned v (kSigned false) or
// signed v.
template <bool kSigned>
SI_X8_TARGET inline __m512i mul_bytes(__m512i v, __m512i f) {
    const __m512i lo   = kSigned ? _mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8) : _mm512_and_si512(v, _mm512_set1_epi16(0x00ff));
    const __m512i hi   = kSigned ? _mm512_srai_epi16(v, 8) : _mm512_srli_epi16(v, 8);
    const __m512i even = _mm512_mullo_epi16(lo, f);
    return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0x00ff)), _mm512_slli_epi16(_mm512_mullo_epi16(hi, f), 8));
}

// r / kD for 0 <= r < 2000 (exact there for kD = 3, 5, 7, 9; the digits need r < 400), per int32 lane.
template <int kD>
SI_X8_TARGET inline __m512i div_small(__m512i r) {
    return _mm512_srli_epi32(_mm512_mullo_epi32(r, _mm512_set1_epi32((65536 + kD - 1) / kD)), 16);
}

// The n balanced digits (-(base-1)/2 .. (base-1)/2) of s (per int32 lane,
// |s| below half of base^n), each in both 16-bit halves of its lane.
template <int kBase, int kN>
SI_X8_TARGET inline void balanced_digits(__m512i s, __m512i * e) {
    int bias = 0;
    for (int i = 0, p = 1; i < kN; ++i, p *= kBase) bias += (kBase / 2) * p;
    __m512i r = _mm512_add_epi32(s, _mm512_set1_epi32(bias));
    for (int i = 0; i < kN; ++i) {
        const __m512i q = div_small<kBase>(r);
        const __m512i d = _mm512_sub_epi32(r, _mm512_mullo_epi32(q, _mm512_set1_epi32(kBase)));
        e[i] = halves16(_mm512_sub_epi32(d, _mm512_set1_epi32(kBase / 2)));
        r = q;
    }
}

// A super-block's panel: for each tile i and pair p (0..3) of its runs of 32
// codes, the B tile at chunk 4i + p, whose row k4 holds codes 4 (k4 % 8)..
// of run 2p + k4 / 8 of the 16 rows; after the 4 kTiles chunks, the rows'
// float factors (d, then dmin where there is one).
template <int kTiles>
constexpr int super_panel() {
    return 4 * kTiles * kChunk + 2 * 64;
}

// Stores tile i's bytes of word w of run j (32 codes) in a super-block's panel.
SI_X8_TARGET inline void store_word(int8_t * sb, int i, int j, int w, __m512i v) {
    _mm512_store_si512(sb + kChunk * (4 * i + j / 2) + 64 * (8 * (j % 2) + w), v);
}

// 16 rows' float factors: the half-precision values at byte `off` of each group's block8.
SI_X8_TARGET inline void store_factors(float * out, const uint8_t * b0, const uint8_t * b1, size_t off) {
    _mm256_store_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b0 + off))));
    _mm256_store_ps(out + 8, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b1 + off))));
}

// --- the formats: tiles, signedness, the panel and the float steps ----------------

// Q4_K and Q5_K (K: KQ4_K or KQ5_K of mul_mat_x8_k.h).
template <class K>
struct SuperMin {
    static constexpr size_t kBlock8  = K::kBlock8;
    static constexpr int    kTiles   = 3;  // lo, hi, min
    static constexpr bool   kSignedB = false;
    SI_X8_TARGET static void build(const uint8_t * b0, const uint8_t * b1, int8_t * sb) {
        const KScales k0 = k_scales(b0), k1 = k_scales(b1);
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            const __m512i sc = row_byte(k0.sc, k1.sc, j);
            const __m512i mn = bytes8(row_byte(k0.mn, k1.mn, j));
            const __m512i lo = halves16(_mm512_and_si512(sc, _mm512_set1_epi32(7)));
            const __m512i hi = halves16(_mm512_srli_epi32(sc, 3));
#pragma GCC unroll 8
            for (int w = 0; w < 8; ++w) {
                const __m512i q = rows16(K::codes(b0, j, w), K::codes(b1, j, w));
                store_word(sb, 0, j, w, mul_bytes<false>(q, lo));
                store_word(sb, 1, j, w, mul_bytes<false>(q, hi));
                store_word(sb, 2, j, w, mn);
            }
        }
        float * f = reinterpret_cast<float *>(sb + 4 * kTiles * kChunk);
        store_factors(f, b0, b1, 0);
        store_factors(f + 16, b0, b1, X8Q4_K::kDmin);
    }
    SI_X8_TARGET static void finish(__m512 * acc, const CTiles & c, const float * f, const float * dy) {
        const __m512 dw = _mm512_load_ps(f), dmin = _mm512_load_ps(f + 16);
#pragma GCC unroll 16
        for (int m = 0; m < kTileCols; ++m) {
            const __m512i isum = _mm512_add_epi32(_mm512_load_si512(c[0] + kTileRows * m),
                                                  _mm512_slli_epi32(_mm512_load_si512(c[1] + kTileRows * m), 3));
            const __m512  dym  = _mm512_set1_ps(dy[m]);
            acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[2] + kTileRows * m)), _mm512_mul_ps(dmin, dym), acc[m]);
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, dym), acc[m]);
        }
    }
};

// acc[m] += float(sum_i base^i * C_i[m]) * (d * dy[m]): the signed-digit formats' step.
template <int kBase, int kTiles>
SI_X8_TARGET inline void finish_digits(__m512 * acc, const CTiles & c, const float * f, const float * dy) {
    const __m512 dw = _mm512_load_ps(f);
#pragma GCC unroll 16
    for (int m = 0; m < kTileCols; ++m) {
        __m512i isum = _mm512_load_si512(c[kTiles - 1] + kTileRows * m);
        for (int i = kTiles - 2; i >= 0; --i) {
            isum = _mm512_add_epi32(_mm512_mullo_epi32(isum, _mm512_set1_epi32(kBase)), _mm512_load_si512(c[i] + kTileRows * m));
        }
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(dy[m])), acc[m]);
    }
}

// The digit tiles of a format with runs of 16 under signed scales: run k's
// scale (16 rows, int32 lanes) from scale(k), written in kN balanced base-kBase
// digits, times the signed values value(j, w) of word w of run pair j.
template <int kBase, int kN, class Scale, class Value>
SI_X8_TARGET inline void build_runs16(int8_t * sb, Scale scale, Value value) {
    __m512i digit[16][kN];  // run k's digits
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) balanced_digits<kBase, kN>(scale(k), digit[k]);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
#pragma GCC unroll 8
        for (int w = 0; w < 8; ++w) {
            const __m512i v = value(j, w);
            for (int i = 0; i < kN; ++i) store_word(sb, i, j, w, mul_bytes<true>(v, digit[2 * j + w / 4][i]));
        }
    }
}

// Q6_K (Note [AMX super-blocks]): runs k of 16, scales in balanced base 7.
struct SuperQ6_K {
    static constexpr size_t kBlock8  = X8Q6_K::kBlock8;
    static constexpr int    kTiles   = 3;
    static constexpr bool   kSignedB = true;
    SI_X8_TARGET static void build(const uint8_t * b0, const uint8_t * b1, int8_t * sb) {
        __m256i s0[4], s1[4];
        load_words4(b0 + X8Q6_K::kScales, s0);
        load_words4(b1 + X8Q6_K::kScales, s1);
        build_runs16<7, kTiles>(
            sb, [&](int k) SI_X8_TARGET { return row_byte(s0, s1, k); },
            [&](int j, int w) SI_X8_TARGET {
                const int     h  = j / 4, t = j % 4;
                const __m256i q0 = q6_codes(b0 + 32 * (16 * h + 8 * (t % 2) + w), b0 + X8Q6_K::kQh + 32 * (8 * h + w), t);
                const __m256i q1 = q6_codes(b1 + 32 * (16 * h + 8 * (t % 2) + w), b1 + X8Q6_K::kQh + 32 * (8 * h + w), t);
                return _mm512_sub_epi8(rows16(q0, q1), _mm512_set1_epi8(32));
            });
        store_factors(reinterpret_cast<float *>(sb + 4 * kTiles * kChunk), b0, b1, X8Q6_K::kD);
    }
    SI_X8_TARGET static void finish(__m512 * acc, const CTiles & c, const float * f, const float * dy) {
        finish_digits<7, kTiles>(acc, c, f, dy);
    }
};

// Q3_K (Note [AMX super-blocks]): runs of 16, scales in balanced base 9.
struct SuperQ3_K {
    static constexpr size_t kBlock8  = X8Q3_K::kBlock8;
    static constexpr int    kTiles   = 2;
    static constexpr bool   kSignedB = true;
    SI_X8_TARGET static void build(const uint8_t * b0, const uint8_t * b1, int8_t * sb) {
        __m256i s0[4], s1[4];
        q3_scales(b0, s0);
        q3_scales(b1, s1);
        build_runs16<9, kTiles>(
            sb, [&](int k) SI_X8_TARGET { return row_byte(s0, s1, k); },
            [&](int j, int w) SI_X8_TARGET {
                return _mm512_sub_epi8(rows16(q3_codes(b0, j, w), q3_codes(b1, j, w)), _mm512_set1_epi8(4));
            });
        store_factors(reinterpret_cast<float *>(sb + 4 * kTiles * kChunk), b0, b1, X8Q3_K::kD);
    }
    SI_X8_TARGET static void finish(__m512 * acc, const CTiles & c, const float * f, const float * dy) {
        finish_digits<9, kTiles>(acc, c, f, dy);
    }
};

// Q2_K (Note [AMX super-blocks]): runs of 16, codes times the scale, and the minimums.
struct SuperQ2_K {
    static constexpr size_t kBlock8  = X8Q2_K::kBlock8;
    static constexpr int    kTiles   = 2;  // isum, min
    static constexpr bool   kSignedB = false;
    SI_X8_TARGET static void build(const uint8_t * b0, const uint8_t * b1, int8_t * sb) {
        __m256i sc0[4], mn0[4], sc1[4], mn1[4];
        KQ2_K::scales(b0, sc0, mn0);
        KQ2_K::scales(b1, sc1, mn1);
        __m512i sc[16], mn[16];
#pragma GCC unroll 16
        for (int k = 0; k < 16; ++k) {
            sc[k] = halves16(row_byte(sc0, sc1, k));
            mn[k] = bytes8(row_byte(mn0, mn1, k));
        }
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
#pragma GCC unroll 8
            for (int w = 0; w < 8; ++w) {
                const __m512i q = rows16(q2_codes(b0, j, w), q2_codes(b1, j, w));
                store_word(sb, 0, j, w, mul_bytes<false>(q, sc[2 * j + w / 4]));
                store_word(sb, 1, j, w, mn[2 * j + w / 4]);
            }
        }
        float * f = reinterpret_cast<float *>(sb + 4 * kTiles * kChunk);
        store_factors(f, b0, b1, X8Q2_K::kD);
        store_factors(f + 16, b0, b1, X8Q2_K::kDmin);
    }
    SI_X8_TARGET static void finish(__m512 * acc, const CTiles & c, const float * f, const float * dy) {
        const __m512 dw = _mm512_load_ps(f), dmin = _mm512_load_ps(f + 16);
#pragma GCC unroll 16
        for (int m = 0; m < kTileCols; ++m) {
            const __m512 dym = _mm512_set1_ps(dy[m]);
            acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[1] + kTileRows * m)), _mm512_mul_ps(dmin, dym), acc[m]);
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[0] + kTileRows * m)), _mm512_mul_ps(dw, dym), acc[m]);
        }
    }
};

// IQ4_XS (Note [AMX super-blocks]): sub-blocks of 32, levels, scales in balanced base 3.
struct SuperIQ4_XS {
    static constexpr size_t kBlock8  = X8IQ4_XS::kBlock8;
    static constexpr int    kTiles   = 4;
    static constexpr bool   kSignedB = true;
    SI_X8_TARGET static void build(const uint8_t * b0, const uint8_t * b1, int8_t * sb) {
        __m256i s0[2], s1[2];
        iq4_xs_scales(b0, s0);
        iq4_xs_scales(b1, s1);
        const __m512i levels = _mm512_broadcast_i32x4(_mm256_castsi256_si128(level_table<X8IQ4_NL>(false)));
        const __m512i m4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            __m512i digit[4];
            balanced_digits<3, 4>(row_byte(s0, s1, j), digit);
#pragma GCC unroll 8
            for (int w = 0; w < 8; ++w) {
                // Word w: elements 4w.. of the sub-block, the low nibbles of
                // quant word 4j + w (w < 4) or the high ones of 4j + w - 4.
                const __m512i raw = rows16(load_w(b0 + X8IQ4_XS::kQuants + 32 * (4 * j + w % 4)),
                                           load_w(b1 + X8IQ4_XS::kQuants + 32 * (4 * j + w % 4)));
                const __m512i v = _mm512_shuffle_epi8(levels, _mm512_and_si512(w < 4 ? raw : _mm512_srli_epi16(raw, 4), m4));
                for (int i = 0; i < kTiles; ++i) store_word(sb, i, j, w, mul_bytes<true>(v, digit[i]));
            }
        }
        store_factors(reinterpret_cast<float *>(sb + 4 * kTiles * kChunk), b0, b1, 0);
    }
    SI_X8_TARGET static void finish(__m512 * acc, const CTiles & c, const float * f, const float * dy) {
        finish_digits<3, kTiles>(acc, c, f, dy);
    }
};

// The grid i-quants and the ternary types, decoded by their tile into X8Grid
// groups (mul_mat_x8_grid.h, in the VNNI level's form: values plus 128):
// values |v| <= 62, run multipliers m (odd, at most 31; 1 for the ternary
// types) in balanced base 5 (digits -2..2, |v e| <= 124); acc = fma(float(C0
// + 5 C1 + 25 C2), f * dy, acc), the float step of the other levels.
struct SuperGrid {
    static constexpr size_t kBlock8  = X8Grid::kBlock8;
    static constexpr int    kTiles   = 3;
    static constexpr bool   kSignedB = true;
    SI_X8_TARGET static void build(const uint8_t * b0, const uint8_t * b1, int8_t * sb) {
        __m256i m0[4], m1[4];
        load_words4(b0 + X8Grid::kMult, m0);
        load_words4(b1 + X8Grid::kMult, m1);
        build_runs16<5, kTiles>(
            sb, [&](int k) SI_X8_TARGET { return row_byte(m0, m1, k); },
            [&](int j, int w) SI_X8_TARGET {
                return _mm512_xor_si512(rows16(load_w(b0 + 32 * (8 * j + w)), load_w(b1 + 32 * (8 * j + w))),
                                        _mm512_set1_epi8(int8_t(0x80)));
            });
        float * f = reinterpret_cast<float *>(sb + 4 * kTiles * kChunk);
        _mm256_store_ps(f, _mm256_loadu_ps(reinterpret_cast<const float *>(b0 + X8Grid::kF)));
        _mm256_store_ps(f + 8, _mm256_loadu_ps(reinterpret_cast<const float *>(b1 + X8Grid::kF)));
    }
    SI_X8_TARGET static void finish(__m512 * acc, const CTiles & c, const float * f, const float * dy) {
        finish_digits<5, kTiles>(acc, c, f, dy);
    }
};

// --- the column loop ---------------------------------------------------------------

// Tile i (from kI) of run pair p against A tile kA: B tiles 5, 6, 7 in turn.
template <class Fmt, int kA, int kI = 0>
SI_X8_TARGET inline void digit_dots(const int8_t * sb, int p) {
    if constexpr (kI < Fmt::kTiles) {
        constexpr int kB = 5 + kI % 3;
        tile_load<kB>(sb + kChunk * (4 * kI + p), 64);
        tile_dot<Fmt::kSignedB, kI, kA, kB>();
        digit_dots<Fmt, kA, kI + 1>(sb, p);
    }
}

template <int kN, int kI = 0>
SI_X8_TARGET inline void zero_tiles() {
    if constexpr (kI < kN) {
        tile_zero<kI>();
        zero_tiles<kN, kI + 1>();
    }
}

template <int kN, int kI = 0>
SI_X8_TARGET inline void store_tiles(CTiles & c) {
    if constexpr (kI < kN) {
        tile_store<kI>(c[kI], 4 * kTileRows);
        store_tiles<kN, kI + 1>(c);
    }
}

// Run pair p of the super-block: its A tile (columns' codes), then every tile's product.
template <class Fmt, int kP>
SI_X8_TARGET inline void run_pair(const int8_t * codes, const int8_t * sb, int64_t K) {
    constexpr int kA = Fmt::kTiles <= 3 && kP % 2 == 0 ? 3 : 4;
    tile_load<kA>(codes + 64 * kP, K);
    digit_dots<Fmt, kA>(sb, kP);
}

// 16 rows (the panel) times the 16 columns from tile column cl0; a
// super-block is scaled while the next one's products run (as the
// 32-element formats' loop does with pairs of blocks).
template <class Fmt>
SI_X8_TARGET void columns16(const QTile & t, int64_t cl0, const int8_t * panel, float * dy, int64_t nsb) {
    constexpr int  kPanel = super_panel<Fmt::kTiles>();
    const int64_t  K = t.act.K;
    const int8_t * a = t.act.q + (t.c0 + cl0) * K;
    column_scales(t.act.d + (t.c0 + cl0) * nsb, nsb, dy);
    alignas(64) CTiles c;
    __m512 acc[kTileCols];
    for (int m = 0; m < kTileCols; ++m) acc[m] = _mm512_setzero_ps();
    auto factors = [&](int64_t b) { return reinterpret_cast<const float *>(panel + kPanel * b + 4 * Fmt::kTiles * kChunk); };
    for (int64_t b = 0; b < nsb; ++b) {
        const int8_t * sb = panel + kPanel * b;
        zero_tiles<Fmt::kTiles>();
        run_pair<Fmt, 0>(a + 256 * b, sb, K);
        run_pair<Fmt, 1>(a + 256 * b, sb, K);
        run_pair<Fmt, 2>(a + 256 * b, sb, K);
        run_pair<Fmt, 3>(a + 256 * b, sb, K);
        if (b > 0) Fmt::finish(acc, c, factors(b - 1), dy + 16 * (b - 1));
        store_tiles<Fmt::kTiles>(c);
    }
    Fmt::finish(acc, c, factors(nsb - 1), dy + 16 * (nsb - 1));
    for (int m = 0; m < kTileCols; ++m) _mm512_storeu_ps(t.out + (cl0 + m) * t.out_col_stride, acc[m]);
}

// From 32 columns: the panel of a super-block costs about as much as 30
// columns' products (Q4_K at 16 columns: 1149 us on AMX against 1003).
template <class Fmt>
SI_X8_TARGET void tile_amx_super(const QTile & t, QTileFn rest_fn) {
    amx_and_rest<2 * kTileCols>(t, rest_fn, [&](int64_t amx_cols) SI_X8_TARGET {
        constexpr int   kPanel = super_panel<Fmt::kTiles>();
        const int64_t   nsb    = t.act.K / 256;
        int8_t *        panel  = panel_lines(size_t(nsb) * (kPanel / 64 + 1));
        const uint8_t * g0     = reinterpret_cast<const uint8_t *>(t.x);
        const uint8_t * g1     = g0 + packed::kRows * int64_t(t.x_stride);
        for (int64_t b = 0; b < nsb; ++b) {
            Fmt::build(g0 + b * int64_t(Fmt::kBlock8), g1 + b * int64_t(Fmt::kBlock8), panel + kPanel * b);
        }
        static constexpr TileConfig kConfig = super_config();
        const TileScope scope(kConfig);
        float * dy = reinterpret_cast<float *>(panel + kPanel * nsb);
        for (int64_t cl0 = 0; cl0 < amx_cols; cl0 += kTileCols) columns16<Fmt>(t, cl0, panel, dy, nsb);
    });
}

template <class Fmt, ggml_type kType>
SI_X8_TARGET void tile_amx_packed(const QTile & t) {
    tile_amx_super<Fmt>(t, x8_tile_vnni(kType));
}

// A tile of grid weights: decoded as for the VNNI level, then on tiles.
template <class B, ggml_type kType>
SI_X8_TARGET void tile_amx_grid(const QTile & t) {
    tile_grid_x8<B>(t, true, [](const QTile & d) SI_X8_TARGET { tile_amx_super<SuperGrid>(d, x8_grid_decoded_vnni(kType)); });
}

// The format of each packed super-block type (mul_mat_x8_lowbit.h's
// SI_X8_SUPER_FORMATS lists them; a type without one here does not compile).
template <ggml_type T> struct AmxSuper;
template <> struct AmxSuper<GGML_TYPE_Q2_K> { using Fmt = SuperQ2_K; };
template <> struct AmxSuper<GGML_TYPE_Q3_K> { using Fmt = SuperQ3_K; };
template <> struct AmxSuper<GGML_TYPE_Q4_K> { using Fmt = SuperMin<KQ4_K>; };
template <> struct AmxSuper<GGML_TYPE_Q5_K> { using Fmt = SuperMin<KQ5_K>; };
template <> struct AmxSuper<GGML_TYPE_Q6_K> { using Fmt = SuperQ6_K; };
template <> struct AmxSuper<GGML_TYPE_IQ4_XS> { using Fmt = SuperIQ4_XS; };

} // namespace

QTileFn x8_tile_amx_super(ggml_type type) {
    switch (type) {
#define SI_X(name, Body) case GGML_TYPE_##name: return tile_amx_packed<AmxSuper<GGML_TYPE_##name>::Fmt, GGML_TYPE_##name>;
        SI_X8_SUPER_FORMATS(SI_X)
#undef SI_X
        default: return nullptr;
    }
}

QTileFn x8_grid_tile_amx(ggml_type type) {
    switch (type) {
#define SI_X(type, Block) case type: return tile_amx_grid<Block, type>;
        SI_HOST_GRID_TYPES(SI_X)
#undef SI_X
        default: return nullptr;
    }
}

} // namespace standin::kernels::host::mm
