// One activation column times NVFP4, Q1_0 or Q2_0 weight rows
// (mul_mat_qd_column.h) at the AVX-512 VNNI level: 64 elements a vector (an
// NVFP4 block, half a Q1_0 block), their signs applied to the activation
// codes with a byte mask and the unsigned magnitudes multiplied by vpdpbusd,
// whose lane l sums elements 4l..4l+3 as maddubs and madd do at the AVX2
// level, exactly. The float steps are those of the AVX2 level on the two
// 32-element groups in turn, so results are bit-identical to it.
// Only reached when isa::level() says the CPU has it (mul_mat_qd.cpp).
//
// Test: tests/kernels/test_quants.cpp (IntFormTypesSameBitsAloneAndAmongColumns,
// every level the CPU has).
// GCC 12's AVX-512 intrinsics: as in mul_mat_x8_vnni.cpp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define SI_X8_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#include "kernels/host/mul_mat_qd_column.h"

#include <cstring>

namespace standin::kernels::host::mm {

namespace {

using namespace standin::quant;

// group_step for two groups of 32: p and s hold the first in lanes 0..7.
SI_X8_TARGET inline __m256 group_steps2(__m256 acc, __m512i p, __m512 s, const float * dy) {
    const __m512 g = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), s, _mm512_setzero_ps());
    acc = _mm256_fmadd_ps(_mm512_castps512_ps256(g), _mm256_broadcast_ss(dy), acc);
    const __m256 g1 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(g), 1));
    return _mm256_fmadd_ps(g1, _mm256_broadcast_ss(dy + 1), acc);
}

// NVFP4: qword j of the nibbles holds elements 16j..16j+7 (low nibbles) and
// 16j+8.. (high ones), so each qword twice, the second shifted by 4, gives
// the 64 indices in element order. Their magnitudes (doubled E2M1, 0..12)
// multiply the codes negated where the index's sign bit (8) is set.
struct ColumnNVFP4 {
    using Block = BlockNVFP4;
    static constexpr int kRows = 4;
    SI_X8_TARGET static __m256 block(const BlockNVFP4 & b, const int8_t * y, const float * dy, __m256 acc) {
        const __m512i twice = _mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0);
        const __m512i shift = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0);
        const __m512i mag   = _mm512_set1_epi64(int64_t(kE2M1Twice.lo));  // entries 0..7, twice per 128 bits
        const __m256i qs  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs));
        const __m512i x   = _mm512_permutexvar_epi64(twice, _mm512_zextsi256_si512(qs));
        const __m512i idx = _mm512_and_si512(_mm512_srlv_epi64(x, shift), _mm512_set1_epi8(0x0f));
        const __m512i yv  = _mm512_loadu_si512(y);
        const __mmask64 neg = _mm512_test_epi8_mask(idx, _mm512_set1_epi8(8));
        const __m512i   ys  = _mm512_mask_sub_epi8(yv, neg, _mm512_setzero_si512(), yv);
        const __m512i   p   = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_shuffle_epi8(mag, idx), ys);
        const __m128 s4 =
            _mm_setr_ps(kUe4m3Half.v[b.d[0]], kUe4m3Half.v[b.d[1]], kUe4m3Half.v[b.d[2]], kUe4m3Half.v[b.d[3]]);
        const __m512 s = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                                               _mm512_zextps128_ps512(s4));
        return group_steps2(acc, p, s, dy);
    }
};

// Q1_0: 64 sign bits a mask; the codes negated where the bit is clear,
// summed against ones.
struct ColumnQ1_0 {
    using Block = BlockQ1_0;
    static constexpr int kRows = 4;
    SI_X8_TARGET static __m256 block(const BlockQ1_0 & b, const int8_t * y, const float * dy, __m256 acc) {
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(b.d));
        for (int h = 0; h < 2; ++h) {
            uint64_t bits;
            std::memcpy(&bits, b.qs + 8 * h, 8);
            const __m512i yv = _mm512_loadu_si512(y + 64 * h);
            const __m512i ys = _mm512_mask_sub_epi8(yv, _cvtu64_mask64(~bits), _mm512_setzero_si512(), yv);
            const __m512i p  = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), ys);
            acc = group_steps2(acc, p, d, dy + 2 * h);
        }
        return acc;
    }
};

// Q2_0: the 64 codes (value + 1) put in element order as at the AVX2 level
// (ColumnQ2_0, mul_mat_qd.cpp), 16 dwords: 128-bit lane k the bytes
// 4k..4k+3 shifted by 0, 2, 4, 6; multiplied unsigned, the activation's
// sums of 4 taken off.
struct ColumnQ2_0 {
    using Block = BlockQ2_0;
    static constexpr int kRows = 4;
    SI_X8_TARGET static __m256 block(const BlockQ2_0 & b, const int8_t * y, const float * dy, __m256 acc) {
        const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
        const __m512i shift  = _mm512_set_epi32(6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0);
        const __m512i order  = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b.qs));
        const __m512i v = _mm512_srlv_epi32(_mm512_permutexvar_epi32(spread, _mm512_castsi128_si512(x)), shift);
        const __m512i q = _mm512_and_si512(_mm512_shuffle_epi8(v, order), _mm512_set1_epi8(3));
        const __m512i yv = _mm512_loadu_si512(y);
        const __m512i ysum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), yv);
        const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, yv), ysum);
        return group_steps2(acc, p, _mm512_set1_ps(_cvtsh_ss(b.d)), dy);
    }
};

} // namespace

SI_X8_TARGET void column_nvfp4_vnni(const QTile & t) { tile_column<ColumnNVFP4>(t); }
SI_X8_TARGET void column_q1_0_vnni(const QTile & t) { tile_column<ColumnQ1_0>(t); }
SI_X8_TARGET void column_q2_0_vnni(const QTile & t) { tile_column<ColumnQ2_0>(t); }

} // namespace standin::kernels::host::mm
