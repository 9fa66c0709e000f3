#include "diag/check.h"
#include "glue/glue.h"
#include "runtime/ownership.h"

namespace standin::glue {

namespace {

void require(const void * obj, rt::ObjKind kind, const char * what) {
    SI_ASSERT_MSG(obj != nullptr && rt::Ownership::instance().is_ours(obj, kind), what);
}

} // namespace

DeviceContext & device_ctx(ggml_backend_dev_t dev) {
    require(dev, rt::ObjKind::device, "not a standin device");
    return *static_cast<DeviceContext *>(dev->context);
}

BufferTypeContext & buft_ctx(ggml_backend_buffer_type_t buft) {
    require(buft, rt::ObjKind::buffer_type, "not a standin buffer type");
    return *static_cast<BufferTypeContext *>(buft->context);
}

BufferContext & buffer_ctx(ggml_backend_buffer_t buffer) {
    require(buffer, rt::ObjKind::buffer, "not a standin buffer");
    return *static_cast<BufferContext *>(buffer->context);
}

BackendContext & backend_ctx(ggml_backend_t backend) {
    require(backend, rt::ObjKind::backend, "not a standin backend");
    return *static_cast<BackendContext *>(backend->context);
}

EventContext & event_ctx(ggml_backend_event_t event) {
    require(event, rt::ObjKind::event, "not a standin event");
    return *static_cast<EventContext *>(event->context);
}

bool is_standin_buft(ggml_backend_buffer_type_t buft) {
    return buft != nullptr && rt::Ownership::instance().is_ours(buft, rt::ObjKind::buffer_type);
}

ggml_guid_t backend_guid() {
    // Random bytes fixed once: identifies a backend as standin's in ggml_backend_is_*-style checks.
    static ggml_guid guid = {0x5a, 0x1d, 0x7e, 0x42, 0x93, 0x0c, 0x4f, 0xb1,
                             0x8e, 0x27, 0xd4, 0x61, 0x3a, 0xc9, 0x05, 0x7f};
    return &guid;
}

} // namespace standin::glue
