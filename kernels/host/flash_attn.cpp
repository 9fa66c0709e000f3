// FLASH_ATTN_EXT: out = softmax(score(Q K^T) + slope * mask) V per head, with
// score(s) = s * scale, or c * tanh(s * scale / c) with a logit soft cap c;
// op_params = scale, max_bias (ALiBi), logit_softcap. Q is F32, K and V are
// F32, F16 or BF16 (each may be any view with contiguous rows: a KV-cache
// slice, permuted, or V a sub-view of K); mask optional F16 (row = query
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
// Tasks with only a couple of rows use plain dot products instead (padding
// them to 8 lanes would waste most of the FMAs). Tiles in which every row is
// masked to -inf are skipped. Arithmetic is f32 throughout.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o FLASH_ATTN_EXT
// Time: test-backend-ops perf -b STANDIN_HOST0 -o FLASH_ATTN_EXT
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/common/softmax.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/simd_math.h"
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
    return s;
}

struct Scratch {
    std::vector<float> qt;    // [dk][kMaxRows] queries, transposed (blocked scores)
    std::vector<float> q;     // [kMaxRows][dk] queries (dot-product scores)
    std::vector<float> o;     // [kMaxRows][dv] running weighted value sums
    std::vector<float> kt;    // [kTileKV][dk] the tile's keys
    std::vector<float> vt;    // [kTileKV][dv] the tile's values
    std::vector<float> sc;    // [kTileKV][rp] scores, then weights
    std::vector<float> dots;  // [kTileKV][rp] raw q.k
    std::vector<num::OnlineSoftmax> st;
    std::vector<const uint16_t *> mrow;
    std::vector<float> slope, msub, rsum;
    explicit Scratch(const Shape & s)
        : qt(size_t(s.dk * kMaxRows)), q(size_t(kMaxRows * s.dk)), o(size_t(kMaxRows * s.dv)),
          kt(size_t(kTileKV * s.dk)), vt(size_t(kTileKV * s.dv)), sc(size_t(kTileKV * kMaxRows)),
          dots(size_t(kTileKV * kMaxRows)), st(kMaxRows), mrow(kMaxRows), slope(kMaxRows), msub(kMaxRows),
          rsum(kMaxRows) {}
};

// Starts a tile's scores with the mask term: sc[c][r] = slope_r * mask_r[c]
// (0 without a mask, and for padding rows). Returns false when every real
// row is masked to -inf over the whole tile.
bool tile_mask(Scratch & w, int64_t rows, int64_t rp, int64_t c0, int64_t nc) {
    bool any = false;
    for (int64_t r = 0; r < rp; ++r) {
        const uint16_t * m = r < rows ? w.mrow[r] : nullptr;
        if (m == nullptr) {
            for (int64_t c = 0; c < nc; ++c) w.sc[size_t(c * rp + r)] = 0.0f;
            any = any || r < rows;
            continue;
        }
        for (int64_t c = 0; c < nc; ++c) {
            const float mv = w.slope[r] * num::fp16_to_f32(m[c0 + c]);
            w.sc[size_t(c * rp + r)] = mv;
            any = any || mv != -INFINITY;
        }
    }
    return any;
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

void tile_dots(const Shape & s, Scratch & w, int64_t rows, int64_t rp, int64_t nc) {
    if (rows < kMinRowsBlocked) {
        for (int64_t r = 0; r < rows; ++r) {
            const float * qr = &w.q[size_t(r * s.dk)];
            for (int64_t c = 0; c < nc; ++c) {
                w.dots[size_t(c * rp + r)] = simd::dot_f32(qr, &w.kt[size_t(c * s.dk)], s.dk);
            }
        }
        return;
    }
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

// One task: heads [h0, h0 + hb) x positions [p0, p0 + qb) of batch i3.
void run_task(const ggml_tensor * dst, const Shape & s, const num::AttnParams & ap, const num::Alibi & alibi,
              Scratch & w, int64_t i3, int64_t h0, int64_t p0) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    const ggml_tensor * mask = dst->src[3];
    const ggml_tensor * sinks = dst->src[4];
    const int64_t np = std::min(s.qb, s.nq - p0);
    const int64_t rows = s.hb * np;
    const int64_t rp = (rows + 7) / 8 * 8;
    const bool blocked = rows >= kMinRowsBlocked;
    if (blocked) std::fill_n(w.qt.begin(), s.dk * rp, 0.0f);
    for (int64_t r = 0; r < rp; ++r) w.st[r] = num::OnlineSoftmax{};
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t h = h0 + r / np, p = p0 + r % np;
        const float * qr = reinterpret_cast<const float *>(static_cast<const char *>(q->data) + p * q->nb[1] +
                                                           h * q->nb[2] + i3 * q->nb[3]);
        if (blocked) {
            for (int64_t d = 0; d < s.dk; ++d) w.qt[size_t(d * rp + r)] = qr[d];
        } else {
            std::copy_n(qr, s.dk, &w.q[size_t(r * s.dk)]);
        }
        w.mrow[r] = mask ? reinterpret_cast<const uint16_t *>(static_cast<const char *>(mask->data) +
                                                               p * mask->nb[1] + (h % mask->ne[2]) * mask->nb[2] +
                                                               (i3 % mask->ne[3]) * mask->nb[3])
                         : nullptr;
        w.slope[r] = alibi.slope(uint32_t(h));
    }
    std::fill_n(w.o.begin(), rows * s.dv, 0.0f);
    const char * kbase = static_cast<const char *>(k->data) + (h0 / s.rk2) * k->nb[2] + (i3 / s.rk3) * k->nb[3];
    const char * vbase = static_cast<const char *>(v->data) + (h0 / s.rv2) * v->nb[2] + (i3 / s.rv3) * v->nb[3];

    for (int64_t c0 = 0; c0 < s.nkv; c0 += kTileKV) {
        const int64_t nc = std::min(kTileKV, s.nkv - c0);
        if (!tile_mask(w, rows, rp, c0, nc)) continue;
        for (int64_t c = 0; c < nc; ++c) {
            simd::row_to_f32(k->type, kbase + (c0 + c) * k->nb[1], &w.kt[size_t(c * s.dk)], s.dk);
            simd::row_to_f32(v->type, vbase + (c0 + c) * v->nb[1], &w.vt[size_t(c * s.dv)], s.dv);
        }
        tile_dots(s, w, rows, rp, nc);
        tile_scores(w, rp, nc, ap);
        tile_softmax(s, w, rows, rp, nc);
        tile_pv(s, w, rows, rp, nc);
    }

    for (int64_t r = 0; r < rows; ++r) {
        const int64_t h = h0 + r / np, p = p0 + r % np;
        num::OnlineSoftmax & st = w.st[r];
        float * o = &w.o[size_t(r * s.dv)];
        if (sinks != nullptr) {
            const float f = st.add_sink(static_cast<const float *>(sinks->data)[h]);
            if (f != 1.0f) simd::scale(o, f, s.dv);
        }
        simd::scale(o, st.inv_sum(), s.dv);
        char * out = static_cast<char *>(dst->data) + h * dst->nb[1] + p * dst->nb[2] + i3 * dst->nb[3];
        std::copy_n(o, s.dv, reinterpret_cast<float *>(out));
    }
}

} // namespace

bool flash_attn_ext(rt::Stream & stream, ggml_tensor * node) {
    auto & pool = static_cast<rt::host::HostStream &>(stream).pool();
    const Shape s = make_shape(node);
    const num::AttnParams ap = num::attn_params_from(reinterpret_cast<const int32_t *>(node->op_params));
    const num::Alibi alibi = num::make_alibi(ap.max_bias, uint32_t(s.nh));
    const int64_t n_tasks = s.nq3 * s.n_hblk * s.n_qblk;
    pool.parallel_for(n_tasks, 1, [&](int64_t t0, int64_t t1) {
        Scratch w(s);
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t qbk = t % s.n_qblk;
            const int64_t hbk = (t / s.n_qblk) % s.n_hblk;
            const int64_t i3 = t / (s.n_qblk * s.n_hblk);
            run_task(node, s, ap, alibi, w, i3, hbk * s.hb, qbk * s.qb);
        }
    });
    return true;
}

} // namespace standin::kernels::host
