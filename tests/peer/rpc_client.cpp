// A ggml-rpc client that sends one small graph to a server and checks the
// result against ggml-cpu in this process (tests/peer/rpc_guard.sh).
// Usage: rpc_client MODE HOST:PORT GGML_BIN_DIR
//   fallback:   MUL_MAT -> SQR -> ADD. standin has no SQR kernel: the server
//               must run that node elsewhere (or die, as ggml's own server did).
//   unrunnable: MUL_MAT of an F32 matrix by an F16 one, which neither standin
//               nor ggml-cpu computes: the server must refuse it without
//               dying; this client then loses its connection (ggml-rpc's
//               client aborts) and must never print a result.
// Prints "rpc client MODE: ok" on success.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

namespace {

struct Graph {
    ggml_context * ctx = nullptr;
    ggml_cgraph *  gf = nullptr;
    ggml_tensor *  a = nullptr, * b = nullptr, * c = nullptr, * out = nullptr;
};

// a: 16x4, b: 16x3 (F32, or F16 when `f16_b`), c: 4x3.
Graph build(bool unrunnable) {
    Graph            g;
    ggml_init_params p{16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    g.ctx = ggml_init(p);
    g.a   = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 16, 4);
    g.b   = ggml_new_tensor_2d(g.ctx, unrunnable ? GGML_TYPE_F16 : GGML_TYPE_F32, 16, 3);
    g.c   = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 4, 3);
    ggml_tensor * mm = ggml_mul_mat(g.ctx, g.a, g.b);
    g.out = unrunnable ? mm : ggml_add(g.ctx, ggml_sqr(g.ctx, mm), g.c);
    g.gf  = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(g.gf, g.out);
    return g;
}

std::vector<float> run(ggml_backend_t backend, bool unrunnable) {
    Graph                 g   = build(unrunnable);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(g.ctx, backend);
    std::vector<float>    a(16 * 4), b(16 * 3), c(4 * 3);
    for (size_t i = 0; i < a.size(); ++i) a[i] = 0.25f * float(int(i % 7) - 3);
    for (size_t i = 0; i < b.size(); ++i) b[i] = 0.5f * float(int(i % 5) - 2);
    for (size_t i = 0; i < c.size(); ++i) c[i] = float(i);
    ggml_backend_tensor_set(g.a, a.data(), 0, ggml_nbytes(g.a));
    if (unrunnable) {
        std::vector<ggml_fp16_t> h(b.size());
        ggml_fp32_to_fp16_row(b.data(), h.data(), static_cast<int64_t>(b.size()));
        ggml_backend_tensor_set(g.b, h.data(), 0, ggml_nbytes(g.b));
    } else {
        ggml_backend_tensor_set(g.b, b.data(), 0, ggml_nbytes(g.b));
        ggml_backend_tensor_set(g.c, c.data(), 0, ggml_nbytes(g.c));
    }
    ggml_status s = ggml_backend_graph_compute(backend, g.gf);
    std::vector<float> out(static_cast<size_t>(ggml_nelements(g.out)));
    ggml_backend_tensor_get(g.out, out.data(), 0, ggml_nbytes(g.out));
    if (s != GGML_STATUS_SUCCESS) {
        std::fprintf(stderr, "graph_compute on %s: %s\n", ggml_backend_name(backend), ggml_status_to_string(s));
        out.clear();
    }
    ggml_backend_buffer_free(buf);
    ggml_free(g.ctx);
    return out;
}

} // namespace

int main(int argc, char ** argv) {
    if (argc != 4 || (std::strcmp(argv[1], "fallback") != 0 && std::strcmp(argv[1], "unrunnable") != 0)) {
        std::fprintf(stderr, "usage: rpc_client fallback|unrunnable HOST:PORT GGML_BIN_DIR\n");
        return 2;
    }
    const bool unrunnable = std::strcmp(argv[1], "unrunnable") == 0;
    ggml_backend_load_all_from_path(argv[3]);
    ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
    using add_fn = ggml_backend_reg_t (*)(const char *);
    auto add = rpc != nullptr ? reinterpret_cast<add_fn>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"))
                              : nullptr;
    ggml_backend_dev_t cpu = ggml_backend_dev_by_name("CPU");
    if (add == nullptr || cpu == nullptr) {
        std::fprintf(stderr, "rpc_client: ggml-rpc or ggml-cpu not found in %s\n", argv[3]);
        return 2;
    }
    ggml_backend_reg_t server = add(argv[2]);
    if (server == nullptr || ggml_backend_reg_dev_count(server) == 0) {
        std::fprintf(stderr, "rpc_client: no device at %s\n", argv[2]);
        return 2;
    }
    ggml_backend_t remote = ggml_backend_dev_init(ggml_backend_reg_dev_get(server, 0), nullptr);
    ggml_backend_t local  = ggml_backend_dev_init(cpu, nullptr);
    std::vector<float> got = run(remote, unrunnable);
    if (unrunnable) {
        // Reaching here means the server computed (or pretended to compute) it.
        std::printf("rpc client unrunnable: FAIL: the server returned a result for a graph nothing can run\n");
        return 1;
    }
    std::vector<float> want = run(local, false);
    if (got.size() != want.size() || want.empty()) {
        std::printf("rpc client fallback: FAIL: %zu values, expected %zu\n", got.size(), want.size());
        return 1;
    }
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::fabs(got[i] - want[i]) > 1e-4f * (1.0f + std::fabs(want[i]))) {
            std::printf("rpc client fallback: FAIL: value %zu is %g, ggml-cpu gives %g\n", i, got[i], want[i]);
            return 1;
        }
    }
    std::printf("rpc client fallback: ok (%zu values match ggml-cpu)\n", want.size());
    ggml_backend_free(remote);
    ggml_backend_free(local);
    return 0;
}
