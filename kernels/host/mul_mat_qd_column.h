// One activation column times NVFP4, Q1_0 or Q2_0 weight rows (matrix-vector,
// decoding), where their weights are not packed: the integer form of
// mul_mat_qd.cpp, without a decoded block stored and read back. Written once
// and included by one file per instruction-set level, as mul_mat_x8.h is:
// mul_mat_qd.cpp (AVX2, SI_X8_TARGET empty) and mul_mat_qd_vnni.cpp
// (AVX-512 VNNI), each with its own Dot per type.
//
// Per 32 elements (one activation group) of a row, the int32 lane l holds
// the integer dot product of elements 4l..4l+3 with the activation codes,
// and the float steps are those of dot_groups (mul_mat_qd.cpp) for a group
// of 32:
//     acc = fma(fma(float(p), s, 0), dy, acc)
// with s the 8 lane scales of the group's two runs of 16 and dy the group's
// activation scale, one chain per row, summed by hsum at the end. So a
// column gives the same bits here as among several columns, at every level
// (tests/kernels/test_quants.cpp, IntFormTypesSameBitsAloneAndAmongColumns).
//
// Dot::kRows rows run side by side, each with its own chain: one row's
// chain is one fma latency per 32 elements, which alone held Q1_0 at 567 us
// for 2048 x 8192 on a Zen 4; the activation loads are shared by the rows.
// Dot also gives Block and block(b, y, dy, acc): acc after one weight block
// times its activation codes y and group scales dy.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/common/quants.h"
#include "kernels/host/vec_dot.h"

#ifndef SI_X8_TARGET
#error "define SI_X8_TARGET before including mul_mat_qd_column.h"
#endif

namespace standin::kernels::host::mm {

namespace {

// quant::ue4m3_half of every code, filled from it once at load (it is not
// constexpr): a load in place of its branches and conversions, with its
// values by construction.
struct Ue4m3Table {
    alignas(64) float v[256];
};
inline Ue4m3Table make_ue4m3_table() {
    Ue4m3Table t{};
    for (int x = 0; x < 256; ++x) t.v[x] = quant::ue4m3_half(uint8_t(x));
    return t;
}
const Ue4m3Table kUe4m3Half = make_ue4m3_table();

// dot_groups' float steps for one group of 32 (see the header comment).
SI_X8_TARGET inline __m256 group_step(__m256 acc, __m256i p, __m256 s, const float * dy) {
    return _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, _mm256_setzero_ps()), _mm256_broadcast_ss(dy),
                           acc);
}

// Rows [r0, r0 + R) of the tile times its one column.
template <class Dot, int R>
SI_X8_TARGET void column_rows(const QTile & t, int64_t r0) {
    using B = typename Dot::Block;
    const int64_t  K  = t.act.K;
    const int8_t * y  = t.act.q + t.c0 * K;
    const float *  dy = t.act.d + t.c0 * (K / 32);
    const B *      x[R];
    __m256         acc[R];
    for (int r = 0; r < R; ++r) {
        x[r]   = reinterpret_cast<const B *>(t.x + (r0 + r) * t.x_stride);
        acc[r] = _mm256_setzero_ps();
    }
    for (int64_t ib = 0; ib < K / B::kElems; ++ib) {
        for (int r = 0; r < R; ++r) {
            acc[r] = Dot::block(x[r][ib], y + ib * B::kElems, dy + ib * (B::kElems / 32), acc[r]);
        }
    }
    for (int r = 0; r < R; ++r) t.out[r0 + r] = hsum(acc[r]);
}

// Dot::kRows rows side by side, then single rows.
template <class Dot>
SI_X8_TARGET void tile_column(const QTile & t) {
    int64_t r = 0;
    for (; r + Dot::kRows <= t.nrows; r += Dot::kRows) column_rows<Dot, Dot::kRows>(t, r);
    for (; r < t.nrows; ++r) column_rows<Dot, 1>(t, r);
}

} // namespace

} // namespace standin::kernels::host::mm
