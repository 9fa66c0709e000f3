// Buffers: one runtime allocation each, tensors placed in it by ggml-alloc.
// Data movement goes through the runtime's synchronous helpers, which order
// themselves after all work on the device (ggml's buffer calls are blocking).
#include <cstring>

#include "diag/log.h"
#include "glue/glue.h"
#include "runtime/ownership.h"

namespace standin::glue {

namespace {

char * tensor_at(const ggml_tensor * t, size_t offset) { return static_cast<char *>(t->data) + offset; }

void buffer_free(ggml_backend_buffer_t buffer) {
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

// Host buffers and host-memory devices are plain memory; only device memory
// goes through the runtime's copies.
bool is_plain_memory(const BufferContext & ctx) { return ctx.host || ctx.dev->rt->memory_is_host(); }

void buffer_memset_tensor(ggml_backend_buffer_t buffer, ggml_tensor * tensor, uint8_t value, size_t offset,
                          size_t size) {
    BufferContext & ctx = buffer_ctx(buffer);
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
    if (is_plain_memory(ctx)) {
        memcpy(tensor_at(tensor, offset), data, size);
    } else {
        ctx.dev->rt->copy_to_device_sync(tensor_at(tensor, offset), data, size);
    }
}

void buffer_get_tensor(ggml_backend_buffer_t buffer, const ggml_tensor * tensor, void * data, size_t offset,
                       size_t size) {
    BufferContext & ctx = buffer_ctx(buffer);
    if (is_plain_memory(ctx)) {
        memcpy(data, tensor_at(tensor, offset), size);
    } else {
        ctx.dev->rt->copy_to_host_sync(data, tensor_at(tensor, offset), size);
    }
}

bool buffer_cpy_tensor(ggml_backend_buffer_t buffer, const ggml_tensor * src, ggml_tensor * dst) {
    BufferContext & ctx = buffer_ctx(buffer);
    const size_t n = ggml_nbytes(src);
    if (ggml_backend_buffer_is_host(src->buffer)) {
        buffer_set_tensor(buffer, dst, src->data, 0, n);
        return true;
    }
    // Device to device only within one of our devices; anything else is
    // staged through the host by ggml.
    if (rt::Ownership::instance().is_ours(src->buffer, rt::ObjKind::buffer) &&
        buffer_ctx(src->buffer).dev == ctx.dev && !buffer_ctx(src->buffer).host) {
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
    /* .init_tensor   = */ nullptr,  // no per-tensor state: views need nothing either
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
