// The random-model writer of `standin make-model`: tensor plans match the real
// llama shapes, values have the intended statistics and do not depend on the
// thread count, and a written file reads back through ggml's own GGUF reader
// with the right keys, types, offsets and data; the other types come from the
// pinned tree's llama-quantize (skipped where it is not built).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gguf.h"
#include "tools/standin/gguf_model.h"
#include "tools/standin/quantize_tool.h"

namespace fs = std::filesystem;
using namespace standin::tools::model;

namespace {

constexpr int64_t kVocab = 96;  // the test vocabulary's size

// One scratch directory per process (ctest runs each test in its own), removed at exit.
fs::path scratch(const std::string & name) {
    struct Dir {
        fs::path path = fs::temp_directory_path() / ("standin-test-gguf-model-" + std::to_string(::getpid()));
        Dir() { fs::create_directories(path); }
        ~Dir() {
            std::error_code ec;
            fs::remove_all(path, ec);
        }
    };
    static Dir dir;
    return dir.path / name;
}

// A vocabulary-only GGUF like llama.cpp's models/ggml-vocab-*.gguf, plus a
// non-tokenizer key that must not be copied.
std::string write_vocab() {
    const std::string path = scratch("vocab.gguf").string();
    gguf_context * v = gguf_init_empty();
    gguf_set_val_str(v, "general.name", "must-not-be-copied");
    gguf_set_val_str(v, "tokenizer.ggml.model", "gpt2");
    std::vector<std::string> toks;
    std::vector<const char *> ptrs;
    for (int i = 0; i < kVocab; ++i) toks.push_back("tok" + std::to_string(i));
    for (const auto & t : toks) ptrs.push_back(t.c_str());
    gguf_set_arr_str(v, "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
    gguf_set_val_u32(v, "tokenizer.ggml.bos_token_id", 1);
    EXPECT_TRUE(gguf_write_to_file(v, path.c_str(), true));
    gguf_free(v);
    return path;
}

Shape small_shape(bool tied) {
    Shape s;
    s.name = "unit", s.n_embd = 64, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 96, s.n_ctx = 128;
    s.tied_embeddings = tied;
    return s;
}

std::vector<char> slurp(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int64_t total_params(const std::vector<TensorPlan> & plan) {
    int64_t n = 0;
    for (const auto & t : plan) n += t.ne0 * t.ne1 * t.ne2;
    return n;
}

} // namespace

TEST(GgufModel, PlansHaveTheRealModelsParameterCounts) {
    Shape s;
    ASSERT_TRUE(shape_by_name("1b", s));
    auto p = plan_tensors(s, 128256, GGML_TYPE_Q8_0);
    EXPECT_EQ(total_params(p), 1235814400);  // Llama-3.2-1B
    EXPECT_EQ(p.size(), size_t(2 + 16 * 9));
    for (const auto & t : p) EXPECT_NE(t.name, "output.weight");
    ASSERT_TRUE(shape_by_name("8b", s));
    p = plan_tensors(s, 128256, GGML_TYPE_Q4_0);
    EXPECT_EQ(total_params(p), 8030261248);  // Meta-Llama-3-8B
    EXPECT_EQ(p.back().name, "output.weight");
    EXPECT_FALSE(shape_by_name("70b", s));
    // 8 query heads of 128 per K/V head; every name the CLI offers resolves.
    ASSERT_TRUE(shape_by_name("1b-gqa8", s));
    EXPECT_EQ(s.n_embd / s.n_head, 128);
    EXPECT_EQ(s.n_head / s.n_head_kv, 8);
    EXPECT_EQ(s.name, "1b-gqa8");
    for (const auto & name : shape_names()) EXPECT_TRUE(shape_by_name(name, s)) << name;
    ggml_type type;
    uint32_t  ftype;
    EXPECT_TRUE(weight_type_by_name("q4_0", type, ftype));
    EXPECT_EQ(type, GGML_TYPE_Q4_0);
    EXPECT_EQ(ftype, 2u);
    EXPECT_FALSE(weight_type_by_name("q5_k", type, ftype));
}

// The MoE shapes: llama's expert layout (a router and three 3-D expert
// tensors per layer, no dense FFN), qwen3-30b-a3b's experts in "moe"; the
// file says how many experts there are and how many a token uses, and
// llama.cpp reads the 3-D tensors back.
TEST(GgufModel, MoeShapesHaveRoutersAndExpertTensors) {
    Shape s;
    ASSERT_TRUE(shape_by_name("moe", s));
    EXPECT_EQ(s.n_expert, 128);
    EXPECT_EQ(s.n_expert_used, 8);
    int experts = 0, routers = 0, dense = 0;
    int64_t expert_params = 0;
    for (const auto & t : plan_tensors(s, 128256, GGML_TYPE_Q4_0)) {
        if (t.name.find("_exps.") != std::string::npos) {
            ++experts;
            EXPECT_EQ(t.ne2, 128) << t.name;
            EXPECT_EQ(t.type, GGML_TYPE_Q4_0) << t.name;
            expert_params += t.ne0 * t.ne1 * t.ne2;
        } else if (t.name.find("ffn_gate_inp") != std::string::npos) {
            ++routers;
            EXPECT_EQ(t.type, GGML_TYPE_F32) << t.name;  // as llama-quantize keeps routers
            EXPECT_EQ(t.ne0, 2048);
            EXPECT_EQ(t.ne1, 128);
        } else {
            EXPECT_EQ(t.ne2, 1) << t.name;
            dense += t.name.find("ffn_up.") != std::string::npos;
        }
    }
    EXPECT_EQ(experts, 3 * 8);
    EXPECT_EQ(routers, 8);
    EXPECT_EQ(dense, 0);
    EXPECT_EQ(expert_params, int64_t(8) * 3 * 768 * 2048 * 128);  // 8 of qwen3-30b-a3b's 48 layers

    WriteOptions o;
    o.shape = small_shape(false);
    o.shape.n_expert = 4, o.shape.n_expert_used = 2;
    ASSERT_TRUE(weight_type_by_name("q8_0", o.wtype, o.file_type));
    o.vocab_path = write_vocab();
    o.out_path   = scratch("moe.gguf").string();
    o.threads    = 2;
    const WriteResult r = write_model(o);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.n_params, total_params(plan_tensors(o.shape, kVocab, o.wtype)));
    ggml_context * meta = nullptr;
    gguf_init_params gp{true, &meta};
    gguf_context * g = gguf_init_from_file(o.out_path.c_str(), gp);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(gguf_get_val_u32(g, gguf_find_key(g, "llama.expert_count")), 4u);
    EXPECT_EQ(gguf_get_val_u32(g, gguf_find_key(g, "llama.expert_used_count")), 2u);
    const ggml_tensor * down = ggml_get_tensor(meta, "blk.1.ffn_down_exps.weight");
    ASSERT_NE(down, nullptr);
    EXPECT_EQ(down->ne[0], o.shape.n_ff);
    EXPECT_EQ(down->ne[1], o.shape.n_embd);
    EXPECT_EQ(down->ne[2], 4);
    EXPECT_EQ(down->type, GGML_TYPE_Q8_0);
    gguf_free(g);
    ggml_free(meta);
}

TEST(GgufModel, NormsAreF32AndMatricesTakeTheChosenType) {
    for (const auto & t : plan_tensors(small_shape(false), kVocab, GGML_TYPE_Q4_0)) {
        if (t.init == Init::Norm) {
            EXPECT_EQ(t.type, GGML_TYPE_F32) << t.name;
            EXPECT_EQ(t.ne1, 1) << t.name;
        } else {
            EXPECT_EQ(t.type, GGML_TYPE_Q4_0) << t.name;
        }
    }
}

TEST(GgufModel, ValuesHaveTheIntendedStatistics) {
    const TensorPlan m{"m", GGML_TYPE_F32, 4096, 8, Init::Matrix};
    const TensorPlan n{"n", GGML_TYPE_F32, 4096, 1, Init::Norm};
    for (const TensorPlan * t : {&m, &n}) {
        std::vector<float> row(size_t(t->ne0));
        double sum = 0, sq = 0, maxabs = 0;
        const int rows = 64;
        for (int r = 0; r < rows; ++r) {
            fill_row(7, 3, *t, r, row.data());
            for (float v : row) sum += v, sq += double(v) * v;
        }
        const double cnt  = double(rows) * double(t->ne0);
        const double mean = sum / cnt, sd = std::sqrt(sq / cnt - mean * mean);
        const double want_mean = t->init == Init::Norm ? 1.0 : 0.0;
        const double want_sd   = t->init == Init::Norm ? 0.1 : 1.0 / 64.0;
        EXPECT_NEAR(mean, want_mean, 0.01 * want_sd + 1e-4) << t->name;
        EXPECT_NEAR(sd, want_sd, 0.02 * want_sd) << t->name;
        for (int r = 0; r < rows; ++r) {
            fill_row(7, 3, *t, r, row.data());
            for (float v : row) maxabs = std::max(maxabs, std::fabs(double(v) - want_mean));
        }
        EXPECT_LE(maxabs, 3.47 * want_sd) << t->name;  // sum of four uniforms: bounded at sqrt(12) sigma
        EXPECT_GE(maxabs, 2.5 * want_sd) << t->name;   // but with tails
    }
}

TEST(GgufModel, RowsDependOnSeedTensorAndRowOnly) {
    const TensorPlan t{"t", GGML_TYPE_F32, 256, 4, Init::Matrix};
    std::vector<float> a(256), b(256);
    fill_row(1, 2, t, 3, a.data());
    fill_row(1, 2, t, 3, b.data());
    EXPECT_EQ(a, b);
    for (auto [seed, ti, row] : {std::tuple{2ull, 2, 3}, std::tuple{1ull, 5, 3}, std::tuple{1ull, 2, 4}}) {
        fill_row(seed, ti, t, row, b.data());
        EXPECT_NE(a, b) << seed << " " << ti << " " << row;
    }
}

TEST(GgufModel, WritesAFileGgmlReadsBack) {
    const std::string vocab = write_vocab();
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        WriteOptions o;
        o.shape      = small_shape(type == GGML_TYPE_Q8_0);
        o.wtype      = type;
        o.file_type  = 99;
        o.vocab_path = vocab;
        o.out_path   = scratch(std::string("m-") + ggml_type_name(type) + ".gguf").string();
        o.seed       = 11;
        o.threads    = 3;
        int64_t last_done = -1, calls = 0;
        o.on_progress = [&](const Progress & p) {
            EXPECT_GE(p.tensors_done, last_done);
            EXPECT_LE(p.bytes_done, p.bytes_total);
            last_done = p.tensors_done, calls++;
        };
        const WriteResult r = write_model(o);
        ASSERT_TRUE(r.ok) << r.error;
        const auto plan = plan_tensors(o.shape, kVocab, type);
        EXPECT_EQ(r.n_vocab, kVocab);
        EXPECT_EQ(r.n_tensors, int64_t(plan.size()));
        EXPECT_EQ(last_done, r.n_tensors);
        EXPECT_GT(calls, r.n_tensors);
        EXPECT_EQ(r.bytes, fs::file_size(o.out_path));
        EXPECT_FALSE(fs::exists(o.out_path + ".partial"));

        ggml_context *   data = nullptr;
        gguf_init_params ip   = {false, &data};
        gguf_context *   g    = gguf_init_from_file(o.out_path.c_str(), ip);
        ASSERT_NE(g, nullptr);
        EXPECT_STREQ(gguf_get_val_str(g, gguf_find_key(g, "general.architecture")), "llama");
        EXPECT_STRNE(gguf_get_val_str(g, gguf_find_key(g, "general.name")), "must-not-be-copied");
        EXPECT_EQ(gguf_get_val_u32(g, gguf_find_key(g, "general.file_type")), 99u);
        EXPECT_EQ(gguf_get_val_u32(g, gguf_find_key(g, "llama.block_count")), 2u);
        EXPECT_EQ(gguf_get_val_u32(g, gguf_find_key(g, "llama.rope.dimension_count")), 16u);
        EXPECT_EQ(gguf_get_val_u32(g, gguf_find_key(g, "tokenizer.ggml.bos_token_id")), 1u);
        EXPECT_EQ(gguf_get_arr_n(g, gguf_find_key(g, "tokenizer.ggml.tokens")), size_t(kVocab));
        EXPECT_EQ(gguf_find_tensor(g, "output.weight") >= 0, !o.shape.tied_embeddings);
        // The last tensor ends the file (after its alignment padding).
        const int64_t last = gguf_get_n_tensors(g) - 1;
        EXPECT_EQ(r.bytes, gguf_get_data_offset(g) + gguf_get_tensor_offset(g, last) +
                               GGML_PAD(gguf_get_tensor_size(g, last), gguf_get_alignment(g)));

        // Every tensor holds its rows, converted to its type.
        ASSERT_EQ(gguf_get_n_tensors(g), int64_t(plan.size()));
        for (size_t i = 0; i < plan.size(); ++i) {
            const TensorPlan & t = plan[i];
            ggml_tensor * tensor = ggml_get_tensor(data, t.name.c_str());
            ASSERT_NE(tensor, nullptr) << t.name;
            EXPECT_EQ(tensor->type, t.type) << t.name;
            EXPECT_EQ(tensor->ne[0], t.ne0) << t.name;
            EXPECT_EQ(tensor->ne[1], t.ne1) << t.name;
            std::vector<float> want(size_t(t.ne0)), got(size_t(t.ne0));
            const int64_t row = t.ne1 - 1;
            fill_row(o.seed, int64_t(i), t, row, want.data());
            const char * src = static_cast<const char *>(tensor->data) + row * tensor->nb[1];
            if (t.type == GGML_TYPE_F32) {
                std::memcpy(got.data(), src, size_t(t.ne0) * sizeof(float));  // F32 has no to_float
            } else {
                ggml_get_type_traits(t.type)->to_float(src, got.data(), t.ne0);
            }
            double err = 0, ref = 0;
            for (int64_t k = 0; k < t.ne0; ++k) {
                err += double(got[k] - want[k]) * (got[k] - want[k]);
                ref += double(want[k]) * want[k];
            }
            const double tol = t.type == GGML_TYPE_F32 ? 0.0 : t.type == GGML_TYPE_F16 ? 1e-6
                             : t.type == GGML_TYPE_Q8_0 ? 1e-4 : 3e-2;
            EXPECT_LE(err / ref, tol) << t.name << " " << ggml_type_name(t.type);
        }
        gguf_free(g);
        ggml_free(data);
    }
}

TEST(GgufModel, OutputDoesNotDependOnThreads) {
    const std::string vocab = write_vocab();
    std::vector<char> first;
    for (int threads : {1, 2, 5}) {
        WriteOptions o;
        o.shape      = small_shape(false);
        o.wtype      = GGML_TYPE_Q4_0;
        o.vocab_path = vocab;
        o.out_path   = scratch("threads-" + std::to_string(threads) + ".gguf").string();
        o.threads    = threads;
        ASSERT_TRUE(write_model(o).ok);
        if (first.empty()) {
            first = slurp(o.out_path);
        } else {
            EXPECT_EQ(slurp(o.out_path), first) << threads << " threads";
        }
    }
}

TEST(GgufModel, ReportsBadPathsClearly) {
    const std::string vocab = write_vocab();
    WriteOptions o;
    o.shape      = small_shape(false);
    o.vocab_path = vocab;
    o.out_path   = scratch("no-such-dir/m.gguf").string();
    WriteResult r = write_model(o);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("cannot create"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("No such file or directory"), std::string::npos) << r.error;

    o.out_path = scratch("").string();  // the scratch directory itself
    r = write_model(o);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("is a directory"), std::string::npos) << r.error;

    o.out_path   = scratch("never.gguf").string();
    o.vocab_path = scratch("missing-vocab.gguf").string();
    r = write_model(o);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("cannot read the vocabulary"), std::string::npos) << r.error;
    EXPECT_FALSE(fs::exists(o.out_path));
}

TEST(QuantizeTool, MissingToolOrUnknownTypeIsAUsageError) {
    const QuantizeResult missing = check_quantize_type("/nonexistent/llama-quantize", "q4_k_m");
    EXPECT_FALSE(missing.ok);
    EXPECT_TRUE(missing.usage_error);
    EXPECT_NE(missing.error.find("--quantize-tool"), std::string::npos) << missing.error;
    const std::string tool = default_quantize_tool();
    if (::access(tool.c_str(), X_OK) != 0) {
        GTEST_SKIP() << "no llama-quantize at " << tool;
    }
    const QuantizeResult unknown = check_quantize_type(tool, "q9_z");
    EXPECT_FALSE(unknown.ok);
    EXPECT_TRUE(unknown.usage_error);
    EXPECT_NE(unknown.error.find("q9_z"), std::string::npos) << unknown.error;
    EXPECT_TRUE(check_quantize_type(tool, "q4_k_m").ok);
}

// The small F16 model the llama-quantize tests convert (rows of 256 where
// `rows256`: the K formats and i-quants take no shorter ones; n_layer layers
// where it is not 0), written to scratch(name); its options, for plan_tensors.
namespace {
WriteOptions write_f16_model(const std::string & name, bool rows256, int64_t n_layer = 0) {
    WriteOptions o;
    o.shape = small_shape(false);
    if (rows256) o.shape.n_embd = 256, o.shape.n_ff = 256;
    if (n_layer != 0) o.shape.n_layer = n_layer;
    EXPECT_TRUE(weight_type_by_name("f16", o.wtype, o.file_type));
    o.vocab_path = write_vocab();
    o.out_path   = scratch(name).string();
    o.threads    = 1;
    EXPECT_TRUE(write_model(o).ok) << o.out_path;
    return o;
}
} // namespace

// An F16 model through llama-quantize as Q4_K_M: its mix of Q4_K and Q6_K
// matrices, norms kept F32, nothing left F16.
TEST(QuantizeTool, Q4KMModelHasTheMixOfTypes) {
    const std::string tool = default_quantize_tool();
    if (::access(tool.c_str(), X_OK) != 0) {
        GTEST_SKIP() << "no llama-quantize at " << tool;
    }
    const WriteOptions o = write_f16_model("q-f16.gguf", true);
    const std::string out = scratch("q-q4_k_m.gguf").string();
    const QuantizeResult q = quantize_file(tool, o.out_path, out, "q4_k_m", 1, scratch("q.log").string());
    ASSERT_TRUE(q.ok) << q.error;
    std::map<ggml_type, int> counts = tensor_type_counts(out);
    int norms = 0;
    for (const auto & t : plan_tensors(o.shape, kVocab, o.wtype)) norms += t.type == GGML_TYPE_F32;
    EXPECT_GT(counts[GGML_TYPE_Q4_K], 0) << describe_type_counts(counts);
    EXPECT_GT(counts[GGML_TYPE_Q6_K], 0) << describe_type_counts(counts);
    EXPECT_EQ(counts[GGML_TYPE_F32], norms) << describe_type_counts(counts);
    EXPECT_EQ(counts[GGML_TYPE_F16], 0) << describe_type_counts(counts);
}

// A ggml type llama-quantize has no whole-model mix for (MXFP4: its mix
// quantizes MoE experts only): the Q8_0 mix with every layer matrix
// overridden, so the layers are all MXFP4 and only the embeddings and output
// are Q8_0.
TEST(QuantizeTool, Mxfp4LayersThroughTheOverride) {
    LayerOverride none;
    EXPECT_FALSE(layer_type_override("q9_z", none));
    EXPECT_FALSE(layer_type_override("f16", none));
    const std::string tool = default_quantize_tool();
    if (::access(tool.c_str(), X_OK) != 0) {
        GTEST_SKIP() << "no llama-quantize at " << tool;
    }
    LayerOverride lo;
    ASSERT_TRUE(layer_type_override("MXFP4", lo));
    const WriteOptions o = write_f16_model("o-f16.gguf", false);
    const std::string out = scratch("o-mxfp4.gguf").string();
    const QuantizeResult q = quantize_file(tool, o.out_path, out, lo.base, 1, scratch("o.log").string(), lo.args);
    ASSERT_TRUE(q.ok) << q.error;
    int layer_mats = 0, other_mats = 0;
    for (const auto & t : plan_tensors(o.shape, kVocab, o.wtype)) {
        if (t.type == GGML_TYPE_F32) continue;
        (t.name.rfind("blk.", 0) == 0 ? layer_mats : other_mats) += 1;
    }
    std::map<ggml_type, int> counts = tensor_type_counts(out);
    EXPECT_EQ(counts[GGML_TYPE_MXFP4], layer_mats) << describe_type_counts(counts);
    // Named by its layers' type (LLAMA_FTYPE_MOSTLY_MXFP4_MOE), not by the base mix.
    gguf_init_params gp{true, nullptr};
    gguf_context * g = gguf_init_from_file(out.c_str(), gp);
    ASSERT_NE(g, nullptr);
    const int64_t key = gguf_find_key(g, "general.file_type");
    ASSERT_GE(key, 0);
    EXPECT_EQ(gguf_get_val_u32(g, key), 38u);
    gguf_free(g);
    EXPECT_EQ(counts[GGML_TYPE_Q8_0], other_mats) << describe_type_counts(counts);
    EXPECT_EQ(counts[GGML_TYPE_F16], 0) << describe_type_counts(counts);
}

// The matrix's context holds every tensor with ggml's alignment padding: a
// model of many matrices (1B's 16 layers overflowed it once, an abort in
// ggml_new_tensor) gets its two tensors per matrix.
TEST(QuantizeTool, UniformImportanceMatrixOfManyMatrices) {
    const WriteOptions o = write_f16_model("many-f16.gguf", false, 48);
    const std::string im = scratch("many.imatrix.gguf").string();
    std::string error;
    ASSERT_TRUE(write_uniform_imatrix(o.out_path, im, error)) << error;
    gguf_init_params gp{true, nullptr};
    gguf_context * g = gguf_init_from_file(im.c_str(), gp);
    ASSERT_NE(g, nullptr);
    int mats = 0;
    for (const auto & t : plan_tensors(o.shape, kVocab, o.wtype)) mats += t.type != GGML_TYPE_F32;
    EXPECT_GT(mats, 48 * 7);
    EXPECT_EQ(gguf_get_n_tensors(g), 2 * mats);
    gguf_free(g);
}

// The very low-bit mixes (here IQ2_XXS) are refused by llama-quantize without
// an importance matrix: quantize_file writes the uniform one (every matrix of
// the model, a sum of ones over one call), runs again, and says so.
TEST(QuantizeTool, VeryLowBitTypesTakeAUniformImportanceMatrix) {
    const std::string tool = default_quantize_tool();
    if (::access(tool.c_str(), X_OK) != 0) {
        GTEST_SKIP() << "no llama-quantize at " << tool;
    }
    const WriteOptions o = write_f16_model("i-f16.gguf", true);

    // The matrix itself: the keys llama-quantize asks for, two tensors per matrix.
    const std::string im = scratch("i.imatrix.gguf").string();
    std::string error;
    ASSERT_TRUE(write_uniform_imatrix(o.out_path, im, error)) << error;
    ggml_context * data = nullptr;
    gguf_init_params gp{false, &data};
    gguf_context * g = gguf_init_from_file(im.c_str(), gp);
    ASSERT_NE(g, nullptr);
    for (const char * key : {"imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"}) {
        EXPECT_GE(gguf_find_key(g, key), 0) << key;
    }
    int mats = 0;
    for (const auto & t : plan_tensors(o.shape, kVocab, o.wtype)) mats += t.type != GGML_TYPE_F32;
    EXPECT_EQ(gguf_get_n_tensors(g), 2 * mats);
    const ggml_tensor * sums = ggml_get_tensor(data, "blk.0.ffn_down.weight.in_sum2");
    ASSERT_NE(sums, nullptr);
    EXPECT_EQ(sums->ne[0], o.shape.n_ff);
    EXPECT_EQ(static_cast<const float *>(sums->data)[0], 1.0f);
    gguf_free(g);
    ggml_free(data);
    EXPECT_FALSE(write_uniform_imatrix(scratch("none.gguf").string(), im, error));
    EXPECT_NE(error.find("none.gguf"), std::string::npos) << error;

    const std::string out = scratch("i-iq2_xxs.gguf").string();
    const QuantizeResult q = quantize_file(tool, o.out_path, out, "iq2_xxs", 1, scratch("i.log").string());
    ASSERT_TRUE(q.ok) << q.error;
    EXPECT_TRUE(q.uniform_imatrix);
    EXPECT_FALSE(std::filesystem::exists(out + ".imatrix.gguf"));
    std::map<ggml_type, int> counts = tensor_type_counts(out);
    EXPECT_GT(counts[GGML_TYPE_IQ2_XXS], 0) << describe_type_counts(counts);
    EXPECT_EQ(counts[GGML_TYPE_F16], 0) << describe_type_counts(counts);
    // A mix that needs no matrix is made without one, as before.
    const QuantizeResult plain = quantize_file(tool, o.out_path, scratch("i-q4_0.gguf").string(), "q4_0", 1,
                                               scratch("p.log").string());
    ASSERT_TRUE(plain.ok) << plain.error;
    EXPECT_FALSE(plain.uniform_imatrix);
}
