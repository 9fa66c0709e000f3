// The forwarding table: every slot of every ABI object, in one list per
// object. A slot is either forwarded generically (F: unwrap the arguments, swap
// tensor buffers, call the inner slot, wrap the result) or handled by a custom
// function (C) because it creates, frees or renames an object, or dispatches
// work locally. Adding a slot to the ABI is one line here; a slot missing from
// a list is a compile error (the static_asserts below compare each list's
// length with the size of ggml's vtable) and a unit test failure.
#pragma once

#include <tuple>
#include <type_traits>

#include "interpose/wrap.h"

// clang-format off
#define SI_REG_SLOTS(X) \
    X(reg, get_name, C) X(reg, get_device_count, C) X(reg, get_device, C) X(reg, get_proc_address, C)

#define SI_DEVICE_SLOTS(X) \
    X(dev, get_name, C) X(dev, get_description, C) X(dev, get_memory, F) X(dev, get_type, F) \
    X(dev, get_props, C) X(dev, init_backend, F) X(dev, get_buffer_type, F) X(dev, get_host_buffer_type, F) \
    X(dev, buffer_from_host_ptr, F) X(dev, supports_op, F) X(dev, supports_buft, F) X(dev, offload_op, F) \
    X(dev, event_new, F) X(dev, event_free, C) X(dev, event_synchronize, F)

#define SI_BUFT_SLOTS(X) \
    X(buft, get_name, C) X(buft, alloc_buffer, F) X(buft, get_alignment, F) X(buft, get_max_size, F) \
    X(buft, get_alloc_size, F) X(buft, is_host, F)

#define SI_BUFFER_SLOTS(X) \
    X(buffer, free_buffer, C) X(buffer, get_base, F) X(buffer, init_tensor, F) X(buffer, memset_tensor, F) \
    X(buffer, set_tensor, F) X(buffer, get_tensor, F) X(buffer, set_tensor_2d, F) X(buffer, get_tensor_2d, F) \
    X(buffer, cpy_tensor, F) X(buffer, clear, F) X(buffer, reset, F)

#define SI_BACKEND_SLOTS(X) \
    X(backend, get_name, C) X(backend, free, C) X(backend, set_tensor_async, F) X(backend, get_tensor_async, F) \
    X(backend, set_tensor_2d_async, F) X(backend, get_tensor_2d_async, F) X(backend, cpy_tensor_async, C) \
    X(backend, synchronize, F) X(backend, graph_plan_create, C) X(backend, graph_plan_free, C) \
    X(backend, graph_plan_update, C) X(backend, graph_plan_compute, C) X(backend, graph_compute, C) \
    X(backend, event_record, F) X(backend, event_wait, F) X(backend, graph_optimize, F)
// clang-format on

namespace standin::interpose {

// The vtable type each list describes.
using reg_iface_t     = ggml_backend_reg_i;
using dev_iface_t     = ggml_backend_device_i;
using buft_iface_t    = ggml_backend_buffer_type_i;
using buffer_iface_t  = ggml_backend_buffer_i;
using backend_iface_t = ggml_backend_i;

#define SI_COUNT_SLOT(obj, slot, kind) +1
constexpr size_t kRegSlots     = 0 SI_REG_SLOTS(SI_COUNT_SLOT);
constexpr size_t kDeviceSlots  = 0 SI_DEVICE_SLOTS(SI_COUNT_SLOT);
constexpr size_t kBuftSlots    = 0 SI_BUFT_SLOTS(SI_COUNT_SLOT);
constexpr size_t kBufferSlots  = 0 SI_BUFFER_SLOTS(SI_COUNT_SLOT);
constexpr size_t kBackendSlots = 0 SI_BACKEND_SLOTS(SI_COUNT_SLOT);
#undef SI_COUNT_SLOT

static_assert(sizeof(reg_iface_t) == kRegSlots * sizeof(void *), "ggml_backend_reg_i has a slot SI_REG_SLOTS lacks");
static_assert(sizeof(dev_iface_t) == kDeviceSlots * sizeof(void *), "ggml_backend_device_i has a slot SI_DEVICE_SLOTS lacks");
static_assert(sizeof(buft_iface_t) == kBuftSlots * sizeof(void *), "ggml_backend_buffer_type_i has a slot SI_BUFT_SLOTS lacks");
static_assert(sizeof(buffer_iface_t) == kBufferSlots * sizeof(void *), "ggml_backend_buffer_i has a slot SI_BUFFER_SLOTS lacks");
static_assert(sizeof(backend_iface_t) == kBackendSlots * sizeof(void *), "ggml_backend_i has a slot SI_BACKEND_SLOTS lacks");

// --- the generic forwarder -------------------------------------------------------

template <typename T> struct slot_traits;
template <typename C, typename R, typename... A> struct slot_traits<R (*C::*)(A...)> {
    using fn = R (*)(A...);
};

template <auto Slot, typename Fn = typename slot_traits<decltype(Slot)>::fn> struct Fwd;

template <auto Slot, typename R, typename Self, typename... A> struct Fwd<Slot, R (*)(Self, A...)> {
    static R call(Self self, A... a) {
        auto inner = unwrap(self);
        SwapScope scope;
        (scope.collect(a), ...);
        if constexpr (std::is_void_v<R>) {
            (inner->iface.*Slot)(inner, unwrap(a)...);
        } else {
            return wrap_result((inner->iface.*Slot)(inner, unwrap(a)...));
        }
    }
};

} // namespace standin::interpose
