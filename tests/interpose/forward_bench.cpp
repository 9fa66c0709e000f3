// The cost of forwarding a graph through interposition, side by side in one
// run: the prebuilt real CPU library alone, then standin over it, on a chain of
// N small ADDs (each node reads the previous one and a weight of its own, so a
// graph visits about 3N tensors). Graphs run without a uid (as
// ggml_backend_graph_compute callers give them) and with one (as ggml's
// scheduler gives its split graphs, which lets standin replay its swap plan,
// Note [swap plan]). One thread on each side; the best of 5 rounds.
//
// Usage: interpose_forward_bench [N nodes, default 1000] [calls per round, default 200]
// A benchmark, not a test: it prints microseconds per graph_compute.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ggml-alloc.h"
#include "ggml-backend.h"
// ggml_cgraph::uid, set here as the scheduler sets it; the static helpers are unused.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "ggml-impl.h"
#pragma GCC diagnostic pop
#include "interpose/loader.h"
#include "interpose/wrap.h"

using namespace standin;

namespace {

double us_per_call(ggml_backend_t be, ggml_cgraph * gf, int calls) {
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
        ggml_backend_graph_compute(be, gf);  // warm
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) ggml_backend_graph_compute(be, gf);
        const auto t1 = std::chrono::steady_clock::now();
        best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
    }
    return best;
}

void set_one_thread(ggml_backend_reg_t reg, ggml_backend_t be) {
    auto set_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"));
    if (set_threads != nullptr) set_threads(be, 1);
}

} // namespace

int main(int argc, char ** argv) {
    const int n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1000;
    const int calls = argc > 2 ? std::max(1, std::atoi(argv[2])) : 200;
    const std::string lib = std::string(STANDIN_PREBUILT_CPU_DIR) + "/bins/linux-x64/libggml-cpu-x64.so";
    interpose::RealLibrary real = interpose::load_real_library(lib);
    if (!real.ok()) {
        std::fprintf(stderr, "cannot load %s: %s\n", lib.c_str(), real.detail.c_str());
        return 1;
    }
    ggml_backend_reg_t ours = interpose::make_registry(real);
    std::printf("%-12s %-8s %8s %14s\n", "backend", "uid", "nodes", "us per call");
    for (ggml_backend_reg_t reg : {real.reg, ours}) {
        ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
        ggml_backend_t be = ggml_backend_dev_init(dev, nullptr);
        set_one_thread(reg, be);
        const size_t n_tensors = size_t(2 * n + 1);
        ggml_init_params params = {n_tensors * ggml_tensor_overhead() + ggml_graph_overhead_custom(2 * n, false),
                                   nullptr, true};
        ggml_context * ctx = ggml_init(params);
        ggml_tensor * cur = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
        for (int i = 0; i < n; ++i) cur = ggml_add(ctx, cur, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8));
        ggml_cgraph * gf = ggml_new_graph_custom(ctx, 2 * n, false);
        ggml_build_forward_expand(gf, cur);
        ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_dev_buffer_type(dev));
        ggml_backend_buffer_clear(buf, 0);
        const char * name = reg == real.reg ? "real" : "standin";
        gf->uid = 0;
        std::printf("%-12s %-8s %8d %14.1f\n", name, "none", ggml_graph_n_nodes(gf), us_per_call(be, gf, calls));
        gf->uid = ggml_graph_next_uid();
        std::printf("%-12s %-8s %8d %14.1f\n", name, "set", ggml_graph_n_nodes(gf), us_per_call(be, gf, calls));
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
        ggml_backend_free(be);
    }
    return 0;
}
