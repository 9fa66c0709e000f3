// Scalar numerics shared by the host and CUDA kernels: half and bfloat16
// conversions with the same rounding as ggml's reference (round to nearest,
// ties to even; NaN stays NaN). One definition for both devices, so a result
// computed on either side rounds identically.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define SI_HD __host__ __device__ __forceinline__
#else
#define SI_HD inline
#endif

namespace standin::num {

SI_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return u;
#endif
}

SI_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
#endif
}

SI_HD float fp16_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
    // The hardware conversion: exact, like every half -> float conversion, so
    // it equals the portable code below (one instruction instead of a loop).
    return __half2float(__ushort_as_half(h));
#else
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t       exp  = (h >> 10) & 0x1fu;
    uint32_t       mant = h & 0x3ffu;
    if (exp == 0x1f) {  // inf / NaN
        return f32_from_bits(sign | 0x7f800000u | (mant << 13));
    }
    if (exp == 0) {
        if (mant == 0) {
            return f32_from_bits(sign);
        }
        // Subnormal half: shift the leading one into the implicit position.
        int e = 113;  // 127 - 15 + 1
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            --e;
        }
        return f32_from_bits(sign | (uint32_t(e) << 23) | ((mant & 0x3ffu) << 13));
    }
    return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
#endif
}

SI_HD uint16_t f32_to_fp16(float f) {
    const uint32_t x    = f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t exp  = (x >> 23) & 0xffu;
    uint32_t       mant = x & 0x7fffffu;
    if (exp == 0xff) {  // inf stays inf; NaN keeps a payload bit so it stays NaN
        return uint16_t(sign | 0x7c00u | (mant != 0 ? 0x200u | (mant >> 13) : 0u));
    }
    const int e = int(exp) - 112;  // rebias 127 -> 15
    if (e >= 0x1f) {
        return uint16_t(sign | 0x7c00u);  // overflow
    }
    if (e <= 0) {
        if (e < -10) {
            return uint16_t(sign);  // below half the smallest subnormal
        }
        mant |= 0x800000u;
        const uint32_t shift   = uint32_t(14 - e);
        uint32_t       m       = mant >> shift;
        const uint32_t rem     = mant & ((1u << shift) - 1u);
        const uint32_t halfway = 1u << (shift - 1u);
        m += (rem > halfway || (rem == halfway && (m & 1u))) ? 1u : 0u;
        return uint16_t(sign | m);
    }
    uint32_t       h   = sign | (uint32_t(e) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    // A carry out of the mantissa correctly bumps the exponent (up to inf).
    h += (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ? 1u : 0u;
    return uint16_t(h);
}

SI_HD float bf16_to_f32(uint16_t b) { return f32_from_bits(uint32_t(b) << 16); }

SI_HD uint16_t f32_to_bf16(float f) {
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return uint16_t((x >> 16) | 64u);  // quiet NaN
    }
    return uint16_t((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

// Entry i of value v in a falling order (larger values first; -0 equal to +0;
// NaN after every number; equal values by rising index) as one integer whose
// falling order is that order: the high word maps the float onto unsigned
// integers monotonically, the low word is the index complemented. A sort or
// rank count then compares integers (moe_fuse.cu's router ranks experts so).
SI_HD uint64_t falling_order_key(float v, uint32_t i) {
    uint32_t u = f32_bits(v + 0.0f);  // -0 + 0 is +0
    if (v != v) {
        u = 0u;  // NaN: below the key of -inf (0x007fffff)
    } else {
        u = (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
    }
    return (uint64_t(u) << 32) | uint64_t(~i);
}

// Entry i of value v in ARGSORT's order (ascending or descending by value,
// -0 equal to +0, equal values by rising index, NaN after every number in
// both) as one integer whose rising order is that order; its low word is i.
// A comparison of floats alone is no order once a NaN is in the row (NaN
// neither before nor after anything), and std::sort with such a comparison
// may read outside its range.
SI_HD uint64_t sort_order_key(float v, uint32_t i, bool desc) {
    if (desc) return ~falling_order_key(v, i);
    uint32_t u = f32_bits(v + 0.0f);
    if (v != v) {
        u = 0xffffffffu;  // NaN: above the key of +inf (0xff800000)
    } else {
        u = (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
    }
    return (uint64_t(u) << 32) | uint64_t(i);
}

} // namespace standin::num
