// The several-column MUL_MAT tile kernel of the grid i-quants and the
// ternary types (grid_decode.h), on the widths and "Ops" of the packed
// kernels (mul_mat_x8_k.h, which this includes; SI_X8_TARGET as there).
//
// A row of one super-block is
//     f * sum_k m_k * dot(v_k, y_k)
// over its 16 runs k of 16 elements, v the signed values (|v| <= 62), m_k
// small integers (odd, or 1 for the ternary types) and f a float factor
// (decode_grid). The weights are not packed at upload (the file's bytes are
// 1.5 to 3.4 bits a value, the grids looked up by index): instead a tile
// decodes its rows once into groups of 8 in the layout of the packed
// kernels, X8Grid, and every activation column of the tile then runs the
// packed kernels' frame over them, one vpdpbusd (or maddubs) per 4 values of
// 8 rows. Where decoded rows served a column at a time, each product cost a
// maddubs, a madd and an add per 32 values of one row: IQ3_S 2048 x 8192 at
// 64 columns on a Zen 4 (2 threads) 5.1-5.5 ms against 11.6.
//
// Two forms of the same integers, as IQ4_XS's (mul_mat_x8_lowbit.h): where a
// lane sums unsigned bytes up to 255 exactly (VNNI), the values are stored
// plus 128 and 128 * sum_k m_k * sum(y_k) comes off at the end through the
// activation's 16-element sums; at the AVX2 level, signed by signed through
// |v| * (y * sign v). Per row and super-block the integer sum is exact and
// meets one float step, acc = fma(float(isum), f * dy, acc), the one-column
// kernel's (mul_mat_qd.cpp), so results do not depend on the column count
// or the level.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/host/grid_decode.h"
#include "kernels/host/mul_mat_x8_k.h"

namespace standin::kernels::host::mm {

namespace {

// Block8 of decoded grid values, one per super-block and group of 8 rows:
// 64 value words (word 8j + w: elements 32j + 4w.. of the 8 rows, lane r
// row r's 4 bytes), 4 words of run multipliers (word u: runs 4u..4u+3 of
// each row as signed bytes, like Q3_K's scales), the 8 rows' factors f.
struct X8Grid {
    static constexpr size_t kMult   = 64 * 32;
    static constexpr size_t kF      = kMult + 4 * 32;
    static constexpr size_t kBlock8 = kF + 8 * sizeof(float);
    static constexpr size_t kRowBytes = kBlock8 / packed::kRows;  // per row and super-block
};
static_assert(X8Grid::kBlock8 % packed::kRows == 0, "a block8 is 8 rows' worth of bytes");

// Where decode_grid puts one row of a group: its 256 values into `vals`
// (transposed into the block8 afterwards), its run multipliers and factor
// into the block8 directly.
struct X8GridSink {
    static constexpr bool kGather = true;  // grid words gathered (decode_grid of IQ3_XXS)
    int8_t *  vals;
    uint8_t * blk;
    int       r;
    bool      offset;
    void block(float factor) const { std::memcpy(blk + X8Grid::kF + sizeof(float) * r, &factor, sizeof(float)); }
    void values(int ib, __m256i mag, __m256i sgn) const {
        __m256i v = _mm256_sign_epi8(mag, sgn);
        if (offset) v = _mm256_xor_si256(v, _mm256_set1_epi8(int8_t(0x80)));  // v + 128 as unsigned
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(vals + 32 * ib), v);
    }
    void runs(int ib, __m256i mult) const {
        runs(ib, _mm256_extract_epi16(mult, 0), _mm256_extract_epi16(mult, 8));
    }
    void runs(int ib, int m0, int m1) const {
        for (int h = 0; h < 2; ++h) {
            const int k = 2 * ib + h;
            blk[X8Grid::kMult + 32 * (k / 4) + 4 * r + k % 4] = uint8_t(h == 0 ? m0 : m1);
        }
    }
};

// Rows r of 8 vectors of 8 int32 become columns: v[w] lane r = old v[r] lane w.
SI_X8_TARGET inline void transpose8_epi32(__m256i v[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i]     = _mm256_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i]     = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; ++i) {
        v[i]     = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}

// The group of `rows` (1..8) rows at x (stride x_stride) decoded into nsb
// block8s at dst; rows past `rows` are zeros with factor 0.
template <class B>
SI_X8_TARGET void decode_group_x8(const char * x, size_t x_stride, int rows, int64_t nsb, bool offset, uint8_t * dst) {
    alignas(32) int8_t vals[packed::kRows][kQK_K];
    for (int64_t b = 0; b < nsb; ++b) {
        uint8_t * blk = dst + b * int64_t(X8Grid::kBlock8);
        std::memset(blk + X8Grid::kMult, 0, X8Grid::kBlock8 - X8Grid::kMult);
        for (int r = 0; r < packed::kRows; ++r) {
            if (r < rows) {
                X8GridSink sink{vals[r], blk, r, offset};
                decode_grid(reinterpret_cast<const B *>(x + size_t(r) * x_stride)[b], sink);
            } else {
                std::memset(vals[r], 0, kQK_K);
            }
        }
        for (int j = 0; j < 8; ++j) {
            __m256i v[8];
            for (int r = 0; r < 8; ++r) v[r] = _mm256_load_si256(reinterpret_cast<const __m256i *>(vals[r] + 32 * j));
            transpose8_epi32(v);
            for (int w = 0; w < 8; ++w) _mm256_storeu_si256(reinterpret_cast<__m256i *>(blk + 32 * (8 * j + w)), v[w]);
        }
    }
}

// A group (8 rows from tile row r0 of decoded block8s) times the columns the
// width V holds from tile column cl0.
template <class V, int kMax>
SI_X8_TARGET void group_grid(const QTile & t, int64_t r0, int64_t cl0) {
    using I = typename V::I;
    k_group<V, X8Grid::kBlock8>(t, r0, cl0, [](const V & v, const uint8_t * blk, int64_t b, typename V::F * acc) SI_X8_TARGET {
        constexpr bool kOffset = V::sum_words(255) > 0;
        // Words of a run of 16 (its multiplier's reach) summed before the
        // multiplier applies: all 4 where int32 lanes sum (VNNI), else as many
        // as int16 lanes hold (Ops::sum_words; 2 for IQ2's and IQ3_XXS's values).
        constexpr int kRun = std::min(4, V::sum_words(kOffset ? 255 : kMax));
        static_assert(kRun >= 1 && 4 % kRun == 0, "a run is 4 words");
        I m[4];
        for (int u = 0; u < 4; ++u) m[u] = V::lanes(load_w(blk + X8Grid::kMult + 32 * u));
        I isum[V::N] = {};
        sub_block_words<V, kRun>(
            [&](I * s, int j, int w) SI_X8_TARGET {
                dot_values<kOffset>(v, s, load_w(blk + 32 * (8 * j + w)), 8 * b + j, w);
            },
            [&](const I * s, int j, int w0) SI_X8_TARGET {
                const int k = 2 * j + w0 / 4;  // the run
                for (int i = 0; i < V::N; ++i) isum[i] = V::add_scaled(isum[i], s[i], m[k / 4], k % 4);
            });
        const typename V::F f = V::floats(blk + X8Grid::kF);
#pragma GCC unroll 4
        for (int i = 0; i < V::N; ++i) {
            I sum = isum[i];
            if constexpr (kOffset) {
                // m_2j and m_2j+1 against the sums of sub-block j's two runs.
                const I off = v.sums_dot([&](int j) SI_X8_TARGET { return V::pair16(m[j / 2], 2 * (j % 2), 2 * (j % 2) + 1); }, i, b);
                sum = V::template less_shl<7>(sum, off);
            }
            acc[i] = V::fma(acc[i], sum, f, v.scale(i, b));
        }
    });
}

template <class B>
struct BodyGrid {
    template <class V>
    SI_X8_TARGET static void run(const QTile & t, int64_t r0, int64_t cl0) { group_grid<V, kGridMax<B>>(t, r0, cl0); }
};

// A tile of grid weights: its rows decoded into X8Grid groups (values plus
// 128 with `offset`, the form of the level's body), then cols(d) runs the
// level's column loop over the decoded tile d. A last group of fewer than 8
// rows writes its 8 rows' results to scratch, and the real ones are copied.
template <class B, class ColsFn>
SI_X8_TARGET void tile_grid_x8(const QTile & t, bool offset, ColsFn cols) {
    const int64_t nsb       = t.act.K / kQK_K;
    const size_t  row_bytes = size_t(nsb) * X8Grid::kRowBytes;
    const int64_t groups    = (t.nrows + packed::kRows - 1) / packed::kRows;
    thread_local std::vector<uint8_t> decoded;
    decoded.resize(size_t(groups * packed::kRows) * row_bytes);
    for (int64_t g = 0; g < groups; ++g) {
        const int64_t r0 = g * packed::kRows;
        decode_group_x8<B>(t.x + r0 * int64_t(t.x_stride), t.x_stride, int(std::min<int64_t>(packed::kRows, t.nrows - r0)),
                           nsb, offset, decoded.data() + size_t(r0) * row_bytes);
    }
    QTile d   = t;
    d.x        = reinterpret_cast<const char *>(decoded.data());
    d.x_stride = row_bytes;
    d.nrows    = t.nrows / packed::kRows * packed::kRows;
    if (d.nrows > 0) cols(d);
    if (d.nrows < t.nrows) {
        thread_local std::vector<float> tail;
        tail.resize(size_t(t.ncols * packed::kRows));
        QTile e          = d;
        e.x             += size_t(d.nrows) * row_bytes;
        e.nrows          = packed::kRows;
        e.out            = tail.data();
        e.out_col_stride = packed::kRows;
        cols(e);
        for (int64_t c = 0; c < t.ncols; ++c) {
            for (int64_t r = d.nrows; r < t.nrows; ++r) {
                t.out[c * t.out_col_stride + r] = tail[size_t(c * packed::kRows + r - d.nrows)];
            }
        }
    }
}

} // namespace

} // namespace standin::kernels::host::mm
