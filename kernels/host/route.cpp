// MoE routing:
//   ARGSORT: dst[:, r] (I32) = the indices of row r of src, ordered so the
//            values rise (op_params[0] = GGML_SORT_ORDER_ASC) or fall (DESC).
//            Ties keep index order (a stable sort), so the result does not
//            depend on the thread count; NaN sorts after every number.
//   TOP_K:   dst[:, r] (I32, ne0 = k) = the indices of the k largest values of
//            row r. ggml leaves their order open; we give them falling, with
//            the lower index first on ties.
//   ADD_ID:  dst[:, i1, i2] = a[:, i1, i2] + b[:, ids[i1, i2]] (the per-expert
//            bias of gpt-oss).
// F32 values, I32 indices, dim-0 elements adjacent, any row strides.
//
// Test: test-backend-ops -b STANDIN_HOST0 -o ARGSORT (TOP_K, ADD_ID, TOPK_MOE)
#include <algorithm>
#include <atomic>
#include <numeric>
#include <vector>

#include "kernels/common/numerics.h"
#include "kernels/common/op_params.h"
#include "kernels/host/elem.h"
#include "kernels/host/host_kernels.h"
#include "runtime/host/host_device.h"

namespace standin::kernels::host {

namespace {

constexpr int64_t kMinElemsPerTask = 16384;

int64_t grain_for(int64_t n) { return std::max<int64_t>(1, kMinElemsPerTask / std::max<int64_t>(1, n)); }

// Index order for "a before b": larger value first for DESC, index on ties,
// NaN last (num::sort_order_key: a strict order whatever the values).
struct Before {
    const float * x;
    bool          desc;
    bool operator()(int32_t a, int32_t b) const {
        return num::sort_order_key(x[a], uint32_t(a), desc) < num::sort_order_key(x[b], uint32_t(b), desc);
    }
};

} // namespace

Status argsort(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * src = node->src[0];
    const int64_t n = src->ne[0];
    const bool desc = op_i32(node, 0) == GGML_SORT_ORDER_DESC;
    pool.parallel_for(ggml_nrows(src), grain_for(n), [&](int64_t r0, int64_t r1) {
        std::vector<int32_t> idx(static_cast<size_t>(n));
        for (int64_t r = r0; r < r1; ++r) {
            const float * x = reinterpret_cast<const float *>(row_ptr(src, r));
            std::iota(idx.begin(), idx.end(), 0);
            std::sort(idx.begin(), idx.end(), Before{x, desc});
            std::copy(idx.begin(), idx.end(), reinterpret_cast<int32_t *>(row_ptr(node, r)));
        }
    });
    return true;
}

Status top_k(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * src = node->src[0];
    const int64_t n = src->ne[0];
    const int64_t k = node->ne[0];
    pool.parallel_for(ggml_nrows(src), grain_for(n), [&](int64_t r0, int64_t r1) {
        std::vector<int32_t> idx(static_cast<size_t>(n));
        for (int64_t r = r0; r < r1; ++r) {
            const float * x = reinterpret_cast<const float *>(row_ptr(src, r));
            std::iota(idx.begin(), idx.end(), 0);
            const Before before{x, true};
            // Select the k first, then order only those (k is often << n).
            if (k < n) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), before);
            std::sort(idx.begin(), idx.begin() + k, before);
            std::copy(idx.begin(), idx.begin() + k, reinterpret_cast<int32_t *>(row_ptr(node, r)));
        }
    });
    return true;
}

Status add_id(rt::host::HostStream & stream, ggml_tensor * node) {
    auto & pool = stream.pool();
    const ggml_tensor * a   = node->src[0];
    const ggml_tensor * b   = node->src[1];
    const ggml_tensor * ids = node->src[2];
    const int64_t n = node->ne[0];
    std::atomic<bool> ok{true};  // an expert index out of range is caller input: reported, never read
    pool.parallel_for(ggml_nrows(node), grain_for(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % node->ne[1];
            const int64_t i2 = (r / node->ne[1]) % node->ne[2];
            const int32_t e = *reinterpret_cast<const int32_t *>(static_cast<const char *>(ids->data) +
                                                                 i1 * ids->nb[0] + i2 * ids->nb[1]);
            if (e < 0 || e >= b->ne[1]) {
                ok.store(false, std::memory_order_relaxed);
                continue;
            }
            const float * x = reinterpret_cast<const float *>(row_ptr(a, r));
            const float * y = reinterpret_cast<const float *>(static_cast<const char *>(b->data) + e * b->nb[1]);
            float * d = reinterpret_cast<float *>(row_ptr(node, r));
            for (int64_t i = 0; i < n; ++i) d[i] = x[i] + y[i];
        }
    });
    return ok.load();
}

} // namespace standin::kernels::host
