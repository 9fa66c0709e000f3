// Buffers: one runtime allocation each, tensors placed in it by ggml-alloc.
// Data movement goes through the runtime's synchronous helpers, which order
// themselves after all work on the device (ggml's buffer calls are blocking).
// A host device's own weight buffers keep Q4_0/Q8_0 weights in the host
// kernels' layout (Note [packed weights], kernels/host/packed.h): a whole
// tensor written into one is packed on the way in, and every read or copy
// out of it gives the original bytes.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "diag/log.h"
#include "glue/glue.h"
#include "glue/meta_split.h"
#include "kernels/host/packed.h"
#include "runtime/ownership.h"

namespace standin::glue {

namespace {

char * tensor_at(const ggml_tensor * t, size_t offset) { return static_cast<char *>(t->data) + offset; }

void buffer_free(ggml_backend_buffer_t buffer) {
    meta_split::forget_buffer(buffer);
    BufferContext * ctx = &buffer_ctx(buffer);
    if (ctx->host) {
        ctx->dev->rt->free_host(ctx->base);
    } else {
        ctx->dev->rt->free(ctx->base);
        --ctx->dev->own_buffers;
    }
    if (!ctx->dev->config->fault_at("leak")) {  // GGML_STANDIN_FAULT=leak: the audit must see it
        rt::Ownership::instance().remove(buffer);
    }
    delete ctx;
}

void * buffer_get_base(ggml_backend_buffer_t buffer) { return buffer_ctx(buffer).base; }

// No per-tensor state of our own; the shapes of named weight and cache
// tensors are noted for tensor splits (Note [declining inside a tensor split]).
ggml_status buffer_init_tensor(ggml_backend_buffer_t buffer, ggml_tensor * tensor) {
    meta_split::note_tensor(buffer, tensor);
    return GGML_STATUS_SUCCESS;
}

// Host buffers and host-memory devices are plain memory; only device memory
// goes through the runtime's copies.
bool is_plain_memory(const BufferContext & ctx) { return ctx.host || ctx.dev->rt->memory_is_host(); }

namespace packed = kernels::host::packed;

// Whether a buffer holds weights the host kernels want packed: a host
// device's own buffer type (not the _Host staging type, which other backends
// read directly) marked for weights.
bool packing_buffer(ggml_backend_buffer_t buffer, const DeviceContext & dev) {
    return buffer->usage == GGML_BACKEND_BUFFER_USAGE_WEIGHTS && buffer->buft == &dev.buft &&
           dev.config->host_repack && dev.rt->kind() == rt::Kind::host;
}

// Whether a write of `size` bytes at `offset` into `tensor` is a whole weight
// the host kernels want packed.
bool packs(ggml_backend_buffer_t buffer, const ggml_tensor * tensor, size_t offset, size_t size) {
    return packing_buffer(buffer, *buffer_ctx(buffer).dev) && offset == 0 && size == ggml_nbytes(tensor) &&
           packed::can_pack(tensor);
}

// A partial write into a packed tensor (or a view of one) meets the original
// layout: the tensor is restored to it first and stays so.
void unpack_for_write(ggml_tensor * tensor) {
    if (packed::packed_of(tensor) != nullptr) {
        packed::unpack_in_place(tensor->view_src != nullptr ? tensor->view_src : tensor);
    }
}

// Bytes [offset, offset + size) of `tensor` as originally laid out.
void read_original(const ggml_tensor * tensor, void * data, size_t offset, size_t size) {
    const ggml_tensor * base = tensor->view_src != nullptr ? tensor->view_src : tensor;
    const size_t view_offs = size_t(static_cast<const char *>(tensor->data) - static_cast<const char *>(base->data));
    packed::read_plain(base, view_offs + offset, size, data);
}

void buffer_memset_tensor(ggml_backend_buffer_t buffer, ggml_tensor * tensor, uint8_t value, size_t offset,
                          size_t size) {
    BufferContext & ctx = buffer_ctx(buffer);
    // One byte value reads the same in either layout; only a part needs restoring.
    if (offset != 0 || size != ggml_nbytes(tensor)) {
        unpack_for_write(tensor);
    }
    if (is_plain_memory(ctx)) {
        memset(tensor_at(tensor, offset), value, size);
    } else {
        ctx.dev->rt->memset_sync(tensor_at(tensor, offset), value, size);
    }
}

void buffer_set_tensor(ggml_backend_buffer_t buffer, ggml_tensor * tensor, const void * data, size_t offset,
                       size_t size) {
    BufferContext & ctx = buffer_ctx(buffer);
    if (ctx.dev->config->fault_at("copy")) {
        return;  // GGML_STANDIN_FAULT=copy: the data never arrives
    }
    if (packs(buffer, tensor, offset, size)) {
        packed::pack(tensor, data, tensor->data);
        return;
    }
    if (packed::packed_of(tensor) != nullptr) {
        if (tensor->view_src == nullptr && offset == 0 && size == ggml_nbytes(tensor)) {
            tensor->extra = nullptr;  // wholly rewritten in the original layout
        } else {
            unpack_for_write(tensor);
        }
    }
    if (is_plain_memory(ctx)) {
        memcpy(tensor_at(tensor, offset), data, size);
    } else {
        ctx.dev->rt->copy_to_device_sync(tensor_at(tensor, offset), data, size);
    }
}

void buffer_get_tensor(ggml_backend_buffer_t buffer, const ggml_tensor * tensor, void * data, size_t offset,
                       size_t size) {
    BufferContext & ctx = buffer_ctx(buffer);
    if (packed::packed_of(tensor) != nullptr) {
        read_original(tensor, data, offset, size);
        return;
    }
    if (is_plain_memory(ctx)) {
        memcpy(data, tensor_at(tensor, offset), size);
    } else {
        ctx.dev->rt->copy_to_host_sync(data, tensor_at(tensor, offset), size);
    }
}

bool buffer_cpy_tensor(ggml_backend_buffer_t buffer, const ggml_tensor * src, ggml_tensor * dst) {
    BufferContext & ctx = buffer_ctx(buffer);
    const size_t n = ggml_nbytes(src);
    if (packed::packed_of(src) != nullptr) {  // only ours are packed: copy the original bytes
        std::vector<char> tmp(n);
        read_original(src, tmp.data(), 0, n);
        buffer_set_tensor(buffer, dst, tmp.data(), 0, n);
        return true;
    }
    if (ggml_backend_buffer_is_host(src->buffer)) {
        buffer_set_tensor(buffer, dst, src->data, 0, n);
        return true;
    }
    // Device to device only within one of our devices; anything else is
    // staged through the host by ggml.
    if (rt::Ownership::instance().is_ours(src->buffer, rt::ObjKind::buffer) &&
        buffer_ctx(src->buffer).dev == ctx.dev && !buffer_ctx(src->buffer).host) {
        unpack_for_write(dst);
        ctx.dev->rt->copy_on_device_sync(dst->data, src->data, n);
        return true;
    }
    return false;
}

void buffer_clear(ggml_backend_buffer_t buffer, uint8_t value) {
    BufferContext & ctx = buffer_ctx(buffer);
    if (is_plain_memory(ctx)) {
        memset(ctx.base, value, buffer->size);
    } else {
        ctx.dev->rt->memset_sync(ctx.base, value, buffer->size);
    }
}

const ggml_backend_buffer_i buffer_iface = {
    /* .free_buffer   = */ buffer_free,
    /* .get_base      = */ buffer_get_base,
    /* .init_tensor   = */ buffer_init_tensor,
    /* .memset_tensor = */ buffer_memset_tensor,
    /* .set_tensor    = */ buffer_set_tensor,
    /* .get_tensor    = */ buffer_get_tensor,
    /* .set_tensor_2d = */ nullptr,  // ggml loops over set_tensor
    /* .get_tensor_2d = */ nullptr,
    /* .cpy_tensor    = */ buffer_cpy_tensor,
    /* .clear         = */ buffer_clear,
    /* .reset         = */ nullptr,
};

} // namespace

void pack_graph_weights(DeviceContext & dev, ggml_cgraph * graph) {
    // Weights arrive in the original layout when llama.cpp reads them into a
    // host buffer's memory itself (no mmap), past set_tensor. A graph that
    // multiplies by one packs it once; the scan costs a few compares per node.
    std::vector<ggml_tensor *> todo;
    const int n = ggml_graph_n_nodes(graph);
    for (int i = 0; i < n; ++i) {
        const ggml_tensor * node = ggml_graph_node(graph, i);
        if (node->op != GGML_OP_MUL_MAT && node->op != GGML_OP_MUL_MAT_ID) {
            continue;
        }
        ggml_tensor * w = node->src[0]->view_src != nullptr ? node->src[0]->view_src : node->src[0];
        if (w->extra == nullptr && w->buffer != nullptr && packing_buffer(w->buffer, dev) && packed::can_pack(w) &&
            std::find(todo.begin(), todo.end(), w) == todo.end()) {
            todo.push_back(w);
        }
    }
    if (todo.empty()) {
        return;
    }
    // No graph of this device runs meanwhile (they hold the lock shared).
    std::unique_lock<std::shared_mutex> lock(dev.weights_mu);
    for (ggml_tensor * w : todo) {
        if (w->extra == nullptr) {
            packed::pack_in_place(w);
        }
    }
}

ggml_backend_buffer_t make_buffer(ggml_backend_buffer_type_t buft, DeviceContext & dev, void * base, size_t size,
                                  bool host) {
    auto * ctx = new BufferContext{&dev, base, host};
    ggml_backend_buffer_t buffer = ggml_backend_buffer_init(buft, buffer_iface, ctx, size);
    if (buffer == nullptr) {
        host ? dev.rt->free_host(base) : dev.rt->free(base);
        delete ctx;
        return nullptr;
    }
    rt::Ownership::instance().add(buffer, rt::ObjKind::buffer);
    if (!host) {
        ++dev.own_buffers;  // counted out in buffer_free
    }
    return buffer;
}

} // namespace standin::glue
