#include <gtest/gtest.h>

#include <set>

#include "ggml.h"
#include "diag/config.h"
#include "kernels/cuda/weight_types.h"
#include "kernels/op_table.h"

using namespace standin;

TEST(OpTable, RowsOfOneOpAreAdjacentAndUnique) {
    const auto & rows = kernels::op_rows();
    std::set<std::pair<int, int>> seen;
    std::set<int> closed;
    int prev = -1;
    for (const auto & r : rows) {
        EXPECT_TRUE(seen.insert({int(r.op), r.sub}).second) << ggml_op_name(r.op) << " listed twice";
        if (int(r.op) != prev) {
            EXPECT_EQ(closed.count(int(r.op)), 0u) << ggml_op_name(r.op) << " rows are not adjacent";
            if (prev >= 0) closed.insert(prev);
            prev = int(r.op);
        }
    }
}

TEST(OpTable, EveryKernelHasAPredicate) {
    for (const auto & r : kernels::op_rows()) {
        if (r.host.run != nullptr) {
            EXPECT_NE(r.host.supports, nullptr) << ggml_op_name(r.op);
        }
        if (r.cuda.run != nullptr) {
            EXPECT_NE(r.cuda.supports, nullptr) << ggml_op_name(r.op);
        }
        // A row with a predicate but no kernel must be a pure view op.
        if (r.host.supports != nullptr && r.host.run == nullptr) {
            EXPECT_TRUE(kernels::is_view_op(r.op)) << ggml_op_name(r.op);
        }
    }
}

class OpTableTensors : public ::testing::Test {
protected:
    void SetUp() override {
        ggml_init_params p = {64 * ggml_tensor_overhead(), nullptr, true};
        ctx = ggml_init(p);
    }
    void TearDown() override { ggml_free(ctx); }
    ggml_context * ctx = nullptr;
};

TEST_F(OpTableTensors, SupportFollowsTypes) {
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    EXPECT_TRUE(kernels::supports(rt::Kind::host, ggml_add(ctx, a, b)));
    EXPECT_TRUE(kernels::supports(rt::Kind::host, ggml_scale(ctx, a, 2.0f)));
    EXPECT_TRUE(kernels::supports(rt::Kind::host, ggml_cast(ctx, a, GGML_TYPE_F16)));
    EXPECT_TRUE(kernels::supports(rt::Kind::host, ggml_transpose(ctx, a)));

    // Not claimed: a quantized destination, and an op with no row at all.
    EXPECT_FALSE(kernels::supports(rt::Kind::host, ggml_cast(ctx, a, GGML_TYPE_Q8_0)));
    ggml_tensor * m = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 8, 8, 8);
    ggml_tensor * part = ggml_win_part(ctx, m, 2);
    EXPECT_FALSE(kernels::supports(rt::Kind::host, part));
    EXPECT_EQ(kernels::find_row(part), nullptr);
    // No SYCL device yet: nothing is claimed for it.
    EXPECT_FALSE(kernels::supports(rt::Kind::sycl, ggml_add(ctx, a, b)));
}

// A CUDA kernel that has not passed test-backend-ops on a GPU is not claimed
// (unless GGML_STANDIN_CUDA_UNPROVEN=1), while the host kernel of the same op is.
TEST_F(OpTableTensors, UnprovenCudaKernelsAreNotClaimed) {
    // ADD1: ggml's test-backend-ops has no case for it, so no GPU run proved it.
    ggml_tensor * a   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4);
    ggml_tensor * one = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    // ggml marks ggml_add1 deprecated, but the op is still in its graphs' op set.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ggml_tensor * add1 = ggml_add1(ctx, a, one);
#pragma GCC diagnostic pop
    EXPECT_TRUE(kernels::supports(rt::Kind::host, add1));
    const kernels::OpRow * row = kernels::find_row(add1);
    ASSERT_NE(row, nullptr);
    EXPECT_TRUE(row->host.proven);
#ifdef STANDIN_WITH_CUDA
    EXPECT_NE(row->cuda.supports, nullptr);
    EXPECT_FALSE(row->cuda.proven);
#endif
    EXPECT_EQ(kernels::supports(rt::Kind::cuda, add1), diag::config().cuda_unproven && row->cuda.supports != nullptr);
    // Proven CUDA rows are unaffected (SQR among the families proven on the H200).
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    EXPECT_TRUE(kernels::find_row(ggml_add(ctx, a, b))->cuda.proven);
    EXPECT_TRUE(kernels::find_row(ggml_sqr(ctx, a))->cuda.proven);
}

// Every weight type of kernels/cuda/weight_types.h, the integer-form ones
// included (proven on the H200, results/h200/summary-33.txt), is claimed by
// the CUDA MUL_MAT, MUL_MAT_ID, GET_ROWS and copies to float, as by the host.
TEST_F(OpTableTensors, CudaClaimsEveryWeightTypeOfItsList) {
    for (ggml_type t : {GGML_TYPE_Q4_K, GGML_TYPE_Q2_K, GGML_TYPE_IQ2_XXS, GGML_TYPE_MXFP4, GGML_TYPE_Q1_0}) {
        EXPECT_TRUE(kernels::cuda_weight_type(t)) << ggml_type_name(t);  // the kernels exist either way
        ggml_tensor * w = ggml_new_tensor_2d(ctx, t, 256, 8);
        ggml_tensor * experts = ggml_new_tensor_3d(ctx, t, 256, 8, 2);
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 4);
        ggml_tensor * xe = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 256, 2, 4);
        ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 4);
        ggml_tensor * rows = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3);
        const ggml_tensor * nodes[] = {ggml_mul_mat(ctx, w, x), ggml_mul_mat_id(ctx, experts, xe, ids),
                                       ggml_get_rows(ctx, w, rows), ggml_cast(ctx, w, GGML_TYPE_F32)};
        for (const ggml_tensor * n : nodes) {
            EXPECT_TRUE(kernels::supports(rt::Kind::host, n)) << ggml_op_name(n->op) << " " << ggml_type_name(t);
#ifdef STANDIN_WITH_CUDA
            const bool claimed = true;
#else
            const bool claimed = false;
#endif
            EXPECT_EQ(kernels::supports(rt::Kind::cuda, n), claimed) << ggml_op_name(n->op) << " " << ggml_type_name(t);
        }
    }
}
