// Interposition in-process, over the prebuilt real CPU library (the baseline x64
// variant, which runs on any x86-64): wrapping, forwarding, swapping, audit.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
// ggml_cgraph::uid (set as ggml's scheduler sets it); the static helpers are unused.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "ggml-impl.h"
#pragma GCC diagnostic pop
#include "interpose/audit.h"
#include "interpose/forward.h"
#include "interpose/router.h"
#include "interpose/wrap.h"
#include "runtime/ownership.h"

using namespace standin;

TEST(InterposeSlots, ListsCoverEveryVtableSlot) {
    // The compile-time static_asserts in forward.h say the same; this names the
    // object whose list fell behind ggml's ABI.
    EXPECT_EQ(interpose::kRegSlots * sizeof(void *), sizeof(ggml_backend_reg_i)) << "reg";
    EXPECT_EQ(interpose::kDeviceSlots * sizeof(void *), sizeof(ggml_backend_device_i)) << "device";
    EXPECT_EQ(interpose::kBuftSlots * sizeof(void *), sizeof(ggml_backend_buffer_type_i)) << "buffer type";
    EXPECT_EQ(interpose::kBufferSlots * sizeof(void *), sizeof(ggml_backend_buffer_i)) << "buffer";
    EXPECT_EQ(interpose::kBackendSlots * sizeof(void *), sizeof(ggml_backend_i)) << "backend";
}

TEST(InterposeLocalOps, Parsing) {
    std::string w;
    EXPECT_TRUE(interpose::parse_local_ops("none", w).none());
    EXPECT_TRUE(interpose::parse_local_ops("", w).none());
    EXPECT_TRUE(interpose::parse_local_ops("all", w).all);
    auto ops = interpose::parse_local_ops("ADD,MUL_MAT,SILU,NOT_AN_OP", w);
    EXPECT_EQ(ops.names.size(), 3u);
    EXPECT_NE(w.find("NOT_AN_OP"), std::string::npos);
}

TEST(InterposeAudit, CatchesAPlantedEscapeAndLeak) {
    const size_t before = interpose::audit::escapes();
    int foreign = 0;  // an object standin never registered: a "real" pointer
    EXPECT_FALSE(interpose::audit::check_escape(&foreign, "planted"));
    EXPECT_EQ(interpose::audit::escapes(), before + 1);

    const size_t leaks_before = interpose::audit::report().leaks;
    int leaked = 0;
    rt::Ownership::instance().add(&leaked, rt::ObjKind::buffer);  // created, never freed
    EXPECT_EQ(interpose::audit::report().leaks, leaks_before + 1);
    EXPECT_NE(interpose::audit::report().text().find("NOT CLEAN"), std::string::npos);
    rt::Ownership::instance().remove(&leaked);
}

#ifdef STANDIN_PREBUILT_CPU_DIR
namespace {
// out = 2 * (a + b) over 8 floats, tensors unallocated.
struct AddScaleGraph {
    ggml_context * ctx;
    ggml_tensor *  a;
    ggml_tensor *  b;
    ggml_tensor *  out;
    ggml_cgraph *  gf;
    AddScaleGraph() {
        ggml_init_params params = {16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
        ctx = ggml_init(params);
        a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
        b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
        out = ggml_scale(ctx, ggml_add(ctx, a, b), 2.0f);
        gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
    }
    ~AddScaleGraph() { ggml_free(ctx); }
};
} // namespace

TEST(InterposeCpu, WrapsForwardsAndNeverLeaksARealPointer) {
    const std::string lib = std::string(STANDIN_PREBUILT_CPU_DIR) + "/bins/linux-x64/libggml-cpu-x64.so";
    if (!std::filesystem::exists(lib)) GTEST_SKIP() << "no prebuilt CPU library at " << lib;
    interpose::RealLibrary real = interpose::load_real_library(lib);
    ASSERT_TRUE(real.ok()) << real.detail;
    ggml_backend_reg_t reg = interpose::make_registry(real);
    ASSERT_NE(reg, real.reg);
    EXPECT_STREQ(ggml_backend_reg_name(reg), "STANDIN");
    ASSERT_EQ(ggml_backend_reg_dev_count(reg), 1u);
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
    EXPECT_STREQ(ggml_backend_dev_name(dev), "STANDIN_CPU");
    EXPECT_TRUE(rt::Ownership::instance().is_ours(dev, rt::ObjKind::device));
    EXPECT_NE(interpose::unwrap(dev), dev);

    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev);
    EXPECT_TRUE(rt::Ownership::instance().is_ours(buft, rt::ObjKind::buffer_type));
    EXPECT_EQ(ggml_backend_buft_get_device(buft), dev);
    EXPECT_TRUE(ggml_backend_dev_supports_buft(dev, buft));

    const size_t escapes_before = interpose::audit::escapes();
    const size_t leaks_before   = interpose::audit::report().leaks;
    ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
    ASSERT_NE(backend, nullptr);
    EXPECT_TRUE(rt::Ownership::instance().is_ours(backend, rt::ObjKind::backend));
    EXPECT_EQ(ggml_backend_get_device(backend), dev);
    auto set_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"));
    ASSERT_NE(set_threads, nullptr);
    set_threads(backend, 2);
    EXPECT_EQ(ggml_backend_reg_get_proc_address(reg, "ggml_backend_no_such_proc"), nullptr);

    AddScaleGraph g;
    auto & [ctx, a, b, out, gf] = g;
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    ASSERT_NE(buf, nullptr);
    EXPECT_TRUE(rt::Ownership::instance().is_ours(buf, rt::ObjKind::buffer));
    EXPECT_EQ(interpose::audit::report().leaks, leaks_before + 2);  // backend + buffer alive
    std::vector<float> av(8), bv(8), ov(8);
    for (int i = 0; i < 8; ++i) { av[i] = float(i); bv[i] = 1.0f; }
    ggml_backend_tensor_set(a, av.data(), 0, 32);
    ggml_backend_tensor_set(b, bv.data(), 0, 32);
    ASSERT_EQ(ggml_backend_graph_compute(backend, gf), GGML_STATUS_SUCCESS);
    ggml_backend_tensor_get(out, ov.data(), 0, 32);
    for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(ov[i], 2.0f * (float(i) + 1.0f));
    // The caller's tensors point at standin's buffer again after the forwarded call.
    EXPECT_EQ(out->buffer, buf);
    EXPECT_EQ(a->buffer, buf);

    ggml_backend_buffer_free(buf);
    ggml_backend_free(backend);
    EXPECT_EQ(interpose::audit::report().leaks, leaks_before);
    EXPECT_EQ(interpose::audit::escapes(), escapes_before);
}

// Note [swap plan]: a graph forwarded again with the same uid reuses its swaps;
// a tensor moved to another buffer under the same uid is noticed, not replayed.
TEST(InterposeCpu, SwapPlanReplaysOnlyAnUnchangedGraph) {
    const std::string lib = std::string(STANDIN_PREBUILT_CPU_DIR) + "/bins/linux-x64/libggml-cpu-x64.so";
    if (!std::filesystem::exists(lib)) GTEST_SKIP() << "no prebuilt CPU library at " << lib;
    interpose::RealLibrary real = interpose::load_real_library(lib);
    ASSERT_TRUE(real.ok()) << real.detail;
    ggml_backend_reg_t reg = interpose::make_registry(real);
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev);
    ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
    ASSERT_NE(backend, nullptr);
    const long escapes_before = interpose::audit::escapes();

    AddScaleGraph g;
    auto & [ctx, a, b, out, gf] = g;
    gf->uid = ggml_graph_next_uid();  // as ggml's scheduler gives its split graphs
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    ASSERT_NE(buf, nullptr);
    const interpose::SwapPlan & plan = interpose::outer_backend(backend).swap_plan;

    std::vector<float> av(8), bv(8, 1.0f), ov(8);
    ggml_backend_buffer_t a_buf = buf;  // where `a` lives
    auto run_and_check = [&](float shift) {
        for (int i = 0; i < 8; ++i) av[i] = float(i) + shift;
        ggml_backend_tensor_set(a, av.data(), 0, 32);
        ggml_backend_tensor_set(b, bv.data(), 0, 32);
        ASSERT_EQ(ggml_backend_graph_compute(backend, gf), GGML_STATUS_SUCCESS);
        ggml_backend_tensor_get(out, ov.data(), 0, 32);
        for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(ov[i], 2.0f * (av[i] + 1.0f));
        // The caller's tensors point at standin's buffers again after the call.
        EXPECT_EQ(out->buffer, buf);
        EXPECT_EQ(a->buffer, a_buf);
    };
    run_and_check(0.0f);
    EXPECT_EQ(plan.replays, 0);
    run_and_check(10.0f);
    run_and_check(20.0f);
    EXPECT_EQ(plan.replays, 2) << "the same graph and uid reuse the swaps";

    // `a` moves to a buffer of its own while the uid stays: the check catches it.
    ggml_backend_buffer_t buf2 = ggml_backend_buft_alloc_buffer(buft, 64);
    ASSERT_NE(buf2, nullptr);
    a->buffer = buf2;
    a->data = ggml_backend_buffer_get_base(buf2);
    a_buf = buf2;
    run_and_check(30.0f);
    EXPECT_EQ(plan.replays, 2);
    run_and_check(40.0f);
    EXPECT_EQ(plan.replays, 3) << "the new placement is recorded and then reused";

    // A new uid (the scheduler split again) records anew.
    gf->uid = ggml_graph_next_uid();
    run_and_check(50.0f);
    EXPECT_EQ(plan.replays, 3);
    EXPECT_EQ(interpose::audit::escapes(), escapes_before);

    ggml_backend_buffer_free(buf2);
    ggml_backend_buffer_free(buf);
    ggml_backend_free(backend);
}
// Note [interposed names]: in replace mode the caller sees the real library's
// names (registry, device, backend), and can still tell standin is there.
// Buffer types are wrapped once per process and keep the names they were
// first given, so the CI application test checks theirs (tests/app).
TEST(InterposeCpu, ReplaceModeShowsTheRealNames) {
    const std::string lib = std::string(STANDIN_PREBUILT_CPU_DIR) + "/bins/linux-x64/libggml-cpu-x64.so";
    if (!std::filesystem::exists(lib)) GTEST_SKIP() << "no prebuilt CPU library at " << lib;
    interpose::RealLibrary real = interpose::load_real_library(lib);
    ASSERT_TRUE(real.ok()) << real.detail;
    ggml_backend_reg_t reg = interpose::make_registry(real, interpose::Names::real);
    ASSERT_NE(reg, real.reg);
    EXPECT_STREQ(ggml_backend_reg_name(reg), ggml_backend_reg_name(real.reg));
    EXPECT_STREQ(ggml_backend_reg_name(reg), "CPU");
    ASSERT_EQ(ggml_backend_reg_dev_count(reg), 1u);
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
    EXPECT_STREQ(ggml_backend_dev_name(dev), "CPU");
    EXPECT_EQ(ggml_backend_dev_type(dev), GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_dev_props props;
    ggml_backend_dev_get_props(dev, &props);
    EXPECT_STREQ(props.name, "CPU");
    EXPECT_EQ(std::string(props.description).rfind("standin over ", 0), 0u) << props.description;
    EXPECT_TRUE(rt::Ownership::instance().is_ours(dev, rt::ObjKind::device));
    EXPECT_NE(ggml_backend_reg_get_proc_address(reg, "ggml_backend_standin_audit"), nullptr);
    ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
    ASSERT_NE(backend, nullptr);
    EXPECT_STREQ(ggml_backend_name(backend), "CPU");
    EXPECT_TRUE(rt::Ownership::instance().is_ours(backend, rt::ObjKind::backend));
    ggml_backend_free(backend);
}
#endif
