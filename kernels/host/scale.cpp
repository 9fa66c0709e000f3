// SCALE: dst = src * s + b, with (s, b) the two floats in op_params. F32 only,
// any row strides (rows are contiguous in ggml's reference; we do not need it).
//
// Test: test-backend-ops -b STANDIN_HOST0 -o SCALE
#include <cstring>

#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

Status scale(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * src = node->src[0];
    float s = 0.0f, b = 0.0f;
    std::memcpy(&s, reinterpret_cast<const float *>(node->op_params) + 0, sizeof(float));
    std::memcpy(&b, reinterpret_cast<const float *>(node->op_params) + 1, sizeof(float));
    const int64_t ne0 = node->ne[0];
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, ne0));
    pool.parallel_for(ggml_nrows(node), grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const char * x = row_ptr(src, r);
            char * d = row_ptr(node, r);
            for (int64_t i = 0; i < ne0; ++i) {
                const float v = *reinterpret_cast<const float *>(x + i * src->nb[0]);
                *reinterpret_cast<float *>(d + i * node->nb[0]) = v * s + b;
            }
        }
    });
    return true;
}

} // namespace standin::kernels::host
