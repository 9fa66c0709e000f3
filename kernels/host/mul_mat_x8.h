// The MUL_MAT tile kernels for packed weights in blocks of 32, Q4_0, Q8_0,
// IQ4_NL and MXFP4 (Note [packed weights], packed.h), written once over an
// instruction-set "Ops" and included (through mul_mat_x8_k.h and
// mul_mat_x8_lowbit.h, the super-block formats') by one file per level:
// mul_mat_x8.cpp (AVX2) and mul_mat_x8_vnni.cpp (AVX-512 VNNI). Everything here has internal linkage
// and carries SI_X8_TARGET, which each includer defines before including it,
// so each file's copy is compiled for its own level and no out-of-line copy of
// an AVX-512 function can be merged into the AVX2 code (isa.h).
//
// One call computes 8 weight rows (one group) times C activation columns. Per
// block, the group's words are loaded once; each word holds 4 quant bytes of
// the 8 rows, and Ops::dot_* multiplies it with the column's 4 matching
// activation bytes broadcast to every lane, leaving row r's partial sum in
// lane r. After the block's words, lane r holds row r's integer dot product
// (minus 8 * sum(q) for Q4_0's offset), and one convert and one multiply-add
// with the 8 scales times the column's scale accumulate the block for all 8
// rows; the result is stored as 8 consecutive floats. The float operations per
// row are those of ggml-cpu's interleaved Q4_0 kernel (its "repack" buffer):
// acc = fma(float(isum), d_w * d_y, acc), block by block. IQ4_NL and MXFP4
// look their nibbles up in a table of 16 signed levels (pshufb) and are then
// multiplied as Q8_0's signed bytes, or, where the level allows, as
// unsigned bytes with an offset like Q4_0's (group_x8).
//
// Ops: dot_u(s, x, y) accumulates unsigned x times signed y (Q4_0 nibbles),
// dot_s(s, |x|, x, y) signed x times signed y (Q8_0), finish_u/finish_s turn
// the accumulator into 8 int32 sums, scale_k(s, sc, j) turns dot_u's
// accumulator into 8 int32 sums times the signed byte j of each lane of sc
// (the super-block formats), sum_words(m) is how many words of codes 0..m
// dot_u may sum before the accumulator is widened (scale_k, finish_u).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/quants.h"
#include "kernels/host/packed.h"
#include "kernels/host/vec_dot.h"

#ifndef SI_X8_TARGET
#error "define SI_X8_TARGET before including mul_mat_x8.h"
#endif

namespace standin::kernels::host::mm {

namespace {

// How a 32-element format's words read (Note [packed weights]): nibbles
// 0..15 standing for -8..7 (Q4_0), signed bytes (Q8_0), or nibbles indexing
// a table of 16 signed levels (IQ4_NL, MXFP4).
enum class Form { nibble_offset, signed_bytes, levels };

struct X8Q4_0 {
    static constexpr size_t kBlock8 = packed::kRows * 18;  // 8 scales, 4 words
    static constexpr size_t kQuants = 2 * packed::kRows;
    static constexpr int    kWords  = 4;
    static constexpr size_t kAhead  = 32 * kBlock8;  // Note [one-column prefetch]
    static constexpr Form   kForm   = Form::nibble_offset;
};

struct X8Q8_0 {
    static constexpr size_t kBlock8 = packed::kRows * 34;  // 8 scales, 8 words
    static constexpr size_t kQuants = 2 * packed::kRows;
    static constexpr int    kWords  = 8;
    static constexpr size_t kAhead  = 12 * kBlock8;  // Note [one-column prefetch]
    static constexpr Form   kForm   = Form::signed_bytes;
};

struct X8IQ4_NL {
    static constexpr size_t kBlock8 = packed::kRows * 18;  // 8 scales, 4 words (Q4_0's)
    static constexpr size_t kQuants = 2 * packed::kRows;
    static constexpr int    kWords  = 4;
    static constexpr size_t kAhead  = 32 * kBlock8;  // Note [one-column prefetch]
    static constexpr Form   kForm   = Form::levels;
    static constexpr quant::Table16 kLevels = quant::kIQ4NLLevels;
};

struct X8MXFP4 {
    static constexpr size_t kBlock8 = packed::kRows * 17;  // 8 one-byte E8M0 scales, 4 words
    static constexpr size_t kQuants = packed::kRows;
    static constexpr int    kWords  = 4;
    static constexpr size_t kAhead  = 32 * kBlock8;  // Note [one-column prefetch]
    static constexpr Form   kForm   = Form::levels;
    static constexpr quant::Table16 kLevels = quant::kE2M1Twice;
};

// Note [one-column prefetch]
// At one column a thread streams its groups' block8s once, and the hardware
// prefetchers alone do not keep enough of them in flight. Measured on an
// Intel Xeon with AVX-512 and AMX (2 threads, 480 MiB of L3), one column of
// 8192 x 2048 rotated over 16 copies (`standin matmul --rotate 16`, 150 MB:
// from L3): Q4_0 415-500 us, IQ4_NL 455-486, MXFP4 557 (in L2: 175). Each
// block8's lines are prefetched into L2 (prefetcht1) kAhead bytes ahead, 32
// block8s of the 4-bit formats (4.3-4.5 KiB): Q4_0 250-276 us, IQ4_NL
// 272-282, MXFP4 272-284; 16 block8s gave Q4_0 326-338, and prefetcht0 less
// than prefetcht1 at every distance. From memory (128256 x 2048 rotated over
// 6, 890 MB) Q4_0 read 23 GB/s one block8 ahead and 27-28 from 16 to 64
// ahead alike (a plain two-thread read: 29-31 GB/s). Q8_0 reads twice the
// bytes per block and gained only nearer: 12 block8s (3264 bytes; 2304-3456:
// 523-578 us from L3 against 574-609; 4608 and more: as without; from memory
// one block8 ahead 26 GB/s, 16 to 64 ahead 28-29). In L2 the times are those
// without. Past the tensor's end it touches the next bytes in the address
// space, which a prefetch may do (it never faults).
// The kBytes of a block8 kAhead bytes past blk, into L2 (this note's and
// Note [Q6_K prefetch]'s).
template <size_t kBytes, size_t kAhead>
SI_X8_TARGET inline void prefetch_block8(const uint8_t * blk) {
    for (size_t l = 0; l < kBytes; l += 64) _mm_prefetch(reinterpret_cast<const char *>(blk + kAhead + l), _MM_HINT_T1);
}

// The 8 rows' weight scales of a block8 as floats: half precision, or
// MXFP4's E8M0 halved (quant::e8m0_half: 2^(e - 128), and for e < 2 the
// subnormals 2^21 << e as bits).
template <class F>
SI_X8_TARGET inline __m256 block_scales(const uint8_t * blk) {
    if constexpr (std::is_same_v<F, X8MXFP4>) {
        const __m256i e    = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(blk)));
        const __m256i norm = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
        const __m256i sub  = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
        return _mm256_castsi256_ps(_mm256_blendv_epi8(norm, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
    } else {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(blk)));
    }
}

// A levels format's table in both 128-bit halves, for pshufb; with `offset`
// each level plus 128 (as unsigned bytes).
template <class F>
SI_X8_TARGET inline __m256i level_table(bool offset) {
    const __m256i t = _mm256_set_epi64x(int64_t(F::kLevels.hi), int64_t(F::kLevels.lo), int64_t(F::kLevels.hi),
                                        int64_t(F::kLevels.lo));
    return offset ? _mm256_add_epi8(t, _mm256_set1_epi8(int8_t(-128))) : t;
}

SI_X8_TARGET inline __m256i bcast4(const int8_t * p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// An empty asm that claims to change v: the accumulation stays one chain per
// column in one register. Without it GCC reassociates the block's integer
// adds into a tree with a live temporary per word and column, and spills half
// of them (the 4-column Q8_0 kernel ran at a third of its speed).
SI_X8_TARGET inline void chain(__m256i & v) { __asm__("" : "+x"(v)); }

SI_X8_TARGET inline __m256i load_w(const uint8_t * p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
}

// Activation columns [cl0, cl0 + C) of a tile: their codes, and their scales
// of `group` elements each (32 or 256, Note [activation blocks]).
template <int C>
struct Cols {
    const int8_t * q[C];
    const float *  d[C];
    SI_X8_TARGET Cols(const QTile & t, int64_t cl0, int64_t group) {
        for (int c = 0; c < C; ++c) {
            q[c] = t.act.q + (t.c0 + cl0 + c) * t.act.K;
            d[c] = t.act.d + (t.c0 + cl0 + c) * (t.act.K / group);
        }
    }
};

// Group (8 rows from tile row r0) times columns [cl0, cl0 + C) of the tile.
template <class Ops, class F, int C>
SI_X8_TARGET void group_x8(const QTile & t, int64_t r0, int64_t cl0) {
    const uint8_t * g  = reinterpret_cast<const uint8_t *>(t.x) + r0 * int64_t(t.x_stride);
    const int64_t   nb = t.act.K / 32;
    const Cols<C>   y(t, cl0, 32);
    const int32_t * ys[C];
    for (int c = 0; c < C; ++c) ys[c] = t.act.q8sum + (t.c0 + cl0 + c) * nb;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();

    // Levels are taken plus 128 where a lane sums unsigned bytes up to 255
    // exactly (VNNI: Ops::sum_words), and 16 * q8sum = 128 * sum(q) is
    // taken off per block; else (AVX2) signed by signed like Q8_0's bytes.
    constexpr bool kLevelOffset = F::kForm == Form::levels && Ops::sum_words(255) > 0;
    __m256i levels = _mm256_setzero_si256();
    if constexpr (F::kForm == Form::levels) levels = level_table<F>(kLevelOffset);

    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * blk = g + b * int64_t(F::kBlock8);
        const uint8_t * qw  = blk + F::kQuants;
        if constexpr (C == 1) prefetch_block8<F::kBlock8, F::kAhead>(blk);  // Note [one-column prefetch]
        __m256i s[C];
        for (int c = 0; c < C; ++c) s[c] = _mm256_setzero_si256();
        if constexpr (F::kForm == Form::nibble_offset || kLevelOffset) {
#pragma GCC unroll 4
            for (int w = 0; w < F::kWords; ++w) {
                const __m256i raw = load_w(qw + 32 * w);
                __m256i lo = _mm256_and_si256(raw, m4);                         // elements 4w..4w+3
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);   // elements 16+4w..
                if constexpr (kLevelOffset) {
                    lo = _mm256_shuffle_epi8(levels, lo);
                    hi = _mm256_shuffle_epi8(levels, hi);
                }
#pragma GCC unroll 4
                for (int c = 0; c < C; ++c) {
                    s[c] = Ops::dot_u(s[c], lo, bcast4(y.q[c] + 32 * b + 4 * w));
                    chain(s[c]);
                    s[c] = Ops::dot_u(s[c], hi, bcast4(y.q[c] + 32 * b + 16 + 4 * w));
                    chain(s[c]);
                }
            }
        } else if constexpr (F::kForm == Form::levels) {
#pragma GCC unroll 4
            for (int w = 0; w < F::kWords; ++w) {
                const __m256i raw = load_w(qw + 32 * w);
                const __m256i v[2] = {_mm256_shuffle_epi8(levels, _mm256_and_si256(raw, m4)),
                                      _mm256_shuffle_epi8(levels, _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4))};
#pragma GCC unroll 2
                for (int h = 0; h < 2; ++h) {
                    const __m256i va = _mm256_abs_epi8(v[h]);
#pragma GCC unroll 4
                    for (int c = 0; c < C; ++c) {
                        s[c] = Ops::dot_s(s[c], va, v[h], bcast4(y.q[c] + 32 * b + 16 * h + 4 * w));
                        chain(s[c]);
                    }
                }
            }
        } else {
#pragma GCC unroll 8
            for (int w = 0; w < F::kWords; ++w) {
                const __m256i v  = load_w(qw + 32 * w);
                const __m256i va = _mm256_abs_epi8(v);
#pragma GCC unroll 4
                for (int c = 0; c < C; ++c) {
                    s[c] = Ops::dot_s(s[c], va, v, bcast4(y.q[c] + 32 * b + 4 * w));
                    chain(s[c]);
                }
            }
        }
        const __m256 dx = block_scales<F>(blk);
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
            __m256i isum;
            if constexpr (F::kForm == Form::nibble_offset) {
                isum = _mm256_sub_epi32(Ops::finish_u(s[c]), _mm256_set1_epi32(ys[c][b]));
            } else if constexpr (kLevelOffset) {
                isum = _mm256_sub_epi32(Ops::finish_u(s[c]), _mm256_set1_epi32(16 * ys[c][b]));
            } else {
                isum = Ops::finish_s(s[c]);
            }
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dx, _mm256_set1_ps(y.d[c][b])), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(t.out + (cl0 + c) * t.out_col_stride + r0, acc[c]);
}

// Column runs of 4, then 2 and 1; every group of the tile for each run, so the
// run's activations stay in L1 while the tile's weights stream past.
// group(cols, r, c) computes the group at tile row r for columns [c, c + cols).
template <class Group>
SI_X8_TARGET inline void column_runs(const QTile & t, Group group) {
    int64_t c = 0;
    for (; c + 4 <= t.ncols; c += 4) {
        for (int64_t r = 0; r < t.nrows; r += packed::kRows) group(std::integral_constant<int, 4>{}, r, c);
    }
    for (; c + 2 <= t.ncols; c += 2) {
        for (int64_t r = 0; r < t.nrows; r += packed::kRows) group(std::integral_constant<int, 2>{}, r, c);
    }
    for (; c < t.ncols; ++c) {
        for (int64_t r = 0; r < t.nrows; r += packed::kRows) group(std::integral_constant<int, 1>{}, r, c);
    }
}

template <class Ops, class F>
SI_X8_TARGET void tile_x8(const QTile & t) {
    column_runs(t, [&](auto cols, int64_t r, int64_t c) SI_X8_TARGET { group_x8<Ops, F, decltype(cols)::value>(t, r, c); });
}

} // namespace

} // namespace standin::kernels::host::mm
