#include "tools/standin/gguf_model.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "gguf.h"
#include "runtime/host/thread_pool.h"

namespace standin::tools::model {

namespace {

// About 16 MiB of f32 per block: large enough for few, big writes, small
// enough that memory stays flat for any model size.
constexpr int64_t kBlockElems = int64_t(1) << 22;

struct GgufDeleter {
    void operator()(gguf_context * c) const { gguf_free(c); }
};
struct GgmlDeleter {
    void operator()(ggml_context * c) const { ggml_free(c); }
};
struct FileCloser {
    void operator()(FILE * f) const { std::fclose(f); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufDeleter>;
using GgmlPtr = std::unique_ptr<ggml_context, GgmlDeleter>;
using FilePtr = std::unique_ptr<FILE, FileCloser>;

uint64_t splitmix64(uint64_t & state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

std::string errno_text() { return std::strerror(errno); }

// Copies the tokenizer.* keys of `vocab` into `dst`. gguf has no per-key copy,
// so copy all keys into a scratch context and drop the others first.
void copy_tokenizer_keys(gguf_context * dst, const gguf_context * vocab) {
    GgufPtr tmp(gguf_init_empty());
    gguf_set_kv(tmp.get(), vocab);
    std::vector<std::string> drop;
    for (int64_t i = 0; i < gguf_get_n_kv(tmp.get()); ++i) {
        const std::string key = gguf_get_key(tmp.get(), i);
        if (key.rfind("tokenizer.", 0) != 0) {
            drop.push_back(key);
        }
    }
    for (const std::string & key : drop) {
        gguf_remove_key(tmp.get(), key.c_str());
    }
    gguf_set_kv(dst, tmp.get());
}

void set_hparams(gguf_context * ctx, const WriteOptions & opt, int64_t n_vocab) {
    const Shape & s = opt.shape;
    const std::string name = "standin-random-" + s.name + "-" + ggml_type_name(opt.wtype);
    gguf_set_val_str(ctx, "general.architecture", "llama");
    gguf_set_val_str(ctx, "general.type", "model");
    gguf_set_val_str(ctx, "general.name", name.c_str());
    gguf_set_val_u32(ctx, "general.file_type", opt.file_type);
    gguf_set_val_u32(ctx, "general.quantization_version", GGML_QNT_VERSION);
    gguf_set_val_u32(ctx, "llama.vocab_size", uint32_t(n_vocab));
    gguf_set_val_u32(ctx, "llama.context_length", uint32_t(s.n_ctx));
    gguf_set_val_u32(ctx, "llama.embedding_length", uint32_t(s.n_embd));
    gguf_set_val_u32(ctx, "llama.block_count", uint32_t(s.n_layer));
    gguf_set_val_u32(ctx, "llama.feed_forward_length", uint32_t(s.n_ff));
    gguf_set_val_u32(ctx, "llama.attention.head_count", uint32_t(s.n_head));
    gguf_set_val_u32(ctx, "llama.attention.head_count_kv", uint32_t(s.n_head_kv));
    gguf_set_val_u32(ctx, "llama.rope.dimension_count", uint32_t(s.n_embd / s.n_head));
    gguf_set_val_f32(ctx, "llama.rope.freq_base", s.rope_theta);
    gguf_set_val_f32(ctx, "llama.attention.layer_norm_rms_epsilon", s.rms_eps);
    if (s.n_expert > 0) {
        gguf_set_val_u32(ctx, "llama.expert_count", uint32_t(s.n_expert));
        gguf_set_val_u32(ctx, "llama.expert_used_count", uint32_t(s.n_expert_used));
    }
}

// Generates rows [row0, row0 + nrows) of tensor `ti` into `f32`, converts them
// to the tensor's type in `out` (unless it is F32, where `out` is unused) and
// returns the bytes to write.
const void * make_block(rt::host::ThreadPool & pool, uint64_t seed, int64_t ti, const TensorPlan & t,
                        int64_t row0, int64_t nrows, std::vector<float> & f32, std::vector<uint8_t> & out) {
    const int64_t grain = std::max<int64_t>(1, 16384 / t.ne0);
    pool.parallel_for(nrows, grain, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            fill_row(seed, ti, t, row0 + r, f32.data() + r * t.ne0);
        }
        if (t.type != GGML_TYPE_F32) {
            ggml_quantize_chunk(t.type, f32.data(), out.data(), b * t.ne0, e - b, t.ne0, nullptr);
        }
    });
    if (t.type == GGML_TYPE_F32) {
        return f32.data();
    }
    return out.data();
}

struct Writer {
    FILE *      f = nullptr;
    uint64_t    pos = 0;
    std::string error;

    bool write(const void * data, size_t n) {
        if (n != 0 && std::fwrite(data, 1, n, f) != n) {
            error = "write failed: " + errno_text();
            return false;
        }
        pos += n;
        return true;
    }
    bool pad_to(uint64_t target) {
        static const uint8_t zeros[64] = {};
        while (pos < target) {
            if (!write(zeros, size_t(std::min<uint64_t>(sizeof(zeros), target - pos)))) {
                return false;
            }
        }
        return true;
    }
};

// Builds the metadata: hyper-parameters, tokenizer keys and one tensor info
// per planned tensor (the infos fix every tensor's offset in the data section).
GgufPtr build_meta(const WriteOptions & opt, const gguf_context * vocab, int64_t n_vocab,
                   const std::vector<TensorPlan> & plan, GgmlPtr & tctx) {
    GgufPtr ctx(gguf_init_empty());
    set_hparams(ctx.get(), opt, n_vocab);
    copy_tokenizer_keys(ctx.get(), vocab);
    ggml_init_params ip = {ggml_tensor_overhead() * (plan.size() + 1), nullptr, /*no_alloc =*/ true};
    tctx.reset(ggml_init(ip));
    for (const TensorPlan & t : plan) {
        ggml_tensor * tensor = t.init == Init::Norm ? ggml_new_tensor_1d(tctx.get(), t.type, t.ne0)
                               : t.ne2 > 1          ? ggml_new_tensor_3d(tctx.get(), t.type, t.ne0, t.ne1, t.ne2)
                                                    : ggml_new_tensor_2d(tctx.get(), t.type, t.ne0, t.ne1);
        ggml_set_name(tensor, t.name.c_str());
        gguf_add_tensor(ctx.get(), tensor);
    }
    return ctx;
}

// The data section: each tensor at the offset its info names, padded to the
// file's alignment, generated and written a block of rows at a time.
bool write_tensors(const WriteOptions & opt, const gguf_context * ctx, const std::vector<TensorPlan> & plan,
                   uint64_t data_offset, Writer & w, Progress & prog) {
    const int threads = opt.threads > 0 ? opt.threads : rt::host::available_cores();
    rt::host::ThreadPool pool(threads);
    std::vector<float>   f32;
    std::vector<uint8_t> out;
    for (size_t i = 0; i < plan.size(); ++i) {
        const TensorPlan & t = plan[i];
        if (w.pos != data_offset + gguf_get_tensor_offset(ctx, int64_t(i))) {
            w.error = "internal error: " + t.name + " is not at the offset its tensor info names";
            return false;
        }
        // An expert tensor's rows run on from one expert to the next.
        const int64_t rows           = t.ne1 * t.ne2;
        const int64_t rows_per_block = std::max<int64_t>(1, kBlockElems / t.ne0);
        const size_t  row_bytes      = ggml_row_size(t.type, t.ne0);
        f32.resize(size_t(std::min(rows_per_block, rows) * t.ne0));
        out.resize(t.type == GGML_TYPE_F32 ? 0 : size_t(std::min(rows_per_block, rows)) * row_bytes);
        prog.current         = &t;
        prog.tensor_finished = false;
        for (int64_t row0 = 0; row0 < rows; row0 += rows_per_block) {
            const int64_t nrows = std::min(rows_per_block, rows - row0);
            const void *  bytes = make_block(pool, opt.seed, int64_t(i), t, row0, nrows, f32, out);
            if (!w.write(bytes, size_t(nrows) * row_bytes)) {
                return false;
            }
            prog.bytes_done = w.pos;
            if (opt.on_progress && row0 + nrows < rows) {
                opt.on_progress(prog);  // mid-tensor: tensors_done not yet advanced
            }
        }
        const uint64_t end = data_offset + gguf_get_tensor_offset(ctx, int64_t(i)) +
                             GGML_PAD(gguf_get_tensor_size(ctx, int64_t(i)), gguf_get_alignment(ctx));
        if (!w.pad_to(end)) {
            return false;
        }
        prog.tensors_done    = int64_t(i) + 1;
        prog.bytes_done      = w.pos;
        prog.tensor_finished = true;
        if (opt.on_progress) {
            opt.on_progress(prog);
        }
    }
    return true;
}

} // namespace

namespace {

// The shapes make-model writes, by name: the one list the CLI and the lookup
// read (rms_eps is Shape's default for all of them).
struct NamedShape {
    const char * name;
    const char * what;
    int64_t      n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    float        rope_theta;
    bool         tied_embeddings;
    int64_t      n_expert = 0, n_expert_used = 0;
};

constexpr NamedShape kShapes[] = {
    // Small enough to write and run in a second; every llama code path (GQA,
    // tied output, several layers) is still there.
    {"tiny", "4 layers of 256, for tests", 256, 4, 8, 4, 512, 2048, 10000.0f, true},
    // llama-3.2-1B; the context is cut from 131072 so a default run does not
    // reserve a 4 GiB KV cache.
    {"1b", "llama-3.2-1B", 2048, 16, 32, 8, 8192, 8192, 500000.0f, true},
    // 1b's sizes with head size 128 and 8 query heads per K/V head, the
    // grouping of llama-3-70B and others: the attention paths for groups of 8.
    {"1b-gqa8", "1b with 16 heads of 128 over 2 K/V heads", 2048, 16, 16, 2, 8192, 8192, 500000.0f, true},
    {"8b", "llama-3-8B", 4096, 32, 32, 8, 14336, 8192, 500000.0f, false},
    // Mixtures of experts in llama's layout: tiny's layers with 8 experts of
    // 512, 2 per token; and qwen3-30b-a3b's experts (128 of 768 by 2048, 8 per
    // token) in 8 of its 48 layers, the products MUL_MAT_ID runs in it.
    {"tiny-moe", "tiny with 8 experts of 512, 2 used, for tests", 256, 4, 8, 4, 512, 2048, 10000.0f, true, 8, 2},
    {"moe", "qwen3-30b-a3b's 128 experts of 768 x 2048, 8 used, in 8 layers", 2048, 8, 16, 4, 768, 8192,
     1000000.0f, true, 128, 8},
};

} // namespace

bool shape_by_name(const std::string & name, Shape & out) {
    for (const NamedShape & n : kShapes) {
        if (name == n.name) {
            out = Shape{};
            out.name = name;
            out.n_embd = n.n_embd, out.n_layer = n.n_layer, out.n_head = n.n_head, out.n_head_kv = n.n_head_kv;
            out.n_ff = n.n_ff, out.n_ctx = n.n_ctx, out.rope_theta = n.rope_theta;
            out.tied_embeddings = n.tied_embeddings;
            out.n_expert = n.n_expert, out.n_expert_used = n.n_expert_used;
            return true;
        }
    }
    return false;
}

std::vector<std::string> shape_names() {
    std::vector<std::string> v;
    for (const NamedShape & n : kShapes) v.emplace_back(n.name);
    return v;
}

std::string shape_help() {
    std::string h;
    for (const NamedShape & n : kShapes) h += (h.empty() ? "" : ", ") + std::string(n.name) + " (" + n.what + ")";
    return h;
}

bool weight_type_by_name(const std::string & name, ggml_type & type, uint32_t & file_type) {
    // file_type values are llama.cpp's LLAMA_FTYPE_ALL_F32 / MOSTLY_F16 / MOSTLY_Q8_0 / MOSTLY_Q4_0.
    if (name == "f32") {
        type = GGML_TYPE_F32, file_type = 0;
    } else if (name == "f16") {
        type = GGML_TYPE_F16, file_type = 1;
    } else if (name == "q8_0") {
        type = GGML_TYPE_Q8_0, file_type = 7;
    } else if (name == "q4_0") {
        type = GGML_TYPE_Q4_0, file_type = 2;
    } else {
        return false;
    }
    return true;
}

std::vector<TensorPlan> plan_tensors(const Shape & s, int64_t n_vocab, ggml_type wtype) {
    const int64_t head_dim = s.n_embd / s.n_head;
    const int64_t n_kv     = head_dim * s.n_head_kv;
    std::vector<TensorPlan> p;
    auto matrix = [&](std::string name, int64_t ne0, int64_t ne1) {
        p.push_back({std::move(name), wtype, ne0, ne1, Init::Matrix});
    };
    auto norm = [&](std::string name) { p.push_back({std::move(name), GGML_TYPE_F32, s.n_embd, 1, Init::Norm}); };

    // The order llama.cpp's converter uses: embeddings, layers, output.
    matrix("token_embd.weight", s.n_embd, n_vocab);
    for (int64_t l = 0; l < s.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        norm(b + "attn_norm.weight");
        matrix(b + "attn_q.weight", s.n_embd, s.n_embd);
        matrix(b + "attn_k.weight", s.n_embd, n_kv);
        matrix(b + "attn_v.weight", s.n_embd, n_kv);
        matrix(b + "attn_output.weight", s.n_embd, s.n_embd);
        norm(b + "ffn_norm.weight");
        if (s.n_expert > 0) {
            p.push_back({b + "ffn_gate_inp.weight", GGML_TYPE_F32, s.n_embd, s.n_expert, Init::Matrix});
            p.push_back({b + "ffn_gate_exps.weight", wtype, s.n_embd, s.n_ff, Init::Matrix, s.n_expert});
            p.push_back({b + "ffn_down_exps.weight", wtype, s.n_ff, s.n_embd, Init::Matrix, s.n_expert});
            p.push_back({b + "ffn_up_exps.weight", wtype, s.n_embd, s.n_ff, Init::Matrix, s.n_expert});
            continue;
        }
        matrix(b + "ffn_gate.weight", s.n_embd, s.n_ff);
        matrix(b + "ffn_up.weight", s.n_embd, s.n_ff);
        matrix(b + "ffn_down.weight", s.n_ff, s.n_embd);
    }
    norm("output_norm.weight");
    if (!s.tied_embeddings) {
        matrix("output.weight", s.n_embd, n_vocab);
    }
    return p;
}

void fill_row(uint64_t seed, int64_t tensor_index, const TensorPlan & t, int64_t row_index, float * row) {
    // One independent stream per (seed, tensor, row): the file is the same
    // whatever the threads and block sizes.
    uint64_t state = seed * 0xD1B54A32D192ED03ull ^ uint64_t(tensor_index + 1) * 0x8CB92BA72F3D8DD7ull ^
                     uint64_t(row_index + 1) * 0xABC98388FB8FAC03ull;
    splitmix64(state);
    // A sum of four 16-bit uniforms (Irwin-Hall, n = 4) is close to normal,
    // bounded at +-3.46 sigma and several times cheaper than Box-Muller, which
    // matters for the 8e9 values of an 8B model.
    constexpr float kMid   = 4.0f * 65535.0f / 2.0f;
    constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(3) / 2^16: unit variance
    const float mean = t.init == Init::Norm ? 1.0f : 0.0f;
    const float std  = t.init == Init::Norm ? 0.1f : 1.0f / std::sqrt(float(t.ne0));
    for (int64_t i = 0; i < t.ne0; ++i) {
        const uint64_t r = splitmix64(state);
        const float    s = float((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
        row[i] = mean + std * (s - kMid) * kScale;
    }
}

WriteResult write_model(const WriteOptions & opt) {
    namespace fs = std::filesystem;
    WriteResult res;
    gguf_init_params vp = {/*no_alloc =*/ true, /*ctx =*/ nullptr};
    GgufPtr vocab(gguf_init_from_file(opt.vocab_path.c_str(), vp));
    if (!vocab) {
        res.error = "cannot read the vocabulary GGUF " + opt.vocab_path;
        return res;
    }
    const int64_t tok = gguf_find_key(vocab.get(), "tokenizer.ggml.tokens");
    if (tok < 0 || gguf_get_kv_type(vocab.get(), tok) != GGUF_TYPE_ARRAY) {
        res.error = opt.vocab_path + " has no tokenizer.ggml.tokens array";
        return res;
    }
    res.n_vocab = int64_t(gguf_get_arr_n(vocab.get(), tok));

    const std::vector<TensorPlan> plan = plan_tensors(opt.shape, res.n_vocab, opt.wtype);
    for (const TensorPlan & t : plan) {
        if (t.ne0 % ggml_blck_size(t.type) != 0) {
            res.error = t.name + ": row length " + std::to_string(t.ne0) + " is not a multiple of the " +
                        ggml_type_name(t.type) + " block size";
            return res;
        }
        res.n_params += t.ne0 * t.ne1 * t.ne2;
    }
    res.n_tensors = int64_t(plan.size());

    GgmlPtr tctx;
    GgufPtr ctx = build_meta(opt, vocab.get(), res.n_vocab, plan, tctx);
    vocab.reset();  // the tokenizer keys now live in ctx
    // The metadata ends padded to the alignment: the data section starts right after it
    // (gguf_get_data_offset only knows the offset of a file that was read).
    std::vector<uint8_t> meta(gguf_get_meta_size(ctx.get()));
    gguf_get_meta_data(ctx.get(), meta.data());
    const uint64_t data_offset = meta.size();

    std::error_code ec;
    if (fs::is_directory(opt.out_path, ec)) {
        res.error = "cannot write " + opt.out_path + ": it is a directory";
        return res;
    }
    const std::string partial = opt.out_path + ".partial";
    std::vector<char> iobuf(size_t(1) << 20);  // declared first: it must outlive the FILE
    FilePtr f(std::fopen(partial.c_str(), "wb"));
    if (!f) {
        res.error = "cannot create " + partial + ": " + errno_text();
        return res;
    }
    std::setvbuf(f.get(), iobuf.data(), _IOFBF, iobuf.size());

    Progress prog;
    prog.tensors_total = res.n_tensors;
    prog.bytes_total   = data_offset;
    for (size_t i = 0; i < plan.size(); ++i) {
        prog.bytes_total += GGML_PAD(gguf_get_tensor_size(ctx.get(), int64_t(i)), gguf_get_alignment(ctx.get()));
    }
    Writer w;
    w.f = f.get();
    bool ok = w.write(meta.data(), meta.size());
    meta = {};
    if (ok && opt.on_progress) {
        prog.bytes_done = w.pos;
        opt.on_progress(prog);
    }
    ok = ok && write_tensors(opt, ctx.get(), plan, data_offset, w, prog);
    if (ok && std::fflush(f.get()) != 0) {
        w.error = "write failed: " + errno_text();
        ok = false;
    }
    if (std::fclose(f.release()) != 0 && ok) {
        w.error = "close failed: " + errno_text();
        ok = false;
    }
    if (ok && std::rename(partial.c_str(), opt.out_path.c_str()) != 0) {
        w.error = "cannot rename " + partial + " to " + opt.out_path + ": " + errno_text();
        ok = false;
    }
    if (!ok) {
        fs::remove(partial, ec);
        res.error = w.error;
        return res;
    }
    res.ok    = true;
    res.bytes = w.pos;
    return res;
}

} // namespace standin::tools::model
