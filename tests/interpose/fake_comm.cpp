// A "real library" with two host-memory devices and the tensor-parallel
// communicator procs (ggml_backend_comm_init/free/allreduce_tensor), which,
// like ggml-cuda's, refuse objects that are not their own: comm_init checks
// every backend's guid, allreduce checks every tensor's buffer type by its
// get_name function. The interposition unit tests wrap it and check that
// standin's trampolines hand it inner objects. Nothing is computed
// (graph_compute does nothing); only the communicator does real work.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ggml-backend-impl.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr size_t kDevices = 2;
int g_live_comms = 0;

ggml_guid * fake_guid() {
    static ggml_guid guid = {0x66, 0x61, 0x6b, 0x65, 0x2d, 0x63, 0x6f, 0x6d, 0x6d, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07};
    return &guid;
}

// --- buffers: plain host memory --------------------------------------------------
void   buf_free(ggml_backend_buffer_t b) { std::free(b->context); }
void * buf_base(ggml_backend_buffer_t b) { return b->context; }
void   buf_memset(ggml_backend_buffer_t, ggml_tensor * t, uint8_t v, size_t off, size_t n) {
    std::memset(static_cast<char *>(t->data) + off, v, n);
}
void buf_set(ggml_backend_buffer_t, ggml_tensor * t, const void * d, size_t off, size_t n) {
    std::memcpy(static_cast<char *>(t->data) + off, d, n);
}
void buf_get(ggml_backend_buffer_t, const ggml_tensor * t, void * d, size_t off, size_t n) {
    std::memcpy(d, static_cast<const char *>(t->data) + off, n);
}
void buf_clear(ggml_backend_buffer_t b, uint8_t v) { std::memset(b->context, v, b->size); }
const ggml_backend_buffer_i buf_iface = {
    buf_free, buf_base, nullptr, buf_memset, buf_set, buf_get, nullptr, nullptr, nullptr, buf_clear, nullptr,
};

const char * buft_name(ggml_backend_buffer_type_t) { return "FAKE"; }
ggml_backend_buffer_t buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    void * p = std::aligned_alloc(64, (size + 63) / 64 * 64 + 64);
    return ggml_backend_buffer_init(buft, buf_iface, p, size);
}
size_t buft_align(ggml_backend_buffer_type_t) { return 64; }
bool   buft_is_host(ggml_backend_buffer_type_t) { return true; }
const ggml_backend_buffer_type_i buft_iface = {buft_name, buft_alloc, buft_align, nullptr, nullptr, buft_is_host};

// --- backends: compute nothing ------------------------------------------------------
const char * be_name(ggml_backend_t) { return "FAKE"; }
void         be_free(ggml_backend_t b) { delete b; }
ggml_status  be_compute(ggml_backend_t, ggml_cgraph *) { return GGML_STATUS_SUCCESS; }
const ggml_backend_i be_iface = {
    be_name, be_free, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    nullptr, nullptr, nullptr, nullptr, be_compute, nullptr, nullptr, nullptr,
};

// --- devices ---------------------------------------------------------------------------
struct FakeDevice {
    ggml_backend_device      dev{};
    ggml_backend_buffer_type buft{};
    const char *             name = nullptr;
};
FakeDevice g_devices[kDevices];

FakeDevice & fake(ggml_backend_dev_t d) { return *static_cast<FakeDevice *>(d->context); }
const char * dev_name(ggml_backend_dev_t d) { return fake(d).name; }
const char * dev_desc(ggml_backend_dev_t) { return "fake device with a communicator"; }
void dev_memory(ggml_backend_dev_t, size_t * free, size_t * total) { *free = *total = size_t(1) << 30; }
enum ggml_backend_dev_type dev_type(ggml_backend_dev_t) { return GGML_BACKEND_DEVICE_TYPE_GPU; }
void dev_props(ggml_backend_dev_t d, ggml_backend_dev_props * p) {
    std::memset(p, 0, sizeof(*p));
    p->name        = fake(d).name;
    p->description = dev_desc(d);
    p->type        = GGML_BACKEND_DEVICE_TYPE_GPU;
    dev_memory(d, &p->memory_free, &p->memory_total);
}
ggml_backend_t dev_init(ggml_backend_dev_t d, const char *) { return new ggml_backend{fake_guid(), be_iface, d, nullptr}; }
ggml_backend_buffer_type_t dev_buft(ggml_backend_dev_t d) { return &fake(d).buft; }
bool dev_supports_op(ggml_backend_dev_t, const ggml_tensor *) { return false; }
bool dev_supports_buft(ggml_backend_dev_t d, ggml_backend_buffer_type_t b) { return b == &fake(d).buft; }
const ggml_backend_device_i dev_iface = {
    dev_name, dev_desc, dev_memory, dev_type, dev_props, dev_init, dev_buft, nullptr,
    nullptr, dev_supports_op, dev_supports_buft, nullptr, nullptr, nullptr, nullptr,
};

// --- the communicator: sums F32 tensors in place, refusing foreign objects -----------
struct Comm {
    size_t n = 0;
};
void * comm_init(ggml_backend_t * backends, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (backends[i] == nullptr || !ggml_guid_matches(backends[i]->guid, fake_guid())) {
            return nullptr;  // not one of ours
        }
    }
    ++g_live_comms;
    return new Comm{n};
}
void comm_free(void * c) {
    if (c != nullptr) {
        --g_live_comms;
        delete static_cast<Comm *>(c);
    }
}
bool comm_allreduce(void * c, ggml_tensor ** t) {
    const size_t n = static_cast<Comm *>(c)->n;
    for (size_t i = 0; i < n; ++i) {
        if (t[i]->type != GGML_TYPE_F32 || t[i]->buffer == nullptr || t[i]->buffer->buft->iface.get_name != buft_name ||
            ggml_nelements(t[i]) != ggml_nelements(t[0])) {
            return false;  // a buffer that is not ours: the caller must use its fallback
        }
    }
    std::vector<float> sum(size_t(ggml_nelements(t[0])), 0.0f);
    for (size_t i = 0; i < n; ++i) {
        for (size_t k = 0; k < sum.size(); ++k) sum[k] += static_cast<const float *>(t[i]->data)[k];
    }
    for (size_t i = 0; i < n; ++i) std::memcpy(t[i]->data, sum.data(), sum.size() * sizeof(float));
    return true;
}

// --- the registry -------------------------------------------------------------------------
const char * reg_name(ggml_backend_reg_t) { return "FAKE"; }
size_t       reg_count(ggml_backend_reg_t) { return kDevices; }
ggml_backend_dev_t reg_dev(ggml_backend_reg_t, size_t i) { return i < kDevices ? &g_devices[i].dev : nullptr; }
void * reg_proc(ggml_backend_reg_t, const char * name) {
    if (std::strcmp(name, "ggml_backend_comm_init") == 0) return reinterpret_cast<void *>(&comm_init);
    if (std::strcmp(name, "ggml_backend_comm_free") == 0) return reinterpret_cast<void *>(&comm_free);
    if (std::strcmp(name, "ggml_backend_comm_allreduce_tensor") == 0) return reinterpret_cast<void *>(&comm_allreduce);
    return nullptr;
}
ggml_backend_reg g_reg = {GGML_BACKEND_API_VERSION, {reg_name, reg_count, reg_dev, reg_proc}, nullptr};

} // namespace

FAKE_EXPORT ggml_backend_reg_t ggml_backend_init(void) {
    static const char * names[kDevices] = {"FAKE0", "FAKE1"};
    for (size_t i = 0; i < kDevices; ++i) {
        FakeDevice & d = g_devices[i];
        d.name = names[i];
        d.dev  = ggml_backend_device{dev_iface, &g_reg, &d};
        d.buft = ggml_backend_buffer_type{buft_iface, &d.dev, nullptr};
    }
    return &g_reg;
}

// For the test: communicators created and not yet freed.
FAKE_EXPORT int fake_comm_live(void) { return g_live_comms; }
