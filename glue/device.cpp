// The device object: identity, memory, capabilities, and the honest
// supports_op / supports_buft / offload_op that the scheduler plans with.
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "diag/log.h"
#include "glue/glue.h"
#include "glue/meta_split.h"
#include "kernels/op_table.h"
#include "runtime/ownership.h"

namespace standin::glue {

namespace {

const char * dev_get_name(ggml_backend_dev_t dev) { return device_ctx(dev).name.c_str(); }

const char * dev_get_description(ggml_backend_dev_t dev) { return device_ctx(dev).description.c_str(); }

void dev_get_memory(ggml_backend_dev_t dev, size_t * free, size_t * total) {
    rt::MemoryInfo m = device_ctx(dev).rt->memory();
    *free  = m.free;
    *total = m.total;
}

// Every standin device is an offload target (llama.cpp's -ngl/-dev), including
// the host one: that is what lets the whole pipeline run without a GPU.
enum ggml_backend_dev_type dev_get_type(ggml_backend_dev_t) { return GGML_BACKEND_DEVICE_TYPE_GPU; }

void dev_get_props(ggml_backend_dev_t dev, ggml_backend_dev_props * props) {
    DeviceContext & ctx = device_ctx(dev);
    rt::MemoryInfo m = ctx.rt->memory();
    props->name         = ctx.name.c_str();
    props->description  = ctx.description.c_str();
    const bool broken = ctx.config->fault_at("props");  // GGML_STANDIN_FAULT
    props->memory_free  = broken ? 0 : m.free;
    props->memory_total = broken ? 0 : m.total;
    props->type         = GGML_BACKEND_DEVICE_TYPE_GPU;
    props->device_id    = ctx.pci_bus_id.empty() ? nullptr : ctx.pci_bus_id.c_str();
    // Host streams finish work when it is enqueued, so they are not async;
    // events work on every kind (trivially on the host).
    const bool host = ctx.rt->kind() == rt::Kind::host;
    props->caps.async                = !host;
    props->caps.host_buffer          = true;
    props->caps.buffer_from_host_ptr = false;
    props->caps.events               = true;
    // No mmap, so llama.cpp reads weights into buffers: then the input layer
    // (token embeddings) sits in our _Host buffer and its GET_ROWS runs here.
    // With mmap it stays in the file's pages, a CPU buffer, and ggml-cpu runs
    // that one op per token, whose worker threads then spin on the cores our
    // pool computes on (1B Q4_0 tg32 on 2 pinned cores: 20 t/s with the pinned
    // ggml-cpu beside it, 11 with npm's). Weights read straight into a host
    // buffer are packed at their first graph (pack_graph_weights, buffer.cpp).
    props->caps.mmap_support         = false;
}

ggml_backend_t dev_init_backend(ggml_backend_dev_t dev, const char * params) {
    (void) params;
    return make_backend(device_ctx(dev));
}

ggml_backend_buffer_type_t dev_get_buffer_type(ggml_backend_dev_t dev) { return &device_ctx(dev).buft; }

ggml_backend_buffer_type_t dev_get_host_buffer_type(ggml_backend_dev_t dev) { return &device_ctx(dev).host_buft; }

// Placement is the scheduler's business (it copies sources into a buffer type
// this device supports_buft), so this answers for the op alone (but see Note
// [declining inside a tensor split]).
bool dev_supports_op(ggml_backend_dev_t dev, const ggml_tensor * op) {
    DeviceContext & ctx = device_ctx(dev);
    if (kernels::supports(ctx.rt->kind(), op) && !ctx.config->declines(ggml_op_desc(op))) {
        return true;
    }
    if (!meta_split::decline_would_abort(op)) {
        return false;
    }
    if (meta_split::is_placement_probe(op)) {
        return true;  // the weight stays on the meta device; its graph node is judged when it is planned
    }
    static std::mutex mu;
    static std::set<std::pair<const DeviceContext *, std::string>> logged;
    std::lock_guard<std::mutex> lock(mu);
    if (logged.insert({&ctx, ggml_op_desc(op)}).second) {
        SI_LOG_ERROR("%s: cannot run %s (%s '%s'), and declining it would abort ggml's tensor split (its data is "
                     "split across the devices); accepted, so computing the graph fails instead",
                     ctx.name.c_str(), ggml_op_desc(op), ggml_type_name(op->type), op->name);
    }
    return true;
}

bool dev_supports_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft) {
    DeviceContext & ctx = device_ctx(dev);
    if (buft == &ctx.buft) {
        return true;
    }
    // Our own host buffer type is readable by the host device's kernels; a GPU
    // computes only from its own device memory.
    return buft == &ctx.host_buft && ctx.rt->memory_is_host();
}

// The batch an op works on, by which the scheduler decides whether moving its
// weights to this device pays off (GGML_OP_OFFLOAD_MIN_BATCH).
int64_t op_batch_size(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_GET_ROWS: return 0;  // gathers rows: never worth moving the table
        case GGML_OP_MUL_MAT:  return op->ne[1];
        case GGML_OP_MUL_MAT_ID:
        case GGML_OP_ROPE:     return op->ne[2];
        default:               return ggml_nrows(op);
    }
}

bool dev_offload_op(ggml_backend_dev_t dev, const ggml_tensor * op) {
    return op_batch_size(op) >= device_ctx(dev).config->offload_min_batch;
}

ggml_backend_event_t dev_event_new(ggml_backend_dev_t dev) { return make_event(device_ctx(dev)); }

void dev_event_free(ggml_backend_dev_t, ggml_backend_event_t event) { free_event(event); }

void dev_event_synchronize(ggml_backend_dev_t, ggml_backend_event_t event) { event_ctx(event).event->synchronize(); }

const ggml_backend_device_i device_iface = {
    /* .get_name             = */ dev_get_name,
    /* .get_description      = */ dev_get_description,
    /* .get_memory           = */ dev_get_memory,
    /* .get_type             = */ dev_get_type,
    /* .get_props            = */ dev_get_props,
    /* .init_backend         = */ dev_init_backend,
    /* .get_buffer_type      = */ dev_get_buffer_type,
    /* .get_host_buffer_type = */ dev_get_host_buffer_type,
    /* .buffer_from_host_ptr = */ nullptr,
    /* .supports_op          = */ dev_supports_op,
    /* .supports_buft        = */ dev_supports_buft,
    /* .offload_op           = */ dev_offload_op,
    /* .event_new            = */ dev_event_new,
    /* .event_free           = */ dev_event_free,
    /* .event_synchronize    = */ dev_event_synchronize,
};

} // namespace

void init_device(DeviceContext & ctx, ggml_backend_reg_t reg) {
    ctx.device = ggml_backend_device{device_iface, reg, &ctx};
    rt::Ownership::instance().add(&ctx.device, rt::ObjKind::device, rt::Owner::ours, nullptr, true);
    init_buffer_types(ctx);
}

} // namespace standin::glue
