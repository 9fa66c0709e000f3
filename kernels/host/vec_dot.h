// What mul_mat.cpp (the MUL_MAT driver) and mul_mat_q.cpp (the quantized
// weight kernels) share: the activation format and the tile entry points.
// For kernels/host only (built for x86-64-v3: the inline helpers use AVX).
//
// Note [activation blocks]
// For a block-quantized weight matrix, each src1 row (a column of the product)
// is quantized once per op to int8 with one float scale per group:
// q = round(x * 127 / absmax), d ~ absmax / 127. The dot product of a weight
// sub-block of 32 with the matching activation bytes is then an integer dot
// product (AVX2 maddubs/madd) times the scales. The rounding and the scales are
// exactly those of ggml-cpu's Q8_0/Q8_1/Q8_K activations, so the integer sums
// are the ones ggml-cpu computes and results differ from it only by the order
// of float additions (for Q4_0/Q5_0/Q8_0 matrix-vector products, not even that:
// test_quants.cpp checks they are bit-identical to ggml-cpu's vec_dot; packed
// Q4_0 weights give the bits of ggml-cpu's own repacked Q4_0, mul_mat_x8.h). Any
// other rounding makes quantized models drift from ggml-cpu: a rounding flip in
// one layer's activations moves the next layer's, and the logits end up ~1e-4
// apart in NMSE instead of identical.
// The packed kernels (Note [packed weights], packed.h) take the same
// activations plus q8sum = 8 * sum(q) per 32-group, as int32: the Q4_0 offset
// of 8 is then one integer subtraction per block for 8 rows at once (packed
// Q4_K, Q5_K and Q6_K need nothing more than the 256 format's 16-element sums).
// Two group sizes, as in ggml (quant::act_group, from the type list in quants.h):
//   32  for Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 (one weight block, one group) and the
//       32-group types in integer form (IQ4_NL MXFP4 NVFP4 Q1_0 Q2_0), with
//       s = d * sum(q) per group for the minimum of Q4_1/Q5_1, and 8 times the
//       sums of adjacent pairs of q (16 int16 per group) for the offset of
//       Q4_0/Q5_0, subtracted from maddubs' pair sums in 16-bit;
//   256 for the K formats and IQ4_XS (one super-block, one group), with the int16 sums of
//       q per 16 elements, so that a super-block needs one float multiply-add
//       and its minimum/offset terms become one more integer dot product.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace standin::kernels::host::mm {

// Quantized src1 rows. Column c's K int8 values start at q + c * K, its
// scales (one per group) at d + c * (K / group), the 32-group sums s at
// s + c * (K / 32), and its integer sums at sums + c * (K / 2): for the 32
// format the 8x pair sums, for the 256 format the 16-element sums (K / 16 used);
// for the 32 format q8sum + c * (K / 32) holds 8 * sum(q) per group.
struct Act {
    const int8_t *  q;
    const float *   d;
    const float *   s;
    const int16_t * sums;
    int64_t         K;
    const int32_t * q8sum = nullptr;
    // Optional, for the 512-bit packed kernels (Note [column pairs],
    // mul_mat_x8_pairs.h): the codes of column pairs {2P, 2P + 1} interleaved
    // by 4-byte word, block b of pair P at qpair + (P * K / 32 + b) * 16.
    const int32_t * qpair = nullptr;
};

// Whether the packed kernels of this weight type at the process's level
// read Act::qpair (then every product with two or more columns fills it).
bool x8_wants_pairs(ggml_type type);

// Fills qpair (Act's layout) for pairs [p0, p1) from the codes q of K per column.
void interleave_pairs(const int8_t * q, int64_t K, int64_t p0, int64_t p1, int32_t * qpair);

// Quantizes K floats (K a multiple of the group) into one activation column.
void quantize_act_32(const float * x, int64_t K, int8_t * q, float * d, float * s, int16_t * p8, int32_t * q8sum);
void quantize_act_256(const float * x, int64_t K, int8_t * q, float * d, int16_t * bs);

// One tile of dst: rows [0, nrows) of the weight slice starting at x (row
// stride x_stride bytes) times activation columns [c0, c0 + ncols), written to
// out + c * out_col_stride + r (c counted from c0, in floats).
struct QTile {
    const char * x;
    size_t       x_stride;
    int64_t      nrows;
    Act          act;
    int64_t      c0;
    int64_t      ncols;
    float *      out;
    int64_t      out_col_stride;
};

using QTileFn = void (*)(const QTile & tile);

// The tile kernel for a weight type, or nullptr when there is none.
QTileFn qtile_for(ggml_type type);

// The tile kernel for a type in integer form (SI_QUANT_INT_FORM_TYPES,
// mul_mat_qd.cpp), or nullptr; qtile_for falls back on it.
QTileFn qtile_int_form_for(ggml_type type);

// The tile kernel for weights packed in groups of 8 rows (packed.h) at the
// process's instruction-set level (isa.h), or nullptr when there is none. Its
// tiles start on a group and nrows is a multiple of 8.
QTileFn x8_tile_for(ggml_type type);

// The most columns x8_tile_for(type)'s tiles should take (0: the driver's
// default): the AMX kernels build a panel of a tile's rows first, which
// serves every 16 columns of the tile (mul_mat_x8_amx.cpp).
int64_t x8_tile_cols(ggml_type type);

// The several-column tile kernel of a grid i-quant or ternary type
// (grid_decode.h) at the process's level, which decodes the tile's rows into
// groups of 8 first (mul_mat_x8_grid.h); nullptr for any other type. Any
// tile shape.
QTileFn x8_grid_tile_for(ggml_type type);

// Whether x8_grid_tile_for(type) reads Act::qpair at the process's level.
bool x8_grid_wants_pairs(ggml_type type);

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

} // namespace standin::kernels::host::mm
