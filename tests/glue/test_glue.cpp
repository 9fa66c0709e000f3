// The glue through ggml's public API, the way a caller sees it: registry,
// devices, buffer types, buffers, backends, events and graph compute.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "diag/config.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
// ggml_graph_view (a scheduler split); the header's static helpers are unused here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "ggml-impl.h"
#pragma GCC diagnostic pop
#include "ggml.h"
#include "glue/glue.h"
#include "interpose/audit.h"
#include "kernels/op_table.h"
#include "runtime/ownership.h"

using namespace standin;

namespace {

ggml_backend_dev_t host0() {
    ggml_backend_reg_t reg = glue::registry();
    for (size_t i = 0; i < ggml_backend_reg_dev_count(reg); ++i) {
        ggml_backend_dev_t d = ggml_backend_reg_dev_get(reg, i);
        if (std::string(ggml_backend_dev_name(d)) == "STANDIN_HOST0") return d;
    }
    return nullptr;
}

std::vector<std::string> & captured() {
    static std::vector<std::string> lines;
    return lines;
}
void capture_log(ggml_log_level, const char * text, void *) { captured().emplace_back(text); }

} // namespace

TEST(Glue, RegistryAndDevices) {
    ggml_backend_reg_t reg = glue::registry();
    ASSERT_NE(reg, nullptr);
    EXPECT_EQ(reg->api_version, GGML_BACKEND_API_VERSION);
    EXPECT_STREQ(ggml_backend_reg_name(reg), "STANDIN");
    EXPECT_EQ(glue::registry(), reg);  // built once
    ASSERT_GE(ggml_backend_reg_dev_count(reg), 1u);
    EXPECT_EQ(ggml_backend_reg_dev_get(reg, 1000), nullptr);  // out of range: null, no abort

    ggml_backend_dev_t dev = host0();
    ASSERT_NE(dev, nullptr);
    EXPECT_EQ(ggml_backend_dev_type(dev), GGML_BACKEND_DEVICE_TYPE_GPU);
    ggml_backend_dev_props p;
    ggml_backend_dev_get_props(dev, &p);
    EXPECT_STREQ(p.name, "STANDIN_HOST0");
    EXPECT_GT(p.memory_total, 0u);
    EXPECT_TRUE(p.caps.events);
    EXPECT_EQ(ggml_backend_dev_backend_reg(dev), reg);
}

TEST(Glue, BufferTypes) {
    ggml_backend_dev_t dev = host0();
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev);
    ggml_backend_buffer_type_t hbuft = ggml_backend_dev_host_buffer_type(dev);
    EXPECT_STREQ(ggml_backend_buft_name(buft), "STANDIN_HOST0");
    EXPECT_STREQ(ggml_backend_buft_name(hbuft), "STANDIN_HOST0_Host");
    EXPECT_TRUE(ggml_backend_buft_is_host(hbuft));
    EXPECT_TRUE(ggml_backend_dev_supports_buft(dev, buft));
    EXPECT_TRUE(ggml_backend_dev_supports_buft(dev, hbuft));
    EXPECT_EQ(ggml_backend_buft_get_device(buft), dev);
    EXPECT_EQ(ggml_backend_buft_get_alignment(buft), 64u);
    // Another library's buffer type is not ours.
    EXPECT_FALSE(ggml_backend_dev_supports_buft(dev, ggml_backend_cpu_buffer_type()));
}

TEST(Glue, BufferRoundTripAndOwnership) {
    ggml_backend_dev_t dev = host0();
    const size_t alive_before = rt::Ownership::instance().counts().transient_alive;
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(ggml_backend_dev_buffer_type(dev), 4096);
    ASSERT_NE(buf, nullptr);
    EXPECT_TRUE(rt::Ownership::instance().is_ours(buf, rt::ObjKind::buffer));
    ggml_backend_buffer_clear(buf, 0x5a);
    std::vector<uint8_t> back(4096);
    std::memcpy(back.data(), ggml_backend_buffer_get_base(buf), 4096);
    for (uint8_t b : back) ASSERT_EQ(b, 0x5a);
    ggml_backend_buffer_free(buf);
    EXPECT_EQ(rt::Ownership::instance().counts().transient_alive, alive_before);
}

TEST(Glue, GraphComputeMatchesHandComputedValues) {
    ggml_backend_dev_t dev = host0();
    ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
    ASSERT_NE(backend, nullptr);
    auto set_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(glue::registry(), "ggml_backend_set_n_threads"));
    ASSERT_NE(set_threads, nullptr);
    set_threads(backend, 3);

    ggml_init_params params = {32 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_tensor * t = ggml_scale(ctx, ggml_mul(ctx, ggml_add(ctx, a, b), b), 0.5f);
    ggml_tensor * h = ggml_cast(ctx, ggml_cont(ctx, ggml_transpose(ctx, t)), GGML_TYPE_F16);
    ggml_tensor * out = ggml_cast(ctx, h, GGML_TYPE_F32);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    ASSERT_NE(buf, nullptr);

    float av[12], bv[4] = {1, 2, 3, 4};
    for (int i = 0; i < 12; ++i) av[i] = float(i);
    ggml_backend_tensor_set(a, av, 0, sizeof(av));
    ggml_backend_tensor_set(b, bv, 0, sizeof(bv));
    const size_t local_before = interpose::audit::report().local_nodes;
    ASSERT_EQ(ggml_backend_graph_compute(backend, gf), GGML_STATUS_SUCCESS);
    // The audit counts what ran on standin's kernels in standalone mode too:
    // every node of the graph but the transpose view.
    EXPECT_EQ(interpose::audit::report().local_nodes - local_before, size_t(ggml_graph_n_nodes(gf) - 1));
    float ov[12];
    ggml_backend_tensor_get(out, ov, 0, sizeof(ov));
    // out is [3, 4]: out[c][r] = ((a[r][c] + b[c]) * b[c]) / 2, exactly representable in f16.
    for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 4; ++c) {
            EXPECT_FLOAT_EQ(ov[c * 3 + r], (av[r * 4 + c] + bv[c]) * bv[c] * 0.5f) << r << "," << c;
        }
    }

    // Events record and wait on the stream without error.
    ggml_backend_event_t ev = ggml_backend_event_new(dev);
    ASSERT_NE(ev, nullptr);
    ggml_backend_event_record(ev, backend);
    ggml_backend_event_wait(backend, ev);
    ggml_backend_event_synchronize(ev);
    ggml_backend_event_free(ev);

    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_free(backend);
}

TEST(Glue, UnsupportedOpIsRefusedNotMiscomputed) {
    ggml_backend_dev_t dev = host0();
    ggml_init_params params = {8 * ggml_tensor_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 64, 2);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 1);
    ggml_tensor * y = ggml_mul_mat(ctx, a, x);
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, ggml_win_part(ctx, x, 2)));  // an op with no row
    // supports_op and the op table agree for every node we can build.
    EXPECT_EQ(ggml_backend_dev_supports_op(dev, y), kernels::supports(rt::Kind::host, y));
    ggml_free(ctx);
}

TEST(Glue, OffloadFollowsMinBatchOnGpusOnly) {
    ggml_init_params params = {8 * ggml_tensor_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 16, 16);
    ggml_tensor * small = ggml_mul_mat(ctx, w, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 16, 8));
    ggml_tensor * big = ggml_mul_mat(ctx, w, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 16, 512));
    ggml_tensor * rows = ggml_get_rows(ctx, w, ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 512));
    EXPECT_FALSE(glue::offload_pays(rt::Kind::cuda, small, 32));
    EXPECT_TRUE(glue::offload_pays(rt::Kind::cuda, big, 32));
    EXPECT_FALSE(glue::offload_pays(rt::Kind::cuda, big, 1024));
    EXPECT_FALSE(glue::offload_pays(rt::Kind::cuda, rows, 32));  // a gather never moves its table
    // A host device computes on the CPU backend's own cores: it never asks.
    EXPECT_FALSE(glue::offload_pays(rt::Kind::host, big, 32));
    EXPECT_FALSE(ggml_backend_dev_offload_op(host0(), big));
    ggml_free(ctx);
}

// Note [host device placement]: llama.cpp asks with the weight in a size-0
// placeholder of the buffer type it considers; the scheduler asks with the
// real buffers.
TEST(Glue, HostDeviceTakesOnlyTheTokenLookupFromItsHostBuffers) {
    ggml_backend_dev_t dev = host0();
    ggml_backend_buffer_type_t hbuft = ggml_backend_dev_host_buffer_type(dev);
    ggml_init_params params = {16 * ggml_tensor_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 64, 16);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 2);
    ggml_tensor * mm = ggml_mul_mat(ctx, w, x);
    ggml_tensor * rows = ggml_get_rows(ctx, w, ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2));
    ASSERT_TRUE(kernels::supports(rt::Kind::host, mm));
    ASSERT_TRUE(kernels::supports(rt::Kind::host, rows));

    // Placement: the lookup table may live in the host buffer type, a product's weight may not.
    w->buffer = ggml_backend_buft_alloc_buffer(hbuft, 0);
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev, rows));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, mm));
    ggml_backend_buffer_free(w->buffer);

    // Scheduling: a table there is looked up here only while the device holds
    // buffers of its own (it computes layers); a product from it never runs here.
    ggml_backend_buffer_t table = ggml_backend_buft_alloc_buffer(hbuft, ggml_nbytes(w));
    ASSERT_NE(table, nullptr);
    ggml_backend_buffer_set_usage(table, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    w->buffer = table;
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, rows));
    ggml_backend_buffer_t layer = ggml_backend_buft_alloc_buffer(ggml_backend_dev_buffer_type(dev), 4096);
    ASSERT_NE(layer, nullptr);
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev, rows));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, mm));
    ggml_backend_buffer_free(layer);
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, rows));

    // Activations in that buffer type (ggml-cpu's compute buffer) are no weights.
    ggml_backend_buffer_set_usage(table, GGML_BACKEND_BUFFER_USAGE_COMPUTE);
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev, mm));
    w->buffer = nullptr;
    ggml_backend_buffer_free(table);
    ggml_free(ctx);
}

TEST(Glue, ProcAddressesAndFeatures) {
    ggml_backend_reg_t reg = glue::registry();
    EXPECT_EQ(ggml_backend_reg_get_proc_address(reg, "no_such_function"), nullptr);
    auto features = reinterpret_cast<ggml_backend_get_features_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
    ASSERT_NE(features, nullptr);
    bool mode = false;
    for (ggml_backend_feature * f = features(reg); f->name; ++f) {
        if (std::string(f->name) == "MODE") mode = std::string(f->value) == "standalone";
    }
    EXPECT_TRUE(mode);
}

// A kernel that cannot get scratch memory is an out-of-memory condition, not
// an unsupported node: graph compute answers GGML_STATUS_ALLOC_FAILED and the
// log names the node and says out of memory. The ctest glue.fault.scratch
// runs this with GGML_STANDIN_FAULT=scratch (the configuration is read once
// per process); without the fault the same graph must compute.
TEST(GlueKernelStatus, ScratchFailureIsAllocFailed) {
    const bool fault = diag::config().fault_at("scratch");
    ggml_backend_dev_t dev = host0();
    ASSERT_NE(dev, nullptr);
    ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
    ASSERT_NE(backend, nullptr);

    // Q4_0 weights: the host MUL_MAT quantizes src1 into its scratch.
    ggml_init_params params = {8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 64, 4);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 2);
    ggml_tensor * y = ggml_mul_mat(ctx, a, x);
    ggml_set_name(y, "product");
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    ASSERT_NE(buf, nullptr);
    std::vector<uint8_t> zeros(ggml_nbytes(a), 0);
    ggml_backend_tensor_set(a, zeros.data(), 0, zeros.size());
    std::vector<float> ones(size_t(ggml_nelements(x)), 1.0f);
    ggml_backend_tensor_set(x, ones.data(), 0, ones.size() * sizeof(float));

    captured().clear();
    ggml_log_set(capture_log, nullptr);
    const ggml_status st = ggml_backend_graph_compute(backend, gf);
    ggml_log_set(nullptr, nullptr);

    if (fault) {
        EXPECT_EQ(st, GGML_STATUS_ALLOC_FAILED);
        int named = 0;
        for (const std::string & l : captured()) {
            named += l.find("STANDIN_HOST0") != std::string::npos && l.find("MUL_MAT") != std::string::npos &&
                     l.find("'product'") != std::string::npos && l.find("out of memory") != std::string::npos;
        }
        EXPECT_EQ(named, 1) << "expected one log line naming the node and saying out of memory";
        if (st == GGML_STATUS_ALLOC_FAILED && named == 1) std::printf("scratch fault: out of memory reported\n");
    } else {
        EXPECT_EQ(st, GGML_STATUS_SUCCESS);
        std::vector<float> out(size_t(ggml_nelements(y)), 1.0f);
        ggml_backend_tensor_get(y, out.data(), 0, out.size() * sizeof(float));
        for (float v : out) EXPECT_EQ(v, 0.0f);  // zero blocks: zero scales
    }

    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_free(backend);
}

// The use counts fusion asks for (graph_use_count): ggml's own, the same
// through a view of part of the graph (a scheduler split), -1 for a tensor
// the graph does not hold.
TEST(Glue, GraphUseCountsAreGgmls) {
    ggml_init_params p{16 * 1024 * 1024, nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    ggml_tensor * a = ggml_scale(ctx, x, 2.0f);
    ggml_tensor * view = ggml_view_1d(ctx, a, 8, 0);
    ggml_tensor * b = ggml_add(ctx, a, a);
    ggml_tensor * c = ggml_sum(ctx, view);
    ggml_tensor * d = ggml_add(ctx, b, ggml_sum(ctx, c));
    ggml_tensor * outside = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, d);
    using standin::glue::graph_use_count;
    EXPECT_EQ(graph_use_count(g, a), 3);  // the view, and b twice
    EXPECT_EQ(graph_use_count(g, view), 1);
    EXPECT_EQ(graph_use_count(g, b), 1);
    EXPECT_EQ(graph_use_count(g, d), 0);
    EXPECT_EQ(graph_use_count(g, outside), -1);
    ggml_cgraph split = ggml_graph_view(g, 1, ggml_graph_n_nodes(g));
    EXPECT_EQ(graph_use_count(&split, a), 3);
    EXPECT_EQ(graph_use_count(nullptr, a), -1);
    ggml_free(ctx);
}
