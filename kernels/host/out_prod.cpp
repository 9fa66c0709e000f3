// OUT_PROD: the sum of outer products of the columns of src0 and src1, the
// product a training graph forms for a weight's gradient. With src0 (M, K,
// ne02, ne03) and src1 (N, K, ne2, ne3):
//   dst[i0, i1, i2, i3] = sum_k src0[i0, k, i2 / (ne2/ne02), i3 / (ne3/ne03)] * src1[i1, k, i2, i3]
// (src0 broadcast over dims 2 and 3, as ggml_out_prod allows). src0 F32, F16,
// BF16 or any block type kernels/common/quants.h decodes, rows contiguous
// (packed weights are read row by row in their original layout, packed.h);
// src1 F32 with any strides (a transposed view is fine); dst F32, rows
// contiguous. Each element is summed over k in order, as ggml-cpu does.
//
// Work is split by (slice i2/i3, block of kRows dst rows): a task decodes
// each src0 row once and adds it, scaled by src1, into its kRows dst rows,
// which stay in cache across the k loop.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o OUT_PROD
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/common/quants.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/packed.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

constexpr int64_t kRows = 16;  // dst rows per task

} // namespace

Status out_prod(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    if (b->type != GGML_TYPE_F32 || node->type != GGML_TYPE_F32 || !quant::can_decode(a->type)) {
        return false;  // the support predicate (op_rows_train.cpp) refuses these
    }
    const int64_t M = node->ne[0], N = node->ne[1], ne2 = node->ne[2], ne3 = node->ne[3];
    const int64_t K = a->ne[1];
    const int64_t dps2 = ne2 / a->ne[2], dps3 = ne3 / a->ne[3];  // dst slices per src0 slice
    const int64_t blocks = (N + kRows - 1) / kRows;
    const bool    is_packed = packed::packed_of(a) != nullptr;
    const bool    direct = a->type == GGML_TYPE_F32 && !is_packed;  // src0 rows read in place
    const size_t  row_bytes = size_t(M / ggml_blck_size(a->type)) * ggml_type_size(a->type);

    stream.pool().parallel_for(ne2 * ne3 * blocks, 1, [&](int64_t t0, int64_t t1) {
        std::vector<float> arow(direct ? 0 : size_t(M));
        std::vector<char>  plain(is_packed ? row_bytes : 0);
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t slice = t / blocks, r0 = (t % blocks) * kRows, r1 = std::min(N, r0 + kRows);
            const int64_t i2 = slice % ne2, i3 = slice / ne2, i02 = i2 / dps2, i03 = i3 / dps3;
            char * dbase = static_cast<char *>(node->data) + i2 * node->nb[2] + i3 * node->nb[3];
            for (int64_t i1 = r0; i1 < r1; ++i1) std::memset(dbase + i1 * node->nb[1], 0, size_t(M) * sizeof(float));
            const char * bbase = static_cast<const char *>(b->data) + i2 * b->nb[2] + i3 * b->nb[3];
            for (int64_t k = 0; k < K; ++k) {
                const char * src = static_cast<const char *>(a->data) + k * a->nb[1] + i02 * a->nb[2] + i03 * a->nb[3];
                const float * ar = reinterpret_cast<const float *>(src);
                if (!direct) {
                    if (is_packed) {
                        packed::read_row(a, k, i02, i03, plain.data());
                        src = plain.data();
                    }
                    quant::to_f32_row(a->type, src, arow.data(), M);
                    ar = arow.data();
                }
                for (int64_t i1 = r0; i1 < r1; ++i1) {
                    const float w = *reinterpret_cast<const float *>(bbase + i1 * b->nb[0] + k * b->nb[1]);
                    float * d = reinterpret_cast<float *>(dbase + i1 * node->nb[1]);
                    for (int64_t i0 = 0; i0 < M; ++i0) d[i0] += w * ar[i0];
                }
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
