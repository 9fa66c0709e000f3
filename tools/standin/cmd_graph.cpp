// `standin graph`: builds one small graph that exercises the first op slice
// (MUL and ADD with broadcasting, SCALE, CPY to F16, a transposed CONT, CPY back
// to F32), runs it on a standin device and on ggml's CPU backend, checks that
// the results agree and prints the time per run side by side.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "tools/standin/backends.h"
#include "tools/standin/commands.h"

namespace standin::tools {

namespace {

struct RunResult {
    std::string        device;
    double             ms_per_iter = 0;
    double             gbps        = 0;
    std::vector<float> out;
    std::string        error;
};

constexpr int64_t kRowLen = 1024;

RunResult run_on(ggml_backend_dev_t dev, const GraphOptions & opt, const std::vector<float> & x,
                 const std::vector<float> & w, const std::vector<float> & b) {
    RunResult r;
    r.device = ggml_backend_dev_name(dev);
    ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
    if (backend == nullptr) {
        r.error = "could not init a backend on " + r.device;
        return r;
    }
    if (opt.threads > 0) {
        auto set_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(ggml_backend_reg_get_proc_address(
            ggml_backend_dev_backend_reg(dev), "ggml_backend_set_n_threads"));
        if (set_threads) {
            set_threads(backend, opt.threads);
        }
    }
    const int64_t rows = int64_t(x.size()) / kRowLen;
    ggml_init_params params = {ggml_tensor_overhead() * 32 + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * tx = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kRowLen, rows);
    ggml_tensor * tw = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, kRowLen);
    ggml_tensor * tb = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, kRowLen);
    ggml_tensor * t = ggml_mul(ctx, tx, tw);
    t = ggml_add(ctx, t, tb);
    t = ggml_scale_bias(ctx, t, 0.5f, 0.25f);
    t = ggml_cast(ctx, t, GGML_TYPE_F16);
    t = ggml_cont(ctx, ggml_transpose(ctx, t));
    ggml_tensor * out = ggml_cast(ctx, t, GGML_TYPE_F32);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);

    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    if (buf == nullptr) {
        r.error = "allocation failed on " + r.device;
    } else {
        ggml_backend_tensor_set(tx, x.data(), 0, ggml_nbytes(tx));
        ggml_backend_tensor_set(tw, w.data(), 0, ggml_nbytes(tw));
        ggml_backend_tensor_set(tb, b.data(), 0, ggml_nbytes(tb));
        double bytes = 0;
        for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
            ggml_tensor * n = ggml_graph_node(gf, i);
            bytes += double(ggml_nbytes(n));
            for (ggml_tensor * s : n->src) {
                bytes += s ? double(ggml_nbytes(s)) : 0.0;
            }
        }
        ggml_status st = ggml_backend_graph_compute(backend, gf);  // warm-up
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < opt.iters && st == GGML_STATUS_SUCCESS; ++i) {
            st = ggml_backend_graph_compute(backend, gf);
        }
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (st != GGML_STATUS_SUCCESS) {
            r.error = std::string("graph_compute failed: ") + ggml_status_to_string(st);
        } else {
            r.ms_per_iter = ms / opt.iters;
            r.gbps        = bytes / (r.ms_per_iter * 1e6);
            r.out.resize(size_t(ggml_nelements(out)));
            ggml_backend_tensor_get(out, r.out.data(), 0, ggml_nbytes(out));
        }
        ggml_backend_buffer_free(buf);
    }
    ggml_free(ctx);
    ggml_backend_free(backend);
    return r;
}

} // namespace

int cmd_graph(const GraphOptions & opt) {
    if (opt.n < kRowLen || opt.n % kRowLen != 0 || opt.iters < 1) {
        std::fprintf(stderr, "standin graph: --n must be a positive multiple of %lld and --iters >= 1\n",
                     (long long) kRowLen);
        return 2;
    }
    Loaded l = load_backends(opt.plugin, true);
    if (l.standin == nullptr) {
        std::fprintf(stderr, "standin graph: %s\n", l.error.c_str());
        return 2;
    }
    ggml_backend_dev_t dev = ggml_backend_dev_by_name(opt.device.c_str());
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (dev == nullptr) {
        std::fprintf(stderr, "standin graph: no device named %s (try `standin devices`)\n", opt.device.c_str());
        return 2;
    }
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(size_t(opt.n)), w(kRowLen), b(kRowLen);
    for (float & v : x) v = dist(rng);
    for (float & v : w) v = dist(rng);
    for (float & v : b) v = dist(rng);

    RunResult ours = run_on(dev, opt, x, w, b);
    RunResult ref;
    if (cpu != nullptr) {
        ref = run_on(cpu, opt, x, w, b);
    }
    if (!ours.error.empty()) {
        std::fprintf(stderr, "standin graph: %s\n", ours.error.c_str());
        return 1;
    }
    double max_diff = 0;
    if (ref.error.empty() && !ref.out.empty()) {
        for (size_t i = 0; i < ours.out.size(); ++i) {
            max_diff = std::max(max_diff, double(std::fabs(ours.out[i] - ref.out[i])));
        }
    }
    const bool match = !ref.out.empty() && max_diff == 0.0;
    if (opt.json) {
        nlohmann::json j = {{"device", ours.device}, {"ms_per_iter", ours.ms_per_iter}, {"gbps", ours.gbps},
                            {"n", opt.n}, {"iters", opt.iters}};
        if (!ref.out.empty()) {
            j["reference"] = {{"device", ref.device}, {"ms_per_iter", ref.ms_per_iter}, {"gbps", ref.gbps}};
            j["max_abs_diff"] = max_diff;
        }
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("graph: y = f32(cont(transpose(f16(scale(x*w + b, 0.5, 0.25)))))  x: %lld x %lld f32, %d runs\n",
                    (long long) kRowLen, (long long) (opt.n / kRowLen), opt.iters);
        std::printf("%-16s %10s %10s\n", "device", "ms/run", "GB/s");
        std::printf("%-16s %10.3f %10.2f\n", ours.device.c_str(), ours.ms_per_iter, ours.gbps);
        if (!ref.out.empty()) {
            std::printf("%-16s %10.3f %10.2f   (ggml-cpu reference)\n", ref.device.c_str(), ref.ms_per_iter, ref.gbps);
            std::printf("speed ratio %s/%s: %.2fx   max |difference|: %g  %s\n", ours.device.c_str(), ref.device.c_str(),
                        ref.ms_per_iter / ours.ms_per_iter, max_diff, match ? "(bit-identical)" : "");
        } else {
            std::printf("(no ggml-cpu reference available%s%s)\n", ref.error.empty() ? "" : ": ", ref.error.c_str());
        }
    }
    return ref.out.empty() || match ? 0 : 1;
}

} // namespace standin::tools
