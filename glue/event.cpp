// Events: a marker recorded on one backend's stream that another stream (or the
// host, via the device's event_synchronize) can wait for.
#include "diag/log.h"
#include "glue/glue.h"
#include "runtime/ownership.h"

namespace standin::glue {

ggml_backend_event_t make_event(DeviceContext & dev) {
    std::unique_ptr<rt::Event> ev = dev.rt->create_event();
    if (!ev) {
        SI_LOG_ERROR("%s: could not create an event", dev.name.c_str());
        return nullptr;
    }
    auto * event = new ggml_backend_event{&dev.device, new EventContext{std::move(ev)}};
    rt::Ownership::instance().add(event, rt::ObjKind::event);
    return event;
}

void free_event(ggml_backend_event_t event) {
    if (event == nullptr) {
        return;
    }
    delete &event_ctx(event);
    rt::Ownership::instance().remove(event);
    delete event;
}

} // namespace standin::glue
