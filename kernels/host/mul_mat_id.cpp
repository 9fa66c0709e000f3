// MUL_MAT_ID (mixture-of-experts matmul): with experts as (K, M, n_as), inputs
// b (K, ne11, n_tok) and the I32 expert ids (n_used, n_tok),
//   dst[:, e, t] = as[:, :, ids[e, t]] times b[:, e % ne11, t].
// The (e, t) pairs are grouped by expert; each expert's input rows are gathered
// into one f32 matrix and multiplied by the MUL_MAT kernel (mul_mat.cpp) as an
// ordinary 2-D product, so its weights are read once for all of its tokens;
// the results are scattered back to dst. Weight, input and output types are
// those of MUL_MAT. An id outside [0, n_as) yields a column of zeros.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o MUL_MAT_ID
#include <cstring>
#include <vector>

#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/packed.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

// A dense 2-D f32 or weight-matrix description for the MUL_MAT kernel.
ggml_tensor matrix(ggml_type type, void * data, int64_t ne0, int64_t ne1, size_t nb1) {
    ggml_tensor t{};
    t.type  = type;
    t.data  = data;
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    t.ne[2] = t.ne[3] = 1;
    t.nb[0] = ggml_type_size(type);
    t.nb[1] = nb1;
    t.nb[2] = t.nb[3] = nb1 * size_t(ne1);
    t.op    = GGML_OP_MUL_MAT;
    return t;
}

struct Pair {
    int32_t e, t;
};

} // namespace

Status mul_mat_id(rt::host::HostStream & stream, ggml_tensor * node) {
    const ggml_tensor * as  = node->src[0];
    const ggml_tensor * b   = node->src[1];
    const ggml_tensor * ids = node->src[2];
    const int64_t K = as->ne[0], M = as->ne[1], n_as = as->ne[2];
    const int64_t n_used = ids->ne[0], n_tok = ids->ne[1];

    // Group the (slot, token) pairs by expert.
    std::vector<std::vector<Pair>> by_expert(static_cast<size_t>(n_as));
    for (int64_t t = 0; t < n_tok; ++t) {
        for (int64_t e = 0; e < n_used; ++e) {
            const int32_t x = *reinterpret_cast<const int32_t *>(static_cast<const char *>(ids->data) +
                                                                 e * ids->nb[0] + t * ids->nb[1]);
            if (x >= 0 && x < n_as) {
                by_expert[size_t(x)].push_back({int32_t(e), int32_t(t)});
            } else {
                std::memset(static_cast<char *>(node->data) + e * node->nb[1] + t * node->nb[2], 0,
                            size_t(M) * sizeof(float));
            }
        }
    }

    std::vector<float> in, out;  // one expert's gathered inputs and its results
    for (int64_t x = 0; x < n_as; ++x) {
        const std::vector<Pair> & pairs = by_expert[size_t(x)];
        const int64_t n = int64_t(pairs.size());
        if (n == 0) {
            continue;
        }
        in.resize(size_t(n * K));
        out.resize(size_t(n * M));
        for (int64_t j = 0; j < n; ++j) {
            const char * row = static_cast<const char *>(b->data) + (pairs[size_t(j)].e % b->ne[1]) * b->nb[1] +
                               pairs[size_t(j)].t * b->nb[2];
            for (int64_t k = 0; k < K; ++k) in[size_t(j * K + k)] = load_f(b->type, row + k * b->nb[0]);
        }
        ggml_tensor a   = matrix(as->type, static_cast<char *>(as->data) + x * as->nb[2], K, M, as->nb[1]);
        // A slice of packed experts is a view of whole groups (packed.h).
        a.view_src = packed::packed_of(as) != nullptr ? const_cast<ggml_tensor *>(as->view_src != nullptr ? as->view_src : as) : nullptr;
        ggml_tensor y   = matrix(GGML_TYPE_F32, in.data(), K, n, size_t(K) * sizeof(float));
        ggml_tensor dst = matrix(GGML_TYPE_F32, out.data(), M, n, size_t(M) * sizeof(float));
        dst.src[0] = &a;
        dst.src[1] = &y;
        if (const Status st = mul_mat(stream, &dst); !st) {
            return st;
        }
        for (int64_t j = 0; j < n; ++j) {
            std::memcpy(static_cast<char *>(node->data) + pairs[size_t(j)].e * node->nb[1] + pairs[size_t(j)].t * node->nb[2],
                        out.data() + j * M, size_t(M) * sizeof(float));
        }
    }
    return true;
}

} // namespace standin::kernels::host
