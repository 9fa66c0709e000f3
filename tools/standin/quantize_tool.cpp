#include "tools/standin/quantize_tool.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gguf.h"
#include "tools/standin/bench_process.h"

namespace standin::tools::model {

namespace {

std::string read_text(const std::string & path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// The last non-empty line of a tool's log, for an error message.
std::string last_line(const std::string & text) {
    size_t end = text.find_last_not_of(" \n\r\t");
    if (end == std::string::npos) {
        return "";
    }
    const size_t begin = text.find_last_of('\n', end);
    return text.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1));
}

QuantizeResult tool_missing(const std::string & tool) {
    QuantizeResult r;
    r.usage_error = true;
    r.error = "llama-quantize not found or not executable: " + tool +
              " (pass --quantize-tool PATH, or set STANDIN_LLAMA_BIN_DIR to the llama.cpp tools' folder)";
    return r;
}

} // namespace

std::string default_quantize_tool() {
    const char * dir = std::getenv("STANDIN_LLAMA_BIN_DIR");
    return std::string(dir != nullptr && *dir != '\0' ? dir : STANDIN_GGML_BIN_DIR) + "/llama-quantize";
}

QuantizeResult check_quantize_type(const std::string & tool, const std::string & type) {
    if (::access(tool.c_str(), X_OK) != 0) {
        return tool_missing(tool);
    }
    // An input that does not exist: a known type name gets as far as opening
    // it; an unknown one is refused first, with "invalid ftype".
    const std::filesystem::path log = std::filesystem::temp_directory_path() /
                                      ("standin-quantize-check-" + std::to_string(::getpid()) + ".log");
    bench::ProcSpec spec;
    spec.argv = {tool, "/nonexistent/standin-type-check.gguf", "/nonexistent/standin-type-check.out.gguf", type};
    spec.stderr_path = log.string();
    spec.timeout_s = 60;
    const bench::ProcResult pr = bench::run_process(spec);
    const std::string text = read_text(log.string());
    std::error_code ec;
    std::filesystem::remove(log, ec);
    QuantizeResult r;
    if (pr.spawn_failed) {
        return tool_missing(tool);
    }
    if (text.find("invalid ftype") != std::string::npos) {
        r.usage_error = true;
        r.error = "llama-quantize does not know the type '" + type + "' (its list: " + tool + " --help)";
        return r;
    }
    r.ok = true;
    return r;
}

namespace {

// llama.h's LLAMA_FTYPE_MOSTLY_* of the types that reach the override; 0: none.
uint32_t llama_file_type_of(ggml_type t) {
    switch (t) {
        case GGML_TYPE_MXFP4: return 38;  // MOSTLY_MXFP4_MOE
        case GGML_TYPE_NVFP4: return 39;
        case GGML_TYPE_Q1_0:  return 40;
        case GGML_TYPE_Q2_0:  return 41;
        default:              return 0;
    }
}

} // namespace

bool layer_type_override(const std::string & type, LayerOverride & out) {
    for (int i = 0; i < GGML_TYPE_COUNT; ++i) {
        const ggml_type t = ggml_type(i);
        const char * name = ggml_type_name(t);
        if (name == nullptr || !ggml_is_quantized(t) || ggml_blck_size(t) <= 1 || strcasecmp(name, type.c_str()) != 0) {
            continue;
        }
        // Layer matrices only: norms are 1-D and stay F32 either way.
        out.base = "Q8_0";
        out.args = {"--tensor-type", std::string("blk\\.[0-9]+\\.(attn|ffn)_=") + name};
        if (const uint32_t ft = llama_file_type_of(t); ft != 0) {
            // llama-quantize applies metadata overrides after it writes its own file type.
            out.args.insert(out.args.end(), {"--override-kv", "general.file_type=int:" + std::to_string(ft)});
        }
        return true;
    }
    return false;
}

bool write_uniform_imatrix(const std::string & model_path, const std::string & out_path, std::string & error) {
    ggml_context * meta = nullptr;
    gguf_init_params ip{true, &meta};
    gguf_context * in = gguf_init_from_file(model_path.c_str(), ip);
    if (in == nullptr) {
        error = "cannot read the model " + model_path + " for its importance matrix";
        return false;
    }
    // One entry per matrix (and per expert of a 3-D one): sums of squares
    // 1 over one call, so every column weighs 1 after llama-quantize divides
    // by the count.
    // The context holds both tensors of each entry, each padded to ggml's
    // alignment (a 1-column counts tensor takes more than its 4 bytes).
    const auto room = [](int64_t floats) {
        return GGML_PAD(size_t(floats) * sizeof(float), GGML_MEM_ALIGN) + ggml_tensor_overhead();
    };
    size_t bytes = ggml_tensor_overhead();
    for (ggml_tensor * t = ggml_get_first_tensor(meta); t != nullptr; t = ggml_get_next_tensor(meta, t)) {
        if (t->ne[1] > 1) bytes += room(t->ne[0] * t->ne[2]) + room(t->ne[2]);
    }
    ggml_init_params cp{bytes, nullptr, false};
    ggml_context * ctx = ggml_init(cp);
    gguf_context * outg = gguf_init_empty();
    const char * dataset = "uniform (standin make-model: random weights, no activation statistics)";
    gguf_set_arr_str(outg, "imatrix.datasets", &dataset, 1);
    gguf_set_val_u32(outg, "imatrix.chunk_count", 1);
    gguf_set_val_u32(outg, "imatrix.chunk_size", 1);
    for (ggml_tensor * t = ggml_get_first_tensor(meta); t != nullptr; t = ggml_get_next_tensor(meta, t)) {
        if (t->ne[1] <= 1) continue;
        ggml_tensor * sums = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, t->ne[0], t->ne[2]);
        ggml_tensor * counts = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, t->ne[2]);
        ggml_set_name(sums, (std::string(t->name) + ".in_sum2").c_str());
        ggml_set_name(counts, (std::string(t->name) + ".counts").c_str());
        std::fill_n(static_cast<float *>(sums->data), ggml_nelements(sums), 1.0f);
        std::fill_n(static_cast<float *>(counts->data), ggml_nelements(counts), 1.0f);
        gguf_add_tensor(outg, sums);
        gguf_add_tensor(outg, counts);
    }
    const bool ok = gguf_write_to_file(outg, out_path.c_str(), false);
    if (!ok) {
        error = "cannot write the importance matrix " + out_path;
    }
    gguf_free(outg);
    ggml_free(ctx);
    gguf_free(in);
    ggml_free(meta);
    return ok;
}

namespace {

QuantizeResult run_quantize(const std::string & tool, const std::string & in, const std::string & out,
                            const std::string & type, int threads, const std::string & log_path,
                            const std::vector<std::string> & options) {
    bench::ProcSpec spec;
    spec.argv = {tool};
    spec.argv.insert(spec.argv.end(), options.begin(), options.end());
    spec.argv.insert(spec.argv.end(), {in, out, type});
    if (threads > 0) {
        spec.argv.push_back(std::to_string(threads));
    }
    {
        std::ofstream truncate(log_path);  // run_process appends
    }
    spec.stderr_path = log_path;
    const bench::ProcResult pr = bench::run_process(spec);
    QuantizeResult r;
    if (!pr.ok()) {
        r.error = "llama-quantize " + type + " failed (" + pr.describe() + "): " + last_line(read_text(log_path)) +
                  " (log: " + log_path + ")";
        return r;
    }
    r.ok = true;
    return r;
}

} // namespace

QuantizeResult quantize_file(const std::string & tool, const std::string & in, const std::string & out,
                             const std::string & type, int threads, const std::string & log_path,
                             const std::vector<std::string> & options) {
    if (::access(tool.c_str(), X_OK) != 0) {
        return tool_missing(tool);
    }
    QuantizeResult r = run_quantize(tool, in, out, type, threads, log_path, options);
    // The very low-bit types (IQ1_S/M, IQ2_*, IQ3_XXS, Q2_K_S) are refused
    // without an importance matrix, whose name the tool's error gives: the
    // uniform one, and the same run again.
    if (r.ok || read_text(log_path).find("importance matrix") == std::string::npos) {
        return r;
    }
    const std::string imatrix = out + ".imatrix.gguf";
    std::string error;
    if (!write_uniform_imatrix(in, imatrix, error)) {
        r.error += "; " + error;
        return r;
    }
    std::vector<std::string> with = {"--imatrix", imatrix};
    with.insert(with.end(), options.begin(), options.end());
    r = run_quantize(tool, in, out, type, threads, log_path, with);
    r.uniform_imatrix = r.ok;
    std::error_code ec;
    std::filesystem::remove(imatrix, ec);
    return r;
}

std::map<ggml_type, int> tensor_type_counts(const std::string & path) {
    std::map<ggml_type, int> counts;
    gguf_init_params ip{true, nullptr};
    gguf_context * ctx = gguf_init_from_file(path.c_str(), ip);
    if (ctx == nullptr) {
        return counts;
    }
    for (int64_t i = 0; i < gguf_get_n_tensors(ctx); ++i) {
        ++counts[gguf_get_tensor_type(ctx, i)];
    }
    gguf_free(ctx);
    return counts;
}

std::string describe_type_counts(const std::map<ggml_type, int> & counts) {
    std::string s;
    for (const auto & [type, n] : counts) {
        s += (s.empty() ? "" : ", ") + std::string(ggml_type_name(type)) + " x " + std::to_string(n);
    }
    return s;
}

} // namespace standin::tools::model
