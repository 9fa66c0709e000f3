// Packed-weight MUL_MAT tiles on AMX (the avx512-amx level, isa.h), for the
// 32-element formats Q4_0, Q8_0, IQ4_NL, MXFP4 (Note [AMX tiles]) and the
// super-block formats Q4_K, Q5_K (Note [AMX super-blocks]) and Q6_K (Note
// [AMX Q6_K]); the layouts are packed.h's (Note [packed weights]). The other
// packed formats keep the VNNI kernels at this level.
//
// Note [AMX tiles]
// An AMX int8 product (tdpbssd) multiplies a tile A of 16 rows x 64 bytes
// by a tile B of 16 rows x 64 bytes held "4 bytes per column" and adds the
// int32 results into a 16 x 16 tile C: C[m][n] += sum over k of A[m][k] *
// B[k / 4][4n + k % 4]. Here A is 16 activation columns, 32 codes each (one
// 32-element block: the activation and weight scales change every block, so
// a block is the most one product may sum), read in place with the columns'
// stride; B is the block of 16 weight rows, whose row k4 holds the 4 codes
// 4k4..4k4+3 of each weight row: exactly two groups' packed 32-byte words
// side by side, so a panel of a tile's 16 rows is built once per tile (the
// nibble formats decoded to signed bytes on the way: Q4_0 q - 8, IQ4_NL and
// MXFP4 their levels) and serves every 16 columns of it. C[m][n] is then the
// exact integer dot product of column m and row n for the block, the one the
// VNNI and AVX2 kernels sum (their offsets taken off), and each block adds
// fma(float(C), d_w * d_y, acc) into 16 accumulators of 16 rows, the float
// steps of those kernels in their order: the same bits at every level
// (test_packed.cpp checks it).
//
// One tdpbssd does 16 x 16 x 32 multiply-adds (8192) where vpdpbusd does 64,
// so the products' work moves to the float steps of each block (a tile store,
// 16 converts and multiply-adds). Blocks alternate between two sets of tile
// registers so that one block's product runs while the previous one's sums
// are scaled. Columns beyond a multiple of 16 and tiles of 8 rows (a matrix
// with an odd number of groups) run the VNNI kernels. Measured on an Intel
// Xeon with AMX (2 threads, 2.6 GHz), 8192 x 2048 at 16 / 32 / 64 / 128
// columns (`standin matmul --rotate 2`), us, VNNI -> AMX: Q8_0 1367 / 2649 /
// 5360 / 10839 -> 922 / 1372 / 2285 / 4069; Q4_0 994 / 1960 / 3868 / 7729 ->
// 811 / 1251 / 2135 / 4296 (IQ4_NL and MXFP4 as Q4_0 on AMX).
//
// The tile configuration is per thread and other code on the same thread may
// rely on its own (ggml-cpu's AMX kernels load theirs once per thread): each
// call keeps the thread's configuration and puts it back when it leaves, and
// leaves its own loaded only where none was.
//
// Only reached when isa::level() says the CPU and the OS allow it (isa.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define SI_X8_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-int8")))
#include "kernels/host/mul_mat_x8_lowbit.h"

#include <cstring>
#include <vector>

namespace standin::kernels::host::mm {

QTileFn x8_tile_vnni(ggml_type type);  // mul_mat_x8_vnni.cpp

namespace {

constexpr int kTileCols = 16;             // activation columns per A tile
constexpr int kTileRows = 2 * packed::kRows;  // weight rows per B tile
constexpr int kPanelBlock = 8 * 64;       // bytes of a block in the panel: 8 rows of 64

// The tile registers: a block of even index uses C 0, A 2, B 4, an odd one
// C 1, A 3, B 5. Tile numbers are part of the instruction, so each is a
// literal.
struct alignas(64) TileConfig {
    uint8_t  palette;
    uint8_t  start_row;
    uint8_t  reserved[14];
    uint16_t colsb[16];
    uint8_t  rows[16];
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

constexpr TileConfig blocks_config() {
    TileConfig c{};
    c.palette = 1;
    for (int p = 0; p < 2; ++p) {
        c.rows[0 + p] = kTileCols, c.colsb[0 + p] = 4 * kTileRows;  // C: 16 columns x 16 int32
        c.rows[2 + p] = kTileCols, c.colsb[2 + p] = 32;             // A: 16 columns x 32 codes
        c.rows[4 + p] = 8, c.colsb[4 + p] = 4 * kTileRows;          // B: 8 rows of 4 codes x 16 rows
    }
    return c;
}

// The "memory" clobbers order the tile loads after the stores that built
// their source and the scalar loads after the tile stores.
#define SI_TILE_LOAD(tmm, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #tmm ::"r"(base), "r"(int64_t(stride)) : "memory")
#define SI_TILE_STORE(tmm, base, stride) \
    __asm__ volatile("tilestored %%tmm" #tmm ", (%0,%1,1)" ::"r"(base), "r"(int64_t(stride)) : "memory")
#define SI_TILE_ZERO(tmm) __asm__ volatile("tilezero %%tmm" #tmm ::: "memory")
#define SI_TILE_DOT(c, a, b) __asm__ volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::: "memory")
// Signed A (activations) times unsigned B (weights).
#define SI_TILE_DOT_SU(c, a, b) __asm__ volatile("tdpbsud %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::: "memory")

// Loads this module's tile configuration for the scope of one call and puts
// the thread's previous one back after it (Note [AMX tiles]).
class TileScope {
public:
    SI_X8_TARGET explicit TileScope(const TileConfig & cfg) {
        __asm__ volatile("sttilecfg %0" : "=m"(prev_) : : "memory");
        mine_ = std::memcmp(&prev_, &cfg, sizeof cfg) == 0;
        if (!mine_) __asm__ volatile("ldtilecfg %0" : : "m"(cfg) : "memory");
    }
    SI_X8_TARGET ~TileScope() {
        if (!mine_ && prev_.palette != 0) __asm__ volatile("ldtilecfg %0" : : "m"(prev_) : "memory");
    }
    TileScope(const TileScope &) = delete;
    TileScope & operator=(const TileScope &) = delete;

private:
    TileConfig prev_;
    bool       mine_ = false;
};

// The signed value of each nibble, for pshufb: Q4_0's q - 8 or a levels
// format's table.
template <class F>
SI_X8_TARGET inline __m512i nibble_values() {
    if constexpr (F::kForm == Form::levels) {
        return _mm512_broadcast_i32x4(_mm256_castsi256_si128(level_table<F>(false)));
    } else {
        return _mm512_broadcast_i32x4(_mm_setr_epi8(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7));
    }
}

// The panel of the tile's 16 rows (groups g0 and g1 = g0 + 8 rows): for each
// block b, 8 rows of 64 bytes at panel + kPanelBlock * b (row k4: the 16 rows'
// codes 4k4..4k4+3), and the 16 rows' scales at sc + 16 * b.
template <class F>
SI_X8_TARGET void build_panel(const uint8_t * g0, const uint8_t * g1, int64_t nb, int8_t * panel, float * sc) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i values = nibble_values<F>();
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * b0 = g0 + b * int64_t(F::kBlock8);
        const uint8_t * b1 = g1 + b * int64_t(F::kBlock8);
        _mm256_store_ps(sc + 16 * b, block_scales<F>(b0));
        _mm256_store_ps(sc + 16 * b + 8, block_scales<F>(b1));
        int8_t * out = panel + kPanelBlock * b;
        auto word = [&](int w) SI_X8_TARGET {
            return _mm512_inserti64x4(_mm512_castsi256_si512(load_w(b0 + F::kQuants + 32 * w)),
                                      load_w(b1 + F::kQuants + 32 * w), 1);
        };
        if constexpr (F::kForm == Form::signed_bytes) {
#pragma GCC unroll 8
            for (int w = 0; w < F::kWords; ++w) _mm512_store_si512(out + 64 * w, word(w));
        } else {
            // Word w's low nibbles are codes 4w.. (panel row w), its high
            // nibbles codes 16 + 4w.. (panel row 4 + w).
#pragma GCC unroll 4
            for (int w = 0; w < F::kWords; ++w) {
                const __m512i raw = word(w);
                _mm512_store_si512(out + 64 * w, _mm512_shuffle_epi8(values, _mm512_and_si512(raw, m4)));
                _mm512_store_si512(out + 64 * (4 + w),
                                   _mm512_shuffle_epi8(values, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4)));
            }
        }
    }
}

// This thread's panel memory, at least `lines` 64-byte lines.
int8_t * panel_lines(size_t lines) {
    struct alignas(64) Line {
        int8_t bytes[64];
    };
    thread_local std::vector<Line> buf;
    if (buf.size() < lines) buf.resize(lines);
    return reinterpret_cast<int8_t *>(buf.data());
}

// This thread's panel: 16 rows of K codes and their scales (K / 32 blocks),
// and room for 16 columns' scales.
struct Panel {
    int8_t * codes;
    float *  scales;
    float *  col_scales;
};
Panel panel_for(int64_t nb) {
    int8_t * p = panel_lines(size_t(nb) * (kPanelBlock / 64 + 2));
    return {p, reinterpret_cast<float *>(p + kPanelBlock * nb), reinterpret_cast<float *>(p + (kPanelBlock + 64) * nb)};
}

// The columns a tile runs on AMX (whole runs of 16, in tiles of 16 rows and
// at least kMinCols columns, so that the panel pays), and the rest on the
// VNNI kernel of the type.
template <ggml_type kType, int kMinCols, class Amx>
SI_X8_TARGET void amx_and_rest(const QTile & t, Amx amx) {
    const int64_t amx_cols = t.nrows == kTileRows && t.ncols >= kMinCols ? t.ncols / kTileCols * kTileCols : 0;
    if (amx_cols > 0) amx(amx_cols);
    if (amx_cols < t.ncols) {
        QTile rest = t;
        rest.c0 += amx_cols;
        rest.ncols -= amx_cols;
        rest.out += amx_cols * t.out_col_stride;
        x8_tile_vnni(kType)(rest);
    }
}

// Column m's scale of activation group g at dy[16 * g + m], for the 16
// columns whose first scale is at d (`groups` per column).
SI_X8_TARGET inline void column_scales(const float * d, int64_t groups, float * dy) {
    const __m512i by_column = _mm512_mullo_epi32(_mm512_set1_epi32(int32_t(groups)),
                                                 _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    for (int64_t g = 0; g < groups; ++g) _mm512_store_ps(dy + 16 * g, _mm512_i32gather_ps(by_column, d + g, 4));
}

// acc[m] (16 rows of column m) += float(C[m]) * (d_w * d_y[m]) for one
// block; dy: the 16 columns' scales of the block, side by side.
SI_X8_TARGET inline void scale_block(__m512 * acc, const int32_t * c, __m512 dw, const float * dy) {
#pragma GCC unroll 16
    for (int m = 0; m < kTileCols; ++m) {
        const __m512 sums = _mm512_cvtepi32_ps(_mm512_load_si512(c + kTileRows * m));
        acc[m] = _mm512_fmadd_ps(sums, _mm512_mul_ps(dw, _mm512_set1_ps(dy[m])), acc[m]);
    }
}

// Two blocks' products, into C 0 and C 1.
#define SI_TILE_PAIR(a, panel, K, b)                   \
    do {                                               \
        SI_TILE_LOAD(2, (a) + 32 * (b), K);            \
        SI_TILE_LOAD(4, (panel) + kPanelBlock * (b), 64); \
        SI_TILE_ZERO(0);                               \
        SI_TILE_DOT(0, 2, 4);                          \
        SI_TILE_LOAD(3, (a) + 32 * ((b) + 1), K);      \
        SI_TILE_LOAD(5, (panel) + kPanelBlock * ((b) + 1), 64); \
        SI_TILE_ZERO(1);                               \
        SI_TILE_DOT(1, 3, 5);                          \
    } while (0)

// 16 rows (the panel) times the 16 columns from tile column cl0. A pair of
// blocks is scaled while the next pair's products run: their sums wait in
// memory meanwhile (tile registers are not renamed, and a load of what a
// tile store wrote waits for the store). Measured on the Intel Xeon (2.6
// GHz), 64 blocks: 24.0 ns a block this way, 27.5 scaling each pair right
// after its products.
SI_X8_TARGET void columns16(const QTile & t, int64_t cl0, const int8_t * panel, const float * sc, float * dy, int64_t nb) {
    const int64_t  K  = t.act.K;
    const int8_t * a  = t.act.q + (t.c0 + cl0) * K;
    column_scales(t.act.d + (t.c0 + cl0) * nb, nb, dy);
    alignas(64) int32_t c[2][kTileCols * kTileRows];
    __m512 acc[kTileCols];
    for (int m = 0; m < kTileCols; ++m) acc[m] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        SI_TILE_PAIR(a, panel, K, b);
        if (b > 0) {
            scale_block(acc, c[0], _mm512_load_ps(sc + 16 * (b - 2)), dy + 16 * (b - 2));
            scale_block(acc, c[1], _mm512_load_ps(sc + 16 * (b - 1)), dy + 16 * (b - 1));
        }
        SI_TILE_STORE(0, c[0], 4 * kTileRows);
        SI_TILE_STORE(1, c[1], 4 * kTileRows);
    }
    if (b > 0) {
        scale_block(acc, c[0], _mm512_load_ps(sc + 16 * (b - 2)), dy + 16 * (b - 2));
        scale_block(acc, c[1], _mm512_load_ps(sc + 16 * (b - 1)), dy + 16 * (b - 1));
    }
    if (b < nb) {  // an odd block count's last
        SI_TILE_LOAD(2, a + 32 * b, K);
        SI_TILE_LOAD(4, panel + kPanelBlock * b, 64);
        SI_TILE_ZERO(0);
        SI_TILE_DOT(0, 2, 4);
        SI_TILE_STORE(0, c[0], 4 * kTileRows);
        scale_block(acc, c[0], _mm512_load_ps(sc + 16 * b), dy + 16 * b);
    }
    for (int m = 0; m < kTileCols; ++m) _mm512_storeu_ps(t.out + (cl0 + m) * t.out_col_stride, acc[m]);
}

template <class F, ggml_type kType>
SI_X8_TARGET void tile_amx(const QTile & t) {
    amx_and_rest<kType, kTileCols>(t, [&](int64_t amx_cols) SI_X8_TARGET {
        const int64_t   nb = t.act.K / 32;
        const Panel     p  = panel_for(nb);
        const uint8_t * g0 = reinterpret_cast<const uint8_t *>(t.x);
        build_panel<F>(g0, g0 + packed::kRows * int64_t(t.x_stride), nb, p.codes, p.scales);
        static constexpr TileConfig kConfig = blocks_config();
        const TileScope scope(kConfig);
        for (int64_t cl0 = 0; cl0 < amx_cols; cl0 += kTileCols) columns16(t, cl0, p.codes, p.scales, p.col_scales, nb);
    });
}


// --- Q4_K and Q5_K ------------------------------------------------------------------
//
// Note [AMX super-blocks]
// A Q4_K or Q5_K row's super-block sums sc_j * dot(q_j, y_j) over its 8
// sub-blocks j, with 6-bit scales sc_j and codes q_j up to 15 (31), and
// mn_j * sum(y_j) for the minimum (Note at the top of mul_mat_x8_k.h). The
// integer products need no step per sub-block here: with sc_j = sl_j + 8
// sh_j (sl_j, sh_j < 8), q_j * sl_j and q_j * sh_j are at most 217 and fit
// unsigned bytes, so the panel holds them (and mn_j in every byte of its
// sub-block), and three tiles of int32 sum a whole super-block against the
// activations by tdpbsud, two sub-blocks (64 codes) per product:
//   lo = sum_j dot(q_j sl_j, y_j), hi = sum_j dot(q_j sh_j, y_j),
//   mins = sum_j mn_j sum(y_j),
// and isum = lo + 8 hi, the integers the other levels sum. Each super-block
// then takes the float steps of those levels, in their order:
//   acc = fma(-float(mins), dmin * dy, acc); acc = fma(float(isum), d * dy, acc).
// 12 tile products and one float step per 256 elements, where the 32-element
// formats need 8 products and 8 float steps.

constexpr int kChunk = kTileRows * 64;  // a B tile: 2 sub-blocks' 64 codes of 16 rows
// A super-block's panel: the lo, hi and min tiles of its 4 sub-block pairs,
// then its 16 rows' d and dmin.
constexpr int kSuperPanel = 12 * kChunk + 2 * 64;

constexpr TileConfig super_config() {
    TileConfig c{};
    c.palette = 1;
    // C lo, hi, min: 0, 1, 2 (16 columns x 16 int32); A: 3, 4 (16 columns x
    // 64 codes, alternating); B lo, hi, min: 5, 6, 7 (16 rows of 4 codes x 16
    // rows): every tile 16 rows of 64 bytes.
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

// Each byte of q (a code below 32) times its row's factor (below 8), which
// f holds in both 16-bit halves of the row's lane: products below 256.
SI_X8_TARGET inline __m512i mul_bytes(__m512i q, __m512i f) {
    const __m512i even = _mm512_mullo_epi16(_mm512_and_si512(q, _mm512_set1_epi16(0x00ff)), f);
    const __m512i odd  = _mm512_mullo_epi16(_mm512_srli_epi16(q, 8), f);
    return _mm512_or_si512(even, _mm512_slli_epi16(odd, 8));
}

// The panel of 16 rows (groups g0, g1) over nsb super-blocks (Note [AMX
// super-blocks]): super-block b's at panel + kSuperPanel * b, its B tile for
// sub-blocks 2i, 2i + 1 at chunk i (lo), 4 + i (hi), 8 + i (min); row k4 of
// a tile: code 4 (k4 % 8).. of sub-block 2i + k4 / 8, of the 16 rows.
template <class K>
SI_X8_TARGET void build_super_panel(const uint8_t * g0, const uint8_t * g1, int64_t nsb, int8_t * panel) {
    for (int64_t b = 0; b < nsb; ++b) {
        const uint8_t * b0 = g0 + b * int64_t(K::kBlock8);
        const uint8_t * b1 = g1 + b * int64_t(K::kBlock8);
        int8_t *        out = panel + kSuperPanel * b;
        const KScales   k0 = k_scales(b0), k1 = k_scales(b1);
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            const __m512i sc = rows16(lane_byte32(k0.sc[j / 4], j % 4), lane_byte32(k1.sc[j / 4], j % 4));
            const __m512i mn = rows16(lane_byte32(k0.mn[j / 4], j % 4), lane_byte32(k1.mn[j / 4], j % 4));
            const __m512i sl = _mm512_mullo_epi32(_mm512_and_si512(sc, _mm512_set1_epi32(7)), _mm512_set1_epi32(0x10001));
            const __m512i sh = _mm512_mullo_epi32(_mm512_srli_epi32(sc, 3), _mm512_set1_epi32(0x10001));
            const __m512i m8 = _mm512_mullo_epi32(mn, _mm512_set1_epi32(0x01010101));
            int8_t * row = out + kChunk * (j / 2) + 64 * 8 * (j % 2);
#pragma GCC unroll 8
            for (int w = 0; w < 8; ++w) {
                const __m512i q = rows16(K::codes(b0, j, w), K::codes(b1, j, w));
                _mm512_store_si512(row + 64 * w, mul_bytes(q, sl));
                _mm512_store_si512(row + 4 * kChunk + 64 * w, mul_bytes(q, sh));
                _mm512_store_si512(row + 8 * kChunk + 64 * w, m8);
            }
        }
        float * d = reinterpret_cast<float *>(out + 12 * kChunk);
        _mm256_store_ps(d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b0))));
        _mm256_store_ps(d + 8, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b1))));
        _mm256_store_ps(d + 16, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b0 + X8Q4_K::kDmin))));
        _mm256_store_ps(d + 24, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b1 + X8Q4_K::kDmin))));
    }
}

// The float steps of a super-block for the 16 columns, for Q4_K and Q5_K
// (Note [AMX super-blocks]): c holds its lo, hi and min tiles, d its rows' d
// and dmin, dy its columns' scales. Their B tiles are unsigned.
struct SuperMin {
    static constexpr bool kSignedB = false;
    SI_X8_TARGET static void finish(__m512 * acc, const int32_t (*c)[kTileCols * kTileRows], const float * d, const float * dy) {
        const __m512 dw = _mm512_load_ps(d), dmin = _mm512_load_ps(d + 16);
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

// Sub-blocks 2i, 2i + 1 of super-block b (A tile `a`) into the three sums.
#define SI_TILE_SUPER_PAIR(DOT, a, codes, base, K, i)          \
    do {                                                        \
        SI_TILE_LOAD(a, (codes) + 64 * (i), K);                 \
        SI_TILE_LOAD(5, (base) + kChunk * (i), 64);             \
        DOT(0, a, 5);                                           \
        SI_TILE_LOAD(6, (base) + kChunk * (4 + (i)), 64);       \
        DOT(1, a, 6);                                           \
        SI_TILE_LOAD(7, (base) + kChunk * (8 + (i)), 64);       \
        DOT(2, a, 7);                                           \
    } while (0)

// 16 rows (the panel) times the 16 columns from tile column cl0; a
// super-block is scaled while the next one's products run (as columns16).
template <class Fmt>
SI_X8_TARGET void columns16_super(const QTile & t, int64_t cl0, const int8_t * panel, float * dy, int64_t nsb) {
    const int64_t  K = t.act.K;
    const int8_t * a = t.act.q + (t.c0 + cl0) * K;
    column_scales(t.act.d + (t.c0 + cl0) * nsb, nsb, dy);
    alignas(64) int32_t c[3][kTileCols * kTileRows];
    __m512 acc[kTileCols];
    for (int m = 0; m < kTileCols; ++m) acc[m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nsb; ++b) {
        const int8_t * base = panel + kSuperPanel * b;
        SI_TILE_ZERO(0);
        SI_TILE_ZERO(1);
        SI_TILE_ZERO(2);
        if constexpr (Fmt::kSignedB) {
            SI_TILE_SUPER_PAIR(SI_TILE_DOT, 3, a + 256 * b, base, K, 0);
            SI_TILE_SUPER_PAIR(SI_TILE_DOT, 4, a + 256 * b, base, K, 1);
            SI_TILE_SUPER_PAIR(SI_TILE_DOT, 3, a + 256 * b, base, K, 2);
            SI_TILE_SUPER_PAIR(SI_TILE_DOT, 4, a + 256 * b, base, K, 3);
        } else {
            SI_TILE_SUPER_PAIR(SI_TILE_DOT_SU, 3, a + 256 * b, base, K, 0);
            SI_TILE_SUPER_PAIR(SI_TILE_DOT_SU, 4, a + 256 * b, base, K, 1);
            SI_TILE_SUPER_PAIR(SI_TILE_DOT_SU, 3, a + 256 * b, base, K, 2);
            SI_TILE_SUPER_PAIR(SI_TILE_DOT_SU, 4, a + 256 * b, base, K, 3);
        }
        if (b > 0) Fmt::finish(acc, c, reinterpret_cast<const float *>(base - kSuperPanel + 12 * kChunk), dy + 16 * (b - 1));
        SI_TILE_STORE(0, c[0], 4 * kTileRows);
        SI_TILE_STORE(1, c[1], 4 * kTileRows);
        SI_TILE_STORE(2, c[2], 4 * kTileRows);
    }
    Fmt::finish(acc, c, reinterpret_cast<const float *>(panel + kSuperPanel * (nsb - 1) + 12 * kChunk), dy + 16 * (nsb - 1));
    for (int m = 0; m < kTileCols; ++m) _mm512_storeu_ps(t.out + (cl0 + m) * t.out_col_stride, acc[m]);
}

// From 32 columns: the panel of a super-block costs about as much as 30
// columns' products. Q4_K 8192 x 2048 on the Intel Xeon (2 threads, `standin
// matmul --rotate 2`), us, VNNI -> AMX at 16 / 32 / 64 / 128 columns: 1003 /
// 1974 / 3903 / 7821 -> 1149 / 1550 / 2410 / 3976; Q5_K 1194 / 2369 / 4684 /
// 9337 -> 1114 / 1505 / 2258 / 4135; Q6_K (Note [AMX Q6_K]) at 32 / 64 / 128
// columns 2644 / 5827 / 10572 -> 2225 / 2677 / 4603.
template <class Fmt, ggml_type kType>
SI_X8_TARGET void tile_amx_super(const QTile & t) {
    amx_and_rest<kType, 2 * kTileCols>(t, [&](int64_t amx_cols) SI_X8_TARGET {
        const int64_t   nsb   = t.act.K / 256;
        int8_t *        panel = panel_lines(size_t(nsb) * (kSuperPanel / 64 + 1));
        const uint8_t * g0    = reinterpret_cast<const uint8_t *>(t.x);
        Fmt::build(g0, g0 + packed::kRows * int64_t(t.x_stride), nsb, panel);
        static constexpr TileConfig kConfig = super_config();
        const TileScope scope(kConfig);
        float * dy = reinterpret_cast<float *>(panel + kSuperPanel * nsb);
        for (int64_t cl0 = 0; cl0 < amx_cols; cl0 += kTileCols) columns16_super<Fmt>(t, cl0, panel, dy, nsb);
    });
}

// The formats of tile_amx_super: Q4_K and Q5_K (K: KQ4_K or KQ5_K).
template <class K>
struct SuperMinOf : SuperMin {
    SI_X8_TARGET static void build(const uint8_t * g0, const uint8_t * g1, int64_t nsb, int8_t * panel) {
        build_super_panel<K>(g0, g1, nsb, panel);
    }
};

// Note [AMX Q6_K]
// A Q6_K row's super-block is sum_k sc_k * dot(v_k, y_k) over its 16 runs k
// of 16 elements, with int8 scales sc_k and values v = q - 32 in -32..31
// (Note at the top of mul_mat_x8_k.h: isum - 32 * offset there). With sc_k
// in balanced base 7, sc_k = e0 + 7 e1 + 49 e2 with digits e in -3..3, each
// v * e lies in -96..96: a signed byte. The panel holds the three digits'
// products in the lo, hi and min tiles of Note [AMX super-blocks], tdpbssd
// sums each over the super-block, and c0 + 7 c1 + 49 c2 is the integer the
// other levels sum; then acc = fma(float(that), d * dy, acc), their step.
struct SuperQ6_K {
    static constexpr bool kSignedB = true;

    // Each byte of v (signed) times its row's digit (in both 16-bit halves
    // of the row's lane): products in -96..96.
    SI_X8_TARGET static __m512i mul_bytes_signed(__m512i v, __m512i f) {
        const __m512i even = _mm512_mullo_epi16(_mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8), f);
        const __m512i odd  = _mm512_mullo_epi16(_mm512_srai_epi16(v, 8), f);
        return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0x00ff)), _mm512_slli_epi16(odd, 8));
    }

    // r / 7 for 0 <= r < 400 (exact there), per int32 lane.
    SI_X8_TARGET static __m512i div7(__m512i r) { return _mm512_srli_epi32(_mm512_mullo_epi32(r, _mm512_set1_epi32(9363)), 16); }

    SI_X8_TARGET static void build(const uint8_t * g0, const uint8_t * g1, int64_t nsb, int8_t * panel) {
        for (int64_t b = 0; b < nsb; ++b) {
            const uint8_t * b0 = g0 + b * int64_t(X8Q6_K::kBlock8);
            const uint8_t * b1 = g1 + b * int64_t(X8Q6_K::kBlock8);
            int8_t *        out = panel + kSuperPanel * b;
            // digit[e][k]: digit e of run k's scale for the 16 rows, in both
            // 16-bit halves of each row's lane.
            __m512i digit[3][16];
#pragma GCC unroll 16
            for (int k = 0; k < 16; ++k) {
                const __m512i sc = rows16(lane_byte32(load_w(b0 + X8Q6_K::kScales + 32 * (k / 4)), k % 4),
                                          lane_byte32(load_w(b1 + X8Q6_K::kScales + 32 * (k / 4)), k % 4));
                const __m512i r  = _mm512_add_epi32(sc, _mm512_set1_epi32(171));  // 43..298
                const __m512i r1 = div7(r), r2 = div7(r1);
                const __m512i e[3] = {_mm512_sub_epi32(r, _mm512_mullo_epi32(r1, _mm512_set1_epi32(7))),
                                      _mm512_sub_epi32(r1, _mm512_mullo_epi32(r2, _mm512_set1_epi32(7))), r2};
                for (int i = 0; i < 3; ++i) {
                    const __m512i x = _mm512_sub_epi32(e[i], _mm512_set1_epi32(3));
                    digit[i][k] = _mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(x, 16));
                }
            }
#pragma GCC unroll 8
            for (int j = 0; j < 8; ++j) {
                const int h = j / 4, tt = j % 4;
                int8_t * row = out + kChunk * (j / 2) + 64 * 8 * (j % 2);
#pragma GCC unroll 8
                for (int w = 0; w < 8; ++w) {
                    const __m256i q0 = q6_codes(b0 + 32 * (16 * h + 8 * (tt % 2) + w), b0 + X8Q6_K::kQh + 32 * (8 * h + w), tt);
                    const __m256i q1 = q6_codes(b1 + 32 * (16 * h + 8 * (tt % 2) + w), b1 + X8Q6_K::kQh + 32 * (8 * h + w), tt);
                    const __m512i v  = _mm512_sub_epi8(rows16(q0, q1), _mm512_set1_epi8(32));
                    const int     k  = 2 * j + w / 4;
                    for (int i = 0; i < 3; ++i) _mm512_store_si512(row + 4 * i * kChunk + 64 * w, mul_bytes_signed(v, digit[i][k]));
                }
            }
            float * d = reinterpret_cast<float *>(out + 12 * kChunk);
            _mm256_store_ps(d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b0 + X8Q6_K::kD))));
            _mm256_store_ps(d + 8, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b1 + X8Q6_K::kD))));
        }
    }

    SI_X8_TARGET static void finish(__m512 * acc, const int32_t (*c)[kTileCols * kTileRows], const float * d, const float * dy) {
        const __m512 dw = _mm512_load_ps(d);
#pragma GCC unroll 16
        for (int m = 0; m < kTileCols; ++m) {
            const __m512i c1 = _mm512_load_si512(c[1] + kTileRows * m), c2 = _mm512_load_si512(c[2] + kTileRows * m);
            const __m512i isum = _mm512_add_epi32(_mm512_load_si512(c[0] + kTileRows * m),
                                                  _mm512_add_epi32(_mm512_mullo_epi32(c1, _mm512_set1_epi32(7)),
                                                                   _mm512_mullo_epi32(c2, _mm512_set1_epi32(49))));
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(dy[m])), acc[m]);
        }
    }
};

} // namespace

// Tiles of up to 128 columns, so that a panel serves up to 8 runs of 16
// columns. Q8_0 8192 x 2048 on the Intel Xeon (2 threads, `standin matmul
// --rotate 2`): at 64 columns 2794 us in the driver's 32-column tiles, 2284
// in tiles of 64; at 128 columns 4566-4594 in tiles of 64, 4065-4084 in
// tiles of 128.
extern const int64_t x8_tile_amx_cols = 128;

QTileFn x8_tile_amx(ggml_type type) {
    switch (type) {
#define SI_X(name, L) case GGML_TYPE_##name: return tile_amx<L, GGML_TYPE_##name>;
        SI_X8_GROUP_FORMATS(SI_X)
#undef SI_X
        case GGML_TYPE_Q4_K: return tile_amx_super<SuperMinOf<KQ4_K>, GGML_TYPE_Q4_K>;
        case GGML_TYPE_Q5_K: return tile_amx_super<SuperMinOf<KQ5_K>, GGML_TYPE_Q5_K>;
        case GGML_TYPE_Q6_K: return tile_amx_super<SuperQ6_K, GGML_TYPE_Q6_K>;
        default: return nullptr;
    }
}

} // namespace standin::kernels::host::mm
