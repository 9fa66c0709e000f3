// Buffer types: each device has two, its device memory ("<dev>") and staging
// host memory ("<dev>_Host", pinned on a GPU) that the CPU backend can use
// directly and from which uploads are fast.
#include "diag/log.h"
#include "glue/glue.h"
#include "runtime/ownership.h"

namespace standin::glue {

ggml_backend_buffer_t make_buffer(ggml_backend_buffer_type_t buft, DeviceContext & dev, void * base, size_t size,
                                  bool host);

namespace {

const char * buft_get_name(ggml_backend_buffer_type_t buft) { return buft_ctx(buft).name.c_str(); }

ggml_backend_buffer_t buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    BufferTypeContext & ctx = buft_ctx(buft);
    rt::Device & d = *ctx.dev->rt;
    const bool fault = ctx.dev->config->fault_at("alloc");  // GGML_STANDIN_FAULT
    void * base = fault ? nullptr : ctx.host ? d.alloc_host(size) : d.alloc(size);
    if (base == nullptr) {
        SI_LOG_ERROR("%s: failed to allocate %.2f MiB", ctx.name.c_str(), double(size) / (1024.0 * 1024.0));
        return nullptr;
    }
    return make_buffer(buft, *ctx.dev, base, size, ctx.host);
}

size_t buft_get_alignment(ggml_backend_buffer_type_t buft) { return buft_ctx(buft).dev->rt->alignment(); }

size_t buft_get_max_size(ggml_backend_buffer_type_t buft) { return buft_ctx(buft).dev->rt->max_alloc(); }

// A host device's own memory is host memory, but with GGML_STANDIN_HOST_DISCRETE
// it is announced as device memory (diag/config.h says why); the buffers'
// own copies still use memcpy (buffer.cpp asks the runtime, not this).
bool buft_is_host(ggml_backend_buffer_type_t buft) {
    BufferTypeContext & ctx = buft_ctx(buft);
    return ctx.host || (ctx.dev->rt->memory_is_host() && !ctx.dev->config->host_discrete);
}

const ggml_backend_buffer_type_i buft_iface = {
    /* .get_name       = */ buft_get_name,
    /* .alloc_buffer   = */ buft_alloc_buffer,
    /* .get_alignment  = */ buft_get_alignment,
    /* .get_max_size   = */ buft_get_max_size,
    /* .get_alloc_size = */ nullptr,  // ggml_nbytes: no padding needed by our kernels
    /* .is_host        = */ buft_is_host,
};

} // namespace

void init_buffer_types(DeviceContext & ctx) {
    auto * dev_buft  = new BufferTypeContext{&ctx, false, ctx.name};
    auto * host_buft = new BufferTypeContext{&ctx, true, ctx.name + "_Host"};
    ctx.buft      = ggml_backend_buffer_type{buft_iface, &ctx.device, dev_buft};
    ctx.host_buft = ggml_backend_buffer_type{buft_iface, &ctx.device, host_buft};
    rt::Ownership::instance().add(&ctx.buft, rt::ObjKind::buffer_type, rt::Owner::ours, nullptr, true);
    rt::Ownership::instance().add(&ctx.host_buft, rt::ObjKind::buffer_type, rt::Owner::ours, nullptr, true);
}

} // namespace standin::glue
