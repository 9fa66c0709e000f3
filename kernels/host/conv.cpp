// Convolutions of the vision and audio encoders (op_params as ggml's builders
// store them; every tensor addressed through its strides):
//   IM2COL:    2-D (op_params[6] = 1): dst[(ic, ky, kx), ox, oy, n] =
//              src[ox s0 + kx d0 - p0, oy s1 + ky d1 - p1, ic, n], 0 outside;
//              1-D: the same without y, channels in dim 1 and batch in dim 2.
//              F32 input, F32 or F16 dst. src0 (the kernel) gives KW, KH only.
//   IM2COL_3D: the same over (x, y, z), channels IC = op_params[9] folded into
//              dim 3 of src (N * IC) and the depth into dim 3 of dst (N * OD).
//   CONV_2D:   dst[ox, oy, oc, n] = sum_{ic, ky, kx} k[kx, ky, ic, oc] *
//              src[ox s0 + kx d0 - p0, oy s1 + ky d1 - p1, ic, n]
//   CONV_2D_DW: the same with one kernel plane per channel (k[kx, ky, 0, c]).
//   CONV_TRANSPOSE_1D: dst[x, oc] = sum_{ic, k: x = i s0 + k} src[i, ic] w[k, oc, ic]
//   CONV_3D:   dst[ox, oy, oz, n OC + oc] = sum_{ic, kz, ky, kx} k[kx, ky, kz, oc C + ic] *
//              src[ox s0 + kx d0 - p0, oy s1 + ky d1 - p1, oz s2 + kz d2 - p2, n C + ic]
//              (C, N, OC: op_params[9..11])
//   COL2IM_1D: dst[t, oc] = sum over the columns landing on t of
//              src[oc K + k, t_in], t + p0 = t_in s0 + k (F32/F16/BF16, the
//              sum in f32 in rising t_in, rounded once)
//   CONV_TRANSPOSE_2D: dst[x, y, oc, n] = sum over the kernel taps and input
//              pixels landing on (x, y) (stride op_params[0], no padding) of
//              src[ix, iy, ic, n] w[kx, ky, oc, ic]
// Kernels F32 or F16 (converted to f32 once per op), inputs F32, sums in f32.
// Under an F16 kernel, CONV_2D and the transposed convolutions round each input
// value to F16 first, as ggml's reference does (it multiplies in F16), so the
// results agree to f32 rounding rather than to F16's.
// The transposed convolutions gather per output element (no accumulation
// races), so the work splits over output rows.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o IM2COL (IM2COL_3D, CONV_2D, CONV_2D_DW, CONV_3D,
//       COL2IM_1D, CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D)
#include <immintrin.h>

#include <vector>

#include "kernels/common/op_params.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/simd_math.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

float ld(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return load_f(t->type, static_cast<const char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                               i3 * t->nb[3]);
}

// A whole tensor as dense f32 in ggml's index order (kernels are small next to
// the work done with them).
std::vector<float> dense_f32(const ggml_tensor * t) {
    std::vector<float> out(static_cast<size_t>(ggml_nelements(t)));
    size_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) out[k++] = ld(t, i0, i1, i2, i3);
    return out;
}

float dot(const float * a, const float * b, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    float s = simd::hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

// v as the product's other factor: rounded to F16 under an F16 kernel.
float as_kernel_type(ggml_type kt, float v) {
    return kt == GGML_TYPE_F16 ? num::fp16_to_f32(num::f32_to_fp16(v)) : v;
}

struct Conv2d {
    int s0, s1, p0, p1, d0, d1;
};

Conv2d conv2d_params(const ggml_tensor * n) {
    return Conv2d{op_i32(n, 0), op_i32(n, 1), op_i32(n, 2), op_i32(n, 3), op_i32(n, 4), op_i32(n, 5)};
}

} // namespace

Status im2col(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * k = node->src[0];
    const ggml_tensor * src = node->src[1];
    const Conv2d c = conv2d_params(node);
    const bool is_2d = op_i32(node, 6) == 1;
    const int64_t N = is_2d ? src->ne[3] : src->ne[2], IC = is_2d ? src->ne[2] : src->ne[1];
    const int64_t IH = is_2d ? src->ne[1] : 1, IW = src->ne[0];
    const int64_t KH = is_2d ? k->ne[1] : 1, KW = k->ne[0];
    const int64_t OH = is_2d ? node->ne[2] : 1, OW = node->ne[1];
    const int64_t row = IC * KH * KW;
    const size_t es = ggml_type_size(node->type);
    // One task: one output position (ox, oy, n), i.e. one dst row.
    stream.pool().parallel_for(N * OH * OW, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, row)),
                                 [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t ox = t % OW, oy = (t / OW) % OH, n = t / (OW * OH);
            char * d = static_cast<char *>(node->data) + t * row * es;
            for (int64_t ic = 0; ic < IC; ++ic)
                for (int64_t ky = 0; ky < KH; ++ky)
                    for (int64_t kx = 0; kx < KW; ++kx) {
                        const int64_t ix = ox * c.s0 + kx * c.d0 - c.p0;
                        const int64_t iy = oy * c.s1 + ky * c.d1 - c.p1;
                        float v = 0.0f;
                        if (ix >= 0 && ix < IW && iy >= 0 && iy < IH) {
                            v = is_2d ? ld(src, ix, iy, ic, n) : ld(src, ix, ic, n, 0);
                        }
                        store_f(node->type, d + ((ic * KH + ky) * KW + kx) * es, v);
                    }
        }
    });
    return true;
}

Status im2col_3d(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * k = node->src[0];
    const ggml_tensor * src = node->src[1];
    const int s0 = op_i32(node, 0), s1 = op_i32(node, 1), s2 = op_i32(node, 2);
    const int p0 = op_i32(node, 3), p1 = op_i32(node, 4), p2 = op_i32(node, 5);
    const int d0 = op_i32(node, 6), d1 = op_i32(node, 7), d2 = op_i32(node, 8);
    const int64_t IC = op_i32(node, 9);
    const int64_t N = src->ne[3] / IC, ID = src->ne[2], IH = src->ne[1], IW = src->ne[0];
    if (N == 0) return true;  // a partial image only: no output
    const int64_t KD = k->ne[2], KH = k->ne[1], KW = k->ne[0];
    const int64_t OD = node->ne[3] / N, OH = node->ne[2], OW = node->ne[1];
    const int64_t row = IC * KD * KH * KW;
    const size_t es = ggml_type_size(node->type);
    stream.pool().parallel_for(N * OD * OH * OW, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, row)),
                                 [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t ox = t % OW, oy = (t / OW) % OH, oz = (t / (OW * OH)) % OD, n = t / (OW * OH * OD);
            char * d = static_cast<char *>(node->data) + t * row * es;
            int64_t j = 0;
            for (int64_t ic = 0; ic < IC; ++ic)
                for (int64_t kz = 0; kz < KD; ++kz)
                    for (int64_t ky = 0; ky < KH; ++ky)
                        for (int64_t kx = 0; kx < KW; ++kx, ++j) {
                            const int64_t ix = ox * s0 + kx * d0 - p0;
                            const int64_t iy = oy * s1 + ky * d1 - p1;
                            const int64_t iz = oz * s2 + kz * d2 - p2;
                            float v = 0.0f;
                            if (ix >= 0 && ix < IW && iy >= 0 && iy < IH && iz >= 0 && iz < ID) {
                                v = ld(src, ix, iy, iz, n * IC + ic);
                            }
                            store_f(node->type, d + j * es, v);
                        }
        }
    });
    return true;
}

Status conv_2d(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * k = node->src[0];    // [KW, KH, IC, OC]
    const ggml_tensor * src = node->src[1];  // [W, H, IC, N]
    const Conv2d c = conv2d_params(node);
    const int64_t KW = k->ne[0], KH = k->ne[1], IC = k->ne[2], OC = k->ne[3];
    const int64_t IW = src->ne[0], IH = src->ne[1];
    const int64_t OW = node->ne[0], OH = node->ne[1], N = node->ne[3];
    const int64_t patch = IC * KH * KW;
    const std::vector<float> w = dense_f32(k);  // row oc: the patch-ordered weights
    // One task: one output row (oy, n). Its patches are gathered once, then
    // every output channel is a dot product per patch.
    stream.pool().parallel_for(OH * N, 1, [&](int64_t t0, int64_t t1) {
        std::vector<float> cols(static_cast<size_t>(OW * patch));
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t oy = t % OH, n = t / OH;
            for (int64_t ox = 0; ox < OW; ++ox) {
                float * pr = cols.data() + ox * patch;
                for (int64_t ic = 0; ic < IC; ++ic)
                    for (int64_t ky = 0; ky < KH; ++ky)
                        for (int64_t kx = 0; kx < KW; ++kx) {
                            const int64_t ix = ox * c.s0 + kx * c.d0 - c.p0;
                            const int64_t iy = oy * c.s1 + ky * c.d1 - c.p1;
                            *pr++ = (ix >= 0 && ix < IW && iy >= 0 && iy < IH)
                                        ? as_kernel_type(k->type, ld(src, ix, iy, ic, n))
                                        : 0.0f;
                        }
            }
            for (int64_t oc = 0; oc < OC; ++oc) {
                const float * wr = w.data() + oc * patch;
                for (int64_t ox = 0; ox < OW; ++ox) {
                    *reinterpret_cast<float *>(static_cast<char *>(node->data) + ox * node->nb[0] + oy * node->nb[1] +
                                               oc * node->nb[2] + n * node->nb[3]) =
                        dot(cols.data() + ox * patch, wr, patch);
                }
            }
        }
    });
    return true;
}

Status conv_2d_dw(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * k = node->src[0];    // [KW, KH, 1, C]
    const ggml_tensor * src = node->src[1];  // [W, H, C, N]
    const Conv2d c = conv2d_params(node);
    const int64_t KW = k->ne[0], KH = k->ne[1];
    const int64_t IW = src->ne[0], IH = src->ne[1], C = src->ne[2];
    const int64_t OW = node->ne[0], OH = node->ne[1], N = node->ne[3];
    const std::vector<float> w = dense_f32(k);
    stream.pool().parallel_for(C * N, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t ch = t % C, n = t / C;
            const float * wc = w.data() + ch * KW * KH;
            for (int64_t oy = 0; oy < OH; ++oy)
                for (int64_t ox = 0; ox < OW; ++ox) {
                    float sum = 0.0f;
                    for (int64_t ky = 0; ky < KH; ++ky) {
                        const int64_t iy = oy * c.s1 + ky * c.d1 - c.p1;
                        if (iy < 0 || iy >= IH) continue;
                        for (int64_t kx = 0; kx < KW; ++kx) {
                            const int64_t ix = ox * c.s0 + kx * c.d0 - c.p0;
                            if (ix < 0 || ix >= IW) continue;
                            sum += ld(src, ix, iy, ch, n) * wc[ky * KW + kx];
                        }
                    }
                    *reinterpret_cast<float *>(static_cast<char *>(node->data) + ox * node->nb[0] + oy * node->nb[1] +
                                               ch * node->nb[2] + n * node->nb[3]) = sum;
                }
        }
    });
    return true;
}

Status conv_transpose_1d(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * k = node->src[0];    // [K, OC, IC]
    const ggml_tensor * src = node->src[1];  // [L, IC]
    const int s0 = op_i32(node, 0);
    const int64_t K = k->ne[0], OC = k->ne[1], IC = k->ne[2], L = src->ne[0];
    const int64_t OL = node->ne[0];
    const std::vector<float> w = dense_f32(k);
    stream.pool().parallel_for(OC, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t oc = c0; oc < c1; ++oc)
            for (int64_t x = 0; x < OL; ++x) {
                float sum = 0.0f;
                // taps kk with (x - kk) a multiple of s0 and the input index in range
                for (int64_t kk = x % s0; kk < K && kk <= x; kk += s0) {
                    const int64_t i = (x - kk) / s0;
                    if (i >= L) continue;
                    for (int64_t ic = 0; ic < IC; ++ic) {
                        sum += as_kernel_type(k->type, ld(src, i, ic, 0, 0)) * w[(ic * OC + oc) * K + kk];
                    }
                }
                *reinterpret_cast<float *>(static_cast<char *>(node->data) + x * node->nb[0] + oc * node->nb[1]) = sum;
            }
    });
    return true;
}

Status conv_transpose_2d(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * k = node->src[0];    // [KW, KH, OC, IC]
    const ggml_tensor * src = node->src[1];  // [IW, IH, IC, N]
    const int s = op_i32(node, 0);
    const int64_t KW = k->ne[0], KH = k->ne[1], OC = k->ne[2], IC = k->ne[3];
    const int64_t IW = src->ne[0], IH = src->ne[1];
    const int64_t W = node->ne[0], H = node->ne[1], N = node->ne[3];
    const std::vector<float> w = dense_f32(k);
    stream.pool().parallel_for(H * OC * N, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t y = t % H, oc = (t / H) % OC, n = t / (H * OC);
            for (int64_t x = 0; x < W; ++x) {
                float sum = 0.0f;
                for (int64_t ky = y % s; ky < KH && ky <= y; ky += s) {
                    const int64_t iy = (y - ky) / s;
                    if (iy >= IH) continue;
                    for (int64_t kx = x % s; kx < KW && kx <= x; kx += s) {
                        const int64_t ix = (x - kx) / s;
                        if (ix >= IW) continue;
                        for (int64_t ic = 0; ic < IC; ++ic) {
                            sum += as_kernel_type(k->type, ld(src, ix, iy, ic, n)) *
                                   w[((ic * OC + oc) * KH + ky) * KW + kx];
                        }
                    }
                }
                *reinterpret_cast<float *>(static_cast<char *>(node->data) + x * node->nb[0] + y * node->nb[1] +
                                           oc * node->nb[2] + n * node->nb[3]) = sum;
            }
        }
    });
    return true;
}

Status conv_3d(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * k = node->src[0];    // [KW, KH, KD, C * OC]
    const ggml_tensor * src = node->src[1];  // [W, H, D, C * N]
    const int s0 = op_i32(node, 0), s1 = op_i32(node, 1), s2 = op_i32(node, 2);
    const int p0 = op_i32(node, 3), p1 = op_i32(node, 4), p2 = op_i32(node, 5);
    const int d0 = op_i32(node, 6), d1 = op_i32(node, 7), d2 = op_i32(node, 8);
    const int64_t C = op_i32(node, 9), OC = op_i32(node, 11);
    const int64_t KW = k->ne[0], KH = k->ne[1], KD = k->ne[2];
    const int64_t OW = node->ne[0], OH = node->ne[1], OD = node->ne[2], N = node->ne[3] / OC;
    const int64_t patch = C * KD * KH * KW;
    const std::vector<float> w = dense_f32(k);  // row oc: its C * KD * KH * KW weights
    // One task: one output row (oy, oz, n); patches gathered once per row.
    stream.pool().parallel_for(OH * OD * N, 1, [&](int64_t t0, int64_t t1) {
        std::vector<float> cols(static_cast<size_t>(OW * patch));
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t oy = t % OH, oz = (t / OH) % OD, n = t / (OH * OD);
            for (int64_t ox = 0; ox < OW; ++ox) {
                float * pr = cols.data() + ox * patch;
                for (int64_t ic = 0; ic < C; ++ic)
                    for (int64_t kz = 0; kz < KD; ++kz)
                        for (int64_t ky = 0; ky < KH; ++ky)
                            for (int64_t kx = 0; kx < KW; ++kx) {
                                const int64_t ix = ox * s0 + kx * d0 - p0, iy = oy * s1 + ky * d1 - p1;
                                const int64_t iz = oz * s2 + kz * d2 - p2;
                                const bool in = ix >= 0 && ix < src->ne[0] && iy >= 0 && iy < src->ne[1] && iz >= 0 &&
                                                iz < src->ne[2];
                                *pr++ = in ? as_kernel_type(k->type, ld(src, ix, iy, iz, n * C + ic)) : 0.0f;
                            }
            }
            for (int64_t oc = 0; oc < OC; ++oc) {
                const float * wr = w.data() + oc * patch;
                for (int64_t ox = 0; ox < OW; ++ox) {
                    *reinterpret_cast<float *>(static_cast<char *>(node->data) + ox * node->nb[0] + oy * node->nb[1] +
                                               oz * node->nb[2] + (n * OC + oc) * node->nb[3]) =
                        dot(cols.data() + ox * patch, wr, patch);
                }
            }
        }
    });
    return true;
}

Status col2im_1d(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];  // [K * OC, T_in]
    const int64_t s0 = op_i32(node, 0), OC = op_i32(node, 1), p0 = op_i32(node, 2);
    const int64_t K = src->ne[0] / OC, T_in = src->ne[1], T_out = node->ne[0];
    stream.pool().parallel_for(OC * T_out, 1024, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t oc = t / T_out, to = t % T_out, ta = to + p0;
            int64_t lo = ta - K + 1 > 0 ? (ta - K + 1 + s0 - 1) / s0 : 0;  // first t_in whose column reaches ta
            const int64_t hi = std::min(T_in - 1, ta / s0);
            float sum = 0.0f;
            for (int64_t ti = lo; ti <= hi; ++ti) {
                const int64_t kk = ta - ti * s0;
                if (kk >= 0 && kk < K) sum += ld(src, oc * K + kk, ti, 0, 0);
            }
            store_f(node->type, static_cast<char *>(node->data) + to * node->nb[0] + oc * node->nb[1], sum);
        }
    });
    return true;
}

} // namespace standin::kernels::host
