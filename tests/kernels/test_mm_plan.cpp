// Note [product plan] (kernels/cuda/mm_plan.h), checked without a GPU: every
// weight type the CUDA device's MUL_MAT claims gets a kernel made for its
// column count, at every count from 1 to 4096 (no size falls through to the
// tiled float kernel), and the tile shapes stay within what mmq.cu has.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "ggml.h"
#include "kernels/cuda/mm_plan.h"
#include "kernels/op_table.h"

using namespace standin;
namespace plan = kernels::cuda::plan;

namespace {

// The weight types MUL_MAT may claim, read from the op table itself: its
// predicate with the CUDA device's list.
std::vector<ggml_type> claimed_weight_types() {
    std::vector<ggml_type> out;
    ggml_init_params ip = {16 * ggml_tensor_overhead(), nullptr, true};
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (ggml_blck_size(ggml_type(t)) == 0 || ggml_type_size(ggml_type(t)) == 0) continue;  // removed types
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * a = ggml_new_tensor_2d(ctx, ggml_type(t), 4096, 4096);
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4096, 8);
        // The host row's predicate is the CUDA row's before its weight list (op_table.cpp: cuda_mul_mat).
        ggml_tensor * mm = ggml_mul_mat(ctx, a, b);
        if (kernels::supports(rt::Kind::host, mm) && kernels::cuda_weight_type(ggml_type(t))) {
            out.push_back(ggml_type(t));
        }
#ifdef STANDIN_WITH_CUDA
        EXPECT_TRUE(!kernels::supports(rt::Kind::cuda, mm) || kernels::cuda_weight_type(ggml_type(t)))
            << ggml_type_name(ggml_type(t)) << " claimed without a kernel";
#endif
        ggml_free(ctx);
    }
    return out;
}

// Whether mmq.cu has a kernel of the choice's tile shape for type t
// (SI_MMQ_SHAPES, and mmq_shape_built for the shapes some types lack).
bool is_mmq_shape(const plan::Choice & c, ggml_type t) {
    if (!plan::mmq_shape_built(t, c.nt, c.mw)) return false;
#define SI_X(kNt, kMw) if (c.nt == kNt && c.mw == kMw) return true;
    SI_MMQ_SHAPES(SI_X)
#undef SI_X
    return false;
}

// An mmq tile as wide as the columns up to 48, and no more columns computed
// in all than the widest tiles would compute.
void expect_tile_fits(const plan::Choice & c, ggml_type t, int64_t n) {
    const int64_t w = 8 * c.nt, widest = plan::kMmqMaxCols;
    EXPECT_GE(w, n < 48 ? n : 48) << ggml_type_name(t) << " n=" << n << ": a tile narrower than needed";
    EXPECT_LE((n + w - 1) / w * w, (n + widest - 1) / widest * widest)
        << ggml_type_name(t) << " n=" << n << ": more padding than " << widest << "-column tiles";
}

plan::Problem problem(ggml_type t, int64_t n) {
    plan::Problem p{};
    p.type = t;
    p.K = 4096;
    p.M = 4096;
    p.N = n;
    p.matrices = 1;
    p.rows_aligned = true;
    // What mm::q8_applies answers for these (aligned, K % 256 == 0) shapes.
    p.vec_int_ok = n <= plan::vec_int_max_n(t);
    p.blas_ok = true;
    p.sms = 132;
    p.mmq_mode = 0;
    return p;
}

} // namespace

TEST(ProductPlan, EveryClaimedTypeHasAKernelForEveryColumnCount) {
    const std::vector<ggml_type> types = claimed_weight_types();
    ASSERT_GE(types.size(), 26u);  // 3 float, 8 Part and 15 integer-form formats (weight_types.h)
    for (ggml_type t : types) {
        for (int64_t n = 1; n <= 4096; ++n) {
            const plan::Choice c = plan::choose(problem(t, n));
            if (plan::is_float(t)) {
                EXPECT_EQ(c.path, n <= plan::kVecMaxN ? plan::Path::vec_float : plan::Path::blas)
                    << ggml_type_name(t) << " n=" << n;
                continue;
            }
            if (kernels::cuda::is_int_form_weight(t) && plan::mmq_chunk(t) == 0) {
                // Their integer mat-vec, then the F16 decode and cuBLAS, or
                // without cuBLAS the tiled kernel (which decodes their runs).
                EXPECT_EQ(c.path, n <= plan::kVecMaxN ? plan::Path::vec_int : plan::Path::blas)
                    << ggml_type_name(t) << " n=" << n << " gets " << plan::path_name(c.path);
                plan::Problem no_blas = problem(t, n);
                no_blas.blas_ok = false;
                EXPECT_EQ(plan::choose(no_blas).path, n <= plan::kVecMaxN ? plan::Path::vec_int : plan::Path::tile)
                    << ggml_type_name(t) << " n=" << n;
                continue;
            }
            // Block weights: a kernel made for them at every count; cuBLAS
            // (weights decoded to F16) only from kBlasOverMmqN columns.
            ASSERT_TRUE(c.path == plan::Path::vec_int || c.path == plan::Path::mmq ||
                        (c.path == plan::Path::blas && n >= plan::kBlasOverMmqN))
                << ggml_type_name(t) << " n=" << n << " gets " << plan::path_name(c.path);
            plan::Problem no_blas = problem(t, n);
            no_blas.blas_ok = false;
            const plan::Choice own = plan::choose(no_blas);
            ASSERT_TRUE(own.path == plan::Path::vec_int || own.path == plan::Path::mmq)
                << ggml_type_name(t) << " n=" << n << " without cuBLAS gets " << plan::path_name(own.path);
            if (c.path == plan::Path::mmq) {
                EXPECT_TRUE(is_mmq_shape(c, t)) << ggml_type_name(t) << ": no kernel for nt " << c.nt << " mw " << c.mw;
                EXPECT_GE(c.split, 1);
                EXPECT_LE(c.split, 8);
                expect_tile_fits(c, t, n);
            }
        }
    }
}

TEST(ProductPlan, SplitsKOnlyWhenTilesCannotFillTheGpu) {
    plan::Problem p = problem(GGML_TYPE_Q4_0, 16);
    p.M = 1024;  // 16 row tiles: far fewer than 2 x 132
    EXPECT_GT(plan::choose(p).split, 1);
    p.M = 128256;  // an output projection: thousands of tiles
    EXPECT_EQ(plan::choose(p).split, 1);
    p.K = 256;  // one chunk: nothing to split
    p.M = 1024;
    EXPECT_EQ(plan::choose(p).split, 1);
}

TEST(ProductPlan, ThirtyTwoColumnTilesOf128RowsWhereMeasured) {
    for (const ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K}) {
        for (const int64_t m : {int64_t(4096), int64_t(14336)}) {
            for (const int64_t n : {int64_t(17), int64_t(24), int64_t(32)}) {
                plan::Problem p = problem(t, n);
                p.M = m;
                const plan::Choice c = plan::choose(p);
                ASSERT_EQ(c.path, plan::Path::mmq) << ggml_type_name(t) << " n=" << n;
                EXPECT_EQ(c.nt, 4);
                // Measured for Q4_0 and Q8_0 (mm_plan.h, mmq_quarter_wide); Q4_K not.
                const bool wide = t != GGML_TYPE_Q4_K;
                EXPECT_EQ(c.mw, wide ? 2 : 1) << ggml_type_name(t) << " m=" << m << " n=" << n;
                if (wide) EXPECT_EQ(c.split, 8) << ggml_type_name(t) << " m=" << m << " n=" << n;
            }
        }
        // Sixteen columns keep 64-row tiles; so do MUL_MAT_ID's, which cannot split K.
        EXPECT_EQ(plan::choose(problem(t, 16)).mw, 1) << ggml_type_name(t);
        plan::Problem e = problem(t, 32);
        e.vec_int_ok = false;
        EXPECT_EQ(plan::choose_id(e, 32 * 8).mw, 1) << ggml_type_name(t);
    }
}

TEST(ProductPlan, KnobsAndFallbacks) {
    plan::Problem p = problem(GGML_TYPE_Q8_0, 1);
    EXPECT_EQ(plan::choose(p).path, plan::Path::vec_int);
    p.mmq_mode = 2;  // GGML_STANDIN_MMQ=all
    EXPECT_EQ(plan::choose(p).path, plan::Path::mmq);
    // Q4_K at 3 columns: its mat-vec takes them, the table picks mmq.
    plan::Problem k = problem(GGML_TYPE_Q4_K, 3);
    EXPECT_EQ(plan::choose(k).path, plan::Path::mmq);
    k.mmq_mode = 1;  // off: the mat-vec while it takes the product, cuBLAS beyond
    EXPECT_EQ(plan::choose(k).path, plan::Path::vec_int);
    p.mmq_mode = 1;
    p.N = 64;
    p.vec_int_ok = false;  // q8_applies takes at most 8 columns
    EXPECT_EQ(plan::choose(p).path, plan::Path::blas);
    p.blas_ok = false;
    EXPECT_EQ(plan::choose(p).path, plan::Path::tile);
    // K not a whole number of chunks: the decoding paths.
    plan::Problem odd = problem(GGML_TYPE_Q4_0, 3);
    odd.K = 4096 + 32;
    odd.vec_int_ok = false;  // q8_applies wants K % 256 == 0 too
    EXPECT_EQ(plan::choose(odd).path, plan::Path::vec_float);
}

TEST(ProductPlan, BlockFormatsDecodeFewColumnsOnTheirMatVec) {
    for (ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0}) {
        EXPECT_EQ(plan::choose(problem(t, 8)).path, plan::Path::vec_int) << ggml_type_name(t);
        EXPECT_EQ(plan::choose(problem(t, 9)).path, plan::Path::mmq) << ggml_type_name(t);
    }
}

TEST(ProductPlan, KFormatsDecodeUpToTwoColumnsOnTheirMatVec) {
    for (ggml_type t : {GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K}) {
        EXPECT_EQ(plan::choose(problem(t, 1)).path, plan::Path::vec_int) << ggml_type_name(t);
        EXPECT_EQ(plan::choose(problem(t, 2)).path, plan::Path::vec_int) << ggml_type_name(t);
        EXPECT_EQ(plan::choose(problem(t, 3)).path, plan::Path::mmq) << ggml_type_name(t);
    }
    EXPECT_EQ(plan::vec_int_max_n(GGML_TYPE_TQ2_0), 0);  // not a CUDA weight type
    EXPECT_EQ(plan::vec_int_max_n(GGML_TYPE_F16), 0);
}

TEST(ProductPlan, IntegerFormTypesTakeTheirMatVecThenDecodedGemms) {
    for (ggml_type t : {GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M, GGML_TYPE_NVFP4, GGML_TYPE_Q1_0, GGML_TYPE_Q2_0}) {
        EXPECT_EQ(plan::mmq_chunk(t), 0) << ggml_type_name(t);
        EXPECT_EQ(plan::vec_int_max_n(t), plan::kVecMaxN) << ggml_type_name(t);
        plan::Problem p = problem(t, 8);
        p.mmq_mode = 2;  // GGML_STANDIN_MMQ=all: no mmq format, their mat-vec still
        EXPECT_EQ(plan::choose(p).path, plan::Path::vec_int) << ggml_type_name(t);
        p.vec_int_ok = false;  // rows the mat-vec cannot read (q8_applies): the tiled kernel, not the float mat-vec
        EXPECT_EQ(plan::choose(p).path, plan::Path::tile) << ggml_type_name(t);
        EXPECT_EQ(plan::choose(problem(t, 9)).path, plan::Path::blas) << ggml_type_name(t);
    }
}

// The integer-form formats mmq has: the 4-bit table formats take their
// integer mat-vec up to 8 columns, Q2_K, Q3_K and the IQ2/IQ3 grids the K
// formats' up to 1, 2 and 4 (where it measured faster than mmq); mmq after
// that (the F16 decode and cuBLAS they had taken from 9 measured 3-4x slower
// for the table formats, 1.1-4.2x for these), cuBLAS from kBlasOverMmqN as the
// other block formats; GGML_STANDIN_MMQ=all gives them to mmq at every count,
// and rows mmq cannot stage keep the other paths.
TEST(ProductPlan, IntegerFormTypesWithMmqTakeTheirMatVecThenMmq) {
    struct Case {
        ggml_type t;
        int       chunk, vec_n;
    };
    for (const Case & k : {Case{GGML_TYPE_IQ4_NL, 256, 8}, Case{GGML_TYPE_IQ4_XS, 256, 8},
                           Case{GGML_TYPE_MXFP4, 256, 8}, Case{GGML_TYPE_Q2_K, 256, 1},
                           Case{GGML_TYPE_Q3_K, 512, 2}, Case{GGML_TYPE_IQ2_XXS, 512, 4},
                           Case{GGML_TYPE_IQ2_XS, 512, 4}, Case{GGML_TYPE_IQ2_S, 512, 4},
                           Case{GGML_TYPE_IQ3_XXS, 512, 4}, Case{GGML_TYPE_IQ3_S, 512, 4}}) {
        const ggml_type t = k.t;
        EXPECT_EQ(plan::mmq_chunk(t), k.chunk) << ggml_type_name(t);
        EXPECT_EQ(plan::vec_int_max_n(t), plan::kVecMaxN) << ggml_type_name(t);
        for (int64_t n = 1; n <= 4096; ++n) {
            const plan::Choice table = plan::choose(problem(t, n));
            const plan::Path   want  = n <= k.vec_n               ? plan::Path::vec_int
                                       : n < plan::kBlasOverMmqN ? plan::Path::mmq
                                                                 : plan::Path::blas;
            EXPECT_EQ(table.path, want) << ggml_type_name(t) << " n=" << n << " gets " << plan::path_name(table.path);
            plan::Problem p = problem(t, n);
            p.mmq_mode = 2;
            const plan::Choice c = plan::choose(p);
            EXPECT_EQ(c.path, plan::Path::mmq) << ggml_type_name(t) << " n=" << n << " with GGML_STANDIN_MMQ=all";
            expect_tile_fits(c, t, n);
            p.rows_aligned = false;  // rows mmq cannot stage: the table's other paths
            EXPECT_NE(plan::choose(p).path, plan::Path::mmq) << ggml_type_name(t) << " n=" << n;
        }
    }
}

// MUL_MAT_ID (plan::choose_id): every claimed weight type gets a kernel at
// every pair count from 1 to 4096 (128 experts): the mat-vecs up to
// kIdVecPairs pairs (float weights kIdVecFloatPairs), then mmq over the grouped pairs for the formats it has
// (no K split: the tile list is made on the device), the integer mat-vec
// (any number of pairs) for the other integer formats, the tiled kernel for
// float weights; GGML_STANDIN_MMQ=all takes mmq from one pair, =off never
// (the integer mat-vec instead).
TEST(ProductPlan, ExpertsTakeAKernelForEveryPairCount) {
    const int64_t n_as = 128;
    for (ggml_type t : claimed_weight_types()) {
        const bool has_mmq = plan::mmq_chunk(t) > 0, vec_int = plan::vec_int_max_n(t) > 0;
        EXPECT_EQ(vec_int, !plan::is_float(t)) << ggml_type_name(t);
        for (int64_t pairs = 1; pairs <= 4096; ++pairs) {
            plan::Problem p = problem(t, (pairs + n_as - 1) / n_as);
            p.matrices = n_as;
            p.vec_int_ok = vec_int;  // q8_id_applies: the weights only
            const plan::Choice c = plan::choose_id(p, pairs);
            const bool few = pairs <= (vec_int ? plan::kIdVecPairs : plan::kIdVecFloatPairs);
            const plan::Path small = vec_int ? plan::Path::vec_int : plan::Path::vec_float;
            const plan::Path many = has_mmq ? plan::Path::mmq : vec_int ? plan::Path::vec_int : plan::Path::tile;
            EXPECT_EQ(c.path, few ? small : many)
                << ggml_type_name(t) << " pairs=" << pairs << " gets " << plan::path_name(c.path);
            if (c.path == plan::Path::mmq) {
                EXPECT_TRUE(is_mmq_shape(c, t)) << ggml_type_name(t) << ": no kernel for nt " << c.nt << " mw " << c.mw;
                EXPECT_EQ(c.split, 1) << ggml_type_name(t) << " pairs=" << pairs;
                expect_tile_fits(c, t, p.N);
            }
            p.mmq_mode = 2;
            EXPECT_EQ(plan::choose_id(p, pairs).path, has_mmq ? plan::Path::mmq : c.path)
                << ggml_type_name(t) << " pairs=" << pairs << " with GGML_STANDIN_MMQ=all";
            p.mmq_mode = 1;
            const plan::Path off = vec_int ? plan::Path::vec_int : c.path;
            EXPECT_EQ(plan::choose_id(p, pairs).path, off)
                << ggml_type_name(t) << " pairs=" << pairs << " with GGML_STANDIN_MMQ=off";
            p.mmq_mode = 0;
            p.vec_int_ok = false;  // experts the integer mat-vec cannot read (q8_id_applies)
            if (!has_mmq) {
                EXPECT_EQ(plan::choose_id(p, pairs).path, pairs <= plan::kIdVecFloatPairs ? plan::Path::vec_float
                                                                                      : plan::Path::tile)
                    << ggml_type_name(t) << " pairs=" << pairs << " unreadable rows";
            }
        }
    }
}

// The K formats' mat-vec launch shapes (k_vec_shape) at the products of 1B and
// 8B llama models, as measured in results/h200/summary-102.txt: {rows per
// warp, warps per row group}.
TEST(ProductPlan, KFormatMatVecShapesOfModelProducts) {
    const auto shape = [](int64_t rows, int64_t K, int64_t N, int max_rw, int rows_rw, bool rope) {
        const plan::KVecShape s = plan::k_vec_shape(rows, K / 256, 1, N, max_rw, rows_rw, rope);
        return std::pair<int, int>{s.rw, s.r};
    };
    using P = std::pair<int, int>;
    // 1B (2048 wide, 8192 hidden): Q/K/V with a Q6_K V in one launch, its
    // rope epilogue in neighbouring warps; gate/up; down; wo; the output.
    EXPECT_EQ(shape(3072, 2048, 1, 4, 4, true), P(1, 1));
    EXPECT_EQ(shape(16384, 2048, 1, 4, 4, false), P(4, 1));
    EXPECT_EQ(shape(2048, 8192, 1, 4, 4, false), P(4, 4));
    EXPECT_EQ(shape(2048, 2048, 1, 4, 4, false), P(1, 1));
    EXPECT_EQ(shape(128256, 2048, 1, 4, 4, false), P(4, 1));
    // 8B (4096 wide, 14336 hidden): Q/K/V at four rows (so a Q6_K V takes a
    // launch of its own, at two rows: the rope pairs in one warp), gate/up,
    // gate alone, down.
    EXPECT_EQ(shape(6144, 4096, 1, 4, 4, true), P(4, 4));
    EXPECT_EQ(shape(5120, 4096, 1, 4, 4, true), P(4, 4));
    EXPECT_EQ(shape(1024, 4096, 1, 4, 4, true), P(2, 4));
    EXPECT_EQ(shape(28672, 4096, 1, 4, 4, false), P(4, 1));
    EXPECT_EQ(shape(14336, 4096, 1, 4, 4, false), P(4, 1));
    EXPECT_EQ(shape(4096, 14336, 1, 4, 4, false), P(4, 4));
    // The rope epilogue never takes one row per warp with K split: two rows.
    EXPECT_EQ(shape(512, 4096, 1, 4, 4, false), P(1, 4));
    EXPECT_EQ(shape(512, 4096, 1, 4, 4, true), P(2, 4));
    // The rows and the format's registers bound the rows per warp.
    EXPECT_EQ(shape(8192, 2048, 1, 4, 2, false), P(2, 1));
    EXPECT_EQ(shape(16384, 2048, 1, 2, 4, false), P(2, 1));
    // Several columns: one row per warp, K split below 4096 warps or past 32 super-blocks.
    EXPECT_EQ(shape(4096, 14336, 2, 4, 4, false), P(1, 4));
    EXPECT_EQ(shape(14336, 4096, 2, 4, 4, false), P(1, 1));
    EXPECT_EQ(shape(3072, 4096, 4, 4, 4, false), P(1, 4));
}
