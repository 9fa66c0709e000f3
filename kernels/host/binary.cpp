// ADD, SUB, MUL, DIV: dst = src0 (op) src1, where src1 is repeated to src0's
// shape along every dimension it divides (ggml_can_repeat). Any strides; the
// element types are F32, F16 or BF16, dst has src0's type. Arithmetic is done in
// f32 and rounded once on store, as the reference does.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o ADD (SUB, MUL, DIV)
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

template <ggml_op OP> inline float apply(float a, float b) {
    if constexpr (OP == GGML_OP_ADD) return a + b;
    if constexpr (OP == GGML_OP_SUB) return a - b;
    if constexpr (OP == GGML_OP_MUL) return a * b;
    return a / b;
}

// Rows per task: enough elements that a chunk is worth a thread wake-up.
constexpr int64_t kMinElemsPerTask = 16384;

template <ggml_op OP> void run(rt::host::ThreadPool & pool, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const int64_t nr  = ggml_nrows(dst);
    const bool fast = dst->type == GGML_TYPE_F32 && a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32 &&
                      dst->nb[0] == sizeof(float) && a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float);
    const int64_t grain = std::max<int64_t>(1, kMinElemsPerTask / std::max<int64_t>(1, ne0));

    pool.parallel_for(nr, grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
            char * d = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
            const char * x = static_cast<const char *>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
            const char * y = static_cast<const char *>(b->data) + (i1 % b->ne[1]) * b->nb[1] +
                             (i2 % b->ne[2]) * b->nb[2] + (i3 % b->ne[3]) * b->nb[3];
            const int64_t ne10 = b->ne[0];
            if (fast) {
                float * df = reinterpret_cast<float *>(d);
                const float * xf = reinterpret_cast<const float *>(x);
                const float * yf = reinterpret_cast<const float *>(y);
                if (ne10 == ne0) {
                    for (int64_t i = 0; i < ne0; ++i) df[i] = apply<OP>(xf[i], yf[i]);
                } else {
                    for (int64_t base = 0; base < ne0; base += ne10) {
                        for (int64_t i = 0; i < ne10; ++i) df[base + i] = apply<OP>(xf[base + i], yf[i]);
                    }
                }
                continue;
            }
            for (int64_t i = 0; i < ne0; ++i) {
                const float v = apply<OP>(load_f(a->type, x + i * a->nb[0]), load_f(b->type, y + (i % ne10) * b->nb[0]));
                store_f(dst->type, d + i * dst->nb[0], v);
            }
        }
    });
}

} // namespace

Status binary(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    switch (node->op) {
        case GGML_OP_ADD: run<GGML_OP_ADD>(pool, node); return true;
        case GGML_OP_SUB: run<GGML_OP_SUB>(pool, node); return true;
        case GGML_OP_MUL: run<GGML_OP_MUL>(pool, node); return true;
        case GGML_OP_DIV: run<GGML_OP_DIV>(pool, node); return true;
        default:          return false;
    }
}

} // namespace standin::kernels::host
