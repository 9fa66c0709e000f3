// Packed-weight MUL_MAT tiles on AMX (the avx512-amx level, isa.h), for the
// 32-element formats Q4_0, Q8_0, IQ4_NL and MXFP4 (Note [AMX tiles]), and the
// table of the level's kernels; the super-block formats Q2_K..Q6_K and IQ4_XS
// are mul_mat_x8_amx_super.cpp's (Note [AMX super-blocks]). The layouts are
// packed.h's (Note [packed weights]).
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
#include "kernels/host/mul_mat_x8_amx.h"

namespace standin::kernels::host::mm {

namespace {

constexpr int kPanelBlock = 8 * 64;  // bytes of a block in the panel: 8 rows of 64

// The tile registers: a block of even index uses C 0, A 2, B 4, an odd one
// C 1, A 3, B 5.
constexpr TileConfig blocks_config() {
    TileConfig c{};
    c.palette = 1;
    for (int p = 0; p < 2; ++p) {
        c.rows[0 + p]  = kTileCols;  // C: 16 columns x 16 int32
        c.colsb[0 + p] = 4 * kTileRows;
        c.rows[2 + p]  = kTileCols;  // A: 16 columns x 32 codes
        c.colsb[2 + p] = 32;
        c.rows[4 + p]  = 8;          // B: 8 rows of 4 codes x 16 weight rows
        c.colsb[4 + p] = 4 * kTileRows;
    }
    return c;
}

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

// acc[m] (16 rows of column m) += float(C[m]) * (d_w * d_y[m]) for one
// block; dy: the 16 columns' scales of the block, side by side.
SI_X8_TARGET inline void scale_block(__m512 * acc, const int32_t * c, __m512 dw, const float * dy) {
#pragma GCC unroll 16
    for (int m = 0; m < kTileCols; ++m) {
        const __m512 sums = _mm512_cvtepi32_ps(_mm512_load_si512(c + kTileRows * m));
        acc[m] = _mm512_fmadd_ps(sums, _mm512_mul_ps(dw, _mm512_set1_ps(dy[m])), acc[m]);
    }
}

// Blocks b and b + 1's products, into C 0 and C 1.
SI_X8_TARGET inline void block_pair(const int8_t * a, const int8_t * panel, int64_t K, int64_t b) {
    tile_load<2>(a + 32 * b, K);
    tile_load<4>(panel + kPanelBlock * b, 64);
    tile_zero<0>();
    tile_dot<true, 0, 2, 4>();
    tile_load<3>(a + 32 * (b + 1), K);
    tile_load<5>(panel + kPanelBlock * (b + 1), 64);
    tile_zero<1>();
    tile_dot<true, 1, 3, 5>();
}

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
        block_pair(a, panel, K, b);
        if (b > 0) {
            scale_block(acc, c[0], _mm512_load_ps(sc + 16 * (b - 2)), dy + 16 * (b - 2));
            scale_block(acc, c[1], _mm512_load_ps(sc + 16 * (b - 1)), dy + 16 * (b - 1));
        }
        tile_store<0>(c[0], 4 * kTileRows);
        tile_store<1>(c[1], 4 * kTileRows);
    }
    if (b > 0) {
        scale_block(acc, c[0], _mm512_load_ps(sc + 16 * (b - 2)), dy + 16 * (b - 2));
        scale_block(acc, c[1], _mm512_load_ps(sc + 16 * (b - 1)), dy + 16 * (b - 1));
    }
    if (b < nb) {  // an odd block count's last
        tile_load<2>(a + 32 * b, K);
        tile_load<4>(panel + kPanelBlock * b, 64);
        tile_zero<0>();
        tile_dot<true, 0, 2, 4>();
        tile_store<0>(c[0], 4 * kTileRows);
        scale_block(acc, c[0], _mm512_load_ps(sc + 16 * b), dy + 16 * b);
    }
    for (int m = 0; m < kTileCols; ++m) _mm512_storeu_ps(t.out + (cl0 + m) * t.out_col_stride, acc[m]);
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

template <class F, ggml_type kType>
SI_X8_TARGET void tile_amx(const QTile & t) {
    amx_and_rest<kTileCols>(t, x8_tile_vnni(kType), [&](int64_t amx_cols) SI_X8_TARGET {
        const int64_t   nb = t.act.K / 32;
        const Panel     p  = panel_for(nb);
        const uint8_t * g0 = reinterpret_cast<const uint8_t *>(t.x);
        build_panel<F>(g0, g0 + packed::kRows * int64_t(t.x_stride), nb, p.codes, p.scales);
        static constexpr TileConfig kConfig = blocks_config();
        const TileScope scope(kConfig);
        for (int64_t cl0 = 0; cl0 < amx_cols; cl0 += kTileCols) columns16(t, cl0, p.codes, p.scales, p.col_scales, nb);
    });
}

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
        default: return x8_tile_amx_super(type);
    }
}

} // namespace standin::kernels::host::mm
