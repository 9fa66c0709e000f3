// The i-quant formats on lattice grids (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S, IQ1_S, IQ1_M): block layouts and their integer form (Note [integer
// form], quants.h, which includes this file at the point where the helpers it
// uses are defined; include quants.h, not this).
#pragma once

#include "kernels/common/iq_grids.inc"  // generated from the pinned ggml (cmake/IqGrids.cmake)

namespace standin::quant {

// The i-quants on lattice grids (Note [integer form]): each group of 8 (or 4)
// elements is an index into one of ggml's grids of small integers, plus 8
// sign bits; the grids themselves are extracted from the pinned ggml at
// configure time (cmake/IqGrids.cmake), not kept here.
// IQ2_XXS: per 32, 8 bytes: 4 grid indices (iq2xxs grid), then a 32-bit word
// of four 7-bit sign indices (bits 7l..) and a 4-bit scale (bits 28..31).
struct BlockIQ2_XXS {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = false;
    uint16_t d;
    uint8_t  qs[kQK_K / 4];  // ggml declares 32 uint16 words; read here as their bytes
};
// IQ2_XS: per group of 8 a 16-bit word: 9-bit grid index, 7-bit sign index;
// per 32 a byte of two 4-bit scales (one per 16).
struct BlockIQ2_XS {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = false;
    uint16_t d;
    uint16_t qs[kQK_K / 8];
    uint8_t  scales[kQK_K / 32];
};
// IQ2_S: per group of 8 a byte of grid index (2 more bits in qh, per 32 one
// byte) and a byte of 8 explicit signs (the second half of qs); scales as IQ2_XS.
struct BlockIQ2_S {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = false;
    uint16_t d;
    uint8_t  qs[kQK_K / 4];
    uint8_t  qh[kQK_K / 32];
    uint8_t  scales[kQK_K / 32];
};
// IQ3_XXS: per group of 4 a byte of grid index (iq3xxs grid); per 32 a 32-bit
// word of sign indices and scale, as IQ2_XXS, after the 64 index bytes.
struct BlockIQ3_XXS {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = false;
    uint16_t d;
    uint8_t  qs[3 * kQK_K / 8];
};
// IQ3_S: per group of 4 a byte of grid index with a ninth bit in qh; 8 explicit
// signs per group of 8; per 32 a 4-bit odd scale (1 + 2s), two per byte.
struct BlockIQ3_S {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = false;
    uint16_t d;
    uint8_t  qs[kQK_K / 4];
    uint8_t  qh[kQK_K / 32];
    uint8_t  signs[kQK_K / 8];
    uint8_t  scales[kQK_K / 64];
};
// IQ1_S: per group of 8 an 11-bit index into the iq1s grid (values -1, 0, 1):
// 8 bits in qs, 3 in qh; per 32, qh also holds a 3-bit odd scale (bits 12..14)
// and the sign of a shift of 1/8 added to every value (bit 15).
struct BlockIQ1_S {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = false;
    uint16_t d;
    uint8_t  qs[kQK_K / 8];
    uint16_t qh[kQK_K / 32];
};
// IQ1_M: as IQ1_S, with the 3 high index bits and the shift's sign per group
// of 8 in a nibble of qh, a 3-bit scale per 16, and the half-precision
// super-block scale spread over the top nibbles of the four scale words.
struct BlockIQ1_M {
    static constexpr int  kElems = kQK_K;
    static constexpr bool kMin   = false;
    uint8_t qs[kQK_K / 8];
    uint8_t qh[kQK_K / 16];
    uint8_t scales[kQK_K / 32];
};

static_assert(sizeof(BlockIQ2_XXS) == 66, "IQ2_XXS block is 66 bytes on disk");
static_assert(sizeof(BlockIQ2_XS) == 74, "IQ2_XS block is 74 bytes on disk");
static_assert(sizeof(BlockIQ2_S) == 82, "IQ2_S block is 82 bytes on disk");
static_assert(sizeof(BlockIQ3_XXS) == 98, "IQ3_XXS block is 98 bytes on disk");
static_assert(sizeof(BlockIQ3_S) == 110, "IQ3_S block is 110 bytes on disk");
static_assert(sizeof(BlockIQ1_S) == 50, "IQ1_S block is 50 bytes on disk");
static_assert(sizeof(BlockIQ1_M) == 56, "IQ1_M block is 56 bytes on disk");

// --- the i-quant grids -------------------------------------------------------------
// Entry i of a grid as a little-endian word of 8 (IQ1/IQ2) or 4 (IQ3) byte
// values, read through its accessor (iq2xxs_grid(i), ...). CUDA device code
// reads its own copy of each table: nvcc preprocesses the host and the device
// pass apart, so SI_GRID_AT names the copy of the pass it expands in.
#if defined(__CUDA_ARCH__)
#define SI_GRID_AT(name, i) name##_device[i]
#else
#define SI_GRID_AT(name, i) name[i]
#endif
#if defined(__CUDACC__)
#define SI_GRID_COPIES(type, name, ...)            \
    inline constexpr type name[] = {__VA_ARGS__}; \
    static const __device__ type name##_device[] = {__VA_ARGS__};
#else
#define SI_GRID_COPIES(type, name, ...) inline constexpr type name[] = {__VA_ARGS__};
#endif
// The grid's entries come last: their list macro expands to many arguments.
#define SI_GRID_TABLE(type, name, accessor, ...)  \
    namespace grid {                              \
    SI_GRID_COPIES(type, name, __VA_ARGS__)       \
    }                                             \
    SI_HD type accessor(int i) { return SI_GRID_AT(grid::name, i); }

SI_GRID_TABLE(uint64_t, kIq2xxs, iq2xxs_grid, SI_IQ2XXS_GRID)
SI_GRID_TABLE(uint64_t, kIq2xs, iq2xs_grid, SI_IQ2XS_GRID)
SI_GRID_TABLE(uint64_t, kIq2s, iq2s_grid, SI_IQ2S_GRID)
SI_GRID_TABLE(uint32_t, kIq3xxs, iq3xxs_grid, SI_IQ3XXS_GRID)
SI_GRID_TABLE(uint32_t, kIq3s, iq3s_grid, SI_IQ3S_GRID)
SI_GRID_TABLE(uint64_t, kIq1s, iq1s_grid, SI_IQ1S_GRID)
#undef SI_GRID_TABLE
#undef SI_GRID_COPIES

// A 7-bit sign index to 8 sign bits: the eighth makes the count of set bits even.
SI_HD constexpr uint32_t signs_of_index(uint32_t i) {
    uint32_t p = i ^ (i >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    return i | ((p & 1u) << 7);
}

// 8 grid bytes (word w, byte j) with sign bit j of `signs`: q[j] = +-byte.
SI_HD void signed_bytes8(uint64_t w, uint32_t signs, int8_t * q) {
    for (int j = 0; j < 8; ++j) {
        const int v = int((w >> (8 * j)) & 0xffu);
        q[j] = int8_t(((signs >> j) & 1u) ? -v : v);
    }
}

// IQ1 grid bytes are -1, 0, 1 and every value is shifted by +-1/8: in units
// of 1/8, q = 8 * byte +- 1 (the scale then holds the 1/8).
SI_HD void iq1_bytes8(uint64_t w, bool minus, int8_t * q) {
    for (int j = 0; j < 8; ++j) q[j] = int8_t(8 * int(int8_t(uint8_t(w >> (8 * j)))) + (minus ? -1 : 1));
}

SI_HD void decode_run(const BlockIQ2_XXS & b, int r, int8_t * q, float & sc, float &) {
    const uint8_t * g  = b.qs + 8 * (r / 2);
    const uint32_t  a1 = load_u32_le(g + 4);
    for (int h = 0; h < 2; ++h) {
        const int l = 2 * (r % 2) + h;
        signed_bytes8(iq2xxs_grid(g[l]), signs_of_index((a1 >> (7 * l)) & 127u), q + 8 * h);
    }
    sc = half(b.d) * (0.5f + float(a1 >> 28)) * 0.25f;
}

SI_HD void decode_run(const BlockIQ2_XS & b, int r, int8_t * q, float & sc, float &) {
    const int ib = r / 2;
    for (int h = 0; h < 2; ++h) {
        const uint32_t v = b.qs[4 * ib + 2 * (r % 2) + h];
        signed_bytes8(iq2xs_grid(int(v & 511u)), signs_of_index(v >> 9), q + 8 * h);
    }
    sc = half(b.d) * (0.5f + float((b.scales[ib] >> (4 * (r % 2))) & 15)) * 0.25f;
}

SI_HD void decode_run(const BlockIQ2_S & b, int r, int8_t * q, float & sc, float &) {
    const int ib = r / 2;
    for (int h = 0; h < 2; ++h) {
        const int l   = 2 * (r % 2) + h;
        const int idx = b.qs[4 * ib + l] | ((b.qh[ib] << (8 - 2 * l)) & 0x300);
        signed_bytes8(iq2s_grid(idx), b.qs[kQK_K / 8 + 4 * ib + l], q + 8 * h);
    }
    sc = half(b.d) * (0.5f + float((b.scales[ib] >> (4 * (r % 2))) & 15)) * 0.25f;
}

SI_HD void decode_run(const BlockIQ3_XXS & b, int r, int8_t * q, float & sc, float &) {
    const int      ib = r / 2;
    const uint32_t a  = load_u32_le(b.qs + kQK_K / 4 + 4 * ib);
    for (int h = 0; h < 2; ++h) {
        const int l = 2 * (r % 2) + h;
        const uint64_t w = uint64_t(iq3xxs_grid(b.qs[8 * ib + 2 * l])) |
                           (uint64_t(iq3xxs_grid(b.qs[8 * ib + 2 * l + 1])) << 32);
        signed_bytes8(w, signs_of_index((a >> (7 * l)) & 127u), q + 8 * h);
    }
    sc = half(b.d) * (0.5f + float(a >> 28)) * 0.5f;
}

SI_HD void decode_run(const BlockIQ3_S & b, int r, int8_t * q, float & sc, float &) {
    const int ib = r / 2;
    const int hb = b.qh[ib];
    for (int h = 0; h < 2; ++h) {
        const int l  = 2 * (r % 2) + h;
        const int i1 = b.qs[8 * ib + 2 * l] | ((hb << (8 - 2 * l)) & 256);
        const int i2 = b.qs[8 * ib + 2 * l + 1] | ((hb << (7 - 2 * l)) & 256);
        signed_bytes8(uint64_t(iq3s_grid(i1)) | (uint64_t(iq3s_grid(i2)) << 32), b.signs[4 * ib + l], q + 8 * h);
    }
    sc = half(b.d) * float(1 + 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 15));
}

SI_HD void decode_run(const BlockIQ1_S & b, int r, int8_t * q, float & sc, float &) {
    const int      ib = r / 2;
    const uint32_t hb = b.qh[ib];
    for (int h = 0; h < 2; ++h) {
        const int l = 2 * (r % 2) + h;
        iq1_bytes8(iq1s_grid(int(b.qs[4 * ib + l] | (((hb >> (3 * l)) & 7u) << 8))), (hb & 0x8000u) != 0, q + 8 * h);
    }
    sc = half(b.d) * float(2 * ((hb >> 12) & 7u) + 1) * 0.125f;
}

SI_HD void decode_run(const BlockIQ1_M & b, int r, int8_t * q, float & sc, float &) {
    const int ib = r / 2;
    uint16_t sw[4];
    for (int i = 0; i < 4; ++i) sw[i] = uint16_t(b.scales[2 * i] | (b.scales[2 * i + 1] << 8));
    const uint16_t dh = uint16_t((sw[0] >> 12) | ((sw[1] >> 8) & 0x00f0) | ((sw[2] >> 4) & 0x0f00) | (sw[3] & 0xf000));
    for (int h = 0; h < 2; ++h) {
        const int l  = 2 * (r % 2) + h;
        const int hn = b.qh[2 * ib + l / 2] >> (4 * (l % 2));  // this group's nibble
        iq1_bytes8(iq1s_grid(b.qs[4 * ib + l] | ((hn & 7) << 8)), (hn & 8) != 0, q + 8 * h);
    }
    // This run's scale word read from its bytes, not sw[ib / 2]: an array
    // indexed at run time would sit in local memory on the GPU.
    const int sword = b.scales[2 * (ib / 2)] | (b.scales[2 * (ib / 2) + 1] << 8);
    sc = half(dh) * float(2 * ((sword >> (6 * (ib % 2) + 3 * (r % 2))) & 7) + 1) * 0.125f;
}

} // namespace standin::quant
