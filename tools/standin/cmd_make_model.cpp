// `standin make-model`: writes a llama-architecture GGUF with random weights
// that unmodified llama.cpp loads and runs (llama-completion, llama-bench), so
// standin can be exercised on real model graphs without downloading a model.
// The work is in gguf_model.cpp; this file is the command line and the
// progress display. Types the writer does not make itself go through an F16
// file and llama-quantize (quantize_tool.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "tools/standin/commands.h"
#include "tools/standin/gguf_model.h"
#include "tools/standin/quantize_tool.h"

namespace standin::tools {

namespace {

using Clock = std::chrono::steady_clock;

double mb(uint64_t bytes) { return double(bytes) / 1e6; }

std::string format_eta(double seconds) {
    char buf[32];
    if (seconds < 0) {
        return "--";
    }
    if (seconds < 100) {
        std::snprintf(buf, sizeof(buf), "%.0fs", seconds);
    } else {
        std::snprintf(buf, sizeof(buf), "%dm%02ds", int(seconds) / 60, int(seconds) % 60);
    }
    return buf;
}

// A redrawn bar on a terminal, one line per finished tensor otherwise (logs, CI).
class ProgressDisplay {
public:
    explicit ProgressDisplay(bool tty) : tty_(tty), start_(Clock::now()) {}

    void update(const model::Progress & p) {
        const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
        if (!tty_) {
            if (p.tensor_finished) {
                const model::TensorPlan & t = *p.current;
                std::fprintf(stderr, "[%4lld/%lld] %-28s %-5s %6lld x %-6lld %9.1f / %.1f MB  %.1fs\n",
                             (long long) p.tensors_done, (long long) p.tensors_total, t.name.c_str(),
                             ggml_type_name(t.type), (long long) t.ne0, (long long) t.ne1, mb(p.bytes_done),
                             mb(p.bytes_total), elapsed);
            }
            return;
        }
        const auto now = Clock::now();
        if (p.tensors_done < p.tensors_total && now - last_draw_ < std::chrono::milliseconds(100)) {
            return;
        }
        last_draw_ = now;
        const double frac = p.bytes_total ? double(p.bytes_done) / double(p.bytes_total) : 0.0;
        const double eta  = frac > 0.01 ? elapsed * (1.0 - frac) / frac : -1.0;
        constexpr int kWidth = 30;
        char bar[kWidth + 1];
        const int filled = int(frac * kWidth + 0.5);
        for (int i = 0; i < kWidth; ++i) {
            bar[i] = i < filled ? '#' : '-';
        }
        bar[kWidth] = '\0';
        std::fprintf(stderr, "\r[%s] %4lld/%lld tensors  %8.1f / %.1f MB  ETA %-8s", bar,
                     (long long) p.tensors_done, (long long) p.tensors_total, mb(p.bytes_done), mb(p.bytes_total),
                     format_eta(eta).c_str());
        std::fflush(stderr);
    }

    void finish() {
        if (tty_) {
            std::fputc('\n', stderr);
        }
    }

private:
    bool              tty_;
    Clock::time_point start_;
    Clock::time_point last_draw_{};
};

std::string default_vocab_path() {
#ifdef STANDIN_LLAMA_MODELS_DIR
    return std::string(STANDIN_LLAMA_MODELS_DIR) + "/ggml-vocab-llama-bpe.gguf";
#else
    return "ggml-vocab-llama-bpe.gguf";
#endif
}

} // namespace

int cmd_make_model(const MakeModelOptions & opt) {
    model::WriteOptions w;
    if (!model::shape_by_name(opt.shape, w.shape)) {
        std::fprintf(stderr, "standin make-model: unknown --shape '%s' (%s)\n", opt.shape.c_str(),
                     model::shape_help().c_str());
        return 2;
    }
    if (opt.out.empty()) {
        std::fprintf(stderr, "standin make-model: --out FILE is required\n");
        return 2;
    }
    // Any other name is llama-quantize's (checked before the F16 file is written).
    const bool        native = model::weight_type_by_name(opt.type, w.wtype, w.file_type);
    const std::string tool   = opt.quantize_tool.empty() ? model::default_quantize_tool() : opt.quantize_tool;
    // llama-quantize's type (a mix) or, for a ggml type it has no mix for,
    // its Q8_0 mix with every layer matrix overridden to that type.
    std::string               quant_type = opt.type;
    model::LayerOverride      layers;
    if (!native) {
        if (const model::QuantizeResult c = model::check_quantize_type(tool, opt.type); !c.ok) {
            if (!c.usage_error || !model::layer_type_override(opt.type, layers) ||
                !model::check_quantize_type(tool, layers.base).ok) {
                std::fprintf(stderr, "standin make-model: --type '%s' (not f32, f16, q8_0 or q4_0, which the writer "
                                     "makes itself): %s\n", opt.type.c_str(), c.error.c_str());
                return 2;
            }
            quant_type = layers.base;
        }
        model::weight_type_by_name("f16", w.wtype, w.file_type);
    }
    w.vocab_path = opt.vocab.empty() ? default_vocab_path() : opt.vocab;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(w.vocab_path, ec)) {
        std::fprintf(stderr, "standin make-model: vocabulary file not found: %s (pass --vocab FILE)\n",
                     w.vocab_path.c_str());
        return 2;
    }
    w.out_path = native ? opt.out : opt.out + ".f16.tmp";
    w.seed     = opt.seed;
    w.threads  = opt.threads;

    ProgressDisplay display(!opt.quiet && isatty(fileno(stderr)));
    if (!opt.quiet) {
        w.on_progress = [&](const model::Progress & p) { display.update(p); };
        std::fprintf(stderr, "standin make-model: %s %s, seed %llu -> %s\n", w.shape.name.c_str(),
                     native ? ggml_type_name(w.wtype) : opt.type.c_str(), (unsigned long long) w.seed, opt.out.c_str());
    }
    const auto t0 = Clock::now();
    const model::WriteResult r = model::write_model(w);
    display.finish();
    if (!r.ok) {
        std::fprintf(stderr, "standin make-model: %s\n", r.error.c_str());
        return 1;
    }
    uint64_t bytes = r.bytes;
    std::string types = ggml_type_name(w.wtype);
    if (!native) {
        if (!opt.quiet) {
            std::fprintf(stderr, "standin make-model: %s -> %s with %s\n", w.out_path.c_str(), opt.type.c_str(),
                         tool.c_str());
        }
        const std::string log = opt.out + ".quantize.log";
        const model::QuantizeResult q =
            model::quantize_file(tool, w.out_path, opt.out, quant_type, opt.threads, log, layers.args);
        std::filesystem::remove(w.out_path, ec);
        if (!q.ok) {
            std::fprintf(stderr, "standin make-model: %s\n", q.error.c_str());
            return 1;
        }
        std::filesystem::remove(log, ec);
        bytes = std::filesystem::file_size(opt.out, ec);
        types = opt.type + " (" + model::describe_type_counts(model::tensor_type_counts(opt.out)) +
                (q.uniform_imatrix ? "; with a uniform importance matrix" : "") + ")";
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("wrote %s: llama %s, %s weights, %.3f B parameters, n_vocab %lld, %lld tensors, %.1f MB in %.1f s "
                "(%.0f MB/s)\n",
                opt.out.c_str(), w.shape.name.c_str(), types.c_str(), double(r.n_params) / 1e9, (long long) r.n_vocab,
                (long long) r.n_tensors, mb(bytes), s, s > 0 ? mb(bytes) / s : 0.0);
    return 0;
}

} // namespace standin::tools
