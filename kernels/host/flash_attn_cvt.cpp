// FLASH_ATTN_EXT with block-quantized K or V (KV caches of -ctk/-ctv q8_0,
// q4_0, ...) where many query rows share each KV head (prefill; decode-time
// calls are read in place by flash_attn.cpp, flash_attn_in_place): the
// block-type side is decoded into dense F16 rows first, and
// the attention runs on flash_attn.cpp's F16 kernels unchanged, on a copy of
// the node that points at them. Float K/V go straight to flash_attn_ext.
// Decoding is quant::to_f32_row (the one definition of every format), rounded
// to F16, row by row on the worker pool. Each call decodes the whole K/V view
// it is given: a cost in proportion to the attention's own reads of it.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o FLASH_ATTN_EXT (the quantized
//       K/V cases)
#include <algorithm>
#include <vector>

#include "kernels/common/numerics.h"
#include "kernels/common/quants.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

// t (rows contiguous, any view) decoded into dense F16 rows in buf; `dense`
// becomes t's stand-in: the same shape, type F16, the buffer's strides.
void decode_to_f16(rt::host::HostStream & stream, const ggml_tensor * t, std::vector<uint16_t> & buf,
                   ggml_tensor & dense) {
    const int64_t ne0 = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    buf.resize(size_t(ne0 * rows));
    stream.pool().parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, ne0)), [&](int64_t r0, int64_t r1) {
        std::vector<float> f(static_cast<size_t>(ne0));
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
            const char * src = static_cast<const char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
            quant::to_f32_row(t->type, src, f.data(), ne0);
            uint16_t * out = buf.data() + r * ne0;
            for (int64_t i = 0; i < ne0; ++i) out[i] = num::f32_to_fp16(f[size_t(i)]);
        }
    });
    dense = *t;
    dense.type = GGML_TYPE_F16;
    dense.data = buf.data();
    dense.view_src = nullptr;
    dense.view_offs = 0;
    dense.nb[0] = sizeof(uint16_t);
    for (int d = 1; d < GGML_MAX_DIMS; ++d) dense.nb[d] = dense.nb[d - 1] * size_t(dense.ne[d - 1]);
}

} // namespace

Status flash_attn_ext_any(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * k = node->src[1];
    const ggml_tensor * v = node->src[2];
    if ((is_float_type(k->type) && is_float_type(v->type)) || flash_attn_in_place(node)) {
        return flash_attn_ext(stream, node);
    }
    if (!quant::can_decode(k->type) || !quant::can_decode(v->type)) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    ggml_tensor n2 = *node, k2 = *k, v2 = *v;
    std::vector<uint16_t> kbuf, vbuf;
    if (!is_float_type(k->type)) decode_to_f16(stream, k, kbuf, k2);
    if (!is_float_type(v->type)) decode_to_f16(stream, v, vbuf, v2);
    n2.src[1] = &k2;
    n2.src[2] = &v2;
    return flash_attn_ext(stream, &n2);
}

} // namespace standin::kernels::host
