#include "interpose/router.h"

#include <cstring>
#include <memory>
#include <sstream>

#include "diag/crash.h"
#include "diag/log.h"
#include "interpose/audit.h"
#include "interpose/staging.h"
#include "kernels/op_table.h"
#include "runtime/host/host_device.h"
#include "runtime/runtime.h"

namespace standin::interpose {

namespace {

// Reached through a function-local static, not a namespace-scope object: in
// preload mode the registry (and set_local_ops) can run before this module's
// static initialisers (Note [preload mode]).
LocalOps & local_state() {
    static auto * s = new LocalOps;
    return *s;
}

// Every name a node can be selected by: the op, and the sub-op of UNARY/GLU.
bool is_known_op_name(const std::string & n) {
    for (int op = 0; op < GGML_OP_COUNT; ++op) {
        if (n == ggml_op_name(ggml_op(op))) return true;
    }
    for (int u = 0; u < GGML_UNARY_OP_COUNT; ++u) {
        if (n == ggml_unary_op_name(ggml_unary_op(u))) return true;
    }
    for (int g = 0; g < GGML_GLU_OP_COUNT; ++g) {
        if (n == ggml_glu_op_name(ggml_glu_op(g))) return true;
    }
    return false;
}

// Whether standin's kernels of `kind` can run this node over the real
// library's memory, and if so whether through staging (Note [staging]): host
// kernels read host memory in place and the real device's default buffer
// type through copies; CUDA kernels read the real CUDA device's default
// buffer type in place. Split or repacked ("extra") buffer types keep a
// layout of the real library's own and are never read.
bool can_run_locally(const ggml_tensor * node, rt::Kind kind, ggml_backend_dev_t inner_dev, bool & staged,
                     audit::Refusal & why, const char *& detail) {
    const kernels::OpRow * row = kernels::find_row(node);
    if (row == nullptr || !row->local) {
        why = audit::Refusal::no_kernel, detail = "standin has no kernel for this op";
        return false;
    }
    if (!kernels::supports(kind, node)) {
        why = audit::Refusal::unsupported, detail = "standin's kernel does not take these types or shapes";
        return false;
    }
    staged = false;
    auto reachable = [&](const ggml_tensor * t) {
        if (t == nullptr) return true;
        if (kind == rt::Kind::host) {
            const Reach r = reach_of(t, inner_dev, &detail);
            staged = staged || r == Reach::staged;
            return r != Reach::none;
        }
        const ggml_tensor * base = t->view_src != nullptr ? t->view_src : t;
        if (base->buffer != nullptr && base->data != nullptr &&
            unwrap(base->buffer)->buft == inner_dev->iface.get_buffer_type(inner_dev)) {
            return true;
        }
        detail = "standin's CUDA kernels read only the real device's default buffer type";
        return false;
    };
    bool ok = reachable(node);
    for (const ggml_tensor * s : node->src) ok = ok && reachable(s);
    if (!ok) why = audit::Refusal::memory;
    return ok;
}

rt::Device * device_for(OuterDev & dev) {
    const rt::Kind kind = *dev.local_kind;
    if (kind == rt::Kind::host) {
        static rt::host::HostDevice host(0, 0);
        return &host;
    }
    // A CUDA device is matched to ours by PCI bus id.
    ggml_backend_dev_props props{};
    dev.inner->iface.get_props(dev.inner, &props);
    rt::EnumerateOptions opts;
    opts.host_devices = 0;
    for (rt::Device * d : rt::enumerate_devices(opts)) {
        if (d->kind() == kind && props.device_id != nullptr && d->pci_bus_id() == props.device_id) return d;
    }
    return nullptr;
}

rt::Stream * stream_for(OuterBackend & b) {
    if (b.local_stream == nullptr) {
        rt::Device * d = device_for(*b.dev);
        if (d == nullptr) return nullptr;
        b.local_stream = d->create_stream();
        if (b.n_threads > 0) b.local_stream->set_threads(b.n_threads);
    }
    return b.local_stream.get();
}

ggml_status forward_whole(OuterBackend & b, ggml_cgraph * g) {
    audit::count_forwarded(size_t(ggml_graph_n_nodes(g)), 1);
    SwapScope scope;
    scope.collect(g, b.swap_plan);
    diag::crash_context_node("forwarded graph_compute (real library)", b.name.c_str(), "(graph)", -1);
    ggml_status st = b.inner->iface.graph_compute(b.inner, g);
    diag::crash_context_clear();
    return st;
}

// Nodes [i0, i1) as a graph of their own (public API only: a fresh graph in a
// scratch context holding just the node pointers).
ggml_status forward_range(OuterBackend & b, ggml_cgraph * g, int i0, int i1) {
    if (i0 == 0 && i1 == ggml_graph_n_nodes(g)) {
        return forward_whole(b, g);
    }
    const size_t n = size_t(i1 - i0);
    ggml_init_params params = {ggml_graph_overhead_custom(n, false), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    if (ctx == nullptr) return GGML_STATUS_ALLOC_FAILED;
    ggml_cgraph * sub = ggml_new_graph_custom(ctx, n, false);
    for (int i = i0; i < i1; ++i) {
        ggml_graph_add_node(sub, ggml_graph_node(g, i));
    }
    ggml_status st = forward_whole(b, sub);
    ggml_free(ctx);
    return st;
}

// What the router does with each node.
enum class Place : uint8_t { forward, local, staged, noop };

// Nodes [i0, i1), all local (or no-ops), on standin's kernels: the real
// library's queued work finishes before ours reads its memory, and ours
// before its next graph reads our results; staged runs copy in and out once
// (Note [staging]).
ggml_status run_local(OuterBackend & b, ggml_cgraph * g, const std::vector<Place> & place, int i0, int i1,
                      rt::Kind kind, rt::Stream & stream) {
    bool staged = false;
    for (int i = i0; i < i1; ++i) staged = staged || place[size_t(i)] == Place::staged;
    StagingStats stats;
    std::unique_ptr<StagedRun> run;
    if (staged) {
        run = std::make_unique<StagedRun>(b, g, i0, i1);
        if (!run->stage_in(stats)) return GGML_STATUS_ALLOC_FAILED;
    } else if (b.inner->iface.synchronize != nullptr) {
        b.inner->iface.synchronize(b.inner);
    }
    for (int i = i0; i < i1; ++i) {
        ggml_tensor * node = ggml_graph_node(g, i);
        if (place[size_t(i)] == Place::noop) continue;
        diag::crash_context_node("interposed local dispatch", b.name.c_str(), ggml_op_desc(node), i);
        const kernels::Status st = kernels::run_node(kind, stream, staged ? run->node_to_run(i) : node);
        diag::crash_context_clear();
        if (st.code == kernels::Status::out_of_memory) {
            SI_LOG_ERROR("%s: local kernel ran out of memory for its scratch at node %d (%s)", b.name.c_str(), i,
                         ggml_op_desc(node));
            return GGML_STATUS_ALLOC_FAILED;
        }
        if (!st) {
            SI_LOG_ERROR("%s: local kernel refused node %d (%s)", b.name.c_str(), i, ggml_op_desc(node));
            return GGML_STATUS_FAILED;
        }
        audit::count_local(node, place[size_t(i)] == Place::staged);
    }
    stream.synchronize();
    if (staged) {
        run->stage_out(stats);
        audit::count_staging(stats.runs, stats.bytes_in, stats.bytes_out);
    }
    return GGML_STATUS_SUCCESS;
}

} // namespace

bool LocalOps::selects(const ggml_tensor * node) const {
    if (all) return true;
    if (names.empty()) return false;
    return names.count(ggml_op_name(node->op)) != 0 || names.count(ggml_op_desc(node)) != 0;
}

LocalOps parse_local_ops(const std::string & spec, std::string & warnings) {
    LocalOps ops;
    if (spec.empty() || spec == "none") return ops;
    if (spec == "all") {
        ops.all = true;
        return ops;
    }
    std::stringstream in(spec);
    std::string name;
    while (std::getline(in, name, ',')) {
        if (name.empty()) continue;
        if (is_known_op_name(name)) {
            ops.names.insert(name);
        } else {
            warnings += (warnings.empty() ? "" : "; ") + ("unknown op '" + name + "' ignored");
        }
    }
    return ops;
}

void set_local_ops(const LocalOps & ops) { local_state() = ops; }
const LocalOps & local_ops() { return local_state(); }

rt::Kind local_kind_for(ggml_backend_dev_t inner) {
    const enum ggml_backend_dev_type t = inner->iface.get_type(inner);
    const char * reg_name = inner->reg ? inner->reg->iface.get_name(inner->reg) : "";
    if (t == GGML_BACKEND_DEVICE_TYPE_GPU && std::strcmp(reg_name, "CUDA") == 0 && rt::cuda_compiled()) {
        return rt::Kind::cuda;
    }
    // Any other device: the host kernels, on its host memory in place and on
    // its device memory through staging (Note [staging]).
    return rt::Kind::host;
}

ggml_status route_graph(OuterBackend & b, ggml_cgraph * g) {
    const int n = ggml_graph_n_nodes(g);
    if (local_state().none() || !b.dev->local_kind) {
        return forward_whole(b, g);
    }
    const rt::Kind kind = *b.dev->local_kind;
    std::vector<Place> place(size_t(n), Place::forward);
    std::vector<std::pair<audit::Refusal, const char *>> refusals(size_t(n), {audit::Refusal::count, nullptr});
    bool any_local = false;
    for (int i = 0; i < n; ++i) {
        const ggml_tensor * node = ggml_graph_node(g, i);
        if (is_noop_node(node)) {
            place[size_t(i)] = Place::noop;
        } else if (local_state().selects(node)) {
            bool staged = false;
            audit::Refusal why{};
            const char * detail = "";
            if (can_run_locally(node, kind, b.dev->inner, staged, why, detail)) {
                place[size_t(i)] = staged ? Place::staged : Place::local;
                any_local = true;
            } else {
                refusals[size_t(i)] = {why, detail};
            }
        }
    }
    rt::Stream * stream = any_local ? stream_for(b) : nullptr;
    for (int i = 0; i < n; ++i) {
        const ggml_tensor * node = ggml_graph_node(g, i);
        if (refusals[size_t(i)].second != nullptr) {
            audit::count_refused(refusals[size_t(i)].first, b.name.c_str(), node, refusals[size_t(i)].second);
        } else if (any_local && stream == nullptr && (place[size_t(i)] == Place::local || place[size_t(i)] == Place::staged)) {
            audit::count_refused(audit::Refusal::no_device, b.name.c_str(), node, "no standin device matches the real one");
        }
    }
    if (!any_local || stream == nullptr) {
        return forward_whole(b, g);
    }
    // A no-op node goes with the run before it (the first ones with the first run).
    bool prev_local = false;
    for (int i = 0; i < n; ++i) {
        if (place[size_t(i)] != Place::noop) {
            prev_local = place[size_t(i)] != Place::forward;
            break;
        }
    }
    std::vector<bool> local(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        if (place[size_t(i)] != Place::noop) prev_local = place[size_t(i)] != Place::forward;
        local[size_t(i)] = prev_local;
    }
    ggml_status st = GGML_STATUS_SUCCESS;
    for (int i0 = 0; i0 < n && st == GGML_STATUS_SUCCESS;) {
        int i1 = i0;
        while (i1 < n && local[size_t(i1)] == local[size_t(i0)]) ++i1;
        st = local[size_t(i0)] ? run_local(b, g, place, i0, i1, kind, *stream) : forward_range(b, g, i0, i1);
        i0 = i1;
    }
    end_graph_staging(b);
    return st;
}

void set_local_threads(OuterBackend & b, int n) {
    b.n_threads = n;
    if (b.local_stream != nullptr && n > 0) b.local_stream->set_threads(n);
}

void release_local_stream(OuterBackend & b) {
    release_staging(b);
    b.local_stream.reset();
}

} // namespace standin::interpose
