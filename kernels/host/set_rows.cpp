// SET_ROWS (KV-cache writes): scatter the rows of src[0] (F32 or F16) into the
// destination at the row numbers given by src[1] (I64 or I32), encoding them
// to the destination type (F32, F16, BF16, or a block type of quants.h's
// encode list, SI_QUANT_ENCODE_TYPES, with ggml-cpu's rounding).
// The node is a view of the destination.
// With src (ne00, ne01, ne02, ne03) and indices (ne01, ne11, ne12), indices
// broadcast over dims 2 and 3:
//   dst[:, idx[i01, i02 % ne11, i03 % ne12], i02, i03] = src[:, i01, i02, i03].
// Rows of src and dst are contiguous (ggml_set_rows asserts it); an index
// outside the destination's rows is skipped rather than written out of bounds.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o SET_ROWS
#include <immintrin.h>

#include <vector>

#include "kernels/common/quants.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

// F32 -> F16 with F16C: round-to-nearest-even, the same as num::f32_to_fp16
// (the unit tests compare the scalar function with ggml's, the op test this).
void f32_to_f16_row(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(y + i), h);
    }
    for (; i < n; ++i) {
        y[i] = num::f32_to_fp16(x[i]);
    }
}

int64_t read_index(const ggml_tensor * idx, int64_t i0, int64_t i1, int64_t i2) {
    const char * p = static_cast<const char *>(idx->data) + i0 * idx->nb[0] + i1 * idx->nb[1] + i2 * idx->nb[2];
    return idx->type == GGML_TYPE_I64 ? *reinterpret_cast<const int64_t *>(p)
                                      : int64_t(*reinterpret_cast<const int32_t *>(p));
}

} // namespace

Status set_rows(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * src = node->src[0];
    const ggml_tensor * idx = node->src[1];
    const ggml_type     dt  = node->type;
    if ((src->type != GGML_TYPE_F32 && src->type != GGML_TYPE_F16) || !quant::can_encode(dt)) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    const int64_t ne00 = src->ne[0], ne01 = src->ne[1], ne02 = src->ne[2];
    const int64_t ne11 = idx->ne[1], ne12 = idx->ne[2];
    const int64_t n_rows = ggml_nrows(src);
    const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, ne00));

    pool.parallel_for(n_rows, grain, [&](int64_t r0, int64_t r1) {
        std::vector<float> tmp(src->type == GGML_TYPE_F32 ? 0 : size_t(ne00));
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i01 = r % ne01;
            const int64_t i02 = (r / ne01) % ne02;
            const int64_t i03 = r / (ne01 * ne02);
            const int64_t row = read_index(idx, i01, i02 % ne11, i03 % ne12);
            if (row < 0 || row >= node->ne[1]) {
                continue;
            }
            const char * in = static_cast<const char *>(src->data) + i01 * src->nb[1] + i02 * src->nb[2] + i03 * src->nb[3];
            char * out = static_cast<char *>(node->data) + row * node->nb[1] + i02 * node->nb[2] + i03 * node->nb[3];
            const float * x = reinterpret_cast<const float *>(in);
            if (src->type == GGML_TYPE_F16) {
                quant::to_f32_row(GGML_TYPE_F16, in, tmp.data(), ne00);
                x = tmp.data();
            }
            if (dt == GGML_TYPE_F16) {
                f32_to_f16_row(x, reinterpret_cast<uint16_t *>(out), ne00);
            } else {
                quant::from_f32_row(dt, x, out, ne00);
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
