#include "interpose/router.h"

#include <cstring>
#include <memory>
#include <sstream>

#include "diag/crash.h"
#include "diag/log.h"
#include "interpose/audit.h"
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

// Whether our kernels can read this tensor where it lives: host memory for the
// host kind, the real device's own default buffer type for a GPU (never split
// or repacked "extra" buffer types, whose layout is the real library's own).
bool plain_memory(const ggml_tensor * t, rt::Kind kind, ggml_backend_dev_t inner_dev) {
    if (t == nullptr) return true;
    const ggml_tensor * base = t->view_src != nullptr ? t->view_src : t;
    if (base->buffer == nullptr || base->data == nullptr) return false;
    ggml_backend_buffer_type_t buft = unwrap(base->buffer)->buft;
    if (kind == rt::Kind::host) {
        return buft->iface.is_host != nullptr && buft->iface.is_host(buft);
    }
    return buft == inner_dev->iface.get_buffer_type(inner_dev);
}

bool run_locally(const ggml_tensor * node, rt::Kind kind, ggml_backend_dev_t inner_dev) {
    if ((node->flags & GGML_TENSOR_FLAG_COMPUTE) == 0 || !local_state().selects(node)) return false;
    const kernels::OpRow * row = kernels::find_row(node);
    if (row == nullptr || !row->local || !kernels::supports(kind, node)) return false;
    if (!plain_memory(node, kind, inner_dev)) return false;
    for (const ggml_tensor * s : node->src) {
        if (!plain_memory(s, kind, inner_dev)) return false;
    }
    return true;
}

rt::Device * device_for(OuterDev & dev) {
    const rt::Kind kind = rt::Kind(dev.local_kind);
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
        b.local_stream = d->create_stream().release();
        if (b.n_threads > 0) static_cast<rt::Stream *>(b.local_stream)->set_threads(b.n_threads);
    }
    return static_cast<rt::Stream *>(b.local_stream);
}

ggml_status forward_whole(OuterBackend & b, ggml_cgraph * g) {
    audit::count_dispatch(0, 1);
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

int local_kind_for(ggml_backend_dev_t inner) {
    const enum ggml_backend_dev_type t = inner->iface.get_type(inner);
    if (t == GGML_BACKEND_DEVICE_TYPE_CPU) return int(rt::Kind::host);
    const char * reg_name = inner->reg ? inner->reg->iface.get_name(inner->reg) : "";
    if (t == GGML_BACKEND_DEVICE_TYPE_GPU && std::strcmp(reg_name, "CUDA") == 0 && rt::cuda_compiled()) {
        return int(rt::Kind::cuda);
    }
    return -1;
}

ggml_status route_graph(OuterBackend & b, ggml_cgraph * g) {
    const int n = ggml_graph_n_nodes(g);
    if (local_state().none() || b.dev->local_kind < 0) {
        return forward_whole(b, g);
    }
    const rt::Kind kind = rt::Kind(b.dev->local_kind);
    rt::Stream * stream = nullptr;
    int run_start = 0;
    for (int i = 0; i <= n; ++i) {
        const bool local = i < n && run_locally(ggml_graph_node(g, i), kind, b.dev->inner);
        if (!local && i < n) continue;
        // Nodes [run_start, i) go to the real library as one view.
        if (i > run_start) {
            ggml_status st = forward_range(b, g, run_start, i);
            if (st != GGML_STATUS_SUCCESS) return st;
        }
        run_start = i + 1;
        if (i == n) break;
        if (stream == nullptr && (stream = stream_for(b)) == nullptr) {
            SI_LOG_ERROR("%s: no standin device for local dispatch", b.name.c_str());
            return GGML_STATUS_FAILED;
        }
        // The real library's queued work must finish before ours reads it, and
        // ours before its next view reads our results.
        if (b.inner->iface.synchronize) b.inner->iface.synchronize(b.inner);
        ggml_tensor * node = ggml_graph_node(g, i);
        diag::crash_context_node("interposed local dispatch", b.name.c_str(), ggml_op_desc(node), i);
        const bool ok = kernels::run_node(kind, *stream, node);
        diag::crash_context_clear();
        if (!ok) {
            SI_LOG_ERROR("%s: local kernel refused node %d (%s)", b.name.c_str(), i, ggml_op_desc(node));
            return GGML_STATUS_FAILED;
        }
        stream->synchronize();
        audit::count_dispatch(1, 0);
    }
    return GGML_STATUS_SUCCESS;
}

void set_local_threads(OuterBackend & b, int n) {
    b.n_threads = n;
    if (b.local_stream != nullptr && n > 0) static_cast<rt::Stream *>(b.local_stream)->set_threads(n);
}

void release_local_stream(OuterBackend & b) {
    delete static_cast<rt::Stream *>(b.local_stream);
    b.local_stream = nullptr;
}

} // namespace standin::interpose
