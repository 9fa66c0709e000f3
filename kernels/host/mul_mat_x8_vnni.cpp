// Packed-weight MUL_MAT tiles at the AVX-512 VNNI level (mul_mat_x8.h,
// mul_mat_x8_k.h, mul_mat_x8_lowbit.h):
// vpdpbusd multiplies 4 unsigned bytes by 4 signed bytes and adds them into
// each int32 lane in one instruction, where AVX2 needs maddubs, an int16 add
// and madd. The sums are exact (no saturation), the same integers as the AVX2
// path, and the float operations per row are the same, so results are
// bit-identical to it.
//
// The 512-bit width and its column pairs: mul_mat_x8_pairs.h (Note [column pairs]).
// Only reached when isa::level() says the CPU has it (mul_mat_x8.cpp).
//
// Test: tests/kernels/test_packed.cpp runs every level the CPU has against a
// sequential reference, bit for bit, at 1 to 9 columns.
// GCC 12's AVX-512 intrinsics pass an undefined vector as the unused merge
// source of their masked builtins, which its own flow analysis then reports as
// uninitialized (fixed in later GCC); nothing here reads such a value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define SI_X8_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#include "kernels/host/mul_mat_x8_lowbit.h"
#include "kernels/host/mul_mat_x8_pairs.h"

#include <type_traits>

namespace standin::kernels::host::mm {

namespace {

// Group (8 rows from tile row r0) times NP column pairs from tile column cl0.
template <class F, int NP>
SI_X8_TARGET void group_pairs(const QTile & t, int64_t r0, int64_t cl0) {
    const uint8_t * g  = reinterpret_cast<const uint8_t *>(t.x) + r0 * int64_t(t.x_stride);
    const int64_t   nb = t.act.K / 32;
    const Pairs<NP> y(t, cl0, 32);
    const int32_t * ys[2 * NP];
    for (int c = 0; c < 2 * NP; ++c) ys[c] = t.act.q8sum + (t.c0 + cl0 + c) * nb;
    const __m512i dup = lane_dup();
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i levels = _mm512_setzero_si512();
    if constexpr (F::kForm == Form::levels) levels = _mm512_broadcast_i32x4(_mm256_castsi256_si128(level_table<F>(true)));
    __m512 acc[NP];
    for (int i = 0; i < NP; ++i) acc[i] = _mm512_setzero_ps();

    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * blk = g + b * int64_t(F::kBlock8);
        const uint8_t * qw  = blk + F::kQuants;
        __m512i s[NP];
        for (int i = 0; i < NP; ++i) s[i] = _mm512_setzero_si512();
        if constexpr (F::kForm != Form::signed_bytes) {
#pragma GCC unroll 4
            for (int w = 0; w < F::kWords; ++w) {
                const __m512i raw = dup_rows(dup, qw + 32 * w);
                __m512i lo = _mm512_and_si512(raw, m4);                        // elements 4w..4w+3
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);  // elements 16+4w..
                if constexpr (F::kForm == Form::levels) {  // plus 128, as group_x8 at this level
                    lo = _mm512_shuffle_epi8(levels, lo);
                    hi = _mm512_shuffle_epi8(levels, hi);
                }
#pragma GCC unroll 4
                for (int i = 0; i < NP; ++i) {
                    s[i] = _mm512_dpbusd_epi32(s[i], lo, y.codes(i, b, w));
                    chain512(s[i]);
                    s[i] = _mm512_dpbusd_epi32(s[i], hi, y.codes(i, b, 4 + w));
                    chain512(s[i]);
                }
            }
        } else {
#pragma GCC unroll 8
            for (int w = 0; w < F::kWords; ++w) {
                const __m512i v = dup_rows(dup, qw + 32 * w);
                const __m512i va = _mm512_abs_epi8(v);
                const __mmask64 neg = _mm512_movepi8_mask(v);
#pragma GCC unroll 4
                for (int i = 0; i < NP; ++i) {
                    const __m512i yv = y.codes(i, b, w);
                    s[i] = _mm512_dpbusd_epi32(s[i], va, _mm512_mask_sub_epi8(yv, neg, _mm512_setzero_si512(), yv));
                    chain512(s[i]);
                }
            }
        }
        const __m512 dx = _mm512_permutexvar_ps(dup, _mm512_zextps256_ps512(block_scales<F>(blk)));
#pragma GCC unroll 4
        for (int i = 0; i < NP; ++i) {
            __m512i isum = s[i];
            if constexpr (F::kForm == Form::nibble_offset) isum = _mm512_sub_epi32(isum, bcast_pair(ys[2 * i] + b, ys[2 * i + 1] + b));
            if constexpr (F::kForm == Form::levels) {
                isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(bcast_pair(ys[2 * i] + b, ys[2 * i + 1] + b), 4));
            }
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dx, y.scale(i, b)), acc[i]);
        }
    }
    store_pairs<NP>(t, r0, cl0, acc);
}

template <class F>
SI_X8_TARGET void tile_x8_pairs(const QTile & t) {
    pair_runs(
        t, [&](auto np, int64_t r, int64_t c) SI_X8_TARGET { group_pairs<F, decltype(np)::value>(t, r, c); },
        [&](int64_t r, int64_t c) SI_X8_TARGET { group_x8<OpsVnni, F, 1>(t, r, c); });
}

} // namespace

QTileFn x8_tile_vnni(ggml_type type) {
    switch (type) {
#define SI_X(name, L) case GGML_TYPE_##name: return tile_x8_pairs<L>;
        SI_X8_GROUP_FORMATS(SI_X)
#undef SI_X
#define SI_X(name, Body) case GGML_TYPE_##name: return tile_k_pairs<Body>;
        SI_X8_SUPER_FORMATS(SI_X)
#undef SI_X
        default: return nullptr;
    }
}

// Whether x8_tile_vnni(type) reads Act::qpair.
bool x8_tile_vnni_pairs(ggml_type type) { return x8_tile_vnni(type) != nullptr; }

} // namespace standin::kernels::host::mm
