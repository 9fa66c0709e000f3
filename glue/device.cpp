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

// What to answer for an op the table does not give this device (or that
// GGML_STANDIN_FAULT=decline:OP takes away): no, unless the no would abort
// ggml's tensor split (Note [declining inside a tensor split]).
bool supports_declined(DeviceContext & ctx, const ggml_tensor * op) {
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

// Note [host device placement]
// llama.cpp puts the host buffer type of the first offload device ahead of
// ggml-cpu's own buffer types (its repacking "extra" one included) when it
// places the weights of the layers left on the CPU and the token embeddings,
// and it asks that device's supports_op, with the weight in a placeholder
// buffer of that type, whether it can use them there. For a GPU that is the
// point: the prompt's large batches go to the GPU with a fast upload. A host
// device computes on the same cores as ggml-cpu, so it takes only what makes
// it the sole backend of a fully offloaded model:
//  - GET_ROWS of a table in its host buffer type (the token embeddings, which
//    llama keeps with the CPU layers): the lookup of each token runs here and
//    not in a one-op ggml-cpu graph whose workers would then spin on the cores
//    this device computes on. It runs here only while the device holds buffers
//    of its own (it computes layers of a model); otherwise ggml-cpu reads the
//    table from host memory as it would without standin.
//  - nothing else whose weight is in that buffer type, so the CPU layers'
//    weights go to ggml-cpu's own buffer types (repacked) and their ops stay
//    there.
// offload_op completes it: a host device never asks for host-resident weights.
// With nothing offloaded to standin's devices an application then runs as it
// does without them: the same weights layout, one graph split.
bool dev_supports_op(ggml_backend_dev_t dev, const ggml_tensor * op) {
    DeviceContext & ctx = device_ctx(dev);
    if (!kernels::supports(ctx.rt->kind(), op) || ctx.config->declines(ggml_op_desc(op))) {
        return supports_declined(ctx, op);
    }
    if (ctx.rt->kind() != rt::Kind::host) {
        return true;  // a GPU: placement is the scheduler's business (it copies into a buffer type we support)
    }
    for (const ggml_tensor * s : op->src) {
        const ggml_tensor * base = s != nullptr && s->view_src != nullptr ? s->view_src : s;
        const ggml_backend_buffer * b = base != nullptr ? base->buffer : nullptr;
        // A weight, or ggml's size-0 placeholder of a weight being placed.
        if (b == nullptr || b->buft != &ctx.host_buft ||
            (b->usage != GGML_BACKEND_BUFFER_USAGE_WEIGHTS && b->size != 0)) {
            continue;
        }
        return op->op == GGML_OP_GET_ROWS && (b->size == 0 || ctx.own_buffers.load() > 0);
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
    DeviceContext & ctx = device_ctx(dev);
    return offload_pays(ctx.rt->kind(), op, ctx.config->offload_min_batch);
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

// The scheduler asks this for an op whose weights are in host memory that the
// CPU backend computes from (layers left on the CPU). A GPU takes the op from
// GGML_OP_OFFLOAD_MIN_BATCH rows on, where the copy of the weights pays for
// itself. A host device computes on the same cores as the CPU backend the
// weights already sit in, with kernels no faster than ggml-cpu's repacked
// ones, so for it the copy never pays and it never asks (Note [host device
// placement]).
bool offload_pays(rt::Kind kind, const ggml_tensor * op, int min_batch) {
    return kind != rt::Kind::host && op_batch_size(op) >= min_batch;
}

void init_device(DeviceContext & ctx, ggml_backend_reg_t reg) {
    ctx.device = ggml_backend_device{device_iface, reg, &ctx};
    rt::Ownership::instance().add(&ctx.device, rt::ObjKind::device, rt::Owner::ours, nullptr, true);
    init_buffer_types(ctx);
}

} // namespace standin::glue
