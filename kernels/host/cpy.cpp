// CPY, DUP, CONT: copy src's elements, in row-major logical order, into dst,
// converting between F32, F16 and BF16. dst may have another shape with the same
// element count (CPY into a reshaped view); either side may be non-contiguous.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o CPY (DUP, CONT)
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/simd_math.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

// The byte offset in `t` of the element with row-major linear index k.
inline size_t offset_of(const ggml_tensor * t, int64_t k) {
    const int64_t i0 = k % t->ne[0];
    k /= t->ne[0];
    const int64_t i1 = k % t->ne[1];
    k /= t->ne[1];
    const int64_t i2 = k % t->ne[2];
    const int64_t i3 = k / t->ne[2];
    return size_t(i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

// Note [transposed copies]
// A source whose dim 1 is the dense one and dim 0 strided (CONT of a
// transposed matrix), into dst of the same shape with dense rows: element by
// element, each dst row reads one element per source line, and the lines of
// a row's 4096 elements outlast L1 before the next row needs them (a 1024 x
// 4096 F16 transpose took 24.5 ms of the demo's 31 ms graph). Blocks of kT x
// kT elements read kT runs along the source's dense dim and write kT runs
// along dst's rows, so each block touches 2 kT lines. Same types copy the
// elements' bytes; conversions go through floats with the row conversions
// (the same values as element by element).
constexpr int64_t kT = 32;

// Block (rows [r0, r0 + nr), columns [c0, c0 + nc)) of one 2-D slice: s and
// d its base addresses, snb0 the source's column stride (its dim 1 dense),
// dnb1 dst's row stride (its dim 0 dense).
void transpose_block(ggml_type st, ggml_type dt, const char * s, size_t snb0, char * d, size_t dnb1, int64_t r0, int64_t nr,
                     int64_t c0, int64_t nc) {
    const size_t ss = ggml_type_size(st), ds = ggml_type_size(dt);
    if (st == dt) {
        // The elements as 2- or 4-byte integers (F16, BF16 / F32), column by column.
        auto move = [&](auto zero) {
            using E = decltype(zero);
            for (int64_t c = c0; c < c0 + nc; ++c) {
                const E * col = reinterpret_cast<const E *>(s + size_t(c) * snb0);
                for (int64_t r = r0; r < r0 + nr; ++r) reinterpret_cast<E *>(d + size_t(r) * dnb1)[c] = col[r];
            }
        };
        ss == 2 ? move(uint16_t{}) : move(uint32_t{});
        return;
    }
    float by_col[kT][kT], by_row[kT][kT];
    for (int64_t c = 0; c < nc; ++c) simd::row_to_f32(st, s + size_t(c0 + c) * snb0 + size_t(r0) * ss, by_col[c], nr);
    for (int64_t r = 0; r < nr; ++r) {
        for (int64_t c = 0; c < nc; ++c) by_row[r][c] = by_col[c][r];
    }
    for (int64_t r = 0; r < nr; ++r) simd::row_from_f32(dt, by_row[r], d + size_t(r0 + r) * dnb1 + size_t(c0) * ds, nc);
}

// Note [transposed copies]: src and dst of the same shape, src->nb[1] its
// element size, dst->nb[0] its own.
void copy_transposed(rt::host::ThreadPool & pool, const ggml_tensor * src, ggml_tensor * dst) {
    const int64_t ne0 = src->ne[0], ne1 = src->ne[1], ne2 = src->ne[2];
    const int64_t cb = (ne0 + kT - 1) / kT, rb = (ne1 + kT - 1) / kT, per_slice = cb * rb;
    pool.parallel_for(per_slice * ne2 * src->ne[3], 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t slice = t / per_slice, i2 = slice % ne2, i3 = slice / ne2;
            const int64_t r0 = (t % per_slice) / cb * kT, c0 = (t % per_slice) % cb * kT;
            const char * s = static_cast<const char *>(src->data) + i2 * src->nb[2] + i3 * src->nb[3];
            char *       d = static_cast<char *>(dst->data) + i2 * dst->nb[2] + i3 * dst->nb[3];
            transpose_block(src->type, dst->type, s, src->nb[0], d, dst->nb[1], r0, std::min(kT, ne1 - r0), c0,
                            std::min(kT, ne0 - c0));
        }
    });
}

} // namespace

Status copy(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * src = node->src[0];
    // CPY writes into its second source (dst is a view of it); DUP/CONT into dst.
    ggml_tensor * dst = node;
    if (!is_float_type(src->type) || !is_float_type(dst->type)) {
        return copy_quant(stream, node);  // a block type on either side: cpy_quant.cpp
    }
    const int64_t n = ggml_nelements(src);
    if (n != ggml_nelements(dst)) {
        return false;
    }
    const int64_t ne00 = src->ne[0];
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, ne00));

    if (src->type == dst->type && ggml_is_contiguous(src) && ggml_is_contiguous(dst)) {
        const size_t bytes = ggml_nbytes(src);
        const int64_t chunks = int64_t((bytes + 65535) / 65536);
        pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
            const size_t b0 = size_t(c0) * 65536, b1 = std::min(bytes, size_t(c1) * 65536);
            std::memcpy(static_cast<char *>(dst->data) + b0, static_cast<const char *>(src->data) + b0, b1 - b0);
        });
        return true;
    }

    const bool same_rows = ggml_are_same_shape(src, dst);
    // Rows dense on both sides (a permuted tensor made contiguous, say): whole
    // rows at a time with the vector conversions, instead of element by element.
    // A contiguous dst of another shape (CONT to 2-D) takes src row r at linear
    // element r * ne00.
    const bool dst_linear = ggml_is_contiguous(dst);
    if ((same_rows || dst_linear) && src->nb[0] == ggml_type_size(src->type) &&
        dst->nb[0] == ggml_type_size(dst->type)) {
        pool.parallel_for(ggml_nrows(src), grain, [&](int64_t r0, int64_t r1) {
            std::vector<float> tmp(src->type != GGML_TYPE_F32 && dst->type != GGML_TYPE_F32 ? size_t(ne00) : 0);
            for (int64_t r = r0; r < r1; ++r) {
                const char * s = row_ptr(src, r);
                char * d = same_rows ? row_ptr(dst, r)
                                     : static_cast<char *>(dst->data) + size_t(r * ne00) * ggml_type_size(dst->type);
                if (src->type == dst->type) {
                    std::memcpy(d, s, size_t(ne00) * ggml_type_size(src->type));
                } else if (src->type == GGML_TYPE_F32) {
                    simd::row_from_f32(dst->type, reinterpret_cast<const float *>(s), d, ne00);
                } else if (dst->type == GGML_TYPE_F32) {
                    simd::row_to_f32(src->type, s, reinterpret_cast<float *>(d), ne00);
                } else {
                    simd::row_to_f32(src->type, s, tmp.data(), ne00);
                    simd::row_from_f32(dst->type, tmp.data(), d, ne00);
                }
            }
        });
        return true;
    }
    if (same_rows && src->nb[1] == ggml_type_size(src->type) && dst->nb[0] == ggml_type_size(dst->type)) {
        copy_transposed(pool, src, dst);  // Note [transposed copies]
        return true;
    }
    pool.parallel_for(ggml_nrows(src), grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const char * s = row_ptr(src, r);
            if (same_rows) {
                char * d = row_ptr(dst, r);
                for (int64_t i = 0; i < ne00; ++i) {
                    store_f(dst->type, d + i * dst->nb[0], load_f(src->type, s + i * src->nb[0]));
                }
                continue;
            }
            const int64_t k0 = r * ne00;
            for (int64_t i = 0; i < ne00; ++i) {
                char * d = static_cast<char *>(dst->data) + offset_of(dst, k0 + i);
                store_f(dst->type, d, load_f(src->type, s + i * src->nb[0]));
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
