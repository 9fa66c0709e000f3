// Quantizers for the block types a KV cache or a CPY may be written in: Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, Q1_0, Q2_0, MXFP4, NVFP4, TQ2_0 and IQ4_NL. Each
// rounds exactly like the quantizer ggml-cpu's SET_ROWS and CPY call for its
// type (the reference one but for Q8_0, below), which is what
// test-backend-ops holds every backend to: the same comparisons, the
// same float operations in the same order, products kept out of fused
// multiply-adds (mul_unfused, below). A block whose bytes differ by one
// rounding reads back a whole quantization step away.
//
// Included by quants.h after its block layouts and decoders (which it uses),
// whose list of encoded types (SI_QUANT_ENCODE_TYPES) names these; scalar
// SI_HD code, so CUDA kernels can call it too.
#pragma once

namespace standin::quant {

// --- quantizers ----------------------------------------------------------------
// These round exactly like ggml's CPU backend, which is what test-backend-ops
// holds every backend to (a KV cache written by SET_ROWS must hold the same
// bytes): for Q4_0 that is the reference quantize_row_q4_0_ref; for Q8_0 the
// CPU backend's own quantizer, which differs from the reference only on exact
// ties (it multiplies by 127/amax and rounds half to even).

// a * b rounded to float and never fused with a following add (the host kernels
// are compiled with FMA contraction on; the reference is not). The empty asm
// hides the product from the optimizer, so it cannot form an FMA with it.
SI_HD float mul_unfused(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#elif defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    float p = a * b;
    __asm__("" : "+x"(p));
    return p;
#else
    volatile float p = a * b;
    return p;
#endif
}

// Q8_0: d = amax / 127, q = x * (127 / amax) rounded half to even.
SI_HD void quantize(const float * x, BlockQ8_0 & b) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
        const float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    const float d  = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b.d = num::f32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) {
        b.qs[j] = int8_t(rintf(x[j] * id));
    }
}

// Q4_0: the signed value of largest magnitude maps to -8; the others to
// trunc(x/d + 8.5) clamped to 15.
SI_HD void quantize(const float * x, BlockQ4_0 & b) {
    // vmax: the first element of largest magnitude (NaN never compares larger),
    // found without data-dependent branches in the max loop.
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
        const float a = fabsf(x[j]);
        amax = a > amax ? a : amax;
    }
    float vmax = 0.0f;
    if (amax > 0.0f) {
        for (int j = 0; j < kQK; ++j) {
            if (fabsf(x[j]) == amax) {
                vmax = x[j];
                break;
            }
        }
    }
    const float d  = vmax / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = num::f32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
        const int lo = int(int8_t(mul_unfused(x[j], id) + 8.5f));
        const int hi = int(int8_t(mul_unfused(x[j + kQK / 2], id) + 8.5f));
        b.qs[j] = uint8_t((lo < 15 ? lo : 15) | ((hi < 15 ? hi : 15) << 4));
    }
}

// Q4_1 and Q5_1: d = (max - min) / (2^bits - 1), m = min, and
// q = trunc((x - min) / d + 0.5), Q4_1's clamped to 15 (Q5_1's largest value
// rounds to 31 itself). The 1/d multiply is never fused with the add.
template <int kLevels, typename Block> SI_HD void quantize_with_min(const float * x, Block & b, uint8_t (&q)[kQK]) {
    float lo = 3.402823466e+38f, hi = -3.402823466e+38f;  // FLT_MAX, as the reference starts
    for (int j = 0; j < kQK; ++j) {
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
    }
    const float d  = (hi - lo) / float(kLevels - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = num::f32_to_fp16(d);
    b.m = num::f32_to_fp16(lo);
    for (int j = 0; j < kQK; ++j) {
        const int v = int(int8_t(mul_unfused(x[j] - lo, id) + 0.5f));
        q[j] = uint8_t(v < kLevels - 1 ? v : kLevels - 1);
    }
}

// The fifth bits of 32 five-bit values, bit j for element j (little-endian).
SI_HD void store_high_bits(const uint8_t (&q)[kQK], uint8_t (&qh)[4]) {
    uint32_t h = 0;
    for (int j = 0; j < kQK; ++j) h |= uint32_t((q[j] >> 4) & 1u) << j;
    for (int i = 0; i < 4; ++i) qh[i] = uint8_t(h >> (8 * i));
}

SI_HD void quantize(const float * x, BlockQ4_1 & b) {
    uint8_t q[kQK];
    quantize_with_min<16>(x, b, q);
    for (int j = 0; j < kQK / 2; ++j) b.qs[j] = uint8_t(q[j] | (q[j + kQK / 2] << 4));
}

SI_HD void quantize(const float * x, BlockQ5_1 & b) {
    uint8_t q[kQK];
    quantize_with_min<32>(x, b, q);
    for (int j = 0; j < kQK / 2; ++j) b.qs[j] = uint8_t((q[j] & 15) | ((q[j + kQK / 2] & 15) << 4));
    store_high_bits(q, b.qh);
}

// Q5_0: as Q4_0 with 32 levels: the signed value of largest magnitude maps
// to -16, the others to trunc(x/d + 16.5) clamped to 31.
SI_HD void quantize(const float * x, BlockQ5_0 & b) {
    float amax = 0.0f, vmax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            vmax = x[j];
        }
    }
    const float d  = vmax / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = num::f32_to_fp16(d);
    uint8_t q[kQK];
    for (int j = 0; j < kQK; ++j) {
        const int v = int(int8_t(mul_unfused(x[j], id) + 16.5f));
        q[j] = uint8_t(v < 31 ? v : 31);
    }
    for (int j = 0; j < kQK / 2; ++j) b.qs[j] = uint8_t((q[j] & 15) | ((q[j + kQK / 2] & 15) << 4));
    store_high_bits(q, b.qh);
}

namespace enc {

// The first value of largest magnitude, and that magnitude.
SI_HD float signed_amax(const float * x, int n, float & amax) {
    amax = 0.0f;
    float v = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            v = x[j];
        }
    }
    return v;
}

// The index of the E2M1 level (doubled, e2m1_twice) times d nearest to x;
// the first one on ties.
SI_HD int nearest_e2m1(float x, float d) {
    int best = 0;
    float err = fabsf(mul_unfused(float(e2m1_twice(0)), d) - x);
    for (int i = 1; i < 16; ++i) {
        const float e = fabsf(mul_unfused(float(e2m1_twice(i)), d) - x);
        if (e < err) {
            best = i;
            err = e;
        }
    }
    return best;
}

// Index of the IQ4_NL level nearest to x (the upper one of two equally near).
SI_HD int nearest_iq4nl(float x) {
    if (x <= float(iq4nl_level(0))) return 0;
    if (x >= float(iq4nl_level(15))) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < float(iq4nl_level(mid))) hi = mid;
        else lo = mid;
    }
    return x - float(iq4nl_level(hi - 1)) < float(iq4nl_level(hi)) - x ? hi - 1 : hi;
}

// Unsigned E4M3 code of x > 0 (ue4m3_half reads it back halved): the top 3
// mantissa bits rounded up on the next bit, saturating at 0x7E (448); below
// the normal range, the nearest multiple of 2^-9 up to 7 of them.
SI_HD uint8_t ue4m3_of(float x) {
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    const uint32_t bits = num::f32_bits(x);
    int e = int((bits >> 23) & 0xFF) - 127 + 7;
    if (e <= 0) {
        int m = int(x * 512.0f + 0.5f);
        m = m > 7 ? 7 : m;
        return m < 1 ? uint8_t(0) : uint8_t(m);
    }
    if (e >= 15) return 0x7E;
    int m = int((bits >> 20) & 7) + int((bits >> 19) & 1);
    if (m > 7) {
        m = 0;
        if (++e >= 15) return 0x7E;
    }
    return uint8_t((e << 3) | m);
}

} // namespace enc

// Q1_0: d = mean |x|; the bit of each element is its sign (set for x >= 0).
SI_HD void quantize(const float * x, BlockQ1_0 & b) {
    float sum = 0.0f;
    for (int j = 0; j < BlockQ1_0::kElems; ++j) sum += fabsf(x[j]);
    b.d = num::f32_to_fp16(sum / float(BlockQ1_0::kElems));
    for (int j = 0; j < BlockQ1_0::kElems / 8; ++j) b.qs[j] = 0;
    for (int j = 0; j < BlockQ1_0::kElems; ++j) {
        if (x[j] >= 0.0f) b.qs[j / 8] |= uint8_t(1u << (j % 8));
    }
}

// Q2_0: d = max |x|; field q = round(x / d) + 1 clamped to 0..3.
SI_HD void quantize(const float * x, BlockQ2_0 & b) {
    float amax = 0.0f;
    for (int j = 0; j < BlockQ2_0::kElems; ++j) {
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    }
    const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
    b.d = num::f32_to_fp16(amax);
    for (int j = 0; j < BlockQ2_0::kElems / 4; ++j) b.qs[j] = 0;
    for (int j = 0; j < BlockQ2_0::kElems; ++j) {
        int q = int(roundf(x[j] * id)) + 1;
        q = q < 0 ? 0 : q > 3 ? 3 : q;
        b.qs[j / 4] |= uint8_t(q << (2 * (j % 4)));
    }
}

// MXFP4: the power-of-two scale 2^(floor(log2 amax) - 2), each element the
// nearest E2M1 level.
SI_HD void quantize(const float * x, BlockMXFP4 & b) {
    float amax;
    enc::signed_amax(x, kQK, amax);
    const uint8_t e = amax > 0.0f ? uint8_t(floorf(log2f(amax)) - 2.0f + 127.0f) : uint8_t(0);
    const float d = e8m0_half(e);
    b.e = e;
    for (int j = 0; j < kQK / 2; ++j) {
        b.qs[j] = uint8_t(enc::nearest_e2m1(x[j], d) | (enc::nearest_e2m1(x[j + kQK / 2], d) << 4));
    }
}

// NVFP4: per run of 16, the E4M3 scale of amax / 6, each element the nearest
// E2M1 level under the scale as stored.
SI_HD void quantize(const float * x, BlockNVFP4 & b) {
    for (int s = 0; s < 4; ++s) {
        const float * xs = x + 16 * s;
        float amax;
        enc::signed_amax(xs, 16, amax);
        const uint8_t ue = enc::ue4m3_of(amax / 6.0f);
        b.d[s] = ue;
        const float d = ue4m3_half(ue);
        for (int j = 0; j < 8; ++j) {
            b.qs[8 * s + j] = uint8_t(enc::nearest_e2m1(xs[j], d) | (enc::nearest_e2m1(xs[8 + j], d) << 4));
        }
    }
}

// TQ2_0: d = max |x|; each field round(x / d) + 1 (half away from zero).
SI_HD void quantize(const float * x, BlockTQ2_0 & b) {
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
    b.d = num::f32_to_fp16(amax);
    for (int h = 0; h < 2; ++h) {
        const float * xh = x + 128 * h;
        for (int m = 0; m < 32; ++m) {
            int q = 0;
            for (int n = 0; n < 4; ++n) q += ((int(lroundf(xh[m + 32 * n] * id)) + 1) & 3) << (2 * n);
            b.qs[32 * h + m] = uint8_t(q);
        }
    }
}

// IQ4_NL: levels from the scale that maps the signed value of largest
// magnitude to level -127, then the scale refitted to those levels by least
// squares weighted by x^2. An all-but-zero block is stored as zeros.
SI_HD void quantize(const float * x, BlockIQ4_NL & b) {
    float amax;
    const float vmax = enc::signed_amax(x, kQK, amax);
    uint8_t l[kQK];
    float d = 0.0f;
    if (amax < 1e-15f) {
        for (int j = 0; j < kQK; ++j) l[j] = 0;
    } else {
        const float id = 1.0f / (vmax / float(iq4nl_level(0)));
        float sumqx = 0.0f, sumq2 = 0.0f;
        for (int j = 0; j < kQK; ++j) {
            l[j] = uint8_t(enc::nearest_iq4nl(mul_unfused(id, x[j])));  // unfused: it is compared inside
            const float q = float(iq4nl_level(l[j]));
            const float w = x[j] * x[j];
            sumqx += mul_unfused(w * q, x[j]);
            sumq2 += mul_unfused(w * q, q);
        }
        d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    }
    b.d = num::f32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) b.qs[j] = uint8_t(l[j] | (l[j + kQK / 2] << 4));
}

} // namespace standin::quant
