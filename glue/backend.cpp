// The backend (a stream on a device): async copies, synchronize, events, and
// graph_compute, which walks the graph and runs each node through the op table
// (Note [op table]).
#include <chrono>

#include "diag/crash.h"
#include "diag/log.h"
#include "glue/glue.h"
#include "kernels/op_table.h"
#include "runtime/ownership.h"

namespace standin::glue {

namespace {

const char * backend_get_name(ggml_backend_t backend) { return backend_ctx(backend).dev->name.c_str(); }

void backend_free(ggml_backend_t backend) {
    BackendContext * ctx = &backend_ctx(backend);
    ctx->stream->synchronize();
    rt::Ownership::instance().remove(backend);
    delete ctx;
    delete backend;
}

// The async copies are only reached for tensors in this device's buffers
// (ggml checks the buffer type first), so plain-memory devices can memcpy.
void backend_set_tensor_async(ggml_backend_t backend, ggml_tensor * tensor, const void * data, size_t offset,
                              size_t size) {
    backend_ctx(backend).stream->copy_to_device(static_cast<char *>(tensor->data) + offset, data, size);
}

void backend_get_tensor_async(ggml_backend_t backend, const ggml_tensor * tensor, void * data, size_t offset,
                              size_t size) {
    backend_ctx(backend).stream->copy_to_host(data, static_cast<const char *>(tensor->data) + offset, size);
}

void backend_synchronize(ggml_backend_t backend) { backend_ctx(backend).stream->synchronize(); }

ggml_status backend_graph_compute(ggml_backend_t backend, ggml_cgraph * cgraph) {
    BackendContext & ctx = backend_ctx(backend);
    const rt::Kind kind = ctx.dev->rt->kind();
    const int n_nodes = ggml_graph_n_nodes(cgraph);
    if (ctx.dev->config->fault_at("compute")) {
        SI_LOG_ERROR("%s: fault injected (GGML_STANDIN_FAULT=compute)", ctx.dev->name.c_str());
        return GGML_STATUS_FAILED;
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * node = ggml_graph_node(cgraph, i);
        // Nodes without the COMPUTE flag are placeholders another engine (the
        // meta backend) computes; empty tensors and views have nothing to do.
        if ((node->flags & GGML_TENSOR_FLAG_COMPUTE) == 0 || ggml_is_empty(node) ||
            kernels::is_view_op(node->op)) {
            continue;
        }
        diag::crash_context_node("graph_compute", ctx.dev->name.c_str(), ggml_op_desc(node), i);
        if (!kernels::run_node(kind, *ctx.stream, node)) {
            diag::crash_context_clear();
            SI_LOG_ERROR("%s: node %d (%s, %s '%s') is not supported here", ctx.dev->name.c_str(), i,
                         ggml_op_desc(node), ggml_type_name(node->type), node->name);
            return GGML_STATUS_FAILED;
        }
    }
    diag::crash_context_clear();
    if (ctx.dev->config->debug) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        SI_LOG_DEBUG("%s: %d nodes enqueued in %.3f ms", ctx.dev->name.c_str(), n_nodes, ms);
    }
    return GGML_STATUS_SUCCESS;
}

void backend_event_record(ggml_backend_t backend, ggml_backend_event_t event) {
    backend_ctx(backend).stream->record(*event_ctx(event).event);
}

void backend_event_wait(ggml_backend_t backend, ggml_backend_event_t event) {
    backend_ctx(backend).stream->wait(*event_ctx(event).event);
}

const ggml_backend_i backend_iface = {
    /* .get_name            = */ backend_get_name,
    /* .free                = */ backend_free,
    /* .set_tensor_async    = */ backend_set_tensor_async,
    /* .get_tensor_async    = */ backend_get_tensor_async,
    /* .set_tensor_2d_async = */ nullptr,
    /* .get_tensor_2d_async = */ nullptr,
    /* .cpy_tensor_async    = */ nullptr,  // ggml falls back to a synchronous copy
    /* .synchronize         = */ backend_synchronize,
    /* .graph_plan_create   = */ nullptr,
    /* .graph_plan_free     = */ nullptr,
    /* .graph_plan_update   = */ nullptr,
    /* .graph_plan_compute  = */ nullptr,
    /* .graph_compute       = */ backend_graph_compute,
    /* .event_record        = */ backend_event_record,
    /* .event_wait          = */ backend_event_wait,
    /* .graph_optimize      = */ nullptr,
};

} // namespace

ggml_backend_t make_backend(DeviceContext & dev) {
    if (dev.config->fault_at("backend")) {
        SI_LOG_ERROR("%s: fault injected (GGML_STANDIN_FAULT=backend)", dev.name.c_str());
        return nullptr;
    }
    std::unique_ptr<rt::Stream> stream = dev.rt->create_stream();
    if (!stream) {
        SI_LOG_ERROR("%s: could not create a stream", dev.name.c_str());
        return nullptr;
    }
    auto * ctx = new BackendContext{&dev, std::move(stream)};
    auto * backend = new ggml_backend{backend_guid(), backend_iface, &dev.device, ctx};
    rt::Ownership::instance().add(backend, rt::ObjKind::backend);
    return backend;
}

} // namespace standin::glue
