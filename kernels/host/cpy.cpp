// CPY, DUP, CONT: copy src's elements, in row-major logical order, into dst,
// converting between F32, F16 and BF16. dst may have another shape with the same
// element count (CPY into a reshaped view); either side may be non-contiguous.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o CPY (DUP, CONT)
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
