// The grid i-quants' several-column tiles (mul_mat_x8_grid.h) at the AVX-512
// VNNI level: the decoded values plus 128 against the activation codes by
// vpdpbusd, two columns a vector (Note [column pairs], mul_mat_x8_pairs.h),
// a column left over on 256 bits. Apart from mul_mat_x8_vnni.cpp so that the
// two largest kernel files compile side by side.
// Only reached when isa::level() says the CPU has it (mul_mat_x8.cpp).
//
// Test: tests/kernels/test_quants.cpp (every level the CPU has, against the
// one-column kernel bit for bit and a double-precision product).
// GCC 12's AVX-512 intrinsics: as in mul_mat_x8_vnni.cpp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define SI_X8_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#include "kernels/host/mul_mat_x8_grid.h"
#include "kernels/host/mul_mat_x8_pairs.h"

namespace standin::kernels::host::mm {

namespace {

template <class B>
SI_X8_TARGET void tile_grid_vnni(const QTile & t) {
    static_assert(KPairs<1>::sum_words(255) > 0 && OpsVnni::sum_words(255) > 0, "both widths take the offset form");
    tile_grid_x8<B>(t, true, [](const QTile & d) SI_X8_TARGET { tile_k_pairs<BodyGrid<B>>(d); });
}

} // namespace

// The column loop of this level over a tile already decoded (X8Grid groups,
// the values plus 128): where the AMX kernels leave columns to this level.
QTileFn x8_grid_decoded_vnni(ggml_type type) {
    switch (type) {
#define SI_X(type, Block) case type: return tile_k_pairs<BodyGrid<Block>>;
        SI_HOST_GRID_TYPES(SI_X)
#undef SI_X
        default: return nullptr;
    }
}

QTileFn x8_grid_tile_vnni(ggml_type type) {
    switch (type) {
#define SI_X(type, Block) case type: return tile_grid_vnni<Block>;
        SI_HOST_GRID_TYPES(SI_X)
#undef SI_X
        default: return nullptr;
    }
}

} // namespace standin::kernels::host::mm
