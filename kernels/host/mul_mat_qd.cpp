// MUL_MAT tile kernel for the weight types in integer form (Note [integer
// form], quants.h: Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4, NVFP4, Q1_0, Q2_0)
// against int8 activations (Note [activation blocks], vec_dot.h).
//
// Each weight row of a tile is decoded once into int8 values and per-16
// scales (and mins), then serves every activation column of the tile: per 32
// elements one maddubs/madd integer dot product (signed weights through the
// abs/sign identity x*y = |x| * (y * sign x)) leaves the sums of the two
// 16-element runs in lanes 0..3 and 4..7, which are scaled by the runs' scales
// in f32 and, per activation group, by the group's scale. The minimum of Q2_K
// is one more product of the mins with the activation's 16-element sums.
// The integer sums are those of ggml-cpu's vec_dot for these types, so results
// differ from it only by the order of float additions.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o MUL_MAT; tests/kernels/test_quants.cpp.
#include <immintrin.h>

#include <vector>

#include "kernels/common/quants.h"
#include "kernels/host/vec_dot.h"

namespace standin::kernels::host::mm {

namespace {

using namespace standin::quant;

// One weight row in integer form: K values; per 32 elements the 8 lane scales
// [s0 s0 s0 s0 s1 s1 s1 s1] of its two runs; per 16 elements the run's min.
struct DecodedRow {
    std::vector<int8_t> q;
    std::vector<float>  sv;
    std::vector<float>  mn;
};

template <class B>
void decode_row(const B * x, int64_t K, DecodedRow & row) {
    row.q.resize(size_t(K));
    row.sv.resize(size_t(K / 4));
    row.mn.resize(B::kMin ? size_t(K / 16) : 0);
    for (int64_t run = 0; run < K / 16; ++run) {
        const int64_t ib = run * 16 / B::kElems;
        float sc = 0.0f, mn = 0.0f;
        decode_run(x[ib], int(run % (B::kElems / 16)), row.q.data() + run * 16, sc, mn);
        float * lanes = row.sv.data() + (run / 2) * 8 + (run % 2) * 4;
        for (int i = 0; i < 4; ++i) lanes[i] = sc;
        if constexpr (B::kMin) row.mn[size_t(run)] = mn;
    }
}

inline __m256i load32(const void * p) { return _mm256_loadu_si256(static_cast<const __m256i *>(p)); }

// Row `row` times C activation columns starting at tile column cl0.
template <class B, int G, int C>
void dot_cols(const QTile & t, const DecodedRow & row, int64_t r, int64_t cl0) {
    const int64_t K = t.act.K;
    const int8_t *  yq[C];
    const float *   yd[C];
    const int16_t * ybs[C];
    for (int c = 0; c < C; ++c) {
        const int64_t col = t.c0 + cl0 + c;
        yq[c]  = t.act.q + col * K;
        yd[c]  = t.act.d + col * (K / G);
        ybs[c] = t.act.sums + col * (K / 2);
    }
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t g = 0; g < K / G; ++g) {
        __m256 gacc[C];
        for (int c = 0; c < C; ++c) gacc[c] = _mm256_setzero_ps();
        for (int64_t k = g * G; k < (g + 1) * G; k += 32) {
            const __m256i w  = load32(row.q.data() + k);
            const __m256i wa = _mm256_abs_epi8(w);
            const __m256  sv = _mm256_loadu_ps(row.sv.data() + k / 4);
            for (int c = 0; c < C; ++c) {
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(load32(yq[c] + k), w)), ones);
                gacc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sv, gacc[c]);
            }
        }
        for (int c = 0; c < C; ++c) {
            const __m256 dy = _mm256_set1_ps(yd[c][g]);
            if constexpr (B::kMin) {
                static_assert(G == kQK_K, "a minimum needs the 16-element sums of the 256 activation format");
                const __m256i bs = load32(ybs[c] + 16 * g);
                const __m256  lo = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(bs)));
                const __m256  hi = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(bs, 1)));
                const float * mn = row.mn.data() + 16 * g;
                const __m256 mins = _mm256_fmadd_ps(lo, _mm256_loadu_ps(mn), _mm256_mul_ps(hi, _mm256_loadu_ps(mn + 8)));
                gacc[c] = _mm256_sub_ps(gacc[c], mins);
            }
            acc[c] = _mm256_fmadd_ps(gacc[c], dy, acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) t.out[(cl0 + c) * t.out_col_stride + r] = hsum(acc[c]);
}

template <class B, int G>
void tile_int(const QTile & t) {
    thread_local DecodedRow row;
    for (int64_t r = 0; r < t.nrows; ++r) {
        decode_row(reinterpret_cast<const B *>(t.x + r * t.x_stride), t.act.K, row);
        int64_t c = 0;
        for (; c + 4 <= t.ncols; c += 4) dot_cols<B, G, 4>(t, row, r, c);
        for (; c < t.ncols; ++c) dot_cols<B, G, 1>(t, row, r, c);
    }
}

} // namespace

QTileFn qtile_int_form_for(ggml_type type) {
    switch (type) {
#define SI_X(type, Block, group) case type: return tile_int<Block, group>;
        SI_QUANT_INT_FORM_TYPES(SI_X)
#undef SI_X
        default: return nullptr;
    }
}

} // namespace standin::kernels::host::mm
