// Local dispatch over a real library whose memory standin's kernels cannot
// address (Note [staging]), on a fake one (tests/interpose/fake_opaque.cpp):
// its buffers hand out addresses that fault when read, so a kernel reading
// them in place would crash the test. Each test builds a graph, runs it
// interposed with some LOCAL_OPS and checks the values against the host, the
// copies the real library was asked for, and the audit.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "interpose/audit.h"
#include "interpose/router.h"
#include "interpose/wrap.h"
#include "runtime/ownership.h"

using namespace standin;

#if defined(STANDIN_FAKE_OPAQUE_LIB) && defined(STANDIN_FAKE_OPAQUE_SYNC_LIB)
namespace {

struct Counts {
    int graphs, async_gets, async_sets, sync_gets, sync_sets, synchronizes, host_allocs, refused_nodes;
};

// The fake library's counters (it is opened once per process, by path).
Counts counts(const char * lib) {
    Counts c{};
    void * h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    auto fn = h != nullptr ? reinterpret_cast<void (*)(int *)>(dlsym(h, "fake_opaque_counts")) : nullptr;
    if (fn != nullptr) fn(reinterpret_cast<int *>(&c));
    return c;
}
Counts operator-(const Counts & a, const Counts & b) {
    return {a.graphs - b.graphs, a.async_gets - b.async_gets, a.async_sets - b.async_sets, a.sync_gets - b.sync_gets,
            a.sync_sets - b.sync_sets, a.synchronizes - b.synchronizes, a.host_allocs - b.host_allocs,
            a.refused_nodes - b.refused_nodes};
}

std::vector<std::string> & captured() {
    static std::vector<std::string> lines;
    return lines;
}
void capture_log(ggml_log_level, const char * text, void *) { captured().emplace_back(text); }
int lines_with(const std::string & what) {
    int n = 0;
    for (const std::string & l : captured()) n += l.find(what) != std::string::npos;
    return n;
}

// The interposed device over the fake library, and a backend on it.
struct Opaque {
    const char *          lib;
    ggml_backend_reg_t    reg = nullptr;
    ggml_backend_dev_t    dev = nullptr;
    ggml_backend_t        backend = nullptr;
    size_t                escapes_before = 0;
    explicit Opaque(const char * path, const char * local_ops) : lib(path) {
        std::string warnings;
        interpose::set_local_ops(interpose::parse_local_ops(local_ops, warnings));
        interpose::RealLibrary real = interpose::load_real_library(lib);
        EXPECT_TRUE(real.ok()) << real.detail;
        if (!real.ok()) return;
        reg = interpose::make_registry(real);
        dev = ggml_backend_reg_dev_get(reg, 0);
        backend = ggml_backend_dev_init(dev, nullptr);
        escapes_before = interpose::audit::escapes();
        ggml_log_set(capture_log, nullptr);
    }
    ~Opaque() {
        ggml_log_set(nullptr, nullptr);
        if (backend != nullptr) ggml_backend_free(backend);
        EXPECT_EQ(interpose::audit::escapes(), escapes_before) << "a real pointer reached the caller";
    }
    ggml_backend_buffer_type_t buft() const { return ggml_backend_dev_buffer_type(dev); }
};

std::vector<float> iota(size_t n, float start, float step) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = start + step * float(i);
    return v;
}
void set(ggml_tensor * t, const std::vector<float> & v) { ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(float)); }
std::vector<float> get(const ggml_tensor * t) {
    std::vector<float> v(size_t(ggml_nelements(t)));
    ggml_backend_tensor_get(t, v.data(), 0, v.size() * sizeof(float));
    return v;
}

// w = scale(mul(a + b, c), 0.5) + a over N floats, then DIAG_MASK_ZERO past
// element N/2: an op the op table has no row for (so LOCAL_OPS=all refuses it
// as no_kernel), which the fake real library computes.
constexpr int N = 64;
struct Chain {
    ggml_context * ctx;
    ggml_tensor *a, *b, *c, *x, *y, *z, *w, *out;
    ggml_cgraph * gf;
    Chain() {
        ggml_init_params params = {32 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
        ctx = ggml_init(params);
        a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, N);
        b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, N);
        c = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, N);
        x = ggml_add(ctx, a, b);
        y = ggml_mul(ctx, x, c);
        z = ggml_scale(ctx, y, 0.5f);
        w = ggml_add(ctx, z, a);
        out = ggml_diag_mask_zero(ctx, w, N / 2);
        gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
    }
    ~Chain() { ggml_free(ctx); }
    std::vector<float> expected() const {
        std::vector<float> av = iota(N, -3.0f, 0.25f), bv = iota(N, 1.0f, 0.5f), cv = iota(N, 2.0f, -0.125f), e(N);
        for (int i = 0; i < N; ++i) {
            const float v = (av[size_t(i)] + bv[size_t(i)]) * cv[size_t(i)] * 0.5f + av[size_t(i)];
            e[size_t(i)] = i > N / 2 ? 0.0f : v;
        }
        return e;
    }
    void fill() const {
        set(a, iota(N, -3.0f, 0.25f));
        set(b, iota(N, 1.0f, 0.5f));
        set(c, iota(N, 2.0f, -0.125f));
    }
};

size_t local_of(const interpose::audit::Report & r, const char * op) {
    for (const auto & [name, n] : r.local_by_op) {
        if (name == op) return n;
    }
    return 0;
}

void expect_near(const std::vector<float> & got, const std::vector<float> & want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
}

} // namespace

// A run of two local nodes in the middle of the graph costs one round trip:
// its two inputs copied out, its two results copied back, all queued behind
// the real library's work, and one wait for them.
TEST(InterposeStaging, OneRoundTripPerRun) {
    Opaque o(STANDIN_FAKE_OPAQUE_LIB, "MUL,SCALE");
    ASSERT_NE(o.backend, nullptr);
    Chain g;
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(g.ctx, o.buft());
    ASSERT_NE(buf, nullptr);
    g.fill();
    const auto before = interpose::audit::report();
    const Counts c0 = counts(o.lib);
    ASSERT_EQ(ggml_backend_graph_compute(o.backend, g.gf), GGML_STATUS_SUCCESS);
    const Counts d = counts(o.lib) - c0;
    expect_near(get(g.out), g.expected());
    const auto after = interpose::audit::report();
    EXPECT_EQ(after.local_nodes - before.local_nodes, 2u);
    EXPECT_EQ(after.staged_nodes - before.staged_nodes, 2u);
    EXPECT_EQ(after.staged_runs - before.staged_runs, 1u);
    EXPECT_EQ(after.forwarded_graphs - before.forwarded_graphs, 2u);  // ADD; ADD and DIAG_MASK_ZERO
    EXPECT_EQ(d.graphs, 2);
    EXPECT_EQ(d.async_gets, 2) << "x and c, once each";
    EXPECT_EQ(d.async_sets, 2) << "y and z";
    EXPECT_EQ(d.sync_gets + d.sync_sets, 0);
    // One wait before the kernels, one at the end of the call for the queued
    // write-backs, one by ggml_backend_graph_compute itself.
    EXPECT_EQ(d.synchronizes, 3);
    EXPECT_EQ(after.staged_bytes_in - before.staged_bytes_in, 2u * N * sizeof(float));
    EXPECT_EQ(after.staged_bytes_out - before.staged_bytes_out, 2u * N * sizeof(float));
    EXPECT_EQ(d.refused_nodes, 0);
    // The arena is the real device's pinned host memory, made once and reused.
    EXPECT_EQ(d.host_allocs, 1);
    ASSERT_EQ(ggml_backend_graph_compute(o.backend, g.gf), GGML_STATUS_SUCCESS);
    EXPECT_EQ((counts(o.lib) - c0).host_allocs, 1);
    EXPECT_EQ(g.a->buffer, buf);  // the caller's view of its tensors is back
    ggml_backend_buffer_free(buf);
}

// The same with a real library that has only synchronous copies and no
// pinned memory: it is synchronized before its memory is read.
TEST(InterposeStaging, SynchronousCopies) {
    Opaque o(STANDIN_FAKE_OPAQUE_SYNC_LIB, "MUL,SCALE");
    ASSERT_NE(o.backend, nullptr);
    Chain g;
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(g.ctx, o.buft());
    ASSERT_NE(buf, nullptr);
    g.fill();
    const Counts c0 = counts(o.lib);
    ASSERT_EQ(ggml_backend_graph_compute(o.backend, g.gf), GGML_STATUS_SUCCESS);
    const Counts d = counts(o.lib) - c0;
    expect_near(get(g.out), g.expected());
    EXPECT_EQ(d.async_gets + d.async_sets + d.host_allocs, 0);
    EXPECT_EQ(d.sync_gets, 2);  // x and c
    EXPECT_EQ(d.sync_sets, 2);
    ggml_backend_buffer_free(buf);
}

// LOCAL_OPS=all: ADD, MUL, SCALE, ADD run as one staged run; DIAG_MASK_ZERO, which
// standin has no kernel for, goes to the real library, logged once however
// often it is refused.
TEST(InterposeStaging, AllLocalRefusalLoggedOnce) {
    Opaque o(STANDIN_FAKE_OPAQUE_LIB, "all");
    ASSERT_NE(o.backend, nullptr);
    Chain g;
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(g.ctx, o.buft());
    ASSERT_NE(buf, nullptr);
    g.fill();
    const auto before = interpose::audit::report();
    const Counts c0 = counts(o.lib);
    for (int rep = 0; rep < 3; ++rep) {
        ASSERT_EQ(ggml_backend_graph_compute(o.backend, g.gf), GGML_STATUS_SUCCESS);
        expect_near(get(g.out), g.expected());
    }
    const Counts d = counts(o.lib) - c0;
    const auto after = interpose::audit::report();
    EXPECT_EQ(after.local_nodes - before.local_nodes, 3u * 4);
    EXPECT_EQ(after.staged_runs - before.staged_runs, 3u);
    EXPECT_EQ(after.refused[size_t(interpose::audit::Refusal::no_kernel)] -
                  before.refused[size_t(interpose::audit::Refusal::no_kernel)], 3u);
    EXPECT_EQ(d.graphs, 3) << "DIAG_MASK_ZERO alone, each time";
    EXPECT_EQ(d.async_gets, 3 * 3) << "a, b, c: x, y, z and w are written whole before they are read";
    EXPECT_EQ(lines_with("no_kernel"), before.refused[size_t(interpose::audit::Refusal::no_kernel)] == 0 ? 1 : 0);
    EXPECT_EQ(lines_with("DIAG_MASK_ZERO"), lines_with("no_kernel"));
    EXPECT_EQ(local_of(after, "ADD") - local_of(before, "ADD"), 6u);
    EXPECT_EQ(local_of(after, "MUL") - local_of(before, "MUL"), 3u);
    EXPECT_EQ(local_of(after, "SCALE") - local_of(before, "SCALE"), 3u);
    const std::string text = after.text();
    EXPECT_NE(text.find("; refused: no_kernel="), std::string::npos) << text;
    EXPECT_NE(text.find("; local by op: ADD="), std::string::npos) << text;
    ggml_backend_buffer_free(buf);
}

// Views share their base's host copy: a node writing one half of a tensor
// and a node reading the whole of it in the same run see each other; rows a
// SET_ROWS leaves alone keep their values.
TEST(InterposeStaging, ViewsAndPartialWrites) {
    Opaque o(STANDIN_FAKE_OPAQUE_LIB, "ADD,SCALE,SET_ROWS,CPY");
    ASSERT_NE(o.backend, nullptr);
    ggml_init_params params = {32 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4);     // 4 rows of 8
    ggml_tensor * rows = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 2);  // two new rows
    ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 2);
    ggml_tensor * bias = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    // rows 1 and 3 of t replaced; then the first two rows (a view) + bias
    // written into the last two rows of t (another view); then all of t scaled.
    ggml_tensor * t2 = ggml_set_rows(ctx, t, rows, idx);
    ggml_tensor * head = ggml_view_1d(ctx, t2, 16, 0);
    ggml_tensor * tail = ggml_view_1d(ctx, t2, 16, 16 * sizeof(float));
    ggml_tensor * sum = ggml_add(ctx, head, bias);
    ggml_tensor * put = ggml_cpy(ctx, sum, tail);
    ggml_tensor * whole = ggml_view_2d(ctx, t2, 8, 4, 8 * sizeof(float), 0);
    ggml_tensor * out = ggml_scale(ctx, whole, 2.0f);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, put);  // the order the memory needs: SCALE reads what CPY wrote
    ggml_build_forward_expand(gf, out);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, o.buft());
    ASSERT_NE(buf, nullptr);
    std::vector<float> tv = iota(32, 0.0f, 1.0f), rv = iota(16, 100.0f, 1.0f), bv = iota(16, 0.5f, 0.0f);
    const int64_t iv[2] = {1, 3};
    set(t, tv);
    set(rows, rv);
    set(bias, bv);
    ggml_backend_tensor_set(idx, iv, 0, sizeof(iv));
    const auto before = interpose::audit::report();
    ASSERT_EQ(ggml_backend_graph_compute(o.backend, gf), GGML_STATUS_SUCCESS);
    std::vector<float> want = tv;
    for (int k = 0; k < 8; ++k) want[size_t(8 + k)] = rv[size_t(k)], want[size_t(24 + k)] = rv[size_t(8 + k)];
    for (int k = 0; k < 16; ++k) want[size_t(16 + k)] = want[size_t(k)] + bv[size_t(k)];
    std::vector<float> got_t = get(t);
    expect_near(got_t, want);
    for (float & v : want) v *= 2.0f;
    expect_near(get(out), want);
    const auto after = interpose::audit::report();
    EXPECT_EQ(after.local_nodes - before.local_nodes, 4u);  // SET_ROWS, ADD, CPY, SCALE
    EXPECT_EQ(after.staged_runs - before.staged_runs, 1u);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

// ggml-alloc reuses the memory of a tensor after its last use: two tensors of
// one run at one address have host copies of their own, and the later one is
// what the address holds afterwards.
TEST(InterposeStaging, ReusedAddressKeepsTheLastWrite) {
    Opaque o(STANDIN_FAKE_OPAQUE_LIB, "all");
    ASSERT_NE(o.backend, nullptr);
    ggml_init_params params = {16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, N);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, N);
    ggml_tensor * x = ggml_add(ctx, a, b);      // at slot 2
    ggml_tensor * y = ggml_scale(ctx, x, 3.0f); // at slot 3
    ggml_tensor * z = ggml_add(ctx, y, a);      // at slot 2 again: x is dead
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, z);
    const size_t slot = 256 * sizeof(float);
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(o.buft(), 4 * slot);
    ASSERT_NE(buf, nullptr);
    char * base = static_cast<char *>(ggml_backend_buffer_get_base(buf));
    ASSERT_EQ(ggml_backend_tensor_alloc(buf, a, base), GGML_STATUS_SUCCESS);
    ASSERT_EQ(ggml_backend_tensor_alloc(buf, b, base + slot), GGML_STATUS_SUCCESS);
    ASSERT_EQ(ggml_backend_tensor_alloc(buf, x, base + 2 * slot), GGML_STATUS_SUCCESS);
    ASSERT_EQ(ggml_backend_tensor_alloc(buf, y, base + 3 * slot), GGML_STATUS_SUCCESS);
    ASSERT_EQ(ggml_backend_tensor_alloc(buf, z, base + 2 * slot), GGML_STATUS_SUCCESS);
    const std::vector<float> av = iota(N, 1.0f, 1.0f), bv = iota(N, -2.0f, 0.5f);
    set(a, av);
    set(b, bv);
    ASSERT_EQ(ggml_backend_graph_compute(o.backend, gf), GGML_STATUS_SUCCESS);
    std::vector<float> want(N);
    for (int i = 0; i < N; ++i) want[size_t(i)] = (av[size_t(i)] + bv[size_t(i)]) * 3.0f + av[size_t(i)];
    expect_near(get(z), want);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

// A tensor in a buffer type that is neither host memory nor the device's
// default type (a split or repacked layout) is never read: the node goes to
// the real library, and the reason is named.
TEST(InterposeStaging, PrivateLayoutIsRefused) {
    Opaque o(STANDIN_FAKE_OPAQUE_LIB, "ADD");
    ASSERT_NE(o.backend, nullptr);
    void * h = dlopen(STANDIN_FAKE_OPAQUE_LIB, RTLD_NOW | RTLD_NOLOAD);
    auto private_buft = reinterpret_cast<ggml_backend_buffer_type_t (*)()>(dlsym(h, "fake_opaque_private_buft"));
    ASSERT_NE(private_buft, nullptr);
    ggml_backend_buffer_type_t outer_private = interpose::wrap_result(private_buft());
    ASSERT_TRUE(rt::Ownership::instance().is_ours(outer_private, rt::ObjKind::buffer_type));
    Chain g;
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(g.ctx, outer_private);
    ASSERT_NE(buf, nullptr);
    g.fill();
    const auto before = interpose::audit::report();
    ASSERT_EQ(ggml_backend_graph_compute(o.backend, g.gf), GGML_STATUS_SUCCESS);
    expect_near(get(g.out), g.expected());
    const auto after = interpose::audit::report();
    EXPECT_EQ(after.local_nodes, before.local_nodes);
    EXPECT_EQ(after.refused[size_t(interpose::audit::Refusal::memory)] -
                  before.refused[size_t(interpose::audit::Refusal::memory)], 2u);
    EXPECT_EQ(lines_with("(memory: a tensor in a buffer type whose layout is the real library's own)"),
              before.refused[size_t(interpose::audit::Refusal::memory)] == 0 ? 1 : 0);
    ggml_backend_buffer_free(buf);
}
#endif
