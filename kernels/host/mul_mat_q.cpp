// MUL_MAT tile kernels for block-quantized weights (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, Q4_K, Q5_K, Q6_K) against int8 activations (Note [activation blocks],
// vec_dot.h). AVX2: a weight sub-block of 32 is unpacked to 32 bytes and
// multiplied with the activation bytes by maddubs (u8 x s8 -> pairs of s16) and
// madd (-> 8 s32, with ones or with the sub-block's integer scale).
//
// 32-element formats: each block is converted and accumulated in f32 with the
// product of the two scales; unsigned formats go to maddubs directly and their
// offset or minimum is applied through the activation sum s; Q8_0 uses the
// abs/sign identity x*y = |x| * (y * sign x).
// K formats: the 8 sub-blocks of a super-block are summed in int32 with their
// 6- or 8-bit scales, then one f32 multiply-add per super-block; the minimum
// (Q4_K, Q5_K) or the offset of 32 (Q6_K) is one more integer dot product of
// the scales with the activation's 16-element sums.
//
// Each tile is computed R weight rows by C activation columns at a time, so
// that one unpacked weight row serves C columns and one activation load R rows.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o MUL_MAT; time: the same with perf.
#include <immintrin.h>

#include <cstring>

#include "kernels/common/quants.h"
#include "kernels/host/vec_dot.h"

namespace standin::kernels::host::mm {

namespace {

using namespace standin::quant;

inline float f16(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i mask4() { return _mm256_set1_epi8(0x0f); }

// 16 bytes of nibbles -> 32 bytes: low nibbles (elements 0..15) then high ones.
// The 16 bytes go to both halves by a broadcast load (no shuffle-port work),
// then only the upper half is shifted.
inline __m256i nibbles16(const uint8_t * p) {
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), mask4());
}

// Bit i of the little-endian word at p -> byte i = 0x10 (the fifth bit of a
// 5-bit value). The word is broadcast straight from memory.
inline __m256i bits_to_bytes_0x10(const uint8_t * p) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
    int32_t word;
    std::memcpy(&word, p, 4);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(word), spread);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

inline __m256i load32(const void * p) { return _mm256_loadu_si256(static_cast<const __m256i *>(p)); }

// Q4_K/Q5_K: sub-blocks 2g and 2g+1 are the low and high nibbles of the same 32 bytes.
inline __m256i k_nibbles(const uint8_t * qs, int j) {
    const __m256i v = load32(qs + 32 * (j / 2));
    return _mm256_and_si256(j % 2 ? _mm256_srli_epi16(v, 4) : v, mask4());
}

// --- 32-element formats --------------------------------------------------------
// bytes(): the block's 32 values as bytes: unsigned (0..31) or, if kSigned, signed.
// dh, mh:  the block's half-precision scale d and minimum m (if kMin). The
//          block's dot product with an activation group is
//          d * dy * (dot(bytes, q) - kIntOff * 8 * sum(q)) + m * s.

struct DQ4_0 {
    using Block = BlockQ4_0;
    static constexpr bool kSigned = false, kMin = false;
    static constexpr int  kIntOff = 1;  // value = d * (nibble - 8)
    static uint16_t dh(const Block & b) { return b.d; }
    static uint16_t mh(const Block &) { return 0; }
    static __m256i bytes(const Block & b) { return nibbles16(b.qs); }
};

struct DQ4_1 {
    using Block = BlockQ4_1;
    static constexpr bool kSigned = false, kMin = true;
    static constexpr int  kIntOff = 0;  // value = d * nibble + m
    static uint16_t dh(const Block & b) { return b.d; }
    static uint16_t mh(const Block & b) { return b.m; }
    static __m256i bytes(const Block & b) { return nibbles16(b.qs); }
};

struct DQ5_0 {
    using Block = BlockQ5_0;
    static constexpr bool kSigned = false, kMin = false;
    static constexpr int  kIntOff = 2;  // value = d * (q - 16)
    static uint16_t dh(const Block & b) { return b.d; }
    static uint16_t mh(const Block &) { return 0; }
    static __m256i bytes(const Block & b) {
        return _mm256_or_si256(nibbles16(b.qs), bits_to_bytes_0x10(b.qh));
    }
};

struct DQ5_1 {
    using Block = BlockQ5_1;
    static constexpr bool kSigned = false, kMin = true;
    static constexpr int  kIntOff = 0;  // value = d * q + m
    static uint16_t dh(const Block & b) { return b.d; }
    static uint16_t mh(const Block & b) { return b.m; }
    static __m256i bytes(const Block & b) {
        return _mm256_or_si256(nibbles16(b.qs), bits_to_bytes_0x10(b.qh));
    }
};

struct DQ8_0 {
    using Block = BlockQ8_0;
    static constexpr bool kSigned = true, kMin = false;
    static constexpr int  kIntOff = 0;
    static uint16_t dh(const Block & b) { return b.d; }
    static uint16_t mh(const Block &) { return 0; }
    static __m256i bytes(const Block & b) { return load32(b.qs); }
};

// Pointers to the activation columns of one micro-kernel.
template <int C>
struct ActCols {
    const int8_t *  q[C];
    const float *   d[C];
    const float *   s[C];
    const int16_t * p8[C];
    ActCols(const QTile & t, int64_t cl0) {
        const int64_t K = t.act.K;
        for (int c = 0; c < C; ++c) {
            const int64_t col = t.c0 + cl0 + c;
            q[c]  = t.act.q + col * K;
            d[c]  = t.act.d + col * (K / 32);
            s[c]  = t.act.s + col * (K / 32);
            p8[c] = t.act.sums + col * (K / 2);
        }
    }
};

// The integer part of one block times one activation group: 8 int32 partial
// sums of dot(bytes, q) minus the format's offset term.
template <class D>
inline __m256 block_dot(__m256i xv, __m256i xa, __m256i yv, __m256i yoff) {
    __m256i p16 = D::kSigned ? _mm256_maddubs_epi16(xa, _mm256_sign_epi8(yv, xv)) : _mm256_maddubs_epi16(xv, yv);
    if constexpr (D::kIntOff > 0) p16 = _mm256_sub_epi16(p16, yoff);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

template <class D, int C>
inline __m256i group_off(const ActCols<C> & y, int c, int64_t ib) {
    if constexpr (D::kIntOff == 0) {
        return _mm256_setzero_si256();
    } else {
        const __m256i p8 = load32(y.p8[c] + ib * 16);
        return D::kIntOff == 1 ? p8 : _mm256_slli_epi16(p8, D::kIntOff - 1);
    }
}

// Runs of 8 blocks: the 8 scales of a row are converted with one vcvtph2ps and
// multiplied with the 8 activation scales in one vector op, and the minimum
// terms are one multiply-add per run; the per-block work is then only the
// integer dot product and one multiply-add with a broadcast scale. The tail of
// fewer than 8 blocks goes one block at a time with scalar scales.
template <class D, int R, int C>
void micro32(const QTile & t, int64_t r0, int64_t cl0) {
    using Block = typename D::Block;
    const int64_t nb = t.act.K / 32;
    const Block * x[R];
    for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const Block *>(t.x + (r0 + r) * t.x_stride);
    const ActCols<C> y(t, cl0);
    __m256 acc[R][C], mins[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = mins[r][c] = _mm256_setzero_ps();

    alignas(32) float scale[R][C][8];
    int64_t ib = 0;
    for (; ib + 8 <= nb; ib += 8) {
        for (int r = 0; r < R; ++r) {
            // The 8 blocks' F16 scales (and minimums) as one vector; the lanes
            // are named, not inserted in a loop, which needs unrolling to
            // compile (insert takes a constant lane) and -O1 does not unroll.
            const Block * xb = x[r] + ib;
            const __m128i dh = _mm_setr_epi16(short(D::dh(xb[0])), short(D::dh(xb[1])), short(D::dh(xb[2])),
                                              short(D::dh(xb[3])), short(D::dh(xb[4])), short(D::dh(xb[5])),
                                              short(D::dh(xb[6])), short(D::dh(xb[7])));
            __m128i mh = _mm_setzero_si128();
            if constexpr (D::kMin) {
                mh = _mm_setr_epi16(short(D::mh(xb[0])), short(D::mh(xb[1])), short(D::mh(xb[2])),
                                    short(D::mh(xb[3])), short(D::mh(xb[4])), short(D::mh(xb[5])),
                                    short(D::mh(xb[6])), short(D::mh(xb[7])));
            }
            const __m256 dx = _mm256_cvtph_ps(dh);
            for (int c = 0; c < C; ++c) {
                _mm256_store_ps(scale[r][c], _mm256_mul_ps(dx, _mm256_loadu_ps(y.d[c] + ib)));
                if constexpr (D::kMin) {
                    mins[r][c] = _mm256_fmadd_ps(_mm256_cvtph_ps(mh), _mm256_loadu_ps(y.s[c] + ib), mins[r][c]);
                }
            }
        }
#pragma GCC unroll 8
        for (int b = 0; b < 8; ++b) {
            __m256i xv[R], xa[R];
            for (int r = 0; r < R; ++r) {
                xv[r] = D::bytes(x[r][ib + b]);
                xa[r] = D::kSigned ? _mm256_abs_epi8(xv[r]) : xv[r];
            }
            for (int c = 0; c < C; ++c) {
                const __m256i yv   = load32(y.q[c] + (ib + b) * 32);
                const __m256i yoff = group_off<D>(y, c, ib + b);
                for (int r = 0; r < R; ++r) {
                    const __m256 p = block_dot<D>(xv[r], xa[r], yv, yoff);
                    acc[r][c] = _mm256_fmadd_ps(p, _mm256_broadcast_ss(&scale[r][c][b]), acc[r][c]);
                }
            }
        }
    }
    float tail[R][C] = {};
    for (; ib < nb; ++ib) {
        for (int r = 0; r < R; ++r) {
            const __m256i xv = D::bytes(x[r][ib]);
            const __m256i xa = D::kSigned ? _mm256_abs_epi8(xv) : xv;
            const float   dx = f16(D::dh(x[r][ib]));
            for (int c = 0; c < C; ++c) {
                const __m256 p = block_dot<D>(xv, xa, load32(y.q[c] + ib * 32), group_off<D>(y, c, ib));
                acc[r][c] = _mm256_fmadd_ps(p, _mm256_set1_ps(dx * y.d[c][ib]), acc[r][c]);
                if constexpr (D::kMin) tail[r][c] += f16(D::mh(x[r][ib])) * y.s[c][ib];
            }
        }
    }
    for (int c = 0; c < C; ++c) {
        float * o = t.out + (cl0 + c) * t.out_col_stride + r0;
        for (int r = 0; r < R; ++r) o[r] = hsum(acc[r][c]) + hsum(mins[r][c]) + tail[r][c];
    }
}

// --- K formats -------------------------------------------------------------------
// prep():  per super-block constants (scales unpacked to int16 vectors).
// bytes(): sub-block j's 32 values as unsigned bytes.
// w16():   sub-block j's scale(s) as madd multipliers.
// Q4_K/Q5_K: value = d * sc_j * q - dmin * m_j;  Q6_K: value = d * sc_i * (q - 32).

inline __m256i bcast_i16(__m256i v, int j) {  // lane j of both 128-bit halves, everywhere
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16(int16_t(((2 * j + 1) << 8) | (2 * j))));
}

// The 12 packed bytes of Q4_K/Q5_K -> 8 scales and 8 mins as bytes.
inline void k_unpack(const uint8_t * s, uint32_t & sc_lo, uint32_t & sc_hi, uint32_t & m_lo, uint32_t & m_hi) {
    uint32_t u0, u1, u2;
    std::memcpy(&u0, s, 4);
    std::memcpy(&u1, s + 4, 4);
    std::memcpy(&u2, s + 8, 4);
    sc_lo = u0 & 0x3f3f3f3fu;
    m_lo  = u1 & 0x3f3f3f3fu;
    sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u);
    m_hi  = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
}

struct KPrepMin {
    float   d, dmin;
    __m256i sc;   // 8 int16 scales, in both halves
    __m256i m16;  // 16 int16: min of sub-block j in lanes 2j, 2j+1
};

template <typename B>
void k_prep(const B & b, KPrepMin & p) {
    p.d    = f16(b.d);
    p.dmin = f16(b.dmin);
    uint32_t sc_lo, sc_hi, m_lo, m_hi;
    k_unpack(b.scales, sc_lo, sc_hi, m_lo, m_hi);
    const __m128i sc8 = _mm_set_epi32(0, 0, int32_t(sc_hi), int32_t(sc_lo));
    const __m128i m8  = _mm_set_epi32(0, 0, int32_t(m_hi), int32_t(m_lo));
    p.sc  = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
    p.m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
}

struct DQ4_K {
    using Block = BlockQ4_K;
    using Prep  = KPrepMin;
    static constexpr bool kMin = true;
    static void prep(const Block & b, Prep & p) { k_prep(b, p); }
    static __m256i bytes(const Block & b, int j) { return k_nibbles(b.qs, j); }
    static __m256i w16(const Prep & p, int j) { return bcast_i16(p.sc, j); }
};

struct DQ5_K {
    using Block = BlockQ5_K;
    using Prep  = KPrepMin;
    static constexpr bool kMin = true;
    static void prep(const Block & b, Prep & p) { k_prep(b, p); }
    static __m256i bytes(const Block & b, int j) {
        // Bit j of each qh byte is the fifth bit of sub-block j's element.
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(load32(b.qh), j), _mm256_set1_epi8(1));
        return _mm256_or_si256(k_nibbles(b.qs, j), _mm256_slli_epi16(hb, 4));
    }
    static __m256i w16(const Prep & p, int j) { return bcast_i16(p.sc, j); }
};

// Q6_K: sub-block j = 4h + t takes run t of half h (quants.h, dequant) and the
// scales 2j, 2j+1 (one per 16 elements).
struct DQ6_K {
    using Block = BlockQ6_K;
    struct Prep {
        float   d;
        __m128i sc8;   // 16 int8 scales
        __m256i sc16;  // the same as int16
    };
    static constexpr bool kMin = false;
    static void prep(const Block & b, Prep & p) {
        p.d    = f16(b.d);
        p.sc8  = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b.scales));
        p.sc16 = _mm256_cvtepi8_epi16(p.sc8);
    }
    static __m256i bytes(const Block & b, int j) {
        const int h = j / 4, t = j % 4;
        const __m256i ql = load32(b.ql + 64 * h + 32 * (t % 2));
        const __m256i qh = load32(b.qh + 32 * h);
        const __m256i lo = _mm256_and_si256(t < 2 ? ql : _mm256_srli_epi16(ql, 4), mask4());
        __m256i hi;
        switch (t) {
            case 0:  hi = _mm256_slli_epi16(qh, 4); break;
            case 1:  hi = _mm256_slli_epi16(qh, 2); break;
            case 2:  hi = qh; break;
            default: hi = _mm256_srli_epi16(qh, 2); break;
        }
        return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
    }
    static __m256i w16(const Prep & p, int j) {
        const __m128i pick = _mm_set_epi64x(0x0101010101010101ll * (2 * j + 1), 0x0101010101010101ll * (2 * j));
        return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(p.sc8, pick));
    }
};

template <class D, int R, int C>
void micro256(const QTile & t, int64_t r0, int64_t cl0) {
    using Block = typename D::Block;
    const int64_t K  = t.act.K;
    const int64_t nb = K / kQK_K;
    const Block * x[R];
    for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const Block *>(t.x + (r0 + r) * t.x_stride);
    const int8_t *  yq[C];
    const float *   yd[C];
    const int16_t * ybs[C];
    for (int c = 0; c < C; ++c) {
        const int64_t col = t.c0 + cl0 + c;
        yq[c]  = t.act.q + col * K;
        yd[c]  = t.act.d + col * nb;
        ybs[c] = t.act.sums + col * (K / 2);
    }
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();

    for (int64_t ib = 0; ib < nb; ++ib) {
        typename D::Prep p[R];
        for (int r = 0; r < R; ++r) D::prep(x[r][ib], p[r]);
        __m256i isum[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) isum[r][c] = _mm256_setzero_si256();
        // Unrolled so that j, and with it every shift and shuffle mask, is a constant.
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            __m256i xv[R], w[R];
            for (int r = 0; r < R; ++r) {
                xv[r] = D::bytes(x[r][ib], j);
                w[r]  = D::w16(p[r], j);
            }
            for (int c = 0; c < C; ++c) {
                const __m256i yv = load32(yq[c] + ib * kQK_K + 32 * j);
                for (int r = 0; r < R; ++r) {
                    const __m256i p32 = _mm256_madd_epi16(_mm256_maddubs_epi16(xv[r], yv), w[r]);
                    isum[r][c] = _mm256_add_epi32(isum[r][c], p32);
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            const float   dy = yd[c][ib];
            const __m256i bs = load32(ybs[c] + ib * 16);
            for (int r = 0; r < R; ++r) {
                if constexpr (D::kMin) {
                    const __m256 mins = _mm256_cvtepi32_ps(_mm256_madd_epi16(p[r].m16, bs));
                    acc[r][c] = _mm256_fnmadd_ps(mins, _mm256_set1_ps(p[r].dmin * dy), acc[r][c]);
                } else {
                    const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(p[r].sc16, bs), 5);
                    isum[r][c] = _mm256_sub_epi32(isum[r][c], off);
                }
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][c]), _mm256_set1_ps(p[r].d * dy), acc[r][c]);
            }
        }
    }
    for (int c = 0; c < C; ++c) {
        float * o = t.out + (cl0 + c) * t.out_col_stride + r0;
        for (int r = 0; r < R; ++r) o[r] = hsum(acc[r][c]);
    }
}

// --- tiles ---------------------------------------------------------------------------

// R x C of the main micro-kernels. A K-format super-block already gives the
// core eight independent sub-blocks of work, so one row at a time is fastest;
// the 32-element formats need several rows (or columns) for enough independent
// accumulation chains. Tuned on x86-64-v3 by timing.
constexpr int kCols = 4;
template <class D, int C>
constexpr int kRows = sizeof(typename D::Block) > 64 ? 1 : (C == 1 ? 4 : 2);

template <class D, int R, int C>
void micro(const QTile & t, int64_t r0, int64_t cl0) {
    if constexpr (sizeof(typename D::Block) > 64) {
        micro256<D, R, C>(t, r0, cl0);
    } else {
        micro32<D, R, C>(t, r0, cl0);
    }
}

template <class D, int C>
void rows_of(const QTile & t, int64_t cl0) {
    constexpr int R = kRows<D, C>;
    int64_t r = 0;
    for (; r + R <= t.nrows; r += R) micro<D, R, C>(t, r, cl0);
    for (; r < t.nrows; ++r) micro<D, 1, C>(t, r, cl0);
}

template <class D>
void tile(const QTile & t) {
    int64_t c = 0;
    for (; c + kCols <= t.ncols; c += kCols) rows_of<D, kCols>(t, c);
    for (; c + 2 <= t.ncols; c += 2) rows_of<D, 2>(t, c);
    for (; c < t.ncols; ++c) rows_of<D, 1>(t, c);
}

// absmax of 8k floats -> d = absmax / 127 and the multiplier 127 / absmax.
inline float group_scale(const __m256 * v, int n, float & id) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < n; ++i) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float a = _mm_cvtss_f32(m);
    id = a != 0.0f ? 127.0f / a : 0.0f;
    return a / 127.0f;
}

// 32 rounded int32 (4 vectors) -> 32 int8 in order.
inline void store_q32(const __m256i * iv, int8_t * q) {
    // packs works within 128-bit lanes; the permute restores element order.
    const __m256i p16 = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(q),
                        _mm256_permutevar8x32_epi32(p16, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

inline float half_round(float x) { return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)); }

inline int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

} // namespace

void quantize_act_32(const float * x, int64_t K, int8_t * q, float * d, float * s, int16_t * p8, int32_t * q8sum) {
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t g = 0; g < K / 32; ++g) {
        __m256 v[4];
        for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 32 * g + 8 * i);
        float id;
        const float dd = group_scale(v, 4, id);
        __m256i iv[4];
        for (int i = 0; i < 4; ++i) iv[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], _mm256_set1_ps(id)));
        store_q32(iv, q + 32 * g);
        // Half-precision d and s, as ggml's Q8_0/Q8_1 store them: the integer
        // sums then meet the same scales as in ggml-cpu (Note [activation blocks]).
        d[g] = half_round(dd);
        s[g] = half_round(dd * float(hsum_i32(_mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3])))));
        // 8 * (q[2k] + q[2k+1]): |value| <= 8 * 254, exact in int16.
        const __m256i pairs = _mm256_maddubs_epi16(ones, load32(q + 32 * g));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(p8 + 16 * g), _mm256_slli_epi16(pairs, 3));
        // The packed kernels' offset term, from the stored bytes.
        q8sum[g] = 8 * hsum_i32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
    }
}

void quantize_act_256(const float * x, int64_t K, int8_t * q, float * d, int16_t * bs) {
    for (int64_t g = 0; g < K / kQK_K; ++g) {
        __m256 v[32];
        for (int i = 0; i < 32; ++i) v[i] = _mm256_loadu_ps(x + kQK_K * g + 8 * i);
        float id;
        group_scale(v, 32, id);
        d[g] = id != 0.0f ? 1.0f / id : 0.0f;  // as ggml's Q8_K: the inverse of the multiplier
        for (int k = 0; k < 8; ++k) {
            __m256i iv[4];
            for (int i = 0; i < 4; ++i) iv[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[4 * k + i], _mm256_set1_ps(id)));
            store_q32(iv, q + kQK_K * g + 32 * k);
            bs[16 * g + 2 * k]     = int16_t(hsum_i32(_mm256_add_epi32(iv[0], iv[1])));
            bs[16 * g + 2 * k + 1] = int16_t(hsum_i32(_mm256_add_epi32(iv[2], iv[3])));
        }
    }
}

QTileFn qtile_for(ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0: return tile<DQ4_0>;
        case GGML_TYPE_Q4_1: return tile<DQ4_1>;
        case GGML_TYPE_Q5_0: return tile<DQ5_0>;
        case GGML_TYPE_Q5_1: return tile<DQ5_1>;
        case GGML_TYPE_Q8_0: return tile<DQ8_0>;
        case GGML_TYPE_Q4_K: return tile<DQ4_K>;
        case GGML_TYPE_Q5_K: return tile<DQ5_K>;
        case GGML_TYPE_Q6_K: return tile<DQ6_K>;
        default:             return qtile_int_form_for(type);
    }
}

} // namespace standin::kernels::host::mm
