// `standin ab`: per-op A/B of a real model's graph. The model runs once through
// libllama on the reference (ggml-cpu, or with --reference real the library
// GGML_STANDIN_REAL names, for a GPU); the scheduler's eval callback stops at
// every node, where ab_node captures its inputs and its output. Each captured
// node is then run alone, with the same inputs and layouts, on the standin
// device and on the reference backend; the outputs are compared (max |diff|,
// NMSE against the reference) and both runs are timed (median of --reps).
//
// The reference's own replay is also compared with the output the model
// computed: a non-zero difference there means the replay did not reproduce the
// node (or the reference is not deterministic), which the report shows.
//
// Output: the worst nodes, per-op-type aggregates and the skipped nodes as
// Markdown tables on stdout; every node in --csv.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"
#include "runtime/host/thread_pool.h"
#include "tools/standin/ab_node.h"
#include "tools/standin/backends.h"
#include "tools/standin/commands.h"

namespace standin::tools {

namespace {

struct NodeResult {
    int         index = 0;
    std::string name, key, shape, status;  // status: ok | error: ...
    double      max_abs = 0, nmse = 0, replay_nmse = 0;
    double      ours_ms = 0, ref_ms = 0;
};

struct Skip {
    int         count = 0;
    std::string reason;
};

bool is_view(ggml_op op) {
    return op == GGML_OP_NONE || op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE ||
           op == GGML_OP_TRANSPOSE;
}

std::vector<std::string> split_list(const std::string & s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, ',');) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

// The state the eval callback works on. Captured nodes are queued and replayed
// in batches, one side at a time, the timed runs in rounds over the batch
// (replay_all). Measured on a shared 2-core machine: timing each node's runs
// back to back, right after capturing it, gave ggml-cpu medians of ~20-30 ms
// for 5 us ops on about a third of the nodes (one descheduled worker thread
// stalls every run of a multi-threaded op for a scheduler time slice); in
// rounds, a stall costs one sample of each node instead. The batch is flushed
// when it holds --batch-mib of captured data (while it is replayed, each side
// holds a copy of it too: about 3x that).
struct AbRun {
    const AbOptions *        opt = nullptr;
    ggml_backend_t           ours = nullptr, ref = nullptr;
    std::vector<std::string> only_ops;
    int                      next_index = 0, n_captured = 0, n_no_compute = 0;
    bool                     pending_set = false;
    ab::NodeSnap             pending;
    std::vector<ab::NodeSnap> queue;
    size_t                   queued_bytes = 0;
    std::vector<NodeResult>  results;
    std::map<std::string, Skip> skipped;  // by "op key: reason"

    void skip(const std::string & what, const std::string & reason) {
        Skip & s = skipped[what + "\t" + reason];
        s.count++, s.reason = reason;
    }

    bool ask(ggml_tensor * t) {
        const int index = next_index++;
        if ((t->flags & GGML_TENSOR_FLAG_COMPUTE) == 0 || ggml_is_empty(t) || is_view(t->op)) {
            n_no_compute++;
            return false;  // nothing runs for these: they may join the next node's range
        }
        // Note [ask order]: the scheduler asks about nodes until one is wanted,
        // then computes that whole range. So a node that is not captured must
        // still be wanted (computed alone), or the next captured node would be
        // asked about before its inputs exist. Only when no node will be
        // captured any more may the rest run as one range.
        if (opt->max_nodes > 0 && n_captured >= opt->max_nodes) {
            return false;
        }
        if (!only_ops.empty() && std::find(only_ops.begin(), only_ops.end(), ggml_op_desc(t)) == only_ops.end()) {
            return true;
        }
        if (const std::string why = ab::replay_blocker(t); !why.empty()) {
            skip(ggml_op_desc(t), why);
            return true;
        }
        pending     = ab::capture_inputs(t, index);
        pending_set = true;
        n_captured++;
        return true;
    }

    void done(ggml_tensor * t) {
        if (!pending_set || pending.name != t->name) {
            return;
        }
        pending_set = false;
        ab::capture_result(t, pending);
        queued_bytes += pending.result.size() + pending.out.bytes.size();
        for (const ab::TensorSnap & s : pending.src) queued_bytes += s.bytes.size();
        queue.push_back(std::move(pending));
        pending = ab::NodeSnap{};
        if (queued_bytes >= size_t(opt->batch_mib) << 20) {
            flush();
        }
    }

    // Every node of the batch rebuilt on `backend`, then opt->reps rounds of one timed run each.
    std::vector<std::unique_ptr<ab::Replay>> replay_all(ggml_backend_t backend) const {
        std::vector<std::unique_ptr<ab::Replay>> r;
        for (const ab::NodeSnap & snap : queue) r.push_back(std::make_unique<ab::Replay>(backend, snap));
        for (int round = 0; round < opt->reps; ++round) {
            for (auto & x : r) x->time_once();
        }
        return r;
    }

    void flush() {
        {
            const auto a = replay_all(ours);
            const auto b = replay_all(ref);
            for (size_t i = 0; i < queue.size(); ++i) combine(queue[i], *a[i], *b[i]);
        }
        if (opt->progress) {
            std::fprintf(stderr, "standin ab: %zu nodes compared\n", results.size());
        }
        queue.clear();
        queued_bytes = 0;
    }

    void combine(const ab::NodeSnap & snap, const ab::Replay & a, const ab::Replay & b) {
        const std::string key = ab::op_key(snap);
        if (!a.supported()) {
            skip(key, std::string("not supported by ") + ggml_backend_name(ours) + " (runs on the CPU in a model run)");
            return;
        }
        if (!b.supported()) {
            skip(key, std::string("not supported by the reference ") + ggml_backend_name(ref));
            return;
        }
        NodeResult r;
        r.index = snap.index, r.name = snap.name, r.key = key, r.shape = ab::shape_str(snap.out.ne);
        r.ours_ms = a.median_ms(), r.ref_ms = b.median_ms();
        if (!a.error().empty() || !b.error().empty()) {
            r.status = "error: " + (a.error().empty() ? "reference " + b.error() : a.error());
            r.nmse   = INFINITY;
        } else {
            const std::vector<float> va = ab::to_floats(snap.out, a.out()), vb = ab::to_floats(snap.out, b.out());
            const ab::Diff d = ab::compare(va, vb);
            r.max_abs = d.max_abs, r.nmse = d.nmse;
            r.replay_nmse = ab::compare(vb, ab::to_floats(snap.out, snap.result)).nmse;
            r.status = d.nonfinite_mismatch ? std::to_string(d.nonfinite_mismatch) + " non-finite mismatches"
                     : opt->max_nmse >= 0 && !(d.nmse <= opt->max_nmse) ? "FAIL"
                                                                        : "ok";
        }
        results.push_back(std::move(r));
    }
};

bool eval_callback(ggml_tensor * t, bool ask, void * user) {
    auto * run = static_cast<AbRun *>(user);
    if (ask) {
        return run->ask(t);
    }
    run->done(t);
    return true;
}

void quiet_log(ggml_log_level level, const char * text, void * user) {
    static ggml_log_level last = GGML_LOG_LEVEL_INFO;
    if (level != GGML_LOG_LEVEL_CONT) last = level;
    if (*static_cast<bool *>(user) || last == GGML_LOG_LEVEL_WARN || last == GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

void set_threads(ggml_backend_t backend, int n) {
    ggml_backend_dev_t dev = ggml_backend_get_device(backend);
    auto fn = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_set_n_threads"));
    if (fn != nullptr) fn(backend, n);
}

std::vector<llama_token> tokens_for(const llama_vocab * vocab, const std::string & prompt, int n) {
    std::vector<llama_token> toks(prompt.size() + 8);
    const int got = llama_tokenize(vocab, prompt.c_str(), int(prompt.size()), toks.data(), int(toks.size()), true, false);
    toks.resize(size_t(std::max(got, 0)));
    for (size_t i = 1; toks.size() < size_t(n) && toks.size() > 1; ++i) toks.push_back(toks[i]);  // repeat past BOS
    if (n > 0 && toks.size() > size_t(n)) toks.resize(size_t(n));
    return toks;
}

// Runs the model once on `ref_dev` (nullptr: ggml-cpu) with the callback on.
int run_model(const AbOptions & opt, ggml_backend_dev_t ref_dev, AbRun & run, std::string & desc) {
    ggml_backend_dev_t devices[2] = {ref_dev, nullptr};
    llama_model_params mp = llama_model_default_params();
    mp.devices         = devices;
    mp.n_gpu_layers    = ref_dev != nullptr ? 999 : 0;
    mp.use_extra_bufts = false;  // repacked CPU weights cannot be read back (no get_tensor)
    llama_model * model = llama_model_load_from_file(opt.model.c_str(), mp);
    if (model == nullptr) {
        std::fprintf(stderr, "standin ab: llama.cpp could not load %s\n", opt.model.c_str());
        return 2;
    }
    char buf[128];
    llama_model_desc(model, buf, sizeof(buf));
    desc = buf;
    const std::vector<llama_token> toks = tokens_for(llama_model_get_vocab(model), opt.prompt, opt.n_tokens);
    const int n = int(toks.size());
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = uint32_t(std::max(n, 256));
    cp.n_batch = cp.n_ubatch = uint32_t(std::max(n, 1));
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = opt.threads;
    cp.flash_attn_type = opt.flash_attn == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.cb_eval = eval_callback;
    cp.cb_eval_user_data = &run;
    llama_context * ctx = n > 0 ? llama_init_from_model(model, cp) : nullptr;
    int rc = 0;
    if (ctx == nullptr) {
        std::fprintf(stderr, "standin ab: no tokens or no llama context\n");
        rc = 2;
    } else {
        llama_batch batch = llama_batch_init(n, 0, 1);
        for (int i = 0; i < n; ++i) {
            batch.token[i] = toks[size_t(i)], batch.pos[i] = i, batch.n_seq_id[i] = 1, batch.seq_id[i][0] = 0;
            batch.logits[i] = i == n - 1;
        }
        batch.n_tokens = n;
        if (const int32_t d = llama_decode(ctx, batch); d != 0) {
            std::fprintf(stderr, "standin ab: llama_decode failed (%d)\n", d);
            rc = 1;
        }
        llama_batch_free(batch);
    }
    llama_free(ctx);
    llama_model_free(model);
    return rc;
}

std::string fmt_e(double v) {
    char b[32];
    std::snprintf(b, sizeof(b), "%.2e", v);
    return b;
}
std::string fmt_f(double v, const char * f = "%.3f") {
    char b[32];
    std::snprintf(b, sizeof(b), f, v);
    return b;
}
// Reference time over ours: above 1, standin is faster.
std::string speed(double ours, double ref) { return ours > 0 ? fmt_f(ref / ours, "%.2fx") : "-"; }

void print_report(const AbOptions & opt, const AbRun & run, const std::string & ours, const std::string & ref,
                  const std::string & desc, const std::string & ref_origin) {
    std::vector<const NodeResult *> rows;
    for (const NodeResult & r : run.results) rows.push_back(&r);
    std::stable_sort(rows.begin(), rows.end(), [](auto * a, auto * b) { return a->nmse > b->nmse; });

    std::printf("# standin ab: %s on %s vs %s\n\n", opt.model.c_str(), ours.c_str(), ref.c_str());
    std::printf("reference: %s (%s)\n\n", ref.c_str(), ref_origin.c_str());
    std::printf("model %s, %d tokens, flash attention %s, %d timed runs per node (median), %d threads\n\n", desc.c_str(),
                opt.n_tokens, opt.flash_attn.c_str(), opt.reps, opt.threads);
    // Times are only as good as the machine is quiet: say how busy it was.
    if (std::ifstream la("/proc/loadavg"); la) {
        std::string l1;
        la >> l1;
        std::printf("load average (1 min) at the end of the run: %s\n\n", l1.c_str());
    }
    const int top = std::min<int>(opt.top, int(rows.size()));
    std::printf("## Worst %d of %zu nodes by NMSE (against %s)\n\n", top, rows.size(), ref.c_str());
    std::printf("| # | node | op | shape | max abs | NMSE | %s ms | %s ms | speed | status |\n", ours.c_str(), ref.c_str());
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < top; ++i) {
        const NodeResult & r = *rows[size_t(i)];
        std::printf("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.index, r.name.c_str(), r.key.c_str(),
                    r.shape.c_str(), fmt_e(r.max_abs).c_str(), fmt_e(r.nmse).c_str(), fmt_f(r.ours_ms).c_str(),
                    fmt_f(r.ref_ms).c_str(), speed(r.ours_ms, r.ref_ms).c_str(), r.status.c_str());
    }
    struct Agg { int n = 0; double worst = 0, ours = 0, ref = 0; };
    std::map<std::string, Agg> by_key;
    Agg total;
    double worst_replay = 0;
    std::string worst_replay_node;
    for (const NodeResult & r : run.results) {
        for (Agg * a : {&by_key[r.key], &total}) {
            a->n++, a->worst = std::max(a->worst, r.nmse), a->ours += r.ours_ms, a->ref += r.ref_ms;
        }
        if (r.replay_nmse > worst_replay || worst_replay_node.empty()) worst_replay = r.replay_nmse, worst_replay_node = r.name;
    }
    std::vector<std::pair<std::string, Agg>> aggs(by_key.begin(), by_key.end());
    std::stable_sort(aggs.begin(), aggs.end(), [](auto & a, auto & b) { return a.second.worst > b.second.worst; });
    std::printf("\n## Per op type (worst NMSE first; speed = %s ms / %s ms)\n\n", ref.c_str(), ours.c_str());
    std::printf("| op type | count | worst NMSE | %s ms | %s ms | speed |\n|---|---|---|---|---|---|\n", ours.c_str(), ref.c_str());
    for (const auto & [key, a] : aggs) {
        std::printf("| %s | %d | %s | %s | %s | %s |\n", key.c_str(), a.n, fmt_e(a.worst).c_str(), fmt_f(a.ours).c_str(),
                    fmt_f(a.ref).c_str(), speed(a.ours, a.ref).c_str());
    }
    std::printf("| **all** | %d | %s | %s | %s | %s |\n", total.n, fmt_e(total.worst).c_str(), fmt_f(total.ours).c_str(),
                fmt_f(total.ref).c_str(), speed(total.ours, total.ref).c_str());
    std::printf("\n## Skipped\n\n%d nodes compute nothing (views, reshapes, permutes, empty tensors) and are not "
                "replayed.%s\n", run.n_no_compute, run.skipped.empty() ? " No computed node was skipped." : "");
    if (!run.skipped.empty()) {
        std::printf("\n| op type | nodes | why |\n|---|---|---|\n");
        for (const auto & [what, s] : run.skipped) {
            std::printf("| %s | %d | %s |\n", what.substr(0, what.find('\t')).c_str(), s.count, s.reason.c_str());
        }
    }
    std::printf("\nreplay check: %s's replay of each node against the output the model computed: worst NMSE %s (%s)\n",
                ref.c_str(), fmt_e(worst_replay).c_str(), worst_replay_node.c_str());
}

bool write_csv(const std::string & path, const AbRun & run) {
    std::ofstream out(path);
    out << "index,node,op_type,shape,max_abs,nmse,ours_ms,ref_ms,replay_nmse,status\n";
    for (const NodeResult & r : run.results) {
        out << r.index << ',' << r.name << ",\"" << r.key << "\"," << r.shape << ',' << r.max_abs << ',' << r.nmse
            << ',' << r.ours_ms << ',' << r.ref_ms << ',' << r.replay_nmse << ",\"" << r.status << "\"\n";
    }
    for (const auto & [what, s] : run.skipped) {
        out << ",,\"" << what.substr(0, what.find('\t')) << "\",,,,,,,\"skipped (" << s.count << " nodes): " << s.reason
            << "\"\n";
    }
    return bool(out);
}

// The exit code once the report is out: 1 when a node fails --max-nmse, a
// replay errs, an --expect-ops op was never compared, or nothing was.
int verdict(const AbOptions & opt, const AbRun & run) {
    int bad = 0;
    for (const NodeResult & r : run.results) {
        const bool fail = r.status.rfind("error", 0) == 0 || (opt.max_nmse >= 0 && !(r.nmse <= opt.max_nmse));
        if (fail && bad++ < 10) {
            std::printf("FAIL: node %d %s (%s): NMSE %s (max %s) %s\n", r.index, r.name.c_str(), r.key.c_str(),
                        fmt_e(r.nmse).c_str(), fmt_e(opt.max_nmse).c_str(), r.status.c_str());
        }
        // A replay that does not reproduce the model's own output compared the
        // two sides on the wrong inputs: the comparison proves nothing.
        if (opt.max_nmse >= 0 && !(r.replay_nmse <= opt.max_nmse) && bad++ < 10) {
            std::printf("FAIL: node %d %s (%s): the reference's replay differs from the model's output (NMSE %s)\n",
                        r.index, r.name.c_str(), r.key.c_str(), fmt_e(r.replay_nmse).c_str());
        }
    }
    std::vector<std::string> covered;
    for (const NodeResult & r : run.results) {
        const std::string op = r.key.substr(0, r.key.find(' '));
        if (std::find(covered.begin(), covered.end(), op) == covered.end()) covered.push_back(op);
    }
    std::sort(covered.begin(), covered.end());
    std::string list;
    for (const std::string & c : covered) list += (list.empty() ? "" : " ") + c;
    std::printf("compared ops: %s\n", list.c_str());
    for (const std::string & want : split_list(opt.expect_ops)) {
        if (std::find(covered.begin(), covered.end(), want) == covered.end()) {
            std::printf("FAIL: expected op %s was not compared\n", want.c_str());
            bad++;
        }
    }
    if (run.results.empty()) {
        std::printf("FAIL: no node was compared\n");
        bad++;
    }
    std::printf("standin ab: %zu nodes compared, %d failing%s\n", run.results.size(), bad,
                opt.max_nmse >= 0 ? (" (max NMSE " + fmt_e(opt.max_nmse) + ")").c_str() : "");
    return bad == 0 ? 0 : 1;
}

} // namespace

int cmd_ab(AbOptions opt) {
    static bool verbose = false;  // static: ggml may log after this returns
    verbose = opt.verbose;
    llama_log_set(quiet_log, &verbose);
    if (opt.threads <= 0) opt.threads = rt::host::available_cores();
    if (opt.reps < 1 || opt.n_tokens < 1) {
        std::fprintf(stderr, "standin ab: --reps and --n-tokens must be >= 1\n");
        return 2;
    }
    Loaded l = load_backends(opt.plugin, true);
    if (l.standin == nullptr) {
        std::fprintf(stderr, "standin ab: %s\n", l.error.c_str());
        return 2;
    }
    ggml_backend_dev_t dev = ggml_backend_dev_by_name(opt.device.c_str());
    if (dev == nullptr) {
        std::fprintf(stderr, "standin ab: no device named %s (try `standin devices`)\n", opt.device.c_str());
        return 2;
    }
    // The reference: ggml-cpu, or the first GPU (else first) device of the real library.
    ggml_backend_dev_t ref_dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU), model_dev = nullptr;
    std::string ref_origin = "ggml-cpu, as ggml's loader found it";
    if (opt.reference == "real") {
        const char * real = std::getenv("GGML_STANDIN_REAL");
        ggml_backend_reg_t reg = real != nullptr && *real != '\0' ? ggml_backend_load(real) : nullptr;
        if (reg == nullptr || ggml_backend_reg_dev_count(reg) == 0) {
            std::fprintf(stderr, "standin ab: --reference real needs GGML_STANDIN_REAL naming a loadable ggml backend\n");
            return 2;
        }
        ref_dev = ggml_backend_reg_dev_get(reg, 0);
        for (size_t i = 0; i < ggml_backend_reg_dev_count(reg); ++i) {
            if (ggml_backend_dev_type(ggml_backend_reg_dev_get(reg, i)) == GGML_BACKEND_DEVICE_TYPE_GPU) {
                ref_dev = ggml_backend_reg_dev_get(reg, i);
                break;
            }
        }
        model_dev = ggml_backend_dev_type(ref_dev) == GGML_BACKEND_DEVICE_TYPE_CPU ? nullptr : ref_dev;
        ref_origin = std::string("GGML_STANDIN_REAL=") + real;
    }
    if (ref_dev == nullptr) {
        std::fprintf(stderr, "standin ab: no reference device (ggml-cpu not found)\n");
        return 2;
    }
    llama_backend_init();
    AbRun run;
    run.opt = &opt;
    run.only_ops = split_list(opt.ops);
    run.ours = ggml_backend_dev_init(dev, nullptr);
    run.ref  = ggml_backend_dev_init(ref_dev, nullptr);
    if (run.ours == nullptr || run.ref == nullptr) {
        std::fprintf(stderr, "standin ab: could not start a backend on %s or %s\n", opt.device.c_str(),
                     ggml_backend_dev_name(ref_dev));
        ggml_backend_free(run.ours);  // both accept nullptr
        ggml_backend_free(run.ref);
        return 2;
    }
    set_threads(run.ours, opt.threads);
    set_threads(run.ref, opt.threads);
    std::string desc;
    int rc = run_model(opt, model_dev, run, desc);
    run.flush();
    const std::string ours_name = ggml_backend_name(run.ours), ref_name = ggml_backend_name(run.ref);
    if (rc == 0) {
        print_report(opt, run, ours_name, ref_name, desc, ref_origin);
        if (!opt.csv.empty() && !write_csv(opt.csv, run)) {
            std::fprintf(stderr, "standin ab: cannot write %s\n", opt.csv.c_str());
            rc = 2;
        }
        rc = rc != 0 ? rc : verdict(opt, run);
    }
    ggml_backend_free(run.ours);
    ggml_backend_free(run.ref);
    return rc;
}

} // namespace standin::tools
