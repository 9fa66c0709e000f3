// Elementwise ops that ggml keeps outside UNARY: SQR SQRT LOG SIN COS, CLAMP
// (to [op_params[0], op_params[1]]) and LEAKY_RELU (slope op_params[0]:
// y = max(x, 0) + slope * min(x, 0)). The formulas live in
// kernels/common/math_ops.h, shared with the CUDA kernels. F32/F16 src and dst
// of the same shape and type, dim-0 elements adjacent, any row strides; the
// math is f32, rounded once into dst's type.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o SQR (SQRT LOG SIN COS CLAMP LEAKY_RELU)
#include <vector>

#include "kernels/common/math_ops.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/simd_math.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

Status math(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * src = node->src[0];
    const mathop::Params p = mathop::params_of(node);
    const int64_t n = node->ne[0];
    pool.parallel_for(ggml_nrows(node), std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)),
                      [&](int64_t r0, int64_t r1) {
        std::vector<float> buf(static_cast<size_t>(n));
        for (int64_t r = r0; r < r1; ++r) {
            float * v = buf.data();
            simd::row_to_f32(src->type, row_ptr(src, r), v, n);
            for (int64_t i = 0; i < n; ++i) v[i] = mathop::apply(p, v[i]);
            simd::row_from_f32(node->type, v, row_ptr(node, r), n);
        }
    });
    return true;
}

} // namespace standin::kernels::host
