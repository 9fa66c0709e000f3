// The guarded device (Note [rpc guard] in guard.h).
#include "glue/rpc_guard.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ggml-backend-impl.h"
#include "ggml.h"

namespace standin::rpc {

namespace {

struct DeviceCtx {
    ggml_backend_dev_t inner = nullptr;
    GuardOptions       opt;
    ggml_backend_reg   reg{};  // the guarded device's own registry (set_n_threads reaches both backends)
};

struct BackendCtx {
    DeviceCtx *    dev = nullptr;
    ggml_backend_t inner = nullptr;
    ggml_backend_t fallback = nullptr;  // created with the backend when a fallback device is given
};

std::atomic<std::size_t> g_graphs{0}, g_fallback_nodes{0}, g_failures{0};

DeviceCtx &  dctx(ggml_backend_dev_t d) { return *static_cast<DeviceCtx *>(d->context); }
BackendCtx & bctx(ggml_backend_t b) { return *static_cast<BackendCtx *>(b->context); }

ggml_guid * guard_guid() {
    static ggml_guid guid = {0x73, 0x74, 0x61, 0x6e, 0x64, 0x69, 0x6e, 0x2d, 0x72, 0x70, 0x63, 0x2d, 0x67, 0x75, 0x61, 0x72};
    return &guid;
}

// --- where a node runs ----------------------------------------------------------

enum class Where { inner, fallback, nowhere };

// The CPU reads and writes tensor data in place: only host memory will do.
bool touches_host_memory_only(const ggml_tensor * node) {
    auto host = [](const ggml_tensor * t) {
        const ggml_tensor * base = t->view_src != nullptr ? t->view_src : t;
        return base->buffer != nullptr && ggml_backend_buffer_is_host(base->buffer);
    };
    if (!host(node)) {
        return false;
    }
    for (const ggml_tensor * s : node->src) {
        if (s != nullptr && !host(s)) {
            return false;
        }
    }
    return true;
}

Where place(const BackendCtx & b, const ggml_tensor * node) {
    if (ggml_backend_dev_supports_op(b.dev->inner, node)) {
        return Where::inner;
    }
    if (b.fallback != nullptr && touches_host_memory_only(node) &&
        ggml_backend_dev_supports_op(ggml_backend_get_device(b.fallback), node)) {
        return Where::fallback;
    }
    return Where::nowhere;
}

std::string describe(const ggml_tensor * node, int i) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "node %d (%s, %s '%s')", i, ggml_op_desc(node), ggml_type_name(node->type),
                  node->name);
    return buf;
}

// Refuses the graph: told to the owner, never to ggml-rpc's server (it would abort).
ggml_status refuse(BackendCtx & b, const std::string & why) {
    ++g_failures;
    if (b.dev->opt.on_failure) {
        b.dev->opt.on_failure(why);
    }
    return GGML_STATUS_SUCCESS;
}

// Nodes [i0, i1) of `g` as a graph of their own, computed on `backend`.
ggml_status compute_run(ggml_backend_t backend, ggml_cgraph * g, int i0, int i1) {
    const std::size_t n = static_cast<std::size_t>(i1 - i0);
    ggml_init_params  params{ggml_graph_overhead_custom(n, false), nullptr, true};
    std::unique_ptr<ggml_context, void (*)(ggml_context *)> ctx(ggml_init(params), ggml_free);
    if (ctx == nullptr) {
        return GGML_STATUS_ALLOC_FAILED;
    }
    ggml_cgraph * sub = ggml_new_graph_custom(ctx.get(), n, false);
    for (int i = i0; i < i1; ++i) {
        ggml_graph_add_node(sub, ggml_graph_node(g, i));
    }
    return ggml_backend_graph_compute(backend, sub);
}

ggml_status guarded_compute(ggml_backend_t backend, ggml_cgraph * g) {
    BackendCtx & b = bctx(backend);
    ++g_graphs;
    const int          n = ggml_graph_n_nodes(g);
    std::vector<Where> where(static_cast<std::size_t>(n));
    bool               split = false;
    for (int i = 0; i < n; ++i) {
        where[i] = place(b, ggml_graph_node(g, i));
        if (where[i] == Where::nowhere) {
            return refuse(b, describe(ggml_graph_node(g, i), i) + " runs neither on " +
                                 ggml_backend_dev_name(b.dev->inner) +
                                 (b.fallback != nullptr ? " nor on the CPU" : " (no fallback device)"));
        }
        split = split || where[i] != Where::inner;
    }
    if (!split) {  // the usual case: the served device takes the graph as it came
        ggml_status s = ggml_backend_graph_compute(b.inner, g);
        return s == GGML_STATUS_SUCCESS ? s : refuse(b, std::string(ggml_backend_dev_name(b.dev->inner)) +
                                                            " failed the graph (" + ggml_status_to_string(s) + ")");
    }
    for (int i0 = 0; i0 < n;) {
        int i1 = i0 + 1;
        while (i1 < n && where[i1] == where[i0]) ++i1;
        const bool     on_cpu = where[i0] == Where::fallback;
        ggml_backend_t run_on = on_cpu ? b.fallback : b.inner;
        ggml_backend_synchronize(on_cpu ? b.inner : b.fallback);  // what the other one wrote is read here
        ggml_status s = compute_run(run_on, g, i0, i1);
        if (s != GGML_STATUS_SUCCESS) {
            return refuse(b, describe(ggml_graph_node(g, i0), i0) + ": " + ggml_backend_name(run_on) +
                                 " failed nodes " + std::to_string(i0) + ".." + std::to_string(i1 - 1) + " (" +
                                 ggml_status_to_string(s) + ")");
        }
        if (on_cpu) g_fallback_nodes += static_cast<std::size_t>(i1 - i0);
        i0 = i1;
    }
    ggml_backend_synchronize(b.inner);
    return GGML_STATUS_SUCCESS;
}

// --- the backend ------------------------------------------------------------------

const char * backend_name(ggml_backend_t b) { return ggml_backend_name(bctx(b).inner); }

void backend_free(ggml_backend_t b) {
    BackendCtx * c = &bctx(b);
    ggml_backend_free(c->inner);
    if (c->fallback != nullptr) ggml_backend_free(c->fallback);
    delete c;
    delete b;
}

void backend_synchronize(ggml_backend_t b) { ggml_backend_synchronize(bctx(b).inner); }

ggml_backend_i backend_iface() {
    ggml_backend_i i{};
    i.get_name      = backend_name;
    i.free          = backend_free;
    i.synchronize   = backend_synchronize;
    i.graph_compute = guarded_compute;
    return i;  // the rest null: ggml then uses the buffers' synchronous paths
}

// --- the device and its registry ------------------------------------------------

const char * dev_name(ggml_backend_dev_t d) { return ggml_backend_dev_name(dctx(d).inner); }
const char * dev_description(ggml_backend_dev_t d) { return ggml_backend_dev_description(dctx(d).inner); }
void dev_memory(ggml_backend_dev_t d, size_t * free, size_t * total) { ggml_backend_dev_memory(dctx(d).inner, free, total); }
enum ggml_backend_dev_type dev_type(ggml_backend_dev_t d) { return ggml_backend_dev_type(dctx(d).inner); }
void dev_props(ggml_backend_dev_t d, ggml_backend_dev_props * p) {
    ggml_backend_dev_get_props(dctx(d).inner, p);
    p->caps.async  = false;  // the guarded backend has no async or event paths
    p->caps.events = false;
}
ggml_backend_buffer_type_t dev_buft(ggml_backend_dev_t d) { return ggml_backend_dev_buffer_type(dctx(d).inner); }
ggml_backend_buffer_type_t dev_host_buft(ggml_backend_dev_t d) { return ggml_backend_dev_host_buffer_type(dctx(d).inner); }
bool dev_supports_buft(ggml_backend_dev_t d, ggml_backend_buffer_type_t t) {
    return ggml_backend_dev_supports_buft(dctx(d).inner, t);
}
bool dev_supports_op(ggml_backend_dev_t d, const ggml_tensor * op) {
    const DeviceCtx & c = dctx(d);
    return ggml_backend_dev_supports_op(c.inner, op) ||
           (c.opt.fallback != nullptr && touches_host_memory_only(op) && ggml_backend_dev_supports_op(c.opt.fallback, op));
}

ggml_backend_t dev_init(ggml_backend_dev_t d, const char * params) {
    DeviceCtx & c     = dctx(d);
    auto *      ctx   = new BackendCtx;
    ctx->dev          = &c;
    ctx->inner        = ggml_backend_dev_init(c.inner, params);
    ctx->fallback     = c.opt.fallback != nullptr ? ggml_backend_dev_init(c.opt.fallback, nullptr) : nullptr;
    if (ctx->inner == nullptr) {
        if (ctx->fallback != nullptr) ggml_backend_free(ctx->fallback);
        delete ctx;
        return nullptr;
    }
    return new ggml_backend{guard_guid(), backend_iface(), d, ctx};
}

ggml_backend_device_i device_iface() {
    ggml_backend_device_i i{};
    i.get_name             = dev_name;
    i.get_description      = dev_description;
    i.get_memory           = dev_memory;
    i.get_type             = dev_type;
    i.get_props            = dev_props;
    i.init_backend         = dev_init;
    i.get_buffer_type      = dev_buft;
    i.get_host_buffer_type = dev_host_buft;
    i.supports_op          = dev_supports_op;
    i.supports_buft        = dev_supports_buft;
    return i;
}

// ggml-rpc's server sets its thread count through the device's registry;
// both backends of a guarded one get it.
void set_n_threads(ggml_backend_t backend, int n) {
    using set_fn = void (*)(ggml_backend_t, int);
    if (backend->guid != guard_guid()) {
        return;
    }
    BackendCtx & b = bctx(backend);
    for (ggml_backend_t t : {b.inner, b.fallback}) {
        if (t == nullptr) continue;
        ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(ggml_backend_get_device(t));
        auto fn = reg != nullptr ? reinterpret_cast<set_fn>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"))
                                 : nullptr;
        if (fn != nullptr) fn(t, n);
    }
}

const char * reg_name(ggml_backend_reg_t) { return "STANDIN_RPC_GUARD"; }
size_t       reg_count(ggml_backend_reg_t) { return 0; }  // never enumerated: the device is handed over directly
ggml_backend_dev_t reg_device(ggml_backend_reg_t, size_t) { return nullptr; }
void * reg_proc(ggml_backend_reg_t, const char * name) {
    return std::string(name) == "ggml_backend_set_n_threads" ? reinterpret_cast<void *>(&set_n_threads) : nullptr;
}

} // namespace

ggml_backend_dev_t make_guarded_device(ggml_backend_dev_t dev, GuardOptions opt) {
    auto * ctx = new DeviceCtx;  // lives as long as the process: the server never returns it
    ctx->inner = dev;
    ctx->opt   = std::move(opt);
    ctx->reg   = {GGML_BACKEND_API_VERSION, {reg_name, reg_count, reg_device, reg_proc}, nullptr};
    return new ggml_backend_device{device_iface(), &ctx->reg, ctx};
}

GuardStats guard_stats() { return {g_graphs.load(), g_fallback_nodes.load(), g_failures.load()}; }

} // namespace standin::rpc
