// A "real library" whose device memory nobody else can address, as a GPU's:
// its buffers hand out addresses in a non-canonical range (any access from
// outside faults) and keep the bytes elsewhere. Only its own tensor copies
// reach them. It is asynchronous like a GPU: graph_compute and the *_async
// copies are queued with their addresses resolved at enqueue time, and run in
// order at synchronize. It computes F32 ADD, MUL, SCALE and DIAG_MASK_ZERO (same-shape,
// contiguous), enough for the staging tests (tests/interpose/test_staging.cpp).
// Built twice: with FAKE_SYNC_ONLY it has no *_async copies and no host buffer
// type, so staging takes its synchronous path.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "ggml-backend-impl.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Counts {
    int graphs = 0, async_gets = 0, async_sets = 0, sync_gets = 0, sync_sets = 0, synchronizes = 0, host_allocs = 0;
    int refused_nodes = 0;  // nodes the fake cannot compute (a test failure)
};
Counts g_counts;

std::vector<std::function<void()>> & queue() {
    static std::vector<std::function<void()>> q;
    return q;
}

// --- device memory: fake addresses, bytes elsewhere --------------------------------
struct DevBuffer {
    char *    bytes = nullptr;
    uintptr_t fake  = 0;
};
uintptr_t g_next_fake = uintptr_t(0x4000) << 48;  // non-canonical on x86-64

bool is_dev_buffer(ggml_backend_buffer_t b);
char * real_ptr(const ggml_tensor * t, size_t offset = 0) {
    const ggml_tensor * base = t->view_src != nullptr ? t->view_src : t;
    ggml_backend_buffer_t b = base->buffer;
    if (!is_dev_buffer(b)) return static_cast<char *>(t->data) + offset;  // host memory
    auto * d = static_cast<DevBuffer *>(b->context);
    return d->bytes + (reinterpret_cast<uintptr_t>(t->data) - d->fake) + offset;
}

void dev_free(ggml_backend_buffer_t b) {
    auto * d = static_cast<DevBuffer *>(b->context);
    std::free(d->bytes);
    delete d;
}
void * dev_base(ggml_backend_buffer_t b) { return reinterpret_cast<void *>(static_cast<DevBuffer *>(b->context)->fake); }
void dev_memset(ggml_backend_buffer_t, ggml_tensor * t, uint8_t v, size_t off, size_t n) { std::memset(real_ptr(t, off), v, n); }
void dev_set(ggml_backend_buffer_t, ggml_tensor * t, const void * data, size_t off, size_t n) {
    ++g_counts.sync_sets;
    std::memcpy(real_ptr(t, off), data, n);
}
void dev_get(ggml_backend_buffer_t, const ggml_tensor * t, void * data, size_t off, size_t n) {
    ++g_counts.sync_gets;
    std::memcpy(data, real_ptr(t, off), n);
}
void dev_clear(ggml_backend_buffer_t b, uint8_t v) { std::memset(static_cast<DevBuffer *>(b->context)->bytes, v, b->size); }
const ggml_backend_buffer_i dev_buffer_iface = {
    dev_free, dev_base, nullptr, dev_memset, dev_set, dev_get, nullptr, nullptr, nullptr, dev_clear, nullptr,
};
bool is_dev_buffer(ggml_backend_buffer_t b) { return b != nullptr && b->iface.get_base == dev_base; }

ggml_backend_buffer_t dev_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    auto * d = new DevBuffer;
    d->bytes = static_cast<char *>(std::calloc(1, size + 64));
    d->fake  = g_next_fake;
    g_next_fake += (uintptr_t(size) + 0xffff) & ~uintptr_t(0xffff);
    return ggml_backend_buffer_init(buft, dev_buffer_iface, d, size);
}
size_t dev_align(ggml_backend_buffer_type_t) { return 64; }
bool   dev_is_host(ggml_backend_buffer_type_t) { return false; }
const char * dev_buft_name(ggml_backend_buffer_type_t) { return "OPAQUE"; }
// A second device-memory type the device also takes, standing for a split or
// repacked buffer type: the same bytes, but not the device's default type.
const char * private_buft_name(ggml_backend_buffer_type_t) { return "OPAQUE_PRIVATE"; }
const ggml_backend_buffer_type_i dev_buft_iface = {dev_buft_name, dev_alloc, dev_align, nullptr, nullptr, dev_is_host};
const ggml_backend_buffer_type_i private_buft_iface = {private_buft_name, dev_alloc, dev_align, nullptr, nullptr, dev_is_host};

// --- host ("pinned") memory -------------------------------------------------------------
void   host_free(ggml_backend_buffer_t b) { std::free(b->context); }
void * host_base(ggml_backend_buffer_t b) { return b->context; }
void   host_set(ggml_backend_buffer_t, ggml_tensor * t, const void * d, size_t off, size_t n) { std::memcpy(static_cast<char *>(t->data) + off, d, n); }
void   host_get(ggml_backend_buffer_t, const ggml_tensor * t, void * d, size_t off, size_t n) { std::memcpy(d, static_cast<const char *>(t->data) + off, n); }
void   host_clear(ggml_backend_buffer_t b, uint8_t v) { std::memset(b->context, v, b->size); }
const ggml_backend_buffer_i host_buffer_iface = {
    host_free, host_base, nullptr, nullptr, host_set, host_get, nullptr, nullptr, nullptr, host_clear, nullptr,
};
ggml_backend_buffer_t host_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    ++g_counts.host_allocs;
    return ggml_backend_buffer_init(buft, host_buffer_iface, std::aligned_alloc(64, (size + 63) / 64 * 64 + 64), size);
}
bool host_is_host(ggml_backend_buffer_type_t) { return true; }
const char * host_buft_name(ggml_backend_buffer_type_t) { return "OPAQUE_Host"; }
const ggml_backend_buffer_type_i host_buft_iface = {host_buft_name, host_alloc, dev_align, nullptr, nullptr, host_is_host};

ggml_backend_device      g_dev;
ggml_backend_buffer_type g_dev_buft{dev_buft_iface, &g_dev, nullptr};
ggml_backend_buffer_type g_private_buft{private_buft_iface, &g_dev, nullptr};
ggml_backend_buffer_type g_host_buft{host_buft_iface, &g_dev, nullptr};

// --- compute, queued -----------------------------------------------------------------------
// One node with its addresses resolved now (the caller may show other buffers later).
std::function<void()> resolve(const ggml_tensor * node) {
    const ggml_tensor n = *node;
    const int64_t count = ggml_nelements(node);
    float * dst = reinterpret_cast<float *>(real_ptr(node));
    const float * a = n.src[0] ? reinterpret_cast<const float *>(real_ptr(n.src[0])) : nullptr;
    const float * b = n.src[1] ? reinterpret_cast<const float *>(real_ptr(n.src[1])) : nullptr;
    float p0 = 0.0f, p1 = 0.0f;
    std::memcpy(&p0, &n.op_params[0], sizeof(float));
    std::memcpy(&p1, &n.op_params[1], sizeof(float));
    switch (n.op) {
        case GGML_OP_ADD:   return [=] { for (int64_t i = 0; i < count; ++i) dst[i] = a[i] + b[i]; };
        case GGML_OP_MUL:   return [=] { for (int64_t i = 0; i < count; ++i) dst[i] = a[i] * b[i]; };
        case GGML_OP_SCALE: return [=] { for (int64_t i = 0; i < count; ++i) dst[i] = a[i] * p0 + p1; };
        case GGML_OP_DIAG_MASK_ZERO: {
            // Column c of row r (of each matrix) is zeroed past n_past + r.
            const int64_t ne0 = n.ne[0], ne1 = n.ne[1], n_past = n.op_params[0];
            return [=] {
                for (int64_t i = 0; i < count; ++i) dst[i] = i % ne0 > n_past + (i / ne0) % ne1 ? 0.0f : a[i];
            };
        }
        default:            ++g_counts.refused_nodes; return [] {};
    }
}
bool computes(const ggml_tensor * t) {
    if (t->op != GGML_OP_ADD && t->op != GGML_OP_MUL && t->op != GGML_OP_SCALE && t->op != GGML_OP_DIAG_MASK_ZERO) return false;
    if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t)) return false;
    for (const ggml_tensor * s : t->src) {
        if (s != nullptr && (s->type != GGML_TYPE_F32 || !ggml_is_contiguous(s) || ggml_nelements(s) != ggml_nelements(t))) return false;
    }
    return true;
}

ggml_status be_compute(ggml_backend_t, ggml_cgraph * g) {
    ++g_counts.graphs;
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
        ggml_tensor * node = ggml_graph_node(g, i);
        if (node->op == GGML_OP_NONE || node->op == GGML_OP_VIEW || node->op == GGML_OP_RESHAPE ||
            node->op == GGML_OP_PERMUTE || node->op == GGML_OP_TRANSPOSE) {
            continue;
        }
        queue().push_back(resolve(node));
    }
    return GGML_STATUS_SUCCESS;
}
void be_synchronize(ggml_backend_t) {
    ++g_counts.synchronizes;
    for (auto & task : queue()) task();
    queue().clear();
}
#ifndef FAKE_SYNC_ONLY
void be_set_async(ggml_backend_t, ggml_tensor * t, const void * data, size_t off, size_t n) {
    ++g_counts.async_sets;
    char * dst = real_ptr(t, off);
    queue().push_back([=] { std::memcpy(dst, data, n); });
}
void be_get_async(ggml_backend_t, const ggml_tensor * t, void * data, size_t off, size_t n) {
    ++g_counts.async_gets;
    const char * src = real_ptr(t, off);
    queue().push_back([=] { std::memcpy(data, src, n); });
}
#define FAKE_ASYNC(f) f
#else
#define FAKE_ASYNC(f) nullptr
#endif
const char * be_name(ggml_backend_t) { return "OPAQUE"; }
void         be_free(ggml_backend_t b) { delete b; }
ggml_guid * fake_guid() {
    static ggml_guid guid = {0x6f, 0x70, 0x61, 0x71, 0x75, 0x65, 0x2d, 0x66, 0x61, 0x6b, 0x65, 0x01, 0x02, 0x03, 0x04, 0x05};
    return &guid;
}
const ggml_backend_i be_iface = {
    be_name, be_free, FAKE_ASYNC(be_set_async), FAKE_ASYNC(be_get_async), nullptr, nullptr, nullptr, be_synchronize,
    nullptr, nullptr, nullptr, nullptr, be_compute, nullptr, nullptr, nullptr,
};

// --- device and registry -----------------------------------------------------------------
const char * dev_name(ggml_backend_dev_t) { return "OPAQUE0"; }
const char * dev_desc(ggml_backend_dev_t) { return "fake device with memory only it can address"; }
void dev_memory(ggml_backend_dev_t, size_t * free, size_t * total) { *free = *total = size_t(1) << 30; }
enum ggml_backend_dev_type dev_type(ggml_backend_dev_t) { return GGML_BACKEND_DEVICE_TYPE_GPU; }
void dev_props(ggml_backend_dev_t d, ggml_backend_dev_props * p) {
    std::memset(p, 0, sizeof(*p));
    p->name = dev_name(d);
    p->description = dev_desc(d);
    p->type = GGML_BACKEND_DEVICE_TYPE_GPU;
    dev_memory(d, &p->memory_free, &p->memory_total);
}
ggml_backend_t dev_init(ggml_backend_dev_t d, const char *) { return new ggml_backend{fake_guid(), be_iface, d, nullptr}; }
ggml_backend_buffer_type_t dev_get_buft(ggml_backend_dev_t) { return &g_dev_buft; }
#ifndef FAKE_SYNC_ONLY
ggml_backend_buffer_type_t dev_get_host_buft(ggml_backend_dev_t) { return &g_host_buft; }
#endif
bool dev_supports_op(ggml_backend_dev_t, const ggml_tensor * t) { return computes(t); }
bool dev_supports_buft(ggml_backend_dev_t, ggml_backend_buffer_type_t b) {
    return b == &g_dev_buft || b == &g_private_buft || b == &g_host_buft;
}
const ggml_backend_device_i dev_iface = {
    dev_name, dev_desc, dev_memory, dev_type, dev_props, dev_init, dev_get_buft, FAKE_ASYNC(dev_get_host_buft),
    nullptr, dev_supports_op, dev_supports_buft, nullptr, nullptr, nullptr, nullptr,
};

const char * reg_name(ggml_backend_reg_t) { return "OPAQUE"; }
size_t       reg_count(ggml_backend_reg_t) { return 1; }
ggml_backend_dev_t reg_dev(ggml_backend_reg_t, size_t i) { return i == 0 ? &g_dev : nullptr; }
void * reg_proc(ggml_backend_reg_t, const char *) { return nullptr; }
ggml_backend_reg g_reg = {GGML_BACKEND_API_VERSION, {reg_name, reg_count, reg_dev, reg_proc}, nullptr};

} // namespace

FAKE_EXPORT ggml_backend_reg_t ggml_backend_init(void) {
    g_dev = ggml_backend_device{dev_iface, &g_reg, nullptr};
    return &g_reg;
}

// For the tests.
FAKE_EXPORT void fake_opaque_counts(int * out) {
    const int v[] = {g_counts.graphs, g_counts.async_gets, g_counts.async_sets, g_counts.sync_gets,
                     g_counts.sync_sets, g_counts.synchronizes, g_counts.host_allocs, g_counts.refused_nodes};
    std::memcpy(out, v, sizeof(v));
}
FAKE_EXPORT ggml_backend_buffer_type_t fake_opaque_private_buft(void) { return &g_private_buft; }
