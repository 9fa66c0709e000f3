// What the AMX tile kernels of the host device share (mul_mat_x8_amx.cpp:
// the 32-element formats; mul_mat_x8_amx_super.cpp: the super-block
// formats): the tile configuration and its scope, the tile instructions, the
// panel memory and the split of a tile between AMX and the VNNI kernels.
// Each includer defines SI_X8_TARGET as the AMX level's target first (as the
// other levels' files do for mul_mat_x8.h), so everything here is compiled for
// that level and has internal linkage.
#pragma once

#include "kernels/host/mul_mat_x8_lowbit.h"

#include <cstring>
#include <vector>

namespace standin::kernels::host::mm {

QTileFn x8_tile_vnni(ggml_type type);          // mul_mat_x8_vnni.cpp
QTileFn x8_grid_decoded_vnni(ggml_type type);  // mul_mat_x8_grid_vnni.cpp
QTileFn x8_tile_amx_super(ggml_type type);     // mul_mat_x8_amx_super.cpp

namespace {

constexpr int kTileCols = 16;                 // activation columns per A tile
constexpr int kTileRows = 2 * packed::kRows;  // weight rows per B tile

struct alignas(64) TileConfig {
    uint8_t  palette;
    uint8_t  start_row;
    uint8_t  reserved[14];
    uint16_t colsb[16];
    uint8_t  rows[16];
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

// Tile instructions on tile registers given as template arguments (the
// register is part of the instruction; %c prints the number bare). The
// "memory" clobbers order a tile load after the stores that built its source
// and the scalar loads after a tile store.
template <int kT>
SI_X8_TARGET inline void tile_load(const void * base, int64_t stride) {
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(stride), "i"(kT) : "memory");
}
template <int kT>
SI_X8_TARGET inline void tile_store(void * base, int64_t stride) {
    __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(stride), "i"(kT) : "memory");
}
template <int kT>
SI_X8_TARGET inline void tile_zero() {
    __asm__ volatile("tilezero %%tmm%c0" ::"i"(kT) : "memory");
}
// C += A (signed bytes) times B: signed bytes (tdpbssd) or unsigned (tdpbsud).
template <bool kSignedB, int kC, int kA, int kB>
SI_X8_TARGET inline void tile_dot() {
    if constexpr (kSignedB) {
        __asm__ volatile("tdpbssd %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(kC), "i"(kA), "i"(kB) : "memory");
    } else {
        __asm__ volatile("tdpbsud %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(kC), "i"(kA), "i"(kB) : "memory");
    }
}

// Loads the tile configuration cfg for the scope of one call and puts
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

// This thread's panel memory, at least `lines` 64-byte lines.
int8_t * panel_lines(size_t lines) {
    struct alignas(64) Line {
        int8_t bytes[64];
    };
    thread_local std::vector<Line> buf;
    if (buf.size() < lines) buf.resize(lines);
    return reinterpret_cast<int8_t *>(buf.data());
}

// The columns a tile runs on AMX (whole runs of 16, in tiles of 16 rows and
// at least kMinCols columns, so that the panel pays), and the rest on the
// VNNI level's kernel `rest_fn`.
template <int kMinCols, class Amx>
SI_X8_TARGET void amx_and_rest(const QTile & t, QTileFn rest_fn, Amx amx) {
    const int64_t amx_cols = t.nrows == kTileRows && t.ncols >= kMinCols ? t.ncols / kTileCols * kTileCols : 0;
    if (amx_cols > 0) amx(amx_cols);
    if (amx_cols < t.ncols) {
        QTile rest = t;
        rest.c0 += amx_cols;
        rest.ncols -= amx_cols;
        rest.out += amx_cols * t.out_col_stride;
        rest_fn(rest);
    }
}

// Column m's scale of activation group g at dy[16 * g + m], for the 16
// columns whose first scale is at d (`groups` per column).
SI_X8_TARGET inline void column_scales(const float * d, int64_t groups, float * dy) {
    const __m512i by_column = _mm512_mullo_epi32(_mm512_set1_epi32(int32_t(groups)),
                                                 _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    for (int64_t g = 0; g < groups; ++g) _mm512_store_ps(dy + 16 * g, _mm512_i32gather_ps(by_column, d + g, 4));
}

} // namespace

} // namespace standin::kernels::host::mm
