// CPY, DUP, CONT where a side is a block-quantized type (kernels/host/cpy.cpp
// routes these here; it keeps the float-to-float copies):
//   F32/F16/BF16 -> a block type quants.h encodes (ggml-cpu's rounding)
//   any type quants.h decodes -> F32/F16/BF16
//   a block type -> the same block type (bytes of whole blocks, any block type)
// Like cpy.cpp, elements are copied in row-major logical order, so dst may have
// another shape with the same element count, and either side may be permuted.
// Both ne[0] must be multiples of the block size, so that each block is one run
// of consecutive elements of one row on both sides; the work unit is a block.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o CPY (DUP, CONT)
#include <cstring>
#include <vector>

#include "kernels/common/quants.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/packed.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

enum class Mode { encode, decode, blocks };

} // namespace

Status copy_quant(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * src = node->src[0];
    const ggml_type st = src->type, dt = node->type;
    if (st != dt && !(is_float_type(st) && quant::can_encode(dt)) && !(is_float_type(dt) && quant::can_decode(st))) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    const Mode    mode = st == dt ? Mode::blocks : is_float_type(st) ? Mode::encode : Mode::decode;
    const int64_t qk = std::max(ggml_blck_size(st), ggml_blck_size(dt));
    const int64_t units_per_row = src->ne[0] / qk;
    const size_t  block_bytes = ggml_type_size(mode == Mode::encode ? dt : st);
    const int64_t grain = std::max<int64_t>(1, 16384 / src->ne[0]);
    const bool    f32_dense = st == GGML_TYPE_F32 && src->nb[0] == sizeof(float);
    // A packed weight (packed.h) is read row by row in its original layout;
    // one written to is restored first, as the copy writes original blocks.
    const bool src_packed = packed::packed_of(src) != nullptr;
    if (packed::packed_of(node) != nullptr) {
        packed::unpack_in_place(node->view_src != nullptr ? node->view_src : node);
    }

    pool.parallel_for(ggml_nrows(src), grain, [&](int64_t r0, int64_t r1) {
        float buf[quant::kQK_K];
        std::vector<char> plain(src_packed ? size_t(units_per_row) * block_bytes : 0);
        for (int64_t r = r0; r < r1; ++r) {
            const char * s_row = row_ptr(src, r);
            if (src_packed) {
                packed::read_row(src, r % src->ne[1], (r / src->ne[1]) % src->ne[2], r / (src->ne[1] * src->ne[2]),
                                 plain.data());
                s_row = plain.data();
            }
            for (int64_t u = 0; u < units_per_row; ++u) {
                char * d = static_cast<char *>(node->data) + elem_offset(node, (r * units_per_row + u) * qk);
                switch (mode) {
                    case Mode::blocks:
                        std::memcpy(d, s_row + u * src->nb[0], block_bytes);
                        break;
                    case Mode::encode: {
                        const char * s = s_row + u * qk * src->nb[0];
                        const float * x = reinterpret_cast<const float *>(s);
                        if (!f32_dense) {
                            for (int64_t i = 0; i < qk; ++i) {
                                buf[i] = load_f(st, s + i * src->nb[0]);
                            }
                            x = buf;
                        }
                        quant::from_f32_row(dt, x, d, qk);
                        break;
                    }
                    case Mode::decode:
                        quant::to_f32_row(st, s_row + u * src->nb[0], buf, qk);
                        for (int64_t i = 0; i < qk; ++i) {
                            store_f(dt, d + i * node->nb[0], buf[i]);
                        }
                        break;
                }
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
