// The host device's ARGSORT and TOP_K (kernels/host/route.cpp) on rows that
// hold NaNs, signed zeros and ties: a total order (NaN last), so the result
// is defined and the sort stays inside its row. test-backend-ops' cases have
// no NaN; the CUDA device's sort takes the same keys (route.cu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "ggml.h"
#include "kernels/host/host_kernels.h"
#include "kernels/op_table.h"
#include "runtime/host/host_device.h"

using namespace standin;

namespace {

struct Ctx {
    ggml_context * ctx;
    Ctx() {
        ggml_init_params ip = {size_t(8) << 20, nullptr, false};
        ctx = ggml_init(ip);
    }
    ~Ctx() { ggml_free(ctx); }
};

// Rows of n values, a quarter NaN, some repeated, zeros of both signs.
std::vector<float> rows_with_nans(int64_t n, int64_t rows, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> kind(0, 7);
    std::uniform_real_distribution<float> u(-4.0f, 4.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> v(size_t(n * rows));
    for (float & x : v) {
        const int k = kind(rng);
        x = k < 2 ? nan : k == 2 ? -0.0f : k == 3 ? 0.0f : k == 4 ? 1.5f : u(rng);
    }
    return v;
}

// The expected order of one row: by value (falling when desc), ties by
// index, NaN after every number.
std::vector<int32_t> expected(const float * x, int64_t n, bool desc) {
    std::vector<int32_t> idx(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
        const bool na = std::isnan(x[a]), nb = std::isnan(x[b]);
        if (na || nb) return na == nb ? a < b : nb;
        if (x[a] != x[b]) return desc ? x[a] > x[b] : x[a] < x[b];
        return a < b;
    });
    return idx;
}

} // namespace

TEST(HostRoute, ArgsortPutsNaNLastInBothOrders) {
    for (const int64_t n : {7, 64, 1000}) {
        for (const auto order : {GGML_SORT_ORDER_ASC, GGML_SORT_ORDER_DESC}) {
            Ctx c;
            const int64_t rows = 5;
            ggml_tensor * a = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, n, rows);
            const std::vector<float> v = rows_with_nans(n, rows, uint32_t(n) * 3u + uint32_t(order));
            std::memcpy(a->data, v.data(), ggml_nbytes(a));
            ggml_tensor * d = ggml_argsort(c.ctx, a, order);
            ASSERT_TRUE(kernels::supports(rt::Kind::host, d));
            rt::host::HostStream stream{2};
            ASSERT_TRUE(kernels::host::argsort(stream, d));
            for (int64_t r = 0; r < rows; ++r) {
                const int32_t * got = static_cast<const int32_t *>(d->data) + r * n;
                const bool desc = order == GGML_SORT_ORDER_DESC;
                EXPECT_EQ(std::vector<int32_t>(got, got + n), expected(v.data() + r * n, n, desc))
                    << "n " << n << " row " << r << (desc ? " desc" : " asc");
            }
        }
    }
}

TEST(HostRoute, TopKTakesTheLargestNumbersBeforeAnyNaN) {
    Ctx c;
    const int64_t n = 300, rows = 4, k = 40;
    ggml_tensor * a = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, n, rows);
    const std::vector<float> v = rows_with_nans(n, rows, 99u);
    std::memcpy(a->data, v.data(), ggml_nbytes(a));
    ggml_tensor * d = ggml_top_k(c.ctx, a, int(k));
    ASSERT_TRUE(kernels::supports(rt::Kind::host, d));
    rt::host::HostStream stream{2};
    ASSERT_TRUE(kernels::host::top_k(stream, d));
    for (int64_t r = 0; r < rows; ++r) {
        const std::vector<int32_t> want = expected(v.data() + r * n, n, true);
        const int32_t * got = reinterpret_cast<const int32_t *>(static_cast<const char *>(d->data) + r * d->nb[1]);
        const std::vector<int32_t> first_k(want.begin(), want.begin() + k);
        EXPECT_EQ(std::vector<int32_t>(got, got + k), first_k) << "row " << r;
    }
}
