// Ops that build or rearrange tensors:
//   SET:                dst = src0, then src1 written into dst viewed with
//                       strides op_params[0..2] (bytes, dims 1..3) at byte
//                       offset op_params[3]; op_params[4] = 1: in place (dst is
//                       src0's memory, the copy is skipped)
//   ROLL:               dst[i] = src[(i - shift) mod ne] per dim, shifts in
//                       op_params[0..3]
//   ARANGE:             dst[i] = start + i * step (op_params: start, stop, step)
//   TIMESTEP_EMBEDDING: dst[:, i] = [cos(t f_j), sin(t f_j)], j < dim/2, with
//                       t = src[i], f_j = exp(-ln(max_period) j / (dim/2)); an
//                       odd dim ends with 0 (op_params: dim, max_period)
// SET copies elements of any one non-block type; the others are F32. Dim-0
// elements adjacent; any row strides.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o SET (ROLL, ARANGE, TIMESTEP_EMBEDDING)
#include <cmath>
#include <cstring>

#include "kernels/common/op_params.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

int64_t grain_for(int64_t n) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)); }

int64_t wrap(int64_t i, int64_t n) { return ((i % n) + n) % n; }

} // namespace

Status set(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src0 = node->src[0];
    const ggml_tensor * src1 = node->src[1];
    const size_t nb1 = size_t(op_i32(node, 0)), nb2 = size_t(op_i32(node, 1)), nb3 = size_t(op_i32(node, 2));
    const size_t offset = size_t(op_i32(node, 3));
    const size_t es = ggml_type_size(node->type);
    auto & pool = stream.pool();
    if (node->data != src0->data) {
        const size_t row = size_t(node->ne[0]) * es;
        pool.parallel_for(ggml_nrows(node), grain_for(node->ne[0]), [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) std::memcpy(row_ptr(node, r), row_ptr(src0, r), row);
        });
    }
    const int64_t n = src1->ne[0];
    pool.parallel_for(ggml_nrows(src1), grain_for(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % src1->ne[1];
            const int64_t i2 = (r / src1->ne[1]) % src1->ne[2];
            const int64_t i3 = r / (src1->ne[1] * src1->ne[2]);
            char * d = static_cast<char *>(node->data) + offset + i1 * nb1 + i2 * nb2 + i3 * nb3;
            std::memcpy(d, row_ptr(src1, r), size_t(n) * es);
        }
    });
    return true;
}

Status roll(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const int64_t s0 = op_i32(node, 0), s1 = op_i32(node, 1), s2 = op_i32(node, 2), s3 = op_i32(node, 3);
    const int64_t n = node->ne[0];
    stream.pool().parallel_for(ggml_nrows(node), grain_for(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % node->ne[1];
            const int64_t i2 = (r / node->ne[1]) % node->ne[2];
            const int64_t i3 = r / (node->ne[1] * node->ne[2]);
            const float * x = reinterpret_cast<const float *>(
                static_cast<const char *>(src->data) + wrap(i1 - s1, src->ne[1]) * src->nb[1] +
                wrap(i2 - s2, src->ne[2]) * src->nb[2] + wrap(i3 - s3, src->ne[3]) * src->nb[3]);
            float * y = reinterpret_cast<float *>(row_ptr(node, r));
            for (int64_t i = 0; i < n; ++i) y[i] = x[wrap(i - s0, n)];
        }
    });
    return true;
}

Status arange(rt::host::HostStream & stream, ggml_tensor * node) {
    const float start = op_f32(node, 0), step = op_f32(node, 2);
    float * y = static_cast<float *>(node->data);
    stream.pool().parallel_for(node->ne[0], 16384, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) y[i] = start + step * float(i);
    });
    return true;
}

Status timestep_embedding(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * src = node->src[0];
    const int dim = op_i32(node, 0), max_period = op_i32(node, 1);
    const int half = dim / 2;
    stream.pool().parallel_for(src->ne[0], grain_for(dim), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float t = *reinterpret_cast<const float *>(static_cast<const char *>(src->data) + r * src->nb[0]);
            float * y = reinterpret_cast<float *>(static_cast<char *>(node->data) + r * node->nb[1]);
            for (int j = 0; j < half; ++j) {
                const float freq = std::exp(-std::log(float(max_period)) * float(j) / float(half));
                y[j] = std::cos(t * freq);
                y[j + half] = std::sin(t * freq);
            }
            if (dim % 2 != 0) y[2 * half] = 0.0f;
        }
    });
    return true;
}

} // namespace standin::kernels::host
