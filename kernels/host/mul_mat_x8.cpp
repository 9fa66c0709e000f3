// Packed-weight MUL_MAT tiles at the x86-64-v3 level (mul_mat_x8.h,
// mul_mat_x8_k.h, mul_mat_x8_lowbit.h), and the choice of level for them (isa.h).
//
// AVX2 has no 8-bit dot product into int32: maddubs gives pairs in int16 and
// madd with ones adds the pairs into int32. Q4_0 keeps the pair sums of a
// whole block in int16 and widens once per block: a lane then sums 16
// products of a nibble (0..15) and an activation byte (|q| <= 128), at most
// 16 * 15 * 128 = 30720 < 32767, so nothing saturates. Q8_0 products reach
// 127 * 128 * 2 per pair, so each word is widened at once; its signed
// weights go through |x| and sign(y, x) as maddubs needs one unsigned side,
// and so do the levels of IQ4_NL, MXFP4 and IQ4_XS.
//
// Test: tests/kernels/test_packed.cpp (against the unpacked kernels and a
// double-precision product, every level the CPU has).
#define SI_X8_TARGET
#include "kernels/host/mul_mat_x8_grid.h"
#include "kernels/host/mul_mat_x8_lowbit.h"

#include "kernels/host/isa.h"

namespace standin::kernels::host::mm {

namespace {

struct OpsAvx2 {
    static __m256i dot_u(__m256i s, __m256i x, __m256i y) { return _mm256_add_epi16(s, _mm256_maddubs_epi16(x, y)); }
    static __m256i finish_u(__m256i s) { return _mm256_madd_epi16(s, _mm256_set1_epi16(1)); }
    static __m256i dot_s(__m256i s, __m256i xa, __m256i x, __m256i y) {
        const __m256i p16 = _mm256_maddubs_epi16(xa, _mm256_sign_epi8(y, x));
        return _mm256_add_epi32(s, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
    }
    static __m256i finish_s(__m256i s) { return s; }
    // The K formats' int16 lanes are widened by the madd that applies a
    // sub-block's scale. A word adds 2 products of a code (0..m) and an
    // activation byte to a lane, at most 2 * m * 128, so the lane holds
    // 32767 / (256 m) words without saturating: Q4_K's 8 (a sub-block
    // accumulates like Q4_0's block), Q5_K's 4 (31744: its sub-block is
    // widened twice) and Q6_K's 2 (32256: its runs of 16 elements, 4 words,
    // twice).
    static __m256i scale_k(__m256i s, __m256i sc, int j) { return _mm256_madd_epi16(s, lane_bytes(sc, j, j)); }
    static constexpr int sum_words(int m) { return 32767 / (256 * m); }
};

template <class B>
void tile_grid_avx2(const QTile & t) {
    static_assert(OpsAvx2::sum_words(255) == 0, "the signed form");
    tile_grid_x8<B>(t, false, [](const QTile & d) { tile_x8_k<OpsAvx2, BodyGrid<B>>(d); });
}

} // namespace

QTileFn x8_grid_tile_vnni(ggml_type type);  // mul_mat_x8_grid_vnni.cpp
QTileFn x8_grid_tile_amx(ggml_type type);   // mul_mat_x8_amx_super.cpp

QTileFn x8_grid_tile_for(ggml_type type) {
    if (isa::at_least(isa::Level::avx512_amx)) {
        if (QTileFn fn = x8_grid_tile_amx(type)) return fn;
    }
    if (isa::at_least(isa::Level::avx512_vnni)) {
        return x8_grid_tile_vnni(type);
    }
    switch (type) {
#define SI_X(type, Block) case type: return tile_grid_avx2<Block>;
        SI_HOST_GRID_TYPES(SI_X)
#undef SI_X
        default: return nullptr;
    }
}

bool x8_grid_wants_pairs(ggml_type type) {
    // As x8_wants_pairs: not where AMX takes the product.
    if (isa::at_least(isa::Level::avx512_amx) && x8_grid_tile_amx(type) != nullptr) return false;
    return isa::at_least(isa::Level::avx512_vnni) && x8_grid_tile_vnni(type) != nullptr;
}

QTileFn x8_tile_vnni(ggml_type type);  // mul_mat_x8_vnni.cpp
bool    x8_tile_vnni_pairs(ggml_type type);
QTileFn x8_tile_amx(ggml_type type);   // mul_mat_x8_amx.cpp
extern const int64_t x8_tile_amx_cols;

bool x8_wants_pairs(ggml_type type) {
    // On AMX the interleaved copy would serve only the columns left over
    // beyond a multiple of 16, which read their codes word by word instead:
    // 1B pp64 on the Intel Xeon Q4_0 380-382 t/s without the copy against
    // 371-372 with it, Q8_0 312-319 against 310-313.
    if (isa::at_least(isa::Level::avx512_amx) && x8_tile_amx(type) != nullptr) return false;
    return isa::at_least(isa::Level::avx512_vnni) && x8_tile_vnni_pairs(type);
}

void interleave_pairs(const int8_t * q, int64_t K, int64_t p0, int64_t p1, int32_t * qpair) {
    const int64_t nb = K / 32;
    for (int64_t p = p0; p < p1; ++p) {
        for (int c = 0; c < 2; ++c) {
            const int8_t * col = q + (2 * p + c) * K;
            int32_t * dst = qpair + p * nb * 16 + c;
            for (int64_t w = 0; w < 8 * nb; ++w) std::memcpy(dst + 2 * w, col + 4 * w, 4);
        }
    }
}

int64_t x8_tile_cols(ggml_type type) {
    return isa::at_least(isa::Level::avx512_amx) && x8_tile_amx(type) != nullptr ? x8_tile_amx_cols : 0;
}

QTileFn x8_tile_for(ggml_type type) {
    switch (isa::level()) {
        case isa::Level::avx512_amx:
            if (QTileFn fn = x8_tile_amx(type)) return fn;
            return x8_tile_vnni(type);
        case isa::Level::avx512_vnni: return x8_tile_vnni(type);
        case isa::Level::avx2:        break;
    }
    return x8_tile<OpsAvx2>(type);
}

} // namespace standin::kernels::host::mm
