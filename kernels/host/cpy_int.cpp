// CPY DUP CONT of element types the float copy (cpy.cpp) does not take:
// integers (and any other block-free type) copied to their own type, and
// F32 <-> I32 converted as C converts (toward zero), as ggml does. Element k
// of src in row-major order goes to element k of dst; any strides on both
// sides. Everything else goes on to copy().
//
// Test: test-backend-ops -b STANDIN_HOST0 -o CONT (CPY, DUP)
#include <cstring>

#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

bool is_elem_copy(const ggml_tensor * node) {
    const ggml_type s = node->src[0]->type, d = node->type;
    if (ggml_nelements(node->src[0]) != ggml_nelements(node)) return false;
    const bool conv = (s == GGML_TYPE_F32 && d == GGML_TYPE_I32) || (s == GGML_TYPE_I32 && d == GGML_TYPE_F32);
    const size_t es = ggml_type_size(d);
    const bool same = s == d && !is_float_type(d) && ggml_blck_size(d) == 1 && !ggml_is_quantized(d) &&
                      (es == 1 || es == 2 || es == 4 || es == 8);
    return conv || same;
}

Status copy_any(rt::host::HostStream & stream, ggml_tensor * node) {
    if (!is_elem_copy(node)) {
        return copy(stream, node);
    }
    auto & pool = stream.pool();
    const ggml_tensor * src = node->src[0];
    const char * sd = static_cast<const char *>(src->data);
    char * dd = static_cast<char *>(node->data);
    const ggml_type st = src->type, dt = node->type;
    const size_t es = ggml_type_size(dt);
    pool.parallel_for(ggml_nelements(node), 16384, [&](int64_t k0, int64_t k1) {
        for (int64_t k = k0; k < k1; ++k) {
            const char * x = sd + elem_offset(src, k);
            char * y = dd + elem_offset(node, k);
            if (st == dt) {
                std::memcpy(y, x, es);
            } else if (dt == GGML_TYPE_I32) {
                *reinterpret_cast<int32_t *>(y) = int32_t(*reinterpret_cast<const float *>(x));
            } else {
                *reinterpret_cast<float *>(y) = float(*reinterpret_cast<const int32_t *>(x));
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
