// GET_ROWS: gather rows of src0 selected by the I32 indices in src1, decoded to
// F32 (the embedding lookup). With src0 (ne00, ne01, ne02, ne03) and src1
// (ne10, ne11, ne12): dst[:, i10, i11, i12] = src0[:, src1[i10, i11, i12], i11, i12].
// src0 may be F32/F16/BF16 or any block type kernels/common/quants.h decodes;
// an I32 src0 gathers into an I32 dst unchanged. Rows of src0 must be
// contiguous (nb00 = type size); src1 and dst may have any strides.
// An index outside [0, ne01) yields a row of zeros rather than a wild read.
// Packed weights (packed.h) are read row by row in their original layout.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o GET_ROWS
#include <cstring>
#include <vector>

#include "kernels/common/quants.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/packed.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

Status get_rows(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * src = node->src[0];
    const ggml_tensor * idx = node->src[1];
    if (idx->type != GGML_TYPE_I32 || !(src->type == GGML_TYPE_I32 || quant::can_decode(src->type))) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    const int64_t ne00 = src->ne[0];
    const int64_t ne10 = idx->ne[0], ne11 = idx->ne[1];
    const int64_t n_out = ne10 * ne11 * idx->ne[2];
    const size_t  out_bytes = size_t(ne00) * ggml_type_size(node->type);
    const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, ne00));
    const bool    is_packed = packed::packed_of(src) != nullptr;  // rows restored first (packed.h)

    pool.parallel_for(n_out, grain, [&](int64_t r0, int64_t r1) {
        std::vector<char> plain(is_packed ? size_t(ne00 / ggml_blck_size(src->type)) * ggml_type_size(src->type) : 0);
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i10 = r % ne10;
            const int64_t i11 = (r / ne10) % ne11;
            const int64_t i12 = r / (ne10 * ne11);
            const int32_t row = *reinterpret_cast<const int32_t *>(
                static_cast<const char *>(idx->data) + i10 * idx->nb[0] + i11 * idx->nb[1] + i12 * idx->nb[2]);
            char * out = static_cast<char *>(node->data) + i10 * node->nb[1] + i11 * node->nb[2] + i12 * node->nb[3];
            if (row < 0 || row >= src->ne[1]) {
                std::memset(out, 0, out_bytes);
                continue;
            }
            const char * in = static_cast<const char *>(src->data) + row * src->nb[1] + i11 * src->nb[2] + i12 * src->nb[3];
            if (is_packed) {
                packed::read_row(src, row, i11, i12, plain.data());
                in = plain.data();
            }
            if (src->type == GGML_TYPE_I32 || src->type == GGML_TYPE_F32) {
                std::memcpy(out, in, out_bytes);
            } else {
                quant::to_f32_row(src->type, in, reinterpret_cast<float *>(out), ne00);
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
