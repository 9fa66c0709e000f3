// `standin logits`: runs one prompt through a model with libllama, exactly as
// llama.cpp's tools would (`-dev NAME -ngl 99`, or `-dev none` for ggml-cpu
// alone), and keeps the logits of every position. Two runs on different
// devices compared with --compare give one number, the NMSE
// sum((a-b)^2) / sum(b^2), that says whether a device computes the model right.
//
// Every graph node is counted by the backend the scheduler ran it on, so the
// run shows which ops the chosen device really computed and which went back
// to the CPU; a run where the chosen device computed nothing is an error,
// since comparing it would prove nothing.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "llama.h"
#include "runtime/host/thread_pool.h"
#include "tools/standin/backends.h"
#include "tools/standin/commands.h"

namespace standin::tools {

namespace {

// Which backend computed each node. A node's buffer does not say (ggml-alloc
// lets an op reuse its parent's memory in place, across buffer types), and
// no public hook names the backend of a node, so this reads the scheduler's
// own assignment dump (GGML_SCHED_DEBUG=2, through the log callback): a
// "## SPLIT #k: BACKEND ..." header per split, then "node #i (OP): ..." lines.
// Only the dump of the measured decode counts, not those of the reserve graphs.
class Census {
public:
    void start() { ops_by_device_.clear(), split_.clear(), active_ = true; }
    void stop() { active_ = false; }
    bool seen() const { return !ops_by_device_.empty(); }

    // Log text arrives in fragments; whole lines are parsed.
    void feed(const char * text) {
        if (!active_) {
            return;
        }
        line_ += text;
        size_t nl;
        while ((nl = line_.find('\n')) != std::string::npos) {
            parse(line_.substr(0, nl));
            line_.erase(0, nl + 1);
        }
    }

    // Nodes computed by the backends of device `dev`. A backend is usually
    // named as its device; ggml-rpc's add the endpoint ("RPC0[host:port]"),
    // and the meta backend of a tensor split lists its devices ("Meta(A,B)").
    int nodes_on(const std::string & dev) const {
        int n = 0;
        for (const auto & [backend, ops] : ops_by_device_) {
            if (runs_on(backend, dev)) {
                for (const auto & kv : ops) n += kv.second;
            }
        }
        return n;
    }

    void print() const {
        for (const auto & [dev, ops] : ops_by_device_) {
            std::printf("computed on %s: %d nodes (", dev.c_str(), nodes_on(dev));
            const char * sep = "";
            for (const auto & [op, n] : ops) {
                std::printf("%s%s %d", sep, op.c_str(), n);
                sep = ", ";
            }
            std::printf(")\n");
        }
    }

private:
    static bool runs_on(const std::string & backend, const std::string & dev) {
        if (backend == dev || backend.rfind(dev + "[", 0) == 0) {
            return true;
        }
        if (backend.rfind("Meta(", 0) == 0 && backend.back() == ')') {
            const std::string list = "," + backend.substr(5, backend.size() - 6) + ",";
            return list.find("," + dev + ",") != std::string::npos;
        }
        return false;
    }

    void parse(const std::string & l) {
        static const std::string kSplit = "## SPLIT #";
        if (l.rfind(kSplit, 0) == 0) {
            const size_t colon = l.find(": ");
            const size_t end   = l.find(" # ", colon == std::string::npos ? 0 : colon);
            if (colon != std::string::npos && end != std::string::npos) {
                if (l.compare(kSplit.size(), 2, "0:") == 0) {
                    ops_by_device_.clear();  // a new graph: keep only the last one's
                }
                split_ = l.substr(colon + 2, end - colon - 2);
            }
            return;
        }
        if (l.rfind("node #", 0) == 0 && !split_.empty()) {
            const size_t open = l.find('('), close = l.find(')', open == std::string::npos ? 0 : open);
            if (open != std::string::npos && close != std::string::npos) {
                std::string op = l.substr(open + 1, close - open - 1);
                op.erase(0, op.find_first_not_of(' '));
                ops_by_device_[split_][op]++;
            }
        }
    }

    bool        active_ = false;
    std::string line_, split_;
    std::map<std::string, std::map<std::string, int>> ops_by_device_;
};

struct LogFilter {
    bool           verbose = false;
    ggml_log_level last    = GGML_LOG_LEVEL_INFO;
    Census *       census  = nullptr;
};

// llama and ggml are chatty at load time; keep warnings and errors unless
// --verbose. The scheduler's debug lines feed the census.
void log_filter(ggml_log_level level, const char * text, void * user) {
    auto * f = static_cast<LogFilter *>(user);
    if (level != GGML_LOG_LEVEL_CONT) {
        f->last = level;
    }
    if (f->last == GGML_LOG_LEVEL_DEBUG && f->census != nullptr) {
        f->census->feed(text);
    }
    if (f->verbose || f->last == GGML_LOG_LEVEL_WARN || f->last == GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

std::vector<llama_token> make_tokens(const llama_vocab * vocab, const std::string & prompt, int n_tokens) {
    std::vector<llama_token> toks(prompt.size() + 8);
    int n = llama_tokenize(vocab, prompt.c_str(), int(prompt.size()), toks.data(), int(toks.size()), true, false);
    if (n < 0) {
        toks.resize(size_t(-n));
        n = llama_tokenize(vocab, prompt.c_str(), int(prompt.size()), toks.data(), int(toks.size()), true, false);
    }
    toks.resize(size_t(std::max(n, 0)));
    if (n_tokens > 0 && !toks.empty()) {
        // Repeat the prompt (without its BOS) up to the requested length.
        const size_t first = toks.size() > 1 && toks[0] == llama_vocab_bos(vocab) ? 1 : 0;
        const size_t base  = toks.size();
        for (size_t i = first; toks.size() < size_t(n_tokens); i = i + 1 < base ? i + 1 : first) {
            toks.push_back(toks[i]);
        }
        toks.resize(size_t(n_tokens));
    }
    return toks;
}

bool read_floats(const std::string & path, std::vector<float> & out, std::string & err) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) {
        err = "cannot read " + path;
        return false;
    }
    const std::streamsize size = in.tellg();
    if (size % std::streamsize(sizeof(float)) != 0) {
        err = path + " is not a float32 logits file (size " + std::to_string(size) + ")";
        return false;
    }
    out.resize(size_t(size) / sizeof(float));
    in.seekg(0);
    if (!in.read(reinterpret_cast<char *>(out.data()), size)) {
        err = "cannot read " + path;
        return false;
    }
    return true;
}

// NMSE of `a` against the reference `b`, with the share of positions whose
// top token agrees. Returns the exit code.
int compare(const std::vector<float> & a, const LogitsOptions & opt, int64_t n_vocab) {
    std::vector<float> b;
    std::string err;
    if (!read_floats(opt.compare, b, err)) {
        std::fprintf(stderr, "standin logits: %s\n", err.c_str());
        return 2;
    }
    if (b.size() != a.size()) {
        std::fprintf(stderr, "standin logits: %s holds %zu logits, this run %zu (another model, prompt or --n-tokens?)\n",
                     opt.compare.c_str(), b.size(), a.size());
        return 2;
    }
    double num = 0, den = 0, max_abs = 0;
    int64_t same_top = 0;
    const int64_t rows = int64_t(a.size()) / n_vocab;
    for (int64_t r = 0; r < rows; ++r) {
        int64_t ta = 0, tb = 0;
        for (int64_t i = 0; i < n_vocab; ++i) {
            const size_t k = size_t(r * n_vocab + i);
            const double d = double(a[k]) - double(b[k]);
            num += d * d;
            den += double(b[k]) * double(b[k]);
            max_abs = std::max(max_abs, std::fabs(d));
            ta = a[k] > a[size_t(r * n_vocab + ta)] ? i : ta;
            tb = b[k] > b[size_t(r * n_vocab + tb)] ? i : tb;
        }
        same_top += ta == tb;
    }
    const double nmse = den > 0 ? num / den : INFINITY;
    const bool   ok   = std::isfinite(nmse) && nmse <= opt.max_nmse;
    std::printf("NMSE vs %s: %.3e (max %.1e) max |diff| %.3e, top token agrees at %lld/%lld positions: %s\n",
                opt.compare.c_str(), nmse, opt.max_nmse, max_abs, (long long) same_top, (long long) rows,
                ok ? "OK" : "FAIL");
    return ok ? 0 : 1;
}

struct LlamaRun {
    llama_model *   model = nullptr;
    llama_context * ctx   = nullptr;
    ~LlamaRun() {
        llama_free(ctx);
        llama_model_free(model);
    }
};

std::vector<std::string> split_list(const std::string & s) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t comma; (comma = s.find(',', start)) != std::string::npos; start = comma + 1) {
        out.push_back(s.substr(start, comma - start));
    }
    out.push_back(s.substr(start));
    return out;
}

// Registers the devices of each rpc-server, as llama.cpp's `--rpc` does: the
// RPC backend (loaded with the others) hands out one registry per endpoint
// through its proc "ggml_backend_rpc_add_server"; the devices are named
// RPC0, RPC1, ... in the order the servers are given.
bool add_rpc_servers(const std::string & endpoints) {
    ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
    if (rpc == nullptr) {
        std::fprintf(stderr, "standin logits: --rpc needs ggml's RPC backend (libggml-rpc.so beside ggml-cpu)\n");
        return false;
    }
    using add_server_t = ggml_backend_reg_t (*)(const char *);
    auto add = reinterpret_cast<add_server_t>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"));
    if (add == nullptr) {
        std::fprintf(stderr, "standin logits: the RPC backend has no ggml_backend_rpc_add_server\n");
        return false;
    }
    for (const std::string & ep : split_list(endpoints)) {
        ggml_backend_reg_t reg = add(ep.c_str());
        if (reg == nullptr) {
            std::fprintf(stderr, "standin logits: rpc-server %s offers no device\n", ep.c_str());
            return false;
        }
        ggml_backend_register(reg);
        for (size_t i = 0; i < ggml_backend_reg_dev_count(reg); ++i) {
            ggml_backend_dev_t d = ggml_backend_reg_dev_get(reg, i);
            std::printf("rpc-server %s: device %s\n", ep.c_str(), ggml_backend_dev_name(d));
        }
    }
    return true;
}

// The model with every layer on the listed devices (split across them by
// opt.split_mode), or on ggml-cpu alone for "none": what `-dev A,B -sm MODE
// -ngl 99` and `-dev none` do in llama.cpp's tools.
bool load_model(const LogitsOptions & opt, LlamaRun & run) {
    const bool                      cpu_only = opt.device == "none";
    std::vector<ggml_backend_dev_t> devices;
    if (!cpu_only) {
        for (const std::string & name : split_list(opt.device)) {
            ggml_backend_dev_t d = ggml_backend_dev_by_name(name.c_str());
            if (d == nullptr) {
                std::fprintf(stderr, "standin logits: no device named %s (try `standin devices`, or none)\n",
                             name.c_str());
                return false;
            }
            devices.push_back(d);
        }
    }
    // ggml's meta device (tensor split) gives its buffers placeholder
    // addresses but calls them host memory when every device's is, and
    // llama's loader then writes through them (a crash): refuse up front.
    size_t host_bufts = 0;
    for (ggml_backend_dev_t d : devices) host_bufts += ggml_backend_buft_is_host(ggml_backend_dev_buffer_type(d));
    if (opt.split_mode == "tensor" && !devices.empty() && host_bufts == devices.size()) {
        std::fprintf(stderr, "standin logits: --split-mode tensor needs a device whose buffers are not host memory "
                             "(for standin host devices set GGML_STANDIN_HOST_DISCRETE=1)\n");
        return false;
    }
    devices.push_back(nullptr);  // the list ends with NULL; {NULL} alone: no offload device
    llama_model_params mp = llama_model_default_params();
    mp.devices      = devices.data();  // copied by the loader
    mp.n_gpu_layers = cpu_only ? 0 : 999;
    mp.split_mode   = opt.split_mode == "none"   ? LLAMA_SPLIT_MODE_NONE
                    : opt.split_mode == "tensor" ? LLAMA_SPLIT_MODE_TENSOR
                                                 : LLAMA_SPLIT_MODE_LAYER;
    run.model = llama_model_load_from_file(opt.model.c_str(), mp);
    if (run.model == nullptr) {
        std::fprintf(stderr, "standin logits: llama.cpp could not load %s\n", opt.model.c_str());
        return false;
    }
    return true;
}

// The cache types llama's -ctk takes (common/arg.cpp's list in the pinned tree).
constexpr ggml_type kCacheTypes[] = {GGML_TYPE_F32,  GGML_TYPE_F16,    GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,
                                     GGML_TYPE_Q4_1, GGML_TYPE_IQ4_NL, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1};

ggml_type cache_type_of(const std::string & name) {
    for (ggml_type t : kCacheTypes) {
        if (name == ggml_type_name(t)) return t;
    }
    return GGML_TYPE_COUNT;
}

// Evaluates `toks` as one batch with logits for every position: one graph, or
// with --ubatch N graphs of N tokens each over the KV cache (N = 1: the
// decode path, token by token).
bool decode_all(const LogitsOptions & opt, LlamaRun & run, const std::vector<llama_token> & toks, Census & census,
                std::vector<float> & logits) {
    const int n = int(toks.size());
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx   = uint32_t(std::max(n, 256));
    cp.n_batch  = uint32_t(n);
    cp.n_ubatch = uint32_t(opt.ubatch > 0 && opt.ubatch < n ? opt.ubatch : n);
    cp.n_seq_max       = 1;
    cp.n_threads       = opt.threads > 0 ? opt.threads : rt::host::available_cores();
    cp.n_threads_batch = cp.n_threads;
    cp.flash_attn_type = opt.flash_attn == "on"     ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                       : opt.flash_attn == "auto"   ? LLAMA_FLASH_ATTN_TYPE_AUTO
                                                    : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cache_type_of(opt.cache_type_k);
    run.ctx = llama_init_from_model(run.model, cp);
    if (run.ctx == nullptr) {
        std::fprintf(stderr, "standin logits: could not create a llama context\n");
        return false;
    }
    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
        batch.token[i] = toks[size_t(i)], batch.pos[i] = i, batch.n_seq_id[i] = 1, batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    census.start();
    const int32_t rc = llama_decode(run.ctx, batch);
    census.stop();
    llama_batch_free(batch);
    if (rc != 0) {
        std::fprintf(stderr, "standin logits: llama_decode failed (%d)\n", rc);
        return false;
    }
    const float * p = llama_get_logits(run.ctx);
    logits.assign(p, p + size_t(n) * size_t(llama_vocab_n_tokens(llama_model_get_vocab(run.model))));
    return true;
}

} // namespace

std::vector<std::string> cache_types() {
    std::vector<std::string> names;
    for (ggml_type t : kCacheTypes) names.emplace_back(ggml_type_name(t));
    return names;
}

int cmd_logits(const LogitsOptions & opt) {
    static LogFilter filter;  // static: ggml may log after this returns
    static Census    census;
    filter.verbose = opt.verbose;
    filter.census  = &census;
    llama_log_set(log_filter, &filter);
    // The scheduler reads this when the context is created (see Census).
    if (const char * d = std::getenv("GGML_SCHED_DEBUG"); d == nullptr || std::atoi(d) < 2) {
        setenv("GGML_SCHED_DEBUG", "2", 1);
    }
    if (opt.flash_attn != "on" && opt.flash_attn != "off" && opt.flash_attn != "auto") {
        std::fprintf(stderr, "standin logits: --flash-attn must be on, off or auto\n");
        return 2;
    }
    if (cache_type_of(opt.cache_type_k) == GGML_TYPE_COUNT) {
        std::fprintf(stderr, "standin logits: --cache-type-k %s is not a K cache type llama takes\n",
                     opt.cache_type_k.c_str());
        return 2;
    }
    Loaded l = load_backends(opt.plugin, true);
    if (l.standin == nullptr) {
        std::fprintf(stderr, "standin logits: %s\n", l.error.c_str());
        return 2;
    }
    llama_backend_init();
    if (!opt.rpc.empty() && !add_rpc_servers(opt.rpc)) {
        return 2;
    }
    LlamaRun run;
    if (!load_model(opt, run)) {
        return 2;
    }
    const llama_vocab *            vocab   = llama_model_get_vocab(run.model);
    const int64_t                  n_vocab = llama_vocab_n_tokens(vocab);
    const std::vector<llama_token> toks    = make_tokens(vocab, opt.prompt, opt.n_tokens);
    if (toks.empty()) {
        std::fprintf(stderr, "standin logits: the prompt gives no tokens\n");
        return 2;
    }
    std::vector<float> logits;
    if (!decode_all(opt, run, toks, census, logits)) {
        return 1;
    }

    char desc[128];
    llama_model_desc(run.model, desc, sizeof(desc));
    const bool cpu_only = opt.device == "none";
    std::printf("model %s (%s), device %s%s, %zu tokens x %lld vocab\n", opt.model.c_str(), desc,
                cpu_only ? "none (CPU only)" : opt.device.c_str(),
                opt.device.find(',') == std::string::npos ? "" : (" split by " + opt.split_mode).c_str(),
                toks.size(), (long long) n_vocab);
    census.print();
    size_t bad = 0;
    for (float v : logits) bad += !std::isfinite(v);
    if (bad != 0) {
        std::fprintf(stderr, "standin logits: %zu logits are NaN or infinite\n", bad);
        return 1;
    }
    if (!census.seen()) {
        std::fprintf(stderr, "standin logits: the scheduler printed no assignment (GGML_SCHED_DEBUG ignored?)\n");
        return 1;
    }
    std::vector<std::string> used = cpu_only ? std::vector<std::string>{} : split_list(opt.device);
    if (opt.split_mode == "none") {
        used.resize(std::min<size_t>(used.size(), 1));  // llama uses the first (main) device alone
    }
    for (const std::string & dev : used) {
        if (census.nodes_on(dev) == 0) {  // each device of a split must take part
            std::fprintf(stderr, "standin logits: %s computed no node of the graph\n", dev.c_str());
            return 1;
        }
    }
    if (!opt.out.empty()) {
        std::ofstream out(opt.out, std::ios::binary);
        out.write(reinterpret_cast<const char *>(logits.data()), std::streamsize(logits.size() * sizeof(float)));
        if (!out) {
            std::fprintf(stderr, "standin logits: cannot write %s\n", opt.out.c_str());
            return 2;
        }
        std::printf("wrote %s (%zu x %lld float32)\n", opt.out.c_str(), toks.size(), (long long) n_vocab);
    }
    return opt.compare.empty() ? 0 : compare(logits, opt, n_vocab);
}

} // namespace standin::tools
