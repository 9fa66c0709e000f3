// The upload path of packed weights (Note [packed weights],
// kernels/host/packed.h) through ggml's public API, as llama.cpp drives it: a
// buffer of the host device's own type marked for weights packs Q4_0/Q8_0
// (and the other packed formats) tensors written whole, get_tensor returns the original
// bytes, a partial write restores the original layout, and products are
// unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "glue/glue.h"
#include "kernels/host/packed.h"

using namespace standin;
namespace packed = kernels::host::packed;

namespace {

ggml_backend_dev_t host0() {
    ggml_backend_reg_t reg = glue::registry();
    for (size_t i = 0; i < ggml_backend_reg_dev_count(reg); ++i) {
        ggml_backend_dev_t d = ggml_backend_reg_dev_get(reg, i);
        if (std::string(ggml_backend_dev_name(d)) == "STANDIN_HOST0") return d;
    }
    return nullptr;
}

std::vector<char> quantized(ggml_type t, int64_t K, int64_t M, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> w(size_t(K * M));
    for (float & f : w) f = u(rng);
    std::vector<char> q(size_t(M) * ggml_row_size(t, K));
    ggml_quantize_chunk(t, w.data(), q.data(), 0, M, K, nullptr);
    return q;
}

struct Weights {
    ggml_context *        ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    ggml_tensor *         q4  = nullptr;  // packable
    ggml_tensor *         q8  = nullptr;  // packable
    ggml_tensor *         odd = nullptr;  // 12 rows: not whole groups
    std::vector<char>     q4_bytes, q8_bytes, odd_bytes;

    Weights(ggml_backend_buffer_type_t buft, ggml_backend_buffer_usage usage) {
        ggml_init_params ip = {16 * ggml_tensor_overhead(), nullptr, true};
        ctx = ggml_init(ip);
        q4  = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 128, 16);
        q8  = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 128, 8);
        odd = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 128, 12);
        buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
        ggml_backend_buffer_set_usage(buf, usage);
        q4_bytes  = quantized(GGML_TYPE_Q4_0, 128, 16, 1);
        q8_bytes  = quantized(GGML_TYPE_Q8_0, 128, 8, 2);
        odd_bytes = quantized(GGML_TYPE_Q4_0, 128, 12, 3);
        ggml_backend_tensor_set(q4, q4_bytes.data(), 0, q4_bytes.size());
        ggml_backend_tensor_set(q8, q8_bytes.data(), 0, q8_bytes.size());
        ggml_backend_tensor_set(odd, odd_bytes.data(), 0, odd_bytes.size());
    }
    ~Weights() {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
    }
};

std::vector<char> get(const ggml_tensor * t, size_t offset, size_t size) {
    std::vector<char> out(size);
    ggml_backend_tensor_get(t, out.data(), offset, size);
    return out;
}

bool same(const std::vector<char> & a, const char * b) { return std::memcmp(a.data(), b, a.size()) == 0; }

// a times n columns of f(step * k) (k the element's index) on `be`, as floats.
std::vector<float> product(ggml_backend_t be, ggml_tensor * a, int64_t n, float (*f)(float), float step) {
    ggml_init_params ip = {64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, a->ne[0], n);
    ggml_tensor * y = ggml_mul_mat(ctx, a, x);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, y);
    ggml_backend_buffer_t abuf = ggml_backend_alloc_ctx_tensors(ctx, be);
    std::vector<float> xv(size_t(ggml_nelements(x)));
    for (size_t k = 0; k < xv.size(); ++k) xv[k] = f(step * float(k));
    ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
    std::vector<float> out;
    if (ggml_backend_graph_compute(be, g) == GGML_STATUS_SUCCESS) {
        out.resize(size_t(ggml_nelements(y)));
        ggml_backend_tensor_get(y, out.data(), 0, out.size() * sizeof(float));
    }
    ggml_backend_buffer_free(abuf);
    ggml_free(ctx);
    return out;
}

float sin_f(float v) { return std::sin(v); }
float cos_f(float v) { return std::cos(v); }

// Both products computed, of one size, and equal to float rounding (the
// packed kernels sum in another order).
void expect_close(const std::vector<float> & got, const std::vector<float> & want, const char * what) {
    ASSERT_FALSE(want.empty()) << what << ": the graph failed";
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_NEAR(got[k], want[k], 1e-5f * (1.0f + std::fabs(want[k]))) << what << " " << k;
    }
}

} // namespace

TEST(PackedUpload, WeightBufferPacksAndReadsBackOriginalBytes) {
    ggml_backend_dev_t dev = host0();
    ASSERT_NE(dev, nullptr);
    Weights w(ggml_backend_dev_buffer_type(dev), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    EXPECT_NE(packed::packed_of(w.q4), nullptr);
    EXPECT_NE(packed::packed_of(w.q8), nullptr);
    EXPECT_EQ(packed::packed_of(w.odd), nullptr);
    EXPECT_NE(std::memcmp(w.q4->data, w.q4_bytes.data(), w.q4_bytes.size()), 0) << "stored packed";
    EXPECT_TRUE(same(get(w.q4, 0, w.q4_bytes.size()), w.q4_bytes.data()));
    EXPECT_TRUE(same(get(w.q8, 0, w.q8_bytes.size()), w.q8_bytes.data()));
    EXPECT_TRUE(same(get(w.odd, 0, w.odd_bytes.size()), w.odd_bytes.data()));
    EXPECT_TRUE(same(get(w.q4, 5, 300), w.q4_bytes.data() + 5));
    EXPECT_TRUE(same(get(w.q8, 34 * 4 + 1, 34 * 9), w.q8_bytes.data() + 34 * 4 + 1));
}

// A write of part of a packed tensor (one block of row 1) lands in the
// original layout, and the tensor reads back with just that block changed.
TEST(PackedUpload, PartialWriteRestoresTheOriginalLayout) {
    Weights w(ggml_backend_dev_buffer_type(host0()), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    ASSERT_NE(packed::packed_of(w.q4), nullptr);
    std::vector<char> expect = w.q4_bytes;
    const size_t at = w.q4->nb[1] + 18;
    for (size_t i = 0; i < 18; ++i) expect[at + i] = char(i * 7 + 1);
    ggml_backend_tensor_set(w.q4, expect.data() + at, at, 18);
    EXPECT_EQ(packed::packed_of(w.q4), nullptr);
    EXPECT_TRUE(same(get(w.q4, 0, expect.size()), expect.data()));
    EXPECT_EQ(std::memcmp(w.q4->data, expect.data(), expect.size()), 0);
    // Written whole again, it is packed again.
    ggml_backend_tensor_set(w.q4, w.q4_bytes.data(), 0, w.q4_bytes.size());
    EXPECT_NE(packed::packed_of(w.q4), nullptr);
    EXPECT_TRUE(same(get(w.q4, 0, w.q4_bytes.size()), w.q4_bytes.data()));
}

// Only the device's own weight buffers pack: not compute buffers, and not the
// _Host staging type, whose memory other backends read directly.
TEST(PackedUpload, OnlyWeightBuffersOfTheDeviceTypePack) {
    ggml_backend_dev_t dev = host0();
    Weights any(ggml_backend_dev_buffer_type(dev), GGML_BACKEND_BUFFER_USAGE_ANY);
    EXPECT_EQ(packed::packed_of(any.q4), nullptr);
    EXPECT_EQ(std::memcmp(any.q4->data, any.q4_bytes.data(), any.q4_bytes.size()), 0);
    Weights host(ggml_backend_dev_host_buffer_type(dev), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    EXPECT_EQ(packed::packed_of(host.q4), nullptr);
    EXPECT_EQ(std::memcmp(host.q4->data, host.q4_bytes.data(), host.q4_bytes.size()), 0);
}

// A graph on the device computes the same product from packed weights as
// from the original layout (to float rounding: the sums run in another order).
TEST(PackedUpload, ProductsMatchUnpackedWeights) {
    ggml_backend_dev_t dev = host0();
    Weights wp(ggml_backend_dev_buffer_type(dev), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    Weights wa(ggml_backend_dev_buffer_type(dev), GGML_BACKEND_BUFFER_USAGE_ANY);
    ggml_backend_t be = ggml_backend_dev_init(dev, nullptr);
    ASSERT_NE(be, nullptr);
    for (bool use_q8 : {false, true}) {
        expect_close(product(be, use_q8 ? wp.q8 : wp.q4, 3, sin_f, 0.37f), product(be, use_q8 ? wa.q8 : wa.q4, 3, sin_f, 0.37f),
                     use_q8 ? "q8_0" : "q4_0");
    }
    ggml_backend_free(be);
}

// llama.cpp without mmap reads weights straight into a host buffer's memory;
// they are packed by the first graph that multiplies by them, and read back
// as they were written.
TEST(PackedUpload, WeightsWrittenDirectlyArePackedByTheFirstGraph) {
    ggml_backend_dev_t dev = host0();
    Weights w(ggml_backend_dev_buffer_type(dev), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    Weights ref(ggml_backend_dev_buffer_type(dev), GGML_BACKEND_BUFFER_USAGE_ANY);
    // Back to the original layout, then overwritten in memory as a loader would.
    ggml_backend_tensor_set(w.q4, w.q4_bytes.data(), 7, 100);  // a partial write restores the layout
    ASSERT_EQ(packed::packed_of(w.q4), nullptr);
    std::memcpy(w.q4->data, w.q4_bytes.data(), w.q4_bytes.size());
    ggml_backend_t be = ggml_backend_dev_init(dev, nullptr);
    const std::vector<float> got = product(be, w.q4, 2, cos_f, 0.11f), want = product(be, ref.q4, 2, cos_f, 0.11f);
    EXPECT_NE(packed::packed_of(w.q4), nullptr);
    EXPECT_EQ(packed::packed_of(ref.q4), nullptr);  // not a weight buffer
    EXPECT_TRUE(same(get(w.q4, 0, w.q4_bytes.size()), w.q4_bytes.data()));
    expect_close(got, want, "q4_0 written directly");
    ggml_backend_free(be);
}

// The other packed formats through the same path: a weight buffer packs
// IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS written whole, reads back the original bytes (whole and across a block
// boundary), and multiplies as the same bytes unpacked do.
TEST(PackedUpload, OtherFormatsPackReadBackAndMultiplyAsUnpacked) {
    ggml_backend_dev_t dev = host0();
    ASSERT_NE(dev, nullptr);
    ggml_backend_t be = ggml_backend_dev_init(dev, nullptr);
    ASSERT_NE(be, nullptr);
    for (ggml_type t : {GGML_TYPE_IQ4_NL, GGML_TYPE_MXFP4, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K,
                        GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS}) {
        const char * name = ggml_type_name(t);
        const std::vector<char> bytes = quantized(t, 512, 16, 9);
        ggml_tensor * ts[2] = {};
        ggml_backend_buffer_t bufs[2] = {};
        ggml_context * ctxs[2] = {};
        for (int i = 0; i < 2; ++i) {  // 0: weights (packed), 1: a compute buffer (as written)
            ggml_init_params ip = {2 * ggml_tensor_overhead(), nullptr, true};
            ctxs[i] = ggml_init(ip);
            ts[i] = ggml_new_tensor_2d(ctxs[i], t, 512, 16);
            bufs[i] = ggml_backend_alloc_ctx_tensors_from_buft(ctxs[i], ggml_backend_dev_buffer_type(dev));
            ggml_backend_buffer_set_usage(bufs[i], i == 0 ? GGML_BACKEND_BUFFER_USAGE_WEIGHTS : GGML_BACKEND_BUFFER_USAGE_ANY);
            ggml_backend_tensor_set(ts[i], bytes.data(), 0, bytes.size());
        }
        EXPECT_NE(packed::packed_of(ts[0]), nullptr) << name;
        EXPECT_EQ(packed::packed_of(ts[1]), nullptr) << name;
        EXPECT_NE(std::memcmp(ts[0]->data, bytes.data(), bytes.size()), 0) << name << ": stored packed";
        EXPECT_TRUE(same(get(ts[0], 0, bytes.size()), bytes.data())) << name;
        const size_t bs = ggml_type_size(t), at = ts[0]->nb[1] * 3 + bs - 5;
        EXPECT_TRUE(same(get(ts[0], at, bs + 9), bytes.data() + at)) << name;
        expect_close(product(be, ts[0], 3, sin_f, 0.23f), product(be, ts[1], 3, sin_f, 0.23f), name);
        for (int i = 0; i < 2; ++i) {
            ggml_backend_buffer_free(bufs[i]);
            ggml_free(ctxs[i]);
        }
    }
    ggml_backend_free(be);
}
