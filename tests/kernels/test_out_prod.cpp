// OUT_PROD on the host (kernels/host/out_prod.cpp) in the cases
// test-backend-ops cannot check against ggml-cpu, which refuses them: a
// block-type src0 broadcast over dims 2 and 3, a transposed src1, and a packed
// src0 (Note [packed weights]); and the predicate's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ggml.h"
#include "kernels/common/quants.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/packed.h"
#include "kernels/op_table.h"
#include "runtime/host/host_device.h"

using namespace standin;

namespace {

struct Ctx {
    ggml_context * ctx;
    Ctx() {
        ggml_init_params ip = {size_t(16) << 20, nullptr, false};
        ctx = ggml_init(ip);
    }
    ~Ctx() { ggml_free(ctx); }
};

void fill_random(ggml_tensor * t, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(size_t(ggml_nelements(t)));
    for (float & f : v) f = u(rng);
    if (t->type == GGML_TYPE_F32) {
        std::memcpy(t->data, v.data(), ggml_nbytes(t));
    } else {
        ggml_quantize_chunk(t->type, v.data(), t->data, 0, ggml_nrows(t), t->ne[0], nullptr);
    }
}

// dst[i0, i1, i2, i3] = sum_k a[i0, k, i2 / r2, i3 / r3] * b[i1, k, i2, i3], in double, from a's decoded rows.
std::vector<double> reference(const ggml_tensor * a, const ggml_tensor * b, const ggml_tensor * d) {
    const int64_t M = d->ne[0], N = d->ne[1], ne2 = d->ne[2], ne3 = d->ne[3], K = a->ne[1];
    std::vector<double> out(size_t(M * N * ne2 * ne3), 0.0);
    std::vector<float> row(static_cast<size_t>(M));
    for (int64_t i3 = 0; i3 < ne3; ++i3) {
        for (int64_t i2 = 0; i2 < ne2; ++i2) {
            for (int64_t k = 0; k < K; ++k) {
                const char * ar = static_cast<const char *>(a->data) + k * a->nb[1] + (i2 / (ne2 / a->ne[2])) * a->nb[2] +
                                  (i3 / (ne3 / a->ne[3])) * a->nb[3];
                EXPECT_TRUE(quant::to_f32_row(a->type, ar, row.data(), M));
                for (int64_t i1 = 0; i1 < N; ++i1) {
                    const float w = *reinterpret_cast<const float *>(static_cast<const char *>(b->data) + i1 * b->nb[0] +
                                                                     k * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3]);
                    for (int64_t i0 = 0; i0 < M; ++i0) {
                        out[size_t(((i3 * ne2 + i2) * N + i1) * M + i0)] += double(w) * double(row[size_t(i0)]);
                    }
                }
            }
        }
    }
    return out;
}

std::vector<float> run(ggml_tensor * d) {
    rt::host::HostStream stream{2};
    EXPECT_TRUE(kernels::supports(rt::Kind::host, d));
    EXPECT_TRUE(kernels::host::out_prod(stream, d));
    const float * p = static_cast<const float *>(d->data);
    return std::vector<float>(p, p + ggml_nelements(d));
}

} // namespace

TEST(OutProd, BroadcastBlockTypeAndTransposedSrc1MatchTheSum) {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K}) {
        Ctx c;
        const int64_t M = 256, N = 19, K = 7;  // N: a partial block of dst rows
        ggml_tensor * a = ggml_new_tensor_4d(c.ctx, t, M, K, 2, 1);
        ggml_tensor * bt = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F32, K, N, 4, 3);  // b = bt^T: strided dim 0
        fill_random(a, 3);
        fill_random(bt, 4);
        ggml_tensor * b = ggml_transpose(c.ctx, bt);
        ggml_tensor * d = ggml_out_prod(c.ctx, a, b);
        ASSERT_EQ(d->ne[2], 4);
        ASSERT_EQ(d->ne[3], 3);
        const std::vector<float> got = run(d);
        const std::vector<double> want = reference(a, b, d);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_NEAR(got[i], want[i], 1e-4) << ggml_type_name(t) << " at " << i;
        }
    }
}

TEST(OutProd, PackedSrc0ReadsTheOriginalRows) {
    for (ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0}) {
        Ctx c;
        const int64_t M = 64, K = 16, N = 5;
        ggml_tensor * a = ggml_new_tensor_2d(c.ctx, t, M, K);
        ggml_tensor * ap = ggml_new_tensor_2d(c.ctx, t, M, K);
        ggml_tensor * b = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, N, K);
        fill_random(a, 5);
        fill_random(b, 6);
        ASSERT_TRUE(kernels::host::packed::can_pack(ap));
        kernels::host::packed::pack(ap, a->data, ap->data);
        ASSERT_NE(std::memcmp(a->data, ap->data, ggml_nbytes(a)), 0);  // the layout did change
        const std::vector<float> plain = run(ggml_out_prod(c.ctx, a, b));
        const std::vector<float> packed = run(ggml_out_prod(c.ctx, ap, b));
        EXPECT_EQ(std::memcmp(plain.data(), packed.data(), plain.size() * sizeof(float)), 0) << ggml_type_name(t);
    }
}

TEST(OutProd, PredicateRefusesWhatTheKernelDoesNotRun) {
    Ctx c;
    const auto host = [](const ggml_tensor * t) { return kernels::supports(rt::Kind::host, t); };
    ggml_tensor * a = ggml_new_tensor_2d(c.ctx, GGML_TYPE_Q8_0, 64, 8);
    ggml_tensor * b32 = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 4, 8);
    ggml_tensor * b16 = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F16, 4, 8);
    EXPECT_TRUE(host(ggml_out_prod(c.ctx, a, b32)));
    EXPECT_FALSE(host(ggml_out_prod(c.ctx, a, b16)));  // src1 F32 only
    ggml_tensor * i32 = ggml_new_tensor_2d(c.ctx, GGML_TYPE_I32, 64, 8);
    EXPECT_FALSE(host(ggml_out_prod(c.ctx, i32, b32)));  // no decoder
    // dst rows must be contiguous.
    ggml_tensor * d = ggml_out_prod(c.ctx, a, b32);
    d->nb[0] = 2 * sizeof(float);
    EXPECT_FALSE(host(d));
}
