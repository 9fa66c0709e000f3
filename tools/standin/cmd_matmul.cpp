// `standin matmul`: the MUL_MAT of one weight type and shape at several
// column counts, on several devices side by side (standin's and ggml's own,
// e.g. STANDIN_CUDA0 and CUDA0), each timed and checked against the first.
//
// A product of m x k weights reads them once, so to time the weights' trip
// from device memory and not from the L2 cache each graph holds `rotate`
// independent products (own weights, own src1, so no fusion joins them);
// their total over `rotate` is one product's time. Weights are random floats
// quantized by ggml (ggml_quantize_chunk), src1 random in [-1, 1].
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <strings.h>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "runtime/host/thread_pool.h"
#include "tools/standin/backends.h"
#include "tools/standin/commands.h"

namespace standin::tools {

namespace {

struct Run {
    double             us = 0;  // per product
    std::vector<float> out;     // the first product's result
    std::string        error;
};

Run run_on(ggml_backend_dev_t dev, const MatmulOptions & o, ggml_type type, int64_t n,
           const std::vector<std::vector<uint8_t>> & weights, const std::vector<std::vector<float>> & src1) {
    Run r;
    ggml_backend_t be = ggml_backend_dev_init(dev, nullptr);
    if (be == nullptr) {
        r.error = "no backend";
        return r;
    }
    const int rot = int(weights.size());
    // The weights in a buffer of their own marked as weights, as a model
    // loader does: a device that keeps weights in a layout of its own (the
    // host device's packed types) then computes on that layout, as in a model.
    ggml_init_params ipw = {ggml_tensor_overhead() * size_t(rot + 1), nullptr, true};
    ggml_init_params ip  = {ggml_tensor_overhead() * size_t(2 * rot + 4) + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx_w = ggml_init(ipw);
    ggml_context * ctx   = ggml_init(ip);
    ggml_cgraph * g = ggml_new_graph(ctx);
    std::vector<ggml_tensor *> a(rot), b(rot), c(rot);
    for (int i = 0; i < rot; ++i) {
        a[i] = ggml_new_tensor_2d(ctx_w, type, o.k, o.m);
        b[i] = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, o.k, n);
        c[i] = ggml_mul_mat(ctx, a[i], b[i]);
        ggml_build_forward_expand(g, c[i]);
    }
    ggml_backend_buffer_t buf_w = ggml_backend_alloc_ctx_tensors(ctx_w, be);
    ggml_backend_buffer_t buf   = buf_w != nullptr ? ggml_backend_alloc_ctx_tensors(ctx, be) : nullptr;
    if (buf == nullptr) {
        r.error = "out of memory";
    } else {
        ggml_backend_buffer_set_usage(buf_w, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        for (int i = 0; i < rot; ++i) {
            ggml_backend_tensor_set(a[i], weights[i].data(), 0, ggml_nbytes(a[i]));
            ggml_backend_tensor_set(b[i], src1[i].data(), 0, size_t(o.k * n) * sizeof(float));
        }
        bool ok = true;
        for (int w = 0; w < 3 && ok; ++w) ok = ggml_backend_graph_compute(be, g) == GGML_STATUS_SUCCESS;
        ggml_backend_synchronize(be);
        std::vector<double> times;
        for (int rep = 0; rep < o.reps && ok; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            ok = ggml_backend_graph_compute(be, g) == GGML_STATUS_SUCCESS;
            ggml_backend_synchronize(be);
            times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
        if (!ok) {
            r.error = "graph_compute failed";
        } else {
            std::sort(times.begin(), times.end());
            r.us = times[times.size() / 2] / rot;
            r.out.resize(size_t(o.m * n));
            ggml_backend_tensor_get(c[0], r.out.data(), 0, r.out.size() * sizeof(float));
        }
        ggml_backend_buffer_free(buf);
    }
    if (buf_w != nullptr) ggml_backend_buffer_free(buf_w);
    ggml_free(ctx);
    ggml_free(ctx_w);
    ggml_backend_free(be);
    return r;
}

double nmse(const std::vector<float> & x, const std::vector<float> & ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size() && i < ref.size(); ++i) {
        num += (double(x[i]) - ref[i]) * (double(x[i]) - ref[i]);
        den += double(ref[i]) * ref[i];
    }
    return den > 0 ? num / den : (num > 0 ? INFINITY : 0.0);
}

std::vector<std::string> split(const std::string & s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

} // namespace

int cmd_matmul(const MatmulOptions & o) {
    const Loaded l = load_backends(o.plugin, true);
    if (!l.error.empty()) {
        std::fprintf(stderr, "standin matmul: %s\n", l.error.c_str());
        return 1;
    }
    ggml_type type = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        // Case aside, as llama-quantize and the README spell them (q6_k, Q6_K).
        if (ggml_type_size(ggml_type(t)) != 0 && strcasecmp(o.type.c_str(), ggml_type_name(ggml_type(t))) == 0) {
            type = ggml_type(t);
        }
    }
    if (type == GGML_TYPE_COUNT || o.k % ggml_blck_size(type) != 0 || o.m <= 0 || o.k <= 0 || o.rotate < 1 ||
        o.reps < 1) {
        std::fprintf(stderr, "standin matmul: bad --type, --m, --k, --rotate or --reps\n");
        return 2;
    }
    std::vector<ggml_backend_dev_t> devs;
    for (const std::string & name : split(o.devices)) {
        ggml_backend_dev_t d = ggml_backend_dev_by_name(name.c_str());
        if (d == nullptr) {
            std::fprintf(stderr, "standin matmul: no device %s\n", name.c_str());
            return 2;
        }
        devs.push_back(d);
    }
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<std::vector<uint8_t>> weights(size_t(o.rotate));
    // Rows are quantized on every core: on one, the 4 x 58M weights of
    // IQ4_XS at 4096 x 14336 did not finish in a 60 s call (summary-75.txt).
    rt::host::ThreadPool pool(rt::host::available_cores());
    // IQ1_*, IQ2_XXS and IQ2_XS need an importance matrix: a flat one.
    const std::vector<float> ones(size_t(o.k), 1.0f);
    const float * imatrix = ggml_quantize_requires_imatrix(type) ? ones.data() : nullptr;
    const size_t row_bytes = ggml_row_size(type, o.k);
    for (auto & w : weights) {
        std::vector<float> f(size_t(o.k * o.m));
        for (float & v : f) v = u(rng);
        w.resize(row_bytes * size_t(o.m));
        pool.parallel_for(o.m, std::max<int64_t>(1, 65536 / o.k), [&](int64_t b, int64_t e) {
            ggml_quantize_chunk(type, f.data() + b * o.k, w.data() + size_t(b) * row_bytes, 0, e - b, o.k, imatrix);
        });
    }
    const double wbytes = double(ggml_row_size(type, o.k)) * double(o.m);
    std::printf("MUL_MAT %s, m=%lld k=%lld, %d products per graph, median of %d\n", o.type.c_str(),
                (long long) o.m, (long long) o.k, o.rotate, o.reps);
    std::printf("| n |");
    for (auto * d : devs) std::printf(" %s us | GB/s |", ggml_backend_dev_name(d));
    std::printf(devs.size() > 1 ? " ratio | NMSE vs first |\n" : "\n");
    int rc = 0;
    for (const std::string & ns : split(o.n)) {
        const int64_t n = std::stoll(ns);
        std::vector<std::vector<float>> src1(size_t(o.rotate), std::vector<float>(size_t(o.k * n)));
        for (auto & s : src1)
            for (float & v : s) v = u(rng);
        std::vector<Run> runs;
        for (auto * d : devs) runs.push_back(run_on(d, o, type, n, weights, src1));
        std::printf("| %lld |", (long long) n);
        for (const Run & r : runs) {
            if (!r.error.empty()) {
                std::printf(" %s | - |", r.error.c_str());
                rc = 1;
            } else {
                std::printf(" %.1f | %.0f |", r.us, wbytes / (r.us * 1e3));
            }
        }
        if (runs.size() > 1 && runs[0].error.empty()) {
            const Run & last = runs.back();
            const double e = last.error.empty() ? nmse(last.out, runs[0].out) : INFINITY;
            std::printf(" %.2f | %.2e |", last.error.empty() ? runs[0].us / last.us : 0.0, e);
            if (!(e <= o.max_nmse)) rc = 1;
        }
        std::printf("\n");
    }
    return rc;
}

} // namespace standin::tools
