// Data movement and small arithmetic on whole tensors:
//   CONCAT: dst = src0 followed by src1 along dim op_params[0] (any dim);
//           element-sized copies, so any non-quantized type, any strides;
//           block-quantized types are copied block by block (rows contiguous).
//   REPEAT: dst = src0 tiled to dst's shape (each dim a multiple); any
//           non-quantized type, any strides.
//   ADD1:   dst = src0 + src1[0] (a scalar); float-family types.
//   ACC:    dst = src0, then a strided window of it (op_params: nb1, nb2, nb3,
//           offset in bytes) gets src1 added; F32, src0/dst contiguous.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o CONCAT (REPEAT, ACC); ADD1 has no
// test-backend-ops case and is checked by tests/kernels/test_rope_softmax.cpp.
#include <cstring>

#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

constexpr int64_t kMinBytesPerTask = 65536;

int64_t grain_for(const ggml_tensor * t) {
    const int64_t row_bytes = std::max<int64_t>(1, t->ne[0] * int64_t(ggml_type_size(t->type)));
    return std::max<int64_t>(1, kMinBytesPerTask / row_bytes);
}

// Copies n elements of size esz between strided rows.
inline void copy_elems(char * d, size_t dnb, const char * s, size_t snb, int64_t n, size_t esz) {
    if (dnb == esz && snb == esz) {
        std::memcpy(d, s, size_t(n) * esz);
        return;
    }
    for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * dnb, s + i * snb, esz);
}

inline const char * at(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return static_cast<const char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

void concat(rt::host::ThreadPool & pool, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int dim = dst->op_params[0];
    // Copy units: elements, or whole blocks for block-quantized types.
    const size_t esz = ggml_type_size(dst->type);
    const int64_t blk = ggml_blck_size(dst->type);
    const int64_t ne1 = dst->ne[1], ne2 = dst->ne[2];
    pool.parallel_for(ggml_nrows(dst), grain_for(dst), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            int64_t i[4] = {0, r % ne1, (r / ne1) % ne2, r / (ne1 * ne2)};
            char * d = row_ptr(dst, r);
            if (dim == 0) {
                const int64_t na = a->ne[0] / blk;
                copy_elems(d, dst->nb[0], at(a, i[1], i[2], i[3]), a->nb[0], na, esz);
                copy_elems(d + na * dst->nb[0], dst->nb[0], at(b, i[1], i[2], i[3]), b->nb[0], b->ne[0] / blk, esz);
                continue;
            }
            const ggml_tensor * s = a;
            if (i[dim] >= a->ne[dim]) {
                i[dim] -= a->ne[dim];
                s = b;
            }
            copy_elems(d, dst->nb[0], at(s, i[1], i[2], i[3]), s->nb[0], dst->ne[0] / blk, esz);
        }
    });
}

void repeat(rt::host::ThreadPool & pool, ggml_tensor * dst) {
    const ggml_tensor * s = dst->src[0];
    const size_t esz = ggml_type_size(dst->type);
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2], n00 = s->ne[0];
    pool.parallel_for(ggml_nrows(dst), grain_for(dst), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
            const char * x = at(s, i1 % s->ne[1], i2 % s->ne[2], i3 % s->ne[3]);
            char * d = row_ptr(dst, r);
            for (int64_t k = 0; k < ne0; k += n00) {
                copy_elems(d + k * dst->nb[0], dst->nb[0], x, s->nb[0], n00, esz);
            }
        }
    });
}

void add1(rt::host::ThreadPool & pool, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const float v = load_f(b->type, static_cast<const char *>(b->data));
    const int64_t n = dst->ne[0];
    pool.parallel_for(ggml_nrows(dst), grain_for(dst), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const char * x = row_ptr(a, r);
            char * d = row_ptr(dst, r);
            for (int64_t i = 0; i < n; ++i) {
                store_f(dst->type, d + i * dst->nb[0], load_f(a->type, x + i * a->nb[0]) + v);
            }
        }
    });
}

void acc(rt::host::ThreadPool & pool, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int32_t * p = reinterpret_cast<const int32_t *>(dst->op_params);
    const size_t nb1 = size_t(p[0]), nb2 = size_t(p[1]), nb3 = size_t(p[2]), offset = size_t(p[3]);
    if (dst->data != a->data) {
        const size_t bytes = ggml_nbytes(dst);
        constexpr int64_t kChunk = 1 << 20;
        pool.parallel_for(int64_t((bytes + kChunk - 1) / kChunk), 1, [&](int64_t c0, int64_t c1) {
            const size_t lo = size_t(c0) * kChunk, hi = std::min(bytes, size_t(c1) * kChunk);
            std::memcpy(static_cast<char *>(dst->data) + lo, static_cast<const char *>(a->data) + lo, hi - lo);
        });
    }
    const int64_t n = b->ne[0], ne1 = b->ne[1], ne2 = b->ne[2];
    pool.parallel_for(ggml_nrows(b), grain_for(b), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
            float * d = reinterpret_cast<float *>(static_cast<char *>(dst->data) + offset + i1 * nb1 + i2 * nb2 + i3 * nb3);
            const char * x = row_ptr(b, r);
            for (int64_t i = 0; i < n; ++i) d[i] += *reinterpret_cast<const float *>(x + i * b->nb[0]);
        }
    });
}

} // namespace

Status shape(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    switch (node->op) {
        case GGML_OP_CONCAT: concat(pool, node); return true;
        case GGML_OP_REPEAT: repeat(pool, node); return true;
        case GGML_OP_ADD1:   add1(pool, node); return true;
        case GGML_OP_ACC:    acc(pool, node); return true;
        default:             return false;
    }
}

} // namespace standin::kernels::host
