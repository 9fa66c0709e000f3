// MUL_MAT: dst = src0 (weights, K x M per matrix) times src1 (K x N), so
//   dst[m, n, i2, i3] = sum_k src0[k, m, i2 / r2, i3 / r3] * src1[k, n, i2, i3]
// with r2 = ne12 / ne02 and r3 = ne13 / ne03 (src0 broadcast over dims 2, 3).
// src0: F32, F16, BF16 or a block type with a kernel in mul_mat_q.cpp;
// src1: any of F32, F16, BF16 (the support predicate claims F32, and F16/BF16
// under weights of the same type); dst: F32. src0 and dst rows must be
// contiguous in dim 0 (nb0 = element or block size); every other stride, and
// all of src1's, is free, so permuted and strided views work.
//
// Block-quantized weights: every src1 row is first quantized to int8 groups
// (Note [activation blocks], vec_dot.h) and the integer kernels of
// mul_mat_q.cpp do the rest, or those of mul_mat_x8*.cpp for weights packed in
// groups of 8 rows (Note [packed weights], packed.h; a view that cuts groups
// is restored to the original layout in scratch first). Float weights: src1 is used as f32, rounded to the
// weight type first under F16/BF16 weights as ggml-cpu does (converted into
// scratch unless it is f32 with contiguous rows under f32 weights), and weight
// rows are converted from F16/BF16 on the fly inside FMA loops.
//
// Work is split into tiles of up to kTileRows weight rows x kTileCols src1
// rows per matrix, spread over the pool (weight-row tiles vary fastest, so
// consecutive tiles share src1 rows in cache); inside a tile, micro-kernels
// compute R x C outputs at once so a weight row loaded from cache serves C
// columns and an activation load serves R rows.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o MUL_MAT; time: `perf -o MUL_MAT`
// against -b CPU; tests/kernels/test_quants.cpp (QuantMatMul) sweeps every
// weight type over the micro-kernel shapes against a double-precision product.
#include <immintrin.h>

#include <algorithm>
#include <new>
#include <vector>

#include "diag/config.h"
#include "kernels/common/quants.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/packed.h"
#include "kernels/host/vec_dot.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

constexpr int64_t kTileRows = 16;
constexpr int64_t kTileCols = 32;
// Tiles of weights that a tile decodes before use (the grid i-quants and
// the ternary types, mul_mat_x8_grid.h) take up to this many columns, so
// that a row is decoded once for all of them: IQ3_S 2048 x 8192 at 64
// columns on a Zen 4 (2 threads) took 5.2-5.5 ms in tiles of 128, 6.6 in
// tiles of 32. Fewer where the wider tiles would leave threads without
// work (wide_tile_cols).
constexpr int64_t kDecodedTileCols = 128;

// The column count of a tile whose kernel prefers wide tiles (decoded
// weights, the AMX kernels' panels, mm::x8_tile_cols): `widest`, halved
// (down to kTileCols) while the product would have fewer than 4 tiles a
// thread.
int64_t wide_tile_cols(int64_t widest, int64_t row_tiles, int64_t N, int64_t matrices, int threads) {
    int64_t cols = widest;
    while (cols > kTileCols && row_tiles * matrices * ((N + cols - 1) / cols) < 4 * int64_t(threads)) cols /= 2;
    return cols;
}

// Scratch for converted or quantized src1, reused across calls on this thread
// (a stream runs one kernel at a time on its calling thread). nullptr when it
// cannot grow to `bytes`: the kernel reports out_of_memory instead of the
// process dying in the allocator (GGML_STANDIN_FAULT=scratch plants that).
char * scratch(size_t bytes) {
    thread_local std::vector<char> buf;
    if (diag::config().fault_at("scratch")) {
        return nullptr;
    }
    if (buf.size() < bytes || buf.empty()) {
        try {
            buf.resize(std::max<size_t>(bytes, 1));
        } catch (const std::bad_alloc &) {
            return nullptr;
        }
    }
    return buf.data();
}

// --- float weights ---------------------------------------------------------------

template <ggml_type T>
inline __m256 load8(const char * p) {
    if constexpr (T == GGML_TYPE_F32) {
        return _mm256_loadu_ps(reinterpret_cast<const float *>(p));
    } else if constexpr (T == GGML_TYPE_F16) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    } else {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
}

struct FTile {
    const char *  x;         // first weight row
    size_t        x_stride;  // bytes between weight rows
    int64_t       nrows;
    const char *  y;         // first src1 row (f32, contiguous)
    size_t        y_stride;  // bytes between src1 rows
    int64_t       ncols;
    int64_t       K;
    float *       out;
    int64_t       out_col_stride;  // floats
};

template <ggml_type T, int R, int C>
void fmicro(const FTile & t, int64_t r0, int64_t c0) {
    constexpr size_t es = T == GGML_TYPE_F32 ? 4 : 2;
    const char *  x[R];
    const float * y[C];
    for (int r = 0; r < R; ++r) x[r] = t.x + (r0 + r) * t.x_stride;
    for (int c = 0; c < C; ++c) y[c] = reinterpret_cast<const float *>(t.y + (c0 + c) * t.y_stride);
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= t.K; k += 8) {
        __m256 xv[R];
        for (int r = 0; r < R; ++r) xv[r] = load8<T>(x[r] + k * es);
        for (int c = 0; c < C; ++c) {
            const __m256 yv = _mm256_loadu_ps(y[c] + k);
            for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], yv, acc[r][c]);
        }
    }
    for (int c = 0; c < C; ++c) {
        float * o = t.out + (c0 + c) * t.out_col_stride + r0;
        for (int r = 0; r < R; ++r) {
            float s = mm::hsum(acc[r][c]);
            for (int64_t kk = k; kk < t.K; ++kk) s += load_f(T, x[r] + kk * es) * y[c][kk];
            o[r] = s;
        }
    }
}

template <ggml_type T, int C>
void frows(const FTile & t, int64_t c0) {
    int64_t r = 0;
    for (; r + 4 <= t.nrows; r += 4) fmicro<T, 4, C>(t, r, c0);
    for (; r < t.nrows; ++r) fmicro<T, 1, C>(t, r, c0);
}

template <ggml_type T>
void ftile(const FTile & t) {
    int64_t c = 0;
    for (; c + 2 <= t.ncols; c += 2) frows<T, 2>(t, c);
    for (; c < t.ncols; ++c) frows<T, 1>(t, c);
}

// --- float weights, several columns: packed panels ------------------------------
// With 4 or more src1 columns, 16 weight rows are converted to f32 and stored
// k-major (panel[k * 16 + r]) for kPanelK values of k at a time, then every
// 6 columns of a column block run a 16 x 6 micro-kernel: per k, two loads of
// the panel, one broadcast per column and 12 FMAs into 12 accumulators that
// each hold 8 output rows, so no horizontal sum at all. The row-dot kernels
// above pay one horizontal sum per output, which dominated short products
// such as attention's K*Q (K = head size); the panel costs one conversion
// per weight per column block of up to kPanelCols columns.

constexpr int64_t kPanelRows    = 16;
constexpr int64_t kPanelK       = 256;
constexpr int64_t kPanelCols    = 384;  // columns per task: the panel is converted once per 64 micro-kernel runs
constexpr int64_t kPanelMinCols = 48;   // fewer: the row-dot kernels (measured faster up to 32)

// 8 rows of 8 floats (src + r * src_stride) -> 8 columns (dst + c * 16).
inline void transpose8(const float * src, int64_t src_stride, float * dst) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_load_ps(src + i * src_stride);
    for (int i = 0; i < 8; i += 2) {
        t[i]     = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i]     = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; ++i) {
        _mm256_store_ps(dst + i * kPanelRows, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_store_ps(dst + (i + 4) * kPanelRows, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}

template <ggml_type T>
void pack_panel(const char * x, size_t x_stride, int64_t nr, int64_t k0, int64_t kn, float * panel) {
    constexpr size_t es = T == GGML_TYPE_F32 ? 4 : 2;
    alignas(32) float rows[kPanelRows][kPanelK];
    for (int64_t r = 0; r < kPanelRows; ++r) {
        int64_t k = 0;
        if (r < nr) {
            const char * p = x + size_t(r) * x_stride + size_t(k0) * es;
            for (; k + 8 <= kn; k += 8) _mm256_store_ps(rows[r] + k, load8<T>(p + size_t(k) * es));
            for (; k < kn; ++k) rows[r][k] = load_f(T, p + size_t(k) * es);
        }
        for (; k < kn; ++k) rows[r][k] = 0.0f;
    }
    int64_t k = 0;
    for (; k + 8 <= kn; k += 8) {
        transpose8(&rows[0][k], kPanelK, panel + k * kPanelRows);
        transpose8(&rows[8][k], kPanelK, panel + k * kPanelRows + 8);
    }
    for (; k < kn; ++k) {
        for (int64_t r = 0; r < kPanelRows; ++r) panel[k * kPanelRows + r] = rows[r][k];
    }
}

// 16 rows x C columns over kn values of k; `add` accumulates into out.
template <int C>
void panel_micro(const float * panel, int64_t kn, const char * y, size_t y_stride, float * out,
                 int64_t out_col_stride, int64_t nr, bool add) {
    const float * yc[C];
    for (int c = 0; c < C; ++c) yc[c] = reinterpret_cast<const float *>(y + size_t(c) * y_stride);
    __m256 lo[C], hi[C];
#pragma GCC unroll 6
    for (int c = 0; c < C; ++c) lo[c] = hi[c] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kn; ++k) {
        const __m256 x0 = _mm256_load_ps(panel + k * kPanelRows);
        const __m256 x1 = _mm256_load_ps(panel + k * kPanelRows + 8);
#pragma GCC unroll 6
        for (int c = 0; c < C; ++c) {
            const __m256 yb = _mm256_broadcast_ss(yc[c] + k);
            lo[c] = _mm256_fmadd_ps(x0, yb, lo[c]);
            hi[c] = _mm256_fmadd_ps(x1, yb, hi[c]);
        }
    }
    // Unrolled, so that the accumulators stay in registers (a loop over c here
    // made GCC keep them in memory and store all 12 on every k).
#pragma GCC unroll 6
    for (int c = 0; c < C; ++c) {
        float * o = out + c * out_col_stride;
        if (nr == kPanelRows) {
            if (add) {
                lo[c] = _mm256_add_ps(lo[c], _mm256_loadu_ps(o));
                hi[c] = _mm256_add_ps(hi[c], _mm256_loadu_ps(o + 8));
            }
            _mm256_storeu_ps(o, lo[c]);
            _mm256_storeu_ps(o + 8, hi[c]);
        } else {
            alignas(32) float v[kPanelRows];
            _mm256_store_ps(v, lo[c]);
            _mm256_store_ps(v + 8, hi[c]);
            for (int64_t r = 0; r < nr; ++r) o[r] = add ? o[r] + v[r] : v[r];
        }
    }
}

using PanelMicroFn = void (*)(const float *, int64_t, const char *, size_t, float *, int64_t, int64_t, bool);
constexpr PanelMicroFn kPanelMicro[7] = {nullptr,         panel_micro<1>, panel_micro<2>, panel_micro<3>,
                                         panel_micro<4>, panel_micro<5>, panel_micro<6>};

// One task: 16 rows (from x) times ncols columns (from y), into out.
template <ggml_type T>
void panel_task(const char * x, size_t x_stride, int64_t nr, const char * y, size_t y_stride, int64_t ncols,
                int64_t K, float * out, int64_t out_col_stride) {
    alignas(32) float panel[kPanelK * kPanelRows];
    for (int64_t k0 = 0; k0 < K; k0 += kPanelK) {
        const int64_t kn = std::min(kPanelK, K - k0);
        pack_panel<T>(x, x_stride, nr, k0, kn, panel);
        for (int64_t c = 0; c < ncols; c += 6) {
            const int64_t nc = std::min<int64_t>(6, ncols - c);
            kPanelMicro[nc](panel, kn, y + size_t(c) * y_stride + size_t(k0) * sizeof(float), y_stride,
                            out + c * out_col_stride, out_col_stride, nr, k0 > 0);
        }
    }
}

using PanelTaskFn = void (*)(const char *, size_t, int64_t, const char *, size_t, int64_t, int64_t, float *, int64_t);

PanelTaskFn panel_task_for(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32:  return panel_task<GGML_TYPE_F32>;
        case GGML_TYPE_F16:  return panel_task<GGML_TYPE_F16>;
        case GGML_TYPE_BF16: return panel_task<GGML_TYPE_BF16>;
        default:             return nullptr;
    }
}

using FTileFn = void (*)(const FTile &);

FTileFn ftile_for(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32:  return ftile<GGML_TYPE_F32>;
        case GGML_TYPE_F16:  return ftile<GGML_TYPE_F16>;
        case GGML_TYPE_BF16: return ftile<GGML_TYPE_BF16>;
        default:             return nullptr;
    }
}

// --- the driver ------------------------------------------------------------------

struct Shape {
    int64_t K, M, N, ne12, ne13, r2, r3;
    int64_t tile_cols;
    int64_t row_tiles, col_tiles;
    int64_t tiles() const { return ne12 * ne13 * row_tiles * col_tiles; }
};

// Tile t -> (i12, i13, first weight row, first src1 row); row tiles vary fastest
// so that consecutive tiles reuse the same src1 rows from cache.
struct TileIndex {
    int64_t i12, i13, m0, n0;
};
TileIndex tile_index(const Shape & s, int64_t t) {
    TileIndex ti;
    ti.m0 = (t % s.row_tiles) * kTileRows;
    t /= s.row_tiles;
    ti.n0 = (t % s.col_tiles) * s.tile_cols;
    t /= s.col_tiles;
    ti.i12 = t % s.ne12;
    ti.i13 = t / s.ne12;
    return ti;
}

// y = x rounded to F16 or BF16 and back (x may be y).
void round_row(ggml_type t, const float * x, float * y, int64_t n) {
    int64_t k = 0;
    if (t == GGML_TYPE_F16) {
        for (; k + 8 <= n; k += 8) {
            const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + k), _MM_FROUND_TO_NEAREST_INT);
            _mm256_storeu_ps(y + k, _mm256_cvtph_ps(h));
        }
    }
    for (; k < n; ++k) {
        y[k] = t == GGML_TYPE_F16 ? num::fp16_to_f32(num::f32_to_fp16(x[k])) : num::bf16_to_f32(num::f32_to_bf16(x[k]));
    }
}

// Row n of src1 in matrix (i12, i13) as f32: in place when possible, else
// converted into tmp.
const float * src1_row_f32(const ggml_tensor * b, int64_t n, int64_t i12, int64_t i13, float * tmp) {
    const char * p = static_cast<const char *>(b->data) + n * b->nb[1] + i12 * b->nb[2] + i13 * b->nb[3];
    if (b->type == GGML_TYPE_F32 && b->nb[0] == sizeof(float)) {
        return reinterpret_cast<const float *>(p);
    }
    for (int64_t k = 0; k < b->ne[0]; ++k) tmp[k] = load_f(b->type, p + k * b->nb[0]);
    return tmp;
}

Status mul_mat_quant(rt::host::ThreadPool & pool, ggml_tensor * node, const Shape & s, mm::QTileFn fn) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    const int64_t group = quant::act_group(a->type);
    // Scratch: per column K int8, K/32 floats of d, K/32 of s, K/32 int32 of
    // q8sum, K/2 int16 sums (and for the 512-bit packed kernels the codes again,
    // interleaved by column pair).
    const int64_t ncols = s.N * s.ne12 * s.ne13;
    const size_t  q_bytes = (size_t(ncols * s.K) + 63) & ~size_t(63);
    const size_t  f_bytes = (size_t(ncols * (s.K / 32)) * sizeof(float) + 63) & ~size_t(63);
    // The 512-bit packed and grid kernels read column pairs interleaved (Note
    // [column pairs], mul_mat_x8_pairs.h): as many bytes again as the codes.
    const bool pairs =
        ncols >= 2 && (packed::is_native(a) ? mm::x8_wants_pairs(a->type) : mm::x8_grid_wants_pairs(a->type));
    const size_t p_bytes = pairs ? q_bytes : 0;
    char * buf = scratch(q_bytes + 3 * f_bytes + size_t(ncols * (s.K / 2)) * sizeof(int16_t) + p_bytes);
    if (buf == nullptr) {
        return Status::out_of_memory;
    }
    int8_t *  q     = reinterpret_cast<int8_t *>(buf);
    float *   d     = reinterpret_cast<float *>(buf + q_bytes);
    float *   sm    = reinterpret_cast<float *>(buf + q_bytes + f_bytes);
    int32_t * q8sum = reinterpret_cast<int32_t *>(buf + q_bytes + 2 * f_bytes);
    int16_t * sums  = reinterpret_cast<int16_t *>(buf + q_bytes + 3 * f_bytes);

    pool.parallel_for(ncols, std::max<int64_t>(1, 4096 / s.K), [&](int64_t c0, int64_t c1) {
        std::vector<float> tmp(b->type == GGML_TYPE_F32 && b->nb[0] == sizeof(float) ? 0 : size_t(s.K));
        for (int64_t c = c0; c < c1; ++c) {
            const int64_t n = c % s.N, i12 = (c / s.N) % s.ne12, i13 = c / (s.N * s.ne12);
            const float * x = src1_row_f32(b, n, i12, i13, tmp.data());
            if (group == 32) {
                mm::quantize_act_32(x, s.K, q + c * s.K, d + c * (s.K / 32), sm + c * (s.K / 32),
                                    sums + c * (s.K / 2), q8sum + c * (s.K / 32));
            } else {
                mm::quantize_act_256(x, s.K, q + c * s.K, d + c * (s.K / 256), sums + c * (s.K / 2));
            }
        }
    });

    int32_t * qpair = nullptr;
    if (pairs) {
        qpair = reinterpret_cast<int32_t *>(buf + q_bytes + 3 * f_bytes + size_t(ncols * (s.K / 2)) * sizeof(int16_t));
        pool.parallel_for(ncols / 2, std::max<int64_t>(1, 2048 / s.K),
                          [&](int64_t p0, int64_t p1) { mm::interleave_pairs(q, s.K, p0, p1, qpair); });
    }
    const mm::Act act{q, d, sm, sums, s.K, q8sum, qpair};
    pool.parallel_for(s.tiles(), 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const TileIndex ti = tile_index(s, t);
            mm::QTile tile;
            tile.x = static_cast<const char *>(a->data) + ti.m0 * a->nb[1] + (ti.i12 / s.r2) * a->nb[2] +
                     (ti.i13 / s.r3) * a->nb[3];
            tile.x_stride = a->nb[1];
            tile.nrows = std::min(kTileRows, s.M - ti.m0);
            tile.act = act;
            tile.c0 = (ti.i13 * s.ne12 + ti.i12) * s.N + ti.n0;
            tile.ncols = std::min(s.tile_cols, s.N - ti.n0);
            tile.out = reinterpret_cast<float *>(static_cast<char *>(node->data) + ti.n0 * node->nb[1] +
                                                 ti.i12 * node->nb[2] + ti.i13 * node->nb[3]) + ti.m0;
            tile.out_col_stride = int64_t(node->nb[1] / sizeof(float));
            fn(tile);
        }
    });
    return true;
}

Status mul_mat_float(rt::host::ThreadPool & pool, ggml_tensor * node, const Shape & s, FTileFn fn) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    // src1 rows: in place when f32 with contiguous rows under f32 weights, else
    // converted. Under F16/BF16 weights they are rounded to that type first, as
    // ggml-cpu does (its vec_dot_type), so that both compute the same products.
    const bool round_y  = a->type != GGML_TYPE_F32;
    const bool in_place = !round_y && b->type == GGML_TYPE_F32 && b->nb[0] == sizeof(float);
    const char * y = static_cast<const char *>(b->data);
    size_t y_nb1 = b->nb[1], y_nb2 = b->nb[2], y_nb3 = b->nb[3];
    if (!in_place) {
        const int64_t ncols = s.N * s.ne12 * s.ne13;
        char * buf = scratch(size_t(ncols * s.K) * sizeof(float));
        if (buf == nullptr) {
            return Status::out_of_memory;
        }
        float * f = reinterpret_cast<float *>(buf);
        pool.parallel_for(ncols, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, s.K)), [&](int64_t c0, int64_t c1) {
            for (int64_t c = c0; c < c1; ++c) {
                const int64_t n = c % s.N, i12 = (c / s.N) % s.ne12, i13 = c / (s.N * s.ne12);
                float * row = f + c * s.K;
                const float * x = src1_row_f32(b, n, i12, i13, row);
                if (round_y) {
                    round_row(a->type, x, row, s.K);
                }
            }
        });
        y = buf;
        y_nb1 = size_t(s.K) * sizeof(float);
        y_nb2 = y_nb1 * size_t(s.N);
        y_nb3 = y_nb2 * size_t(s.ne12);
    }
    if (s.N >= kPanelMinCols) {
        const PanelTaskFn task = panel_task_for(a->type);
        const int64_t row_panels = (s.M + kPanelRows - 1) / kPanelRows;
        const int64_t col_blocks = (s.N + kPanelCols - 1) / kPanelCols;
        const int64_t out_cs     = int64_t(node->nb[1] / sizeof(float));
        pool.parallel_for(s.ne12 * s.ne13 * row_panels * col_blocks, 1, [&](int64_t t0, int64_t t1) {
            for (int64_t t = t0; t < t1; ++t) {
                // Row panels vary fastest: neighbouring tasks share the column block's src1 rows.
                const int64_t rp = t % row_panels, cb = (t / row_panels) % col_blocks;
                const int64_t i12 = (t / (row_panels * col_blocks)) % s.ne12, i13 = t / (row_panels * col_blocks * s.ne12);
                const int64_t m0 = rp * kPanelRows, n0 = cb * kPanelCols;
                const char * x = static_cast<const char *>(a->data) + m0 * a->nb[1] + (i12 / s.r2) * a->nb[2] +
                                 (i13 / s.r3) * a->nb[3];
                float * out = reinterpret_cast<float *>(static_cast<char *>(node->data) + n0 * node->nb[1] +
                                                        i12 * node->nb[2] + i13 * node->nb[3]) + m0;
                task(x, a->nb[1], std::min(kPanelRows, s.M - m0), y + n0 * y_nb1 + i12 * y_nb2 + i13 * y_nb3, y_nb1,
                     std::min(kPanelCols, s.N - n0), s.K, out, out_cs);
            }
        });
        return true;
    }
    pool.parallel_for(s.tiles(), 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const TileIndex ti = tile_index(s, t);
            FTile tile;
            tile.x = static_cast<const char *>(a->data) + ti.m0 * a->nb[1] + (ti.i12 / s.r2) * a->nb[2] +
                     (ti.i13 / s.r3) * a->nb[3];
            tile.x_stride = a->nb[1];
            tile.nrows = std::min(kTileRows, s.M - ti.m0);
            tile.y = y + ti.n0 * y_nb1 + ti.i12 * y_nb2 + ti.i13 * y_nb3;
            tile.y_stride = y_nb1;
            tile.ncols = std::min(s.tile_cols, s.N - ti.n0);
            tile.K = s.K;
            tile.out = reinterpret_cast<float *>(static_cast<char *>(node->data) + ti.n0 * node->nb[1] +
                                                 ti.i12 * node->nb[2] + ti.i13 * node->nb[3]) + ti.m0;
            tile.out_col_stride = int64_t(node->nb[1] / sizeof(float));
            fn(tile);
        }
    });
    return true;
}

// src0 is a view of packed weights that cuts groups (packed.h): its rows are
// restored to the original layout in scratch and multiplied as plain weights.
Status mul_mat_restored(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const size_t rb = size_t(a->ne[0] / ggml_blck_size(a->type)) * ggml_type_size(a->type);
    std::vector<char> rows(rb * size_t(a->ne[1] * a->ne[2] * a->ne[3]));
    ggml_tensor plain = *a;
    plain.data     = rows.data();
    plain.view_src = nullptr;
    plain.extra    = nullptr;
    plain.nb[1]    = rb;
    plain.nb[2]    = rb * size_t(a->ne[1]);
    plain.nb[3]    = plain.nb[2] * size_t(a->ne[2]);
    for (int64_t i3 = 0; i3 < a->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < a->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < a->ne[1]; ++i1)
                packed::read_row(a, i1, i2, i3, rows.data() + i1 * plain.nb[1] + i2 * plain.nb[2] + i3 * plain.nb[3]);
    ggml_tensor n2 = *node;
    n2.src[0] = &plain;
    return mul_mat(stream, &n2);
}

} // namespace

Status mul_mat(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    if (packed::packed_of(a) != nullptr && !packed::is_native(a)) {
        return mul_mat_restored(stream, node);
    }
    const mm::QTileFn qfn = packed::is_native(a) ? mm::x8_tile_for(a->type) : mm::qtile_for(a->type);
    const FTileFn     ffn = ftile_for(a->type);
    if ((qfn == nullptr && ffn == nullptr) || !is_float_type(b->type) || node->type != GGML_TYPE_F32) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    Shape s;
    s.K = a->ne[0];
    s.M = a->ne[1];
    s.N = b->ne[1];
    s.ne12 = b->ne[2];
    s.ne13 = b->ne[3];
    s.r2 = s.ne12 / a->ne[2];
    s.r3 = s.ne13 / a->ne[3];
    s.row_tiles = (s.M + kTileRows - 1) / kTileRows;
    const int64_t widest = packed::is_native(a)                         ? mm::x8_tile_cols(a->type)
                           : mm::x8_grid_tile_for(a->type) != nullptr ? kDecodedTileCols
                                                                      : kTileCols;
    s.tile_cols = wide_tile_cols(std::max(widest, kTileCols), s.row_tiles, s.N, s.ne12 * s.ne13, pool.size());
    s.col_tiles = (s.N + s.tile_cols - 1) / s.tile_cols;
    if (s.tiles() == 0) {
        return true;
    }
    return qfn != nullptr ? mul_mat_quant(pool, node, s, qfn) : mul_mat_float(pool, node, s, ffn);
}

} // namespace standin::kernels::host
