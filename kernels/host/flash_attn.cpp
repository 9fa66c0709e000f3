// FLASH_ATTN_EXT: out = softmax(score(Q K^T) + slope * mask) V per head, with
// score(s) = s * scale, or c * tanh(s * scale / c) with a logit soft cap c;
// op_params = scale, max_bias (ALiBi), logit_softcap. Q is F32, K and V are
// F32, F16, BF16 or a block type of quants.h, each on its own (each may be
// any view with contiguous rows: a KV-cache slice, permuted, or V a sub-view
// of K); mask optional F16 (row = query
// index, broadcast over heads / dim 3 by modulo); sinks optional F32, one logit
// per query head. K/V heads are broadcast over groups of query heads (GQA).
// Output F32 in ggml's permuted layout: dst[:, head, query, batch].
//
// The keys are walked in tiles: a tile's K and V rows are converted to f32 once
// and reused by every query row of the task (the query heads that share a KV
// head, times a few query positions). Scores are kept key-major, sc[key][row],
// so that the online softmax (one running max/sum per row, see
// kernels/common/softmax.h) and both products vectorise over rows:
//   scores: queries stored transposed, 4 keys x 16 rows of FMAs per step;
//   P.V:    4 rows x 16 value channels of FMAs per key.
// Tasks with only a few rows (decode without much GQA) use dot products and
// axpys straight from the stored K/V rows instead: padding them to 8 lanes
// would waste most of the FMAs, and the f32 tile copy would double the
// memory traffic that bounds them. Keys that every row of the
// task has masked to -inf are dropped from the tile before any K/V work, so
// causal and sparse masks cost only their visible keys. Arithmetic is f32.
//
// Note [quantized KV cache]
// A block-quantized K is never widened to floats: each query row is quantized
// once per task into ggml-cpu's activation blocks for K's type (Note
// [activation blocks], vec_dot.h), and the scores are the integer dot
// products of MUL_MAT's tile kernel, taking the tile's kept keys as weight
// rows and the task's query rows as columns. That is what ggml-cpu computes
// (it converts Q to K's vec_dot type), so scores differ from it only by the
// order of float additions, and it reads 1 byte per element or less where a
// float K tile would read and write 4. A block-quantized V is decoded into
// the f32 tile (quants.h's dequant, the one decoder of each format), whichever
// path the task takes, and the value sums run on that tile as for F32.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o FLASH_ATTN_EXT
// Time: test-backend-ops perf -b STANDIN_HOST0 -o FLASH_ATTN_EXT
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/common/quants.h"
#include "kernels/common/softmax.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/simd_math.h"
#include "kernels/host/vec_dot.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

constexpr int64_t kTileKV  = 64;  // keys per tile
constexpr int64_t kMaxRows = 32;  // query rows per task (a multiple of 8)
constexpr int64_t kMinRowsBlocked = 6;  // fewer rows: dot-product scores

struct Shape {
    int64_t dk, dv;
    int64_t nq, nh, nq3;  // query positions, query heads, dim 3
    int64_t nkv;
    int64_t rk2, rk3, rv2, rv3;  // broadcast ratios Q/K and Q/V in dims 2 and 3
    int64_t hb, qb;              // heads and positions per task
    int64_t n_hblk, n_qblk;
    mm::QTileFn kdot;   // block-quantized K: its dot kernel (Note [quantized KV cache]), else nullptr
    int64_t kgroup;     // its activation group (32 or 256)
    bool vdecode;       // block-quantized V: rows decoded into the f32 tile
};

Shape make_shape(const ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    Shape s{};
    s.dk = q->ne[0];
    s.dv = v->ne[0];
    s.nq = q->ne[1];
    s.nh = q->ne[2];
    s.nq3 = q->ne[3];
    s.nkv = k->ne[1];
    s.rk2 = q->ne[2] / k->ne[2];
    s.rk3 = q->ne[3] / k->ne[3];
    s.rv2 = q->ne[2] / v->ne[2];
    s.rv3 = q->ne[3] / v->ne[3];
    // Heads of one task must share both their K head and their V head.
    const int64_t g = std::gcd(s.rk2, s.rv2);
    s.hb = std::min<int64_t>(g, kMaxRows);
    while (g % s.hb != 0) --s.hb;
    s.qb = std::max<int64_t>(1, std::min<int64_t>(s.nq, kMaxRows / s.hb));
    s.n_hblk = s.nh / s.hb;
    s.n_qblk = (s.nq + s.qb - 1) / s.qb;
    s.kdot = quant::block_elems(k->type) > 1 ? mm::qtile_for(k->type) : nullptr;
    s.kgroup = quant::act_group(k->type);
    s.vdecode = quant::block_elems(v->type) > 1;
    return s;
}

struct Scratch {
    std::vector<float> qt;    // [dk][kMaxRows] queries, transposed (blocked scores)
    std::vector<float> q;     // [kMaxRows][dk] queries (few-rows path)
    std::vector<float> o;     // [kMaxRows][dv] running weighted value sums
    std::vector<float> kt;    // [kTileKV][dk] the tile's keys
    std::vector<float> vt;    // [kTileKV][dv] the tile's values
    std::vector<float> sc;    // [kTileKV][rp] scores, then weights
    std::vector<float> dots;  // blocked: [kTileKV][rp] raw q.k; few rows: [row][kTileKV] scores, weights
    std::vector<num::OnlineSoftmax> st;
    std::vector<int64_t> keys;  // [kTileKV] key index of each kept tile column
    std::vector<const uint16_t *> mrow;
    std::vector<float> slope, msub, rsum;
    // Block-quantized K only: the task's query rows as activation columns
    // (mm::Act's layout, one column per row) and their raw dots, [row][kTileKV].
    std::vector<int8_t> aq;
    std::vector<float> ad, as;
    std::vector<int32_t> aq8;
    std::vector<int16_t> asums;
    std::vector<float> kd;
    explicit Scratch(const Shape & s)
        : qt(size_t(s.dk * kMaxRows)), q(size_t(kMaxRows * s.dk)), o(size_t(kMaxRows * s.dv)),
          kt(size_t(kTileKV * s.dk)), vt(size_t(kTileKV * s.dv)), sc(size_t(kTileKV * kMaxRows)),
          dots(size_t(kTileKV * kMaxRows)), st(kMaxRows), keys(kTileKV), mrow(kMaxRows), slope(kMaxRows),
          msub(kMaxRows), rsum(kMaxRows) {
        if (s.kdot != nullptr) {
            aq.resize(size_t(kMaxRows * s.dk));
            ad.resize(size_t(kMaxRows * (s.dk / 32)));
            as.resize(size_t(kMaxRows * (s.dk / 32)));
            aq8.resize(size_t(kMaxRows * (s.dk / 32)));
            asums.resize(size_t(kMaxRows * (s.dk / 2)));
            kd.resize(size_t(kMaxRows * kTileKV));
        }
    }
    mm::Act act(const Shape & s) const { return {aq.data(), ad.data(), as.data(), asums.data(), s.dk, aq8.data()}; }
};

// Query row r as activation column r of w (Note [quantized KV cache]).
void quantize_query(const Shape & s, Scratch & w, int64_t r, const float * x) {
    const int64_t K = s.dk;
    if (s.kgroup == 32) {
        mm::quantize_act_32(x, K, &w.aq[size_t(r * K)], &w.ad[size_t(r * (K / 32))], &w.as[size_t(r * (K / 32))],
                            &w.asums[size_t(r * (K / 2))], &w.aq8[size_t(r * (K / 32))]);
    } else {
        mm::quantize_act_256(x, K, &w.aq[size_t(r * K)], &w.ad[size_t(r * (K / 256))], &w.asums[size_t(r * (K / 2))]);
    }
}

// out[r * kTileKV + j] = q_r . k(keys[j]) for the tile's nc kept keys, one tile-kernel
// call per run of adjacent keys (a causal or windowed mask keeps one run).
void quant_dots(const Shape & s, Scratch & w, const char * kbase, size_t nb1, int64_t rows, int64_t nc, float * out) {
    const mm::Act act = w.act(s);
    for (int64_t j = 0; j < nc;) {
        int64_t e = j + 1;
        while (e < nc && w.keys[e] == w.keys[e - 1] + 1) ++e;
        mm::QTile t;
        t.x = kbase + w.keys[j] * nb1;
        t.x_stride = nb1;
        t.nrows = e - j;
        t.act = act;
        t.c0 = 0;
        t.ncols = rows;
        t.out = out + j;
        t.out_col_stride = kTileKV;
        s.kdot(t);
        j = e;
    }
}

// The tile's kept V rows decoded into w.vt[c][.].
void decode_v(const ggml_tensor * v, const Shape & s, Scratch & w, const char * vbase, int64_t nc) {
    for (int64_t c = 0; c < nc; ++c) {
        quant::to_f32_row(v->type, vbase + w.keys[c] * v->nb[1], &w.vt[size_t(c * s.dv)], s.dv);
    }
}

// Starts a tile's scores with the mask term, sc[c][r] = slope_r * mask_r[c]
// (0 without a mask, and for padding rows), then drops the keys that every
// real row has masked to -inf and packs the rest to the front: w.keys[j] is
// the key of column j. Returns the number of columns kept (0: skip the tile).
int64_t tile_mask(Scratch & w, int64_t rows, int64_t rp, int64_t c0, int64_t nc) {
    float mv[kTileKV];
    for (int64_t r = 0; r < rp; ++r) {
        const uint16_t * m = r < rows ? w.mrow[r] : nullptr;
        if (m == nullptr) {
            for (int64_t c = 0; c < nc; ++c) w.sc[size_t(c * rp + r)] = 0.0f;
            continue;
        }
        simd::row_to_f32(GGML_TYPE_F16, m + c0, mv, nc);
        for (int64_t c = 0; c < nc; ++c) w.sc[size_t(c * rp + r)] = w.slope[r] * mv[c];
    }
    int64_t kept = 0;
    for (int64_t c = 0; c < nc; ++c) {
        const float * col = &w.sc[size_t(c * rp)];
        bool visible = false;
        for (int64_t r = 0; r < rows && !visible; ++r) visible = col[r] != -INFINITY;
        if (!visible) continue;
        if (kept != c) std::copy_n(col, rp, &w.sc[size_t(kept * rp)]);
        w.keys[kept++] = c0 + c;
    }
    return kept;
}

// dots[c][r] for NC keys starting at c and NV row vectors starting at rv.
template <int NC, int NV>
void score_block(const float * qt, int64_t rp, const float * kt, int64_t dk, int64_t c, int64_t rv, float * dots) {
    __m256 acc[NC][NV];
    for (int j = 0; j < NC; ++j)
        for (int v = 0; v < NV; ++v) acc[j][v] = _mm256_setzero_ps();
    const float * krow[NC];
    for (int j = 0; j < NC; ++j) krow[j] = kt + (c + j) * dk;
    for (int64_t d = 0; d < dk; ++d) {
        __m256 qv[NV];
        for (int v = 0; v < NV; ++v) qv[v] = _mm256_loadu_ps(qt + d * rp + (rv + v) * 8);
        for (int j = 0; j < NC; ++j) {
            const __m256 kb = _mm256_broadcast_ss(krow[j] + d);
            for (int v = 0; v < NV; ++v) acc[j][v] = _mm256_fmadd_ps(kb, qv[v], acc[j][v]);
        }
    }
    for (int j = 0; j < NC; ++j)
        for (int v = 0; v < NV; ++v) _mm256_storeu_ps(dots + (c + j) * rp + (rv + v) * 8, acc[j][v]);
}

template <int NC>
void score_block_v(int nv, const float * qt, int64_t rp, const float * kt, int64_t dk, int64_t c, int64_t rv,
                   float * dots) {
    if (nv == 2) score_block<NC, 2>(qt, rp, kt, dk, c, rv, dots);
    else         score_block<NC, 1>(qt, rp, kt, dk, c, rv, dots);
}

void tile_dots(const Shape & s, Scratch & w, int64_t rp, int64_t nc) {
    const int64_t nvec = rp / 8;
    for (int64_t c = 0; c < nc; c += 4) {
        const int64_t ncb = std::min<int64_t>(4, nc - c);
        for (int64_t rv = 0; rv < nvec; rv += 2) {
            const int nv = int(std::min<int64_t>(2, nvec - rv));
            switch (ncb) {
                case 4: score_block_v<4>(nv, w.qt.data(), rp, w.kt.data(), s.dk, c, rv, w.dots.data()); break;
                case 3: score_block_v<3>(nv, w.qt.data(), rp, w.kt.data(), s.dk, c, rv, w.dots.data()); break;
                case 2: score_block_v<2>(nv, w.qt.data(), rp, w.kt.data(), s.dk, c, rv, w.dots.data()); break;
                default: score_block_v<1>(nv, w.qt.data(), rp, w.kt.data(), s.dk, c, rv, w.dots.data()); break;
            }
        }
    }
}

// --- few rows: K and V are read in their stored type, without a tile copy ---

template <ggml_type T> inline __m256 load8(const char * row, int64_t i) {
    if constexpr (T == GGML_TYPE_F32) return _mm256_loadu_ps(reinterpret_cast<const float *>(row) + i);
    else if constexpr (T == GGML_TYPE_F16) return simd::load8_f16(reinterpret_cast<const uint16_t *>(row) + i);
    else return simd::load8_bf16(reinterpret_cast<const uint16_t *>(row) + i);
}

template <ggml_type T> inline float load1(const char * row, int64_t i) {
    return load_f(T, row + i * (T == GGML_TYPE_F32 ? 4 : 2));
}

template <ggml_type T> float dot_row(const char * k, const float * q, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(load8<T>(k, i), _mm256_loadu_ps(q + i), a0);
        a1 = _mm256_fmadd_ps(load8<T>(k, i + 8), _mm256_loadu_ps(q + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load8<T>(k, i), _mm256_loadu_ps(q + i), a0);
    float acc = simd::hsum(_mm256_add_ps(a0, a1));
    for (; i < n; ++i) acc += load1<T>(k, i) * q[i];
    return acc;
}

template <ggml_type T> void axpy_row(float * o, const char * v, float p, int64_t n) {
    const __m256 vp = _mm256_set1_ps(p);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_fmadd_ps(load8<T>(v, i), vp, _mm256_loadu_ps(o + i)));
    for (; i < n; ++i) o[i] += load1<T>(v, i) * p;
}

// Scores of the few-rows path, row-major: w.dots[r][c] = mask term (from
// the key-major w.sc) + score(q_r . k(keys[c])); each key row is read once
// for all rows.
template <ggml_type T>
void scores_direct(const Shape & s, Scratch & w, const char * kbase, size_t nb1, int64_t rows, int64_t rp,
                   int64_t nc, const num::AttnParams & ap) {
    for (int64_t c = 0; c < nc; ++c) {
        const char * krow = kbase + w.keys[c] * nb1;
        for (int64_t r = 0; r < rows; ++r) {
            const float m = w.sc[size_t(c * rp + r)];
            float & out = w.dots[size_t(r * kTileKV + c)];
            out = m == -INFINITY ? m
                                 : m + num::attn_score(dot_row<T>(krow, &w.q[size_t(r * s.dk)], s.dk), ap.scale,
                                                       ap.logit_softcap);
        }
    }
}

// Online softmax of the few-rows path, vectorised over the tile's keys;
// leaves the weights in w.dots[r][c].
void softmax_direct(const Shape & s, Scratch & w, int64_t rows, int64_t nc) {
    for (int64_t r = 0; r < rows; ++r) {
        float * row = &w.dots[size_t(r * kTileKV)];
        __m256 vmax = _mm256_set1_ps(-INFINITY);
        int64_t c = 0;
        for (; c + 8 <= nc; c += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(row + c));
        float mx = simd::hmax(vmax);
        for (; c < nc; ++c) mx = std::max(mx, row[c]);
        num::OnlineSoftmax & st = w.st[r];
        const float f = st.rescale_to(mx);
        if (f != 1.0f) simd::scale(&w.o[size_t(r * s.dv)], f, s.dv);
        const float msub = st.m == -INFINITY ? 0.0f : st.m;  // all -inf so far: weights 0
        const __m256 vm = _mm256_set1_ps(msub);
        __m256 vsum = _mm256_setzero_ps();
        for (c = 0; c + 8 <= nc; c += 8) {
            const __m256 e = simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(row + c), vm));
            _mm256_storeu_ps(row + c, e);
            vsum = _mm256_add_ps(vsum, e);
        }
        float sum = simd::hsum(vsum);
        for (; c < nc; ++c) {
            row[c] = simd::exp1(row[c] - msub);
            sum += row[c];
        }
        st.add(sum);
    }
}

// o[i] += sum_j p[j] * v_j[i] over four value rows: one pass over o per four keys.
template <ggml_type T> void axpy4_row(float * o, const char * const v[4], const float p[4], int64_t n) {
    const __m256 p0 = _mm256_set1_ps(p[0]), p1 = _mm256_set1_ps(p[1]);
    const __m256 p2 = _mm256_set1_ps(p[2]), p3 = _mm256_set1_ps(p[3]);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 acc = _mm256_fmadd_ps(load8<T>(v[0], i), p0, _mm256_loadu_ps(o + i));
        acc = _mm256_fmadd_ps(load8<T>(v[1], i), p1, acc);
        acc = _mm256_fmadd_ps(load8<T>(v[2], i), p2, acc);
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(load8<T>(v[3], i), p3, acc));
    }
    for (; i < n; ++i) {
        o[i] += load1<T>(v[0], i) * p[0] + load1<T>(v[1], i) * p[1] + load1<T>(v[2], i) * p[2] +
                load1<T>(v[3], i) * p[3];
    }
}

// o_r += sum_c w.dots[r][c] * v_c, value row c at row(c).
template <ggml_type T, class RowAt>
void pv_direct(const Shape & s, Scratch & w, RowAt row, int64_t rows, int64_t nc) {
    int64_t c = 0;
    for (; c + 4 <= nc; c += 4) {
        const char * const vrow[4] = {row(c), row(c + 1), row(c + 2), row(c + 3)};
        for (int64_t r = 0; r < rows; ++r) {
            const float * p = &w.dots[size_t(r * kTileKV + c)];
            axpy4_row<T>(&w.o[size_t(r * s.dv)], vrow, p, s.dv);
        }
    }
    for (; c < nc; ++c) {
        const char * vrow = row(c);
        for (int64_t r = 0; r < rows; ++r) {
            const float p = w.dots[size_t(r * kTileKV + c)];
            if (p != 0.0f) axpy_row<T>(&w.o[size_t(r * s.dv)], vrow, p, s.dv);
        }
    }
}

// Scores of the few-rows path for a block-quantized K, as scores_direct.
void scores_quant(const Shape & s, Scratch & w, const char * kbase, size_t nb1, int64_t rows, int64_t rp,
                  int64_t nc, const num::AttnParams & ap) {
    quant_dots(s, w, kbase, nb1, rows, nc, w.dots.data());
    for (int64_t r = 0; r < rows; ++r) {
        float * out = &w.dots[size_t(r * kTileKV)];
        for (int64_t c = 0; c < nc; ++c) {
            const float m = w.sc[size_t(c * rp + r)];
            out[c] = m == -INFINITY ? m : m + num::attn_score(out[c], ap.scale, ap.logit_softcap);
        }
    }
}

void tile_direct(const ggml_tensor * k, const ggml_tensor * v, const Shape & s, Scratch & w, const char * kbase,
                 const char * vbase, int64_t rows, int64_t rp, int64_t nc, const num::AttnParams & ap) {
    if (s.kdot != nullptr) {
        scores_quant(s, w, kbase, k->nb[1], rows, rp, nc, ap);
    } else {
        switch (k->type) {
            case GGML_TYPE_F32: scores_direct<GGML_TYPE_F32>(s, w, kbase, k->nb[1], rows, rp, nc, ap); break;
            case GGML_TYPE_F16: scores_direct<GGML_TYPE_F16>(s, w, kbase, k->nb[1], rows, rp, nc, ap); break;
            default:            scores_direct<GGML_TYPE_BF16>(s, w, kbase, k->nb[1], rows, rp, nc, ap); break;
        }
    }
    softmax_direct(s, w, rows, nc);
    const size_t nb1 = v->nb[1];
    const auto stored = [&](int64_t c) { return vbase + w.keys[c] * nb1; };
    if (s.vdecode) {
        decode_v(v, s, w, vbase, nc);
        const auto tile = [&](int64_t c) { return reinterpret_cast<const char *>(&w.vt[size_t(c * s.dv)]); };
        pv_direct<GGML_TYPE_F32>(s, w, tile, rows, nc);
        return;
    }
    switch (v->type) {
        case GGML_TYPE_F32: pv_direct<GGML_TYPE_F32>(s, w, stored, rows, nc); break;
        case GGML_TYPE_F16: pv_direct<GGML_TYPE_F16>(s, w, stored, rows, nc); break;
        default:            pv_direct<GGML_TYPE_BF16>(s, w, stored, rows, nc); break;
    }
}

// The blocked path's w.dots[c][r] for a block-quantized K (padding rows 0).
void tile_quant_dots(const Shape & s, Scratch & w, const char * kbase, size_t nb1, int64_t rows, int64_t rp,
                     int64_t nc) {
    quant_dots(s, w, kbase, nb1, rows, nc, w.kd.data());
    for (int64_t c = 0; c < nc; ++c) {
        float * col = &w.dots[size_t(c * rp)];
        for (int64_t r = 0; r < rows; ++r) col[r] = w.kd[size_t(r * kTileKV + c)];
        for (int64_t r = rows; r < rp; ++r) col[r] = 0.0f;
    }
}

// sc = mask term + score(dot); -inf stays -inf.
void tile_scores(Scratch & w, int64_t rp, int64_t nc, const num::AttnParams & ap) {
    const int64_t n = nc * rp;
    if (ap.logit_softcap != 0.0f) {
        for (int64_t i = 0; i < n; ++i) {
            w.sc[size_t(i)] += num::attn_score(w.dots[size_t(i)], ap.scale, ap.logit_softcap);
        }
        return;
    }
    const __m256 vs = _mm256_set1_ps(ap.scale);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(&w.sc[size_t(i)],
                         _mm256_fmadd_ps(_mm256_loadu_ps(&w.dots[size_t(i)]), vs, _mm256_loadu_ps(&w.sc[size_t(i)])));
    }
    for (; i < n; ++i) w.sc[size_t(i)] += w.dots[size_t(i)] * ap.scale;
}

// Online softmax over the tile: raises each row's max, rescales its value
// sum, and turns sc into weights exp(score - max).
void tile_softmax(const Shape & s, Scratch & w, int64_t rows, int64_t rp, int64_t nc) {
    for (int64_t r = 0; r < rp; ++r) w.rsum[r] = -INFINITY;
    for (int64_t c = 0; c < nc; ++c) {
        for (int64_t r = 0; r < rp; ++r) w.rsum[r] = std::max(w.rsum[r], w.sc[size_t(c * rp + r)]);
    }
    for (int64_t r = 0; r < rp; ++r) {
        num::OnlineSoftmax & st = w.st[r];
        const float f = st.rescale_to(w.rsum[r]);
        if (r < rows && f != 1.0f) simd::scale(&w.o[size_t(r * s.dv)], f, s.dv);
        // A row with nothing visible yet subtracts 0, so its -inf scores give 0.
        w.msub[r] = st.m == -INFINITY ? 0.0f : st.m;
        w.rsum[r] = 0.0f;
    }
    for (int64_t c = 0; c < nc; ++c) {
        float * row = &w.sc[size_t(c * rp)];
        for (int64_t r = 0; r < rp; r += 8) {
            const __m256 e = simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(row + r), _mm256_loadu_ps(&w.msub[r])));
            _mm256_storeu_ps(row + r, e);
            _mm256_storeu_ps(&w.rsum[r], _mm256_add_ps(_mm256_loadu_ps(&w.rsum[r]), e));
        }
    }
    for (int64_t r = 0; r < rows; ++r) w.st[r].add(w.rsum[r]);
}

// o[r + j][d0 + 8v ..] += sum_c p[c][r + j] * v[c][d0 + 8v ..]
template <int NR, int NV>
void pv_block(const float * sc, int64_t rp, const float * vt, int64_t dv, int64_t nc, int64_t r, int64_t d0,
              float * o) {
    __m256 acc[NR][NV];
    for (int j = 0; j < NR; ++j)
        for (int v = 0; v < NV; ++v) acc[j][v] = _mm256_loadu_ps(o + (r + j) * dv + d0 + v * 8);
    for (int64_t c = 0; c < nc; ++c) {
        __m256 vv[NV];
        for (int v = 0; v < NV; ++v) vv[v] = _mm256_loadu_ps(vt + c * dv + d0 + v * 8);
        for (int j = 0; j < NR; ++j) {
            const __m256 pb = _mm256_broadcast_ss(sc + c * rp + r + j);
            for (int v = 0; v < NV; ++v) acc[j][v] = _mm256_fmadd_ps(pb, vv[v], acc[j][v]);
        }
    }
    for (int j = 0; j < NR; ++j)
        for (int v = 0; v < NV; ++v) _mm256_storeu_ps(o + (r + j) * dv + d0 + v * 8, acc[j][v]);
}

template <int NR>
void pv_block_v(int nv, const float * sc, int64_t rp, const float * vt, int64_t dv, int64_t nc, int64_t r,
                int64_t d0, float * o) {
    if (nv == 2) pv_block<NR, 2>(sc, rp, vt, dv, nc, r, d0, o);
    else         pv_block<NR, 1>(sc, rp, vt, dv, nc, r, d0, o);
}

void tile_pv(const Shape & s, Scratch & w, int64_t rows, int64_t rp, int64_t nc) {
    const int64_t dv8 = s.dv / 8 * 8;
    for (int64_t r = 0; r < rows; r += 4) {
        const int64_t nrb = std::min<int64_t>(4, rows - r);
        for (int64_t d0 = 0; d0 < dv8; d0 += 16) {
            const int nv = d0 + 16 <= dv8 ? 2 : 1;
            switch (nrb) {
                case 4: pv_block_v<4>(nv, w.sc.data(), rp, w.vt.data(), s.dv, nc, r, d0, w.o.data()); break;
                case 3: pv_block_v<3>(nv, w.sc.data(), rp, w.vt.data(), s.dv, nc, r, d0, w.o.data()); break;
                case 2: pv_block_v<2>(nv, w.sc.data(), rp, w.vt.data(), s.dv, nc, r, d0, w.o.data()); break;
                default: pv_block_v<1>(nv, w.sc.data(), rp, w.vt.data(), s.dv, nc, r, d0, w.o.data()); break;
            }
        }
    }
    for (int64_t r = 0; r < rows && dv8 < s.dv; ++r) {  // value channels past the last multiple of 8
        for (int64_t d = dv8; d < s.dv; ++d) {
            float acc = w.o[size_t(r * s.dv + d)];
            for (int64_t c = 0; c < nc; ++c) acc += w.sc[size_t(c * rp + r)] * w.vt[size_t(c * s.dv + d)];
            w.o[size_t(r * s.dv + d)] = acc;
        }
    }
}

// The query rows of one task: heads [h0, h0 + hb) x positions [p0, p0 + np)
// of batch i3; row r is head h0 + r / np, position p0 + r % np.
struct Task {
    int64_t i3, h0, p0, np;
};

Task task_of(const Shape & s, int64_t t) {
    const int64_t qbk = t % s.n_qblk;
    const int64_t hbk = (t / s.n_qblk) % s.n_hblk;
    Task k{t / (s.n_qblk * s.n_hblk), hbk * s.hb, qbk * s.qb, 0};
    k.np = std::min(s.qb, s.nq - k.p0);
    return k;
}

// Folds keys [c_begin, c_end) into fresh per-row softmax states w.st and
// value sums w.o for the task's rows.
void accumulate(const ggml_tensor * dst, const Shape & s, const num::AttnParams & ap, const num::Alibi & alibi,
                Scratch & w, const Task & t, int64_t c_begin, int64_t c_end) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    const ggml_tensor * mask = dst->src[3];
    const int64_t rows = s.hb * t.np;
    const int64_t rp = (rows + 7) / 8 * 8;
    const bool blocked = rows >= kMinRowsBlocked;
    if (blocked && s.kdot == nullptr) std::fill_n(w.qt.begin(), s.dk * rp, 0.0f);
    for (int64_t r = 0; r < rp; ++r) w.st[r] = num::OnlineSoftmax{};
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t h = t.h0 + r / t.np, p = t.p0 + r % t.np;
        const float * qr = reinterpret_cast<const float *>(static_cast<const char *>(q->data) + p * q->nb[1] +
                                                           h * q->nb[2] + t.i3 * q->nb[3]);
        if (s.kdot != nullptr) {
            quantize_query(s, w, r, qr);
        } else if (blocked) {
            for (int64_t d = 0; d < s.dk; ++d) w.qt[size_t(d * rp + r)] = qr[d];
        } else {
            std::copy_n(qr, s.dk, &w.q[size_t(r * s.dk)]);
        }
        w.mrow[r] = mask ? reinterpret_cast<const uint16_t *>(static_cast<const char *>(mask->data) +
                                                               p * mask->nb[1] + (h % mask->ne[2]) * mask->nb[2] +
                                                               (t.i3 % mask->ne[3]) * mask->nb[3])
                         : nullptr;
        w.slope[r] = alibi.slope(uint32_t(h));
    }
    std::fill_n(w.o.begin(), rows * s.dv, 0.0f);
    const char * kbase = static_cast<const char *>(k->data) + (t.h0 / s.rk2) * k->nb[2] + (t.i3 / s.rk3) * k->nb[3];
    const char * vbase = static_cast<const char *>(v->data) + (t.h0 / s.rv2) * v->nb[2] + (t.i3 / s.rv3) * v->nb[3];

    for (int64_t c0 = c_begin; c0 < c_end; c0 += kTileKV) {
        const int64_t nc = tile_mask(w, rows, rp, c0, std::min(kTileKV, c_end - c0));
        if (nc == 0) continue;
        if (!blocked) {
            tile_direct(k, v, s, w, kbase, vbase, rows, rp, nc, ap);
            continue;
        }
        if (s.kdot != nullptr) {
            tile_quant_dots(s, w, kbase, k->nb[1], rows, rp, nc);
        } else {
            for (int64_t c = 0; c < nc; ++c) {
                simd::row_to_f32(k->type, kbase + w.keys[c] * k->nb[1], &w.kt[size_t(c * s.dk)], s.dk);
            }
            tile_dots(s, w, rp, nc);
        }
        if (s.vdecode) {
            decode_v(v, s, w, vbase, nc);
        } else {
            for (int64_t c = 0; c < nc; ++c) {
                simd::row_to_f32(v->type, vbase + w.keys[c] * v->nb[1], &w.vt[size_t(c * s.dv)], s.dv);
            }
        }
        tile_scores(w, rp, nc, ap);
        tile_softmax(s, w, rows, rp, nc);
        tile_pv(s, w, rows, rp, nc);
    }
}

// Adds the sinks, normalises and writes the task's rows from w.st / w.o.
void finish(ggml_tensor * dst, const Shape & s, Scratch & w, const Task & t) {
    const ggml_tensor * sinks = dst->src[4];
    for (int64_t r = 0; r < s.hb * t.np; ++r) {
        const int64_t h = t.h0 + r / t.np, p = t.p0 + r % t.np;
        num::OnlineSoftmax & st = w.st[r];
        float * o = &w.o[size_t(r * s.dv)];
        if (sinks != nullptr) {
            const float f = st.add_sink(static_cast<const float *>(sinks->data)[h]);
            if (f != 1.0f) simd::scale(o, f, s.dv);
        }
        simd::scale(o, st.inv_sum(), s.dv);
        char * out = static_cast<char *>(dst->data) + h * dst->nb[1] + p * dst->nb[2] + t.i3 * dst->nb[3];
        std::copy_n(o, s.dv, reinterpret_cast<float *>(out));
    }
}

// Too few tasks to occupy the pool (decode with few KV heads): the keys are
// split into chunks processed in parallel, each leaving (max, sum, values)
// per row, and the chunks are merged with the usual rescaling.
void run_split(rt::host::ThreadPool & pool, ggml_tensor * dst, const Shape & s, const num::AttnParams & ap,
               const num::Alibi & alibi, int64_t n_tasks, int64_t n_split) {
    const int64_t chunk = ((s.nkv + n_split - 1) / n_split + kTileKV - 1) / kTileKV * kTileKV;
    n_split = (s.nkv + chunk - 1) / chunk;
    const int64_t row_len = s.dv + 2;             // max, sum, then the values
    const int64_t stride = kMaxRows * row_len;    // per (task, chunk)
    std::vector<float> part(size_t(n_tasks * n_split * stride));
    pool.parallel_for(n_tasks * n_split, 1, [&](int64_t j0, int64_t j1) {
        Scratch w(s);
        for (int64_t j = j0; j < j1; ++j) {
            const Task t = task_of(s, j / n_split);
            const int64_t c0 = (j % n_split) * chunk;
            accumulate(dst, s, ap, alibi, w, t, c0, std::min(s.nkv, c0 + chunk));
            float * out = &part[size_t(j * stride)];
            for (int64_t r = 0; r < s.hb * t.np; ++r) {
                out[r * row_len]     = w.st[r].m;
                out[r * row_len + 1] = w.st[r].s;
                std::copy_n(&w.o[size_t(r * s.dv)], s.dv, out + r * row_len + 2);
            }
        }
    });
    pool.parallel_for(n_tasks, 1, [&](int64_t t0, int64_t t1) {
        Scratch w(s);
        for (int64_t ti = t0; ti < t1; ++ti) {
            const Task t = task_of(s, ti);
            for (int64_t r = 0; r < s.hb * t.np; ++r) {
                num::OnlineSoftmax & st = w.st[r];
                st = num::OnlineSoftmax{};
                float * o = &w.o[size_t(r * s.dv)];
                std::fill_n(o, s.dv, 0.0f);
                for (int64_t c = 0; c < n_split; ++c) {
                    const float * in = &part[size_t((ti * n_split + c) * stride + r * row_len)];
                    if (in[0] == -INFINITY) continue;  // nothing visible in this chunk
                    const float f = st.rescale_to(in[0]);
                    const float g = std::exp(in[0] - st.m);
                    simd::scale_axpy(o, f, in + 2, g, s.dv);
                    st.add(in[1] * g);
                }
            }
            finish(dst, s, w, t);
        }
    });
}

} // namespace

// Block-type K/V are read in place when the query rows that share a KV head
// fit one task (decode, short GQA batches): each K/V row is then read once.
// With more tasks per KV head each would decode the same V rows again, and
// decoding the caches once to F16 (flash_attn_cvt.cpp) is cheaper.
bool flash_attn_in_place(const ggml_tensor * node) {
    const ggml_tensor * q = node->src[0];
    const ggml_tensor * k = node->src[1];
    return q->ne[1] * (q->ne[2] / k->ne[2]) <= kMaxRows;
}

Status flash_attn_ext(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const Shape s = make_shape(node);
    const num::AttnParams ap = num::attn_params_from(reinterpret_cast<const int32_t *>(node->op_params));
    const num::Alibi alibi = num::make_alibi(ap.max_bias, uint32_t(s.nh));
    const int64_t n_tasks = s.nq3 * s.n_hblk * s.n_qblk;
    // Split the keys only when the tasks leave threads idle and every chunk
    // keeps at least a few tiles.
    const int64_t n_split = std::min<int64_t>((2 * pool.size() + n_tasks - 1) / n_tasks, s.nkv / (8 * kTileKV));
    if (n_tasks < pool.size() && n_split > 1) {
        run_split(pool, node, s, ap, alibi, n_tasks, n_split);
        return true;
    }
    pool.parallel_for(n_tasks, 1, [&](int64_t t0, int64_t t1) {
        Scratch w(s);
        for (int64_t ti = t0; ti < t1; ++ti) {
            const Task t = task_of(s, ti);
            accumulate(node, s, ap, alibi, w, t, 0, s.nkv);
            finish(node, s, w, t);
        }
    });
    return true;
}

} // namespace standin::kernels::host
