// Outer objects: creation, lookup, the custom slots, and the vtables built from
// the lists in forward.h (Note [outer and inner]).
#include <chrono>
#include <cstring>
#include <unordered_map>

// ggml_cgraph::uid, for Note [swap plan]; the header's static helpers are unused here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "ggml-impl.h"
#pragma GCC diagnostic pop

#include "diag/check.h"
#include "diag/config.h"
#include "diag/log.h"
#include "interpose/audit.h"
#include "interpose/forward.h"
#include "interpose/procs.h"
#include "interpose/router.h"
#include "runtime/ownership.h"

namespace standin::interpose {

using rt::ObjKind;
using rt::Owner;
using rt::Ownership;

namespace {

OuterReg * g_reg = nullptr;  // set once by make_registry, under its call_once

// Note [interposed names]
// Names follow placement. In path mode standin's devices come beside those of
// the real library (ggml may load that library itself as well), so every name
// the caller sees is prefixed: registry STANDIN, devices, buffer types and
// backends STANDIN_<real name> (STANDIN_CPU, STANDIN_CPU_REPACK, STANDIN_CUDA0).
// In replace mode standin is what ggml's loader picked for that backend, in
// the real library's place, and nothing else answers to its names; programs
// find devices by those names (node-llama-cpp accepts a CPU-only binary only
// when a device is named exactly CPU; llama.cpp's -dev and -ot options take
// device and buffer-type names), so the caller sees the real library's own
// names, registry included, as it would without standin. Preload mode keeps
// the prefix, its one sign in a tool's device list that the linked
// application's registration call reached standin; a linked application that
// looks devices up by name would want the real names there too. In every mode
// the description reads "standin over <real description>", and the registry
// answers ggml_backend_standin_audit and the STANDIN feature, so a program
// can tell.
Names g_names = Names::prefixed;  // set by make_registry before it builds anything

std::string outer_name(const char * real) {
    return g_names == Names::real ? std::string(real) : std::string("STANDIN_") + real;
}

// inner -> outer, for objects that are shared rather than created per call.
std::unordered_map<const void *, ggml_backend_dev_t> &         dev_map() { static auto * m = new std::unordered_map<const void *, ggml_backend_dev_t>; return *m; }
std::unordered_map<const void *, ggml_backend_buffer_type_t> & buft_map() { static auto * m = new std::unordered_map<const void *, ggml_backend_buffer_type_t>; return *m; }
std::mutex & map_lock() { static auto * m = new std::mutex; return *m; }

template <typename Outer> Outer * ctx_of(const void * obj, ObjKind kind, void * context) {
    SI_ASSERT_MSG(obj != nullptr && Ownership::instance().is_ours(obj, kind), "not an interposed object");
    return static_cast<Outer *>(context);
}

// An outer object is always ours; the registry says which inner object it wraps.
const void * inner_of(const void * obj, ObjKind kind) {
    rt::ObjRecord r;
    if (obj != nullptr && Ownership::instance().find(obj, r) && r.kind == kind && r.inner != nullptr) {
        return r.inner;
    }
    return nullptr;
}

} // namespace

std::recursive_mutex & swap_lock() {
    static auto * m = new std::recursive_mutex;
    return *m;
}

ggml_backend_reg * current_registry() { return g_reg != nullptr ? &g_reg->reg : nullptr; }

OuterReg &     outer_reg(ggml_backend_reg_t r) { return *ctx_of<OuterReg>(r, ObjKind::reg, r->context); }
OuterDev &     outer_dev(ggml_backend_dev_t d) { return *ctx_of<OuterDev>(d, ObjKind::device, d->context); }
OuterBuft &    outer_buft(ggml_backend_buffer_type_t b) { return *ctx_of<OuterBuft>(b, ObjKind::buffer_type, b->context); }
OuterBuffer &  outer_buffer(ggml_backend_buffer_t b) { return *ctx_of<OuterBuffer>(b, ObjKind::buffer, b->context); }
OuterBackend & outer_backend(ggml_backend_t b) { return *ctx_of<OuterBackend>(b, ObjKind::backend, b->context); }
OuterEvent &   outer_event(ggml_backend_event_t e) { return *ctx_of<OuterEvent>(e, ObjKind::event, e->context); }

// --- unwrap ------------------------------------------------------------------------
#define SI_UNWRAP(type, kind)                                                \
    type unwrap(type x) {                                                    \
        const void * in = inner_of(x, kind);                                 \
        return in != nullptr ? static_cast<type>(const_cast<void *>(in)) : x; \
    }
SI_UNWRAP(ggml_backend_reg_t, ObjKind::reg)
SI_UNWRAP(ggml_backend_dev_t, ObjKind::device)
SI_UNWRAP(ggml_backend_buffer_type_t, ObjKind::buffer_type)
SI_UNWRAP(ggml_backend_buffer_t, ObjKind::buffer)
SI_UNWRAP(ggml_backend_t, ObjKind::backend)
SI_UNWRAP(ggml_backend_event_t, ObjKind::event)
#undef SI_UNWRAP

// --- swap scope ----------------------------------------------------------------------

SwapScope::SwapScope() : lock_(swap_lock()) {}

// Each distinct buffer is resolved once per scope, with its verdict cached:
// the inner buffer to show, or nullptr for "nothing to swap" (already inner, or
// not ours). A graph visits each tensor several times (as a node, as a source,
// as a view's base) over a handful of buffers, so the ownership table is asked
// once per buffer instead of once per visit.
ggml_backend_buffer * SwapScope::inner_buffer(ggml_backend_buffer * b) {
    for (const auto & [o, i] : resolved_) {
        if (o == b) return i;
    }
    auto * in = const_cast<ggml_backend_buffer *>(static_cast<const ggml_backend_buffer *>(
        inner_of(b, ObjKind::buffer)));
    resolved_.emplace_back(b, in);
    if (in != nullptr) {
        resolved_.emplace_back(in, nullptr);  // an already swapped tensor is not swapped again
    } else if (const void * inner_buft = inner_of(b->buft, ObjKind::buffer_type); inner_buft != nullptr) {
        // Not an outer buffer, but a buffer of one of our buffer types that
        // ggml created itself (no allocation behind it): its buft is shown as
        // the inner one for the call.
        saved_bufts_.emplace_back(b, b->buft);
        b->buft = static_cast<ggml_backend_buffer_type *>(const_cast<void *>(inner_buft));
    }
    return in;
}

void SwapScope::swap_one(ggml_tensor * t) {
    if (t == nullptr || t->buffer == nullptr) {
        return;
    }
    ggml_backend_buffer * in = inner_buffer(t->buffer);
    if (in == nullptr) {
        return;  // not an outer buffer, or already swapped in this scope
    }
    in->usage = t->buffer->usage;  // the caller sets usage on the outer buffer
    saved_.emplace_back(t, t->buffer);
    t->buffer = in;
}

void SwapScope::collect(const ggml_tensor * ct) {
    ggml_tensor * t = const_cast<ggml_tensor *>(ct);
    if (t == nullptr) {
        return;
    }
    swap_one(t);
    swap_one(t->view_src);
    for (ggml_tensor * s : t->src) {
        if (s != nullptr) {
            swap_one(s);
            swap_one(s->view_src);
        }
    }
}

void SwapScope::collect(ggml_cgraph * g) {
    if (g == nullptr) {
        return;
    }
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
        collect(ggml_graph_node(g, i));
    }
}

void SwapScope::collect(ggml_cgraph * g, SwapPlan & plan) {
    if (g == nullptr) {
        return;
    }
    const uint64_t uid = g->uid;
    if (uid != 0 && plan.graph == g && plan.uid == uid && saved_.empty() && replay(plan)) {
        ++plan.replays;
        audit::count_plan_replay();
        return;
    }
    collect(g);
    plan.graph = nullptr;
    // Only plain buffer swaps are kept: placeholder buffers whose buffer type
    // is swapped instead are rare and resolved each time.
    if (uid == 0 || !saved_bufts_.empty()) {
        return;
    }
    plan.swaps.clear();
    plan.buffers.clear();
    for (const auto & [t, outer] : saved_) plan.swaps.push_back({t, outer, t->buffer});
    for (const auto & [outer, inner] : resolved_) {
        if (inner != nullptr) plan.buffers.emplace_back(outer, inner);
    }
    plan.graph = g;
    plan.uid = uid;
}

bool SwapScope::replay(const SwapPlan & plan) {
    for (const auto & [outer, inner] : plan.buffers) {
        if (inner_of(outer, ObjKind::buffer) != inner) return false;
    }
    for (const SwapPlan::Swap & s : plan.swaps) {
        if (s.tensor->buffer != s.outer) return false;
    }
    saved_.reserve(plan.swaps.size());
    for (const SwapPlan::Swap & s : plan.swaps) {
        s.inner->usage = s.outer->usage;  // as swap_one: the caller sets usage on the outer buffer
        saved_.emplace_back(s.tensor, s.outer);
        s.tensor->buffer = s.inner;
    }
    for (const auto & [outer, inner] : plan.buffers) {
        resolved_.emplace_back(outer, inner);
        resolved_.emplace_back(inner, nullptr);
    }
    return true;
}

SwapScope::~SwapScope() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
        it->first->buffer = it->second;
    }
    for (auto it = saved_bufts_.rbegin(); it != saved_bufts_.rend(); ++it) {
        it->first->buft = it->second;
    }
    // Note [audit]: after the restore, no tensor the caller can see may point at
    // a real buffer. Checked once per buffer, with a sample tensor of each.
    for (const auto & [outer, inner] : resolved_) {
        if (inner == nullptr) continue;
        for (const auto & [t, saved] : saved_) {
            if (saved == outer) {
                audit::check_escape(t->buffer, "tensor->buffer after a forwarded call");
                break;
            }
        }
    }
}

// --- wrap ------------------------------------------------------------------------------

ggml_backend_dev_t wrap_result(ggml_backend_dev_t d) {
    if (d == nullptr) {
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(map_lock());
    auto it = dev_map().find(d);
    ggml_backend_dev_t out = it != dev_map().end() ? it->second : d;
    audit::check_escape(out, "device");
    return out;
}

ggml_backend_buffer_type_t make_outer_buft(ggml_backend_buffer_type_t inner, ggml_backend_dev_t owner_hint);

ggml_backend_buffer_type_t wrap_result(ggml_backend_buffer_type_t b) {
    if (b == nullptr) {
        return nullptr;
    }
    ggml_backend_buffer_type_t out;
    {
        std::lock_guard<std::mutex> lock(map_lock());
        auto it = buft_map().find(b);
        out = it != buft_map().end() ? it->second : nullptr;
    }
    if (out == nullptr) {
        out = make_outer_buft(b, nullptr);
    }
    audit::check_escape(out, "buffer type");
    return out;
}

ggml_backend_buffer_t make_outer_buffer(ggml_backend_buffer_t inner);
ggml_backend_t        make_outer_backend(ggml_backend_t inner);
ggml_backend_event_t  make_outer_event(ggml_backend_event_t inner);

ggml_backend_buffer_t wrap_result(ggml_backend_buffer_t b) { return b ? make_outer_buffer(b) : nullptr; }
ggml_backend_t        wrap_result(ggml_backend_t b) { return b ? make_outer_backend(b) : nullptr; }
ggml_backend_event_t  wrap_result(ggml_backend_event_t e) { return e ? make_outer_event(e) : nullptr; }

// --- custom slots ----------------------------------------------------------------------

namespace {

const char * custom_reg_get_name(ggml_backend_reg_t r) { return outer_reg(r).name.c_str(); }
size_t custom_reg_get_device_count(ggml_backend_reg_t r) { return outer_reg(r).devices.size(); }
ggml_backend_dev_t custom_reg_get_device(ggml_backend_reg_t r, size_t i) {
    OuterReg & o = outer_reg(r);
    if (i >= o.devices.size()) {
        SI_LOG_ERROR("device index %zu out of range (%zu devices)", i, o.devices.size());
        return nullptr;
    }
    return o.devices[i];
}
void * custom_reg_get_proc_address(ggml_backend_reg_t r, const char * name) { return proc_address(outer_reg(r), name); }

const char * custom_dev_get_name(ggml_backend_dev_t d) { return outer_dev(d).name.c_str(); }
const char * custom_dev_get_description(ggml_backend_dev_t d) { return outer_dev(d).description.c_str(); }
void custom_dev_get_props(ggml_backend_dev_t d, ggml_backend_dev_props * props) {
    OuterDev & o = outer_dev(d);
    o.inner->iface.get_props(o.inner, props);
    // Strings the real library owns are replaced by ours (Note [outer and inner]).
    o.device_id      = props->device_id != nullptr ? props->device_id : "";
    props->name        = o.name.c_str();
    props->description = o.description.c_str();
    props->device_id   = props->device_id != nullptr ? o.device_id.c_str() : nullptr;
}
void custom_dev_event_free(ggml_backend_dev_t d, ggml_backend_event_t e) {
    if (e == nullptr) {
        return;
    }
    OuterDev & o = outer_dev(d);
    OuterEvent * ev = &outer_event(e);
    o.inner->iface.event_free(o.inner, ev->inner);
    Ownership::instance().remove(e);
    delete ev;
    delete e;
}

const char * custom_buft_get_name(ggml_backend_buffer_type_t b) { return outer_buft(b).name.c_str(); }

void custom_buffer_free_buffer(ggml_backend_buffer_t b) {
    OuterBuffer * o = &outer_buffer(b);
    ggml_backend_buffer_free(o->inner);  // runs the real free_buffer, then releases the struct
    Ownership::instance().remove(b);
    delete o;  // ggml deletes the outer struct itself after this slot returns
}

const char * custom_backend_get_name(ggml_backend_t b) { return outer_backend(b).name.c_str(); }
void custom_backend_free(ggml_backend_t b) {
    OuterBackend * o = &outer_backend(b);
    release_local_stream(*o);
    o->inner->iface.free(o->inner);
    Ownership::instance().remove(b);
    delete o;
    delete b;  // ggml_backend_free only calls this slot
}
bool custom_backend_cpy_tensor_async(ggml_backend_t src_b, ggml_backend_t dst_b, const ggml_tensor * src,
                                     ggml_tensor * dst) {
    ggml_backend_t in_dst = unwrap(dst_b);
    SwapScope scope;
    scope.collect(src);
    scope.collect(dst);
    return in_dst->iface.cpy_tensor_async(unwrap(src_b), in_dst, src, dst);
}

// Graph plans are opaque real objects: wrapped, with the graph they were made
// from so its tensors can be swapped again when the plan runs.
struct OuterPlan {
    ggml_backend_graph_plan_t inner = nullptr;
    ggml_cgraph *             graph = nullptr;
};
ggml_backend_graph_plan_t custom_backend_graph_plan_create(ggml_backend_t b, const ggml_cgraph * g) {
    ggml_backend_t in = unwrap(b);
    SwapScope scope;
    scope.collect(g);
    ggml_backend_graph_plan_t p = in->iface.graph_plan_create(in, g);
    if (p == nullptr) {
        return nullptr;
    }
    auto * plan = new OuterPlan{p, const_cast<ggml_cgraph *>(g)};
    Ownership::instance().add(plan, ObjKind::opaque, Owner::ours, p);
    return plan;
}
void custom_backend_graph_plan_free(ggml_backend_t b, ggml_backend_graph_plan_t p) {
    auto * plan = static_cast<OuterPlan *>(p);
    SI_ASSERT(Ownership::instance().is_ours(plan, ObjKind::opaque));
    ggml_backend_t in = unwrap(b);
    in->iface.graph_plan_free(in, plan->inner);
    Ownership::instance().remove(plan);
    delete plan;
}
void custom_backend_graph_plan_update(ggml_backend_t b, ggml_backend_graph_plan_t p, const ggml_cgraph * g) {
    auto * plan = static_cast<OuterPlan *>(p);
    SI_ASSERT(Ownership::instance().is_ours(plan, ObjKind::opaque));
    ggml_backend_t in = unwrap(b);
    SwapScope scope;
    scope.collect(g);
    in->iface.graph_plan_update(in, plan->inner, g);
    plan->graph = const_cast<ggml_cgraph *>(g);
}
ggml_status custom_backend_graph_plan_compute(ggml_backend_t b, ggml_backend_graph_plan_t p) {
    auto * plan = static_cast<OuterPlan *>(p);
    SI_ASSERT(Ownership::instance().is_ours(plan, ObjKind::opaque));
    ggml_backend_t in = unwrap(b);
    SwapScope scope;
    scope.collect(plan->graph);
    return in->iface.graph_plan_compute(in, plan->inner);
}
// GGML_STANDIN_DEBUG: one line per computed graph, as standalone mode logs.
ggml_status custom_backend_graph_compute(ggml_backend_t b, ggml_cgraph * g) {
    static const bool debug = diag::config().debug;
    if (!debug) {
        return route_graph(outer_backend(b), g);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const ggml_status st = route_graph(outer_backend(b), g);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    SI_LOG_INFO("%s: %d nodes computed in %.3f ms (%s)", outer_backend(b).name.c_str(), ggml_graph_n_nodes(g), ms,
                 st == GGML_STATUS_SUCCESS ? "ok" : "failed");
    return st;
}

// --- vtables from the slot lists ------------------------------------------------------
// F: forwarded when the real library has the slot; C: custom when it has it;
// A: custom always (the slot creates, frees or names our own object).
#define SI_INSTALL_F(obj, slot) out.slot = in.slot ? &Fwd<&obj##_iface_t::slot>::call : nullptr;
#define SI_INSTALL_C(obj, slot) out.slot = in.slot ? &custom_##obj##_##slot : nullptr;
#define SI_INSTALL_A(obj, slot) out.slot = &custom_##obj##_##slot;
#define SI_INSTALL(obj, slot, kind) SI_INSTALL_##kind(obj, slot)

// Which custom slots must exist even when the real library lacks them.
#define SI_ALWAYS(obj, slot) SI_INSTALL_A(obj, slot)

reg_iface_t make_iface(const reg_iface_t &) {
    reg_iface_t out{};
    out.get_name = &custom_reg_get_name;
    out.get_device_count = &custom_reg_get_device_count;
    out.get_device = &custom_reg_get_device;
    out.get_proc_address = &custom_reg_get_proc_address;
    return out;
}

dev_iface_t make_iface(const dev_iface_t & in) {
    dev_iface_t out{};
    SI_DEVICE_SLOTS(SI_INSTALL)
    SI_ALWAYS(dev, get_name)
    SI_ALWAYS(dev, get_description)
    SI_ALWAYS(dev, get_props)
    return out;
}

buft_iface_t make_iface(const buft_iface_t & in) {
    buft_iface_t out{};
    SI_BUFT_SLOTS(SI_INSTALL)
    SI_ALWAYS(buft, get_name)
    return out;
}

buffer_iface_t make_iface(const buffer_iface_t & in) {
    buffer_iface_t out{};
    SI_BUFFER_SLOTS(SI_INSTALL)
    SI_ALWAYS(buffer, free_buffer)
    return out;
}

backend_iface_t make_iface(const backend_iface_t & in) {
    backend_iface_t out{};
    SI_BACKEND_SLOTS(SI_INSTALL)
    SI_ALWAYS(backend, get_name)
    SI_ALWAYS(backend, free)
    SI_ALWAYS(backend, graph_compute)
    return out;
}

#undef SI_INSTALL_F
#undef SI_INSTALL_C
#undef SI_INSTALL_A
#undef SI_INSTALL
#undef SI_ALWAYS

ggml_guid_t interposed_guid() {
    static ggml_guid guid = {0x5a, 0x1d, 0x7e, 0x42, 0x93, 0x0c, 0x4f, 0xb1,
                             0x8e, 0x27, 0xd4, 0x61, 0x3a, 0xc9, 0x05, 0x80};
    return &guid;
}

} // namespace

// --- creation -------------------------------------------------------------------------

ggml_backend_buffer_type_t make_outer_buft(ggml_backend_buffer_type_t inner, ggml_backend_dev_t owner_hint = nullptr) {
    std::lock_guard<std::mutex> lock(map_lock());
    auto it = buft_map().find(inner);
    if (it != buft_map().end()) {
        return it->second;
    }
    auto * ctx = new OuterBuft;
    ctx->inner = inner;
    ctx->name  = outer_name(inner->iface.get_name(inner));
    ggml_backend_dev_t dev = nullptr;
    if (inner->device != nullptr) {
        auto d = dev_map().find(inner->device);
        dev = d != dev_map().end() ? d->second : nullptr;
    } else {
        // Some real buffer types leave device unset (ggml's own CPU buffer
        // type); the device that hands it out is its owner.
        dev = owner_hint;
    }
    ctx->buft = ggml_backend_buffer_type{make_iface(inner->iface), dev, ctx};
    Ownership::instance().add(&ctx->buft, ObjKind::buffer_type, Owner::ours, inner, true);
    buft_map()[inner] = &ctx->buft;
    return &ctx->buft;
}

ggml_backend_buffer_t make_outer_buffer(ggml_backend_buffer_t inner) {
    ggml_backend_buffer_type_t buft = wrap_result(inner->buft);
    auto * ctx = new OuterBuffer{inner};
    ggml_backend_buffer_t out = ggml_backend_buffer_init(buft, make_iface(inner->iface), ctx, inner->size);
    out->usage = inner->usage;
    Ownership::instance().add(out, ObjKind::buffer, Owner::ours, inner);
    return out;
}

ggml_backend_t make_outer_backend(ggml_backend_t inner) {
    ggml_backend_dev_t dev = wrap_result(inner->device);
    auto * ctx = new OuterBackend;
    ctx->inner = inner;
    ctx->dev   = &outer_dev(dev);
    ctx->name  = outer_name(inner->iface.get_name(inner));
    auto * out = new ggml_backend{interposed_guid(), make_iface(inner->iface), dev, ctx};
    Ownership::instance().add(out, ObjKind::backend, Owner::ours, inner);
    return out;
}

ggml_backend_event_t make_outer_event(ggml_backend_event_t inner) {
    auto * out = new ggml_backend_event{wrap_result(inner->device), new OuterEvent{inner}};
    Ownership::instance().add(out, ObjKind::event, Owner::ours, inner);
    return out;
}

ggml_backend_reg * make_registry(RealLibrary lib, Names names) {
    g_names    = names;
    auto * o   = new OuterReg;
    o->inner   = lib.reg;
    o->lib     = lib;
    o->name    = names == Names::real ? std::string(lib.reg->iface.get_name(lib.reg)) : std::string("STANDIN");
    o->reg     = ggml_backend_reg{GGML_BACKEND_API_VERSION, make_iface(lib.reg->iface), o};
    Ownership::instance().add(&o->reg, ObjKind::reg, Owner::ours, lib.reg, true);
    const size_t n = lib.reg->iface.get_device_count(lib.reg);
    for (size_t i = 0; i < n; ++i) {
        ggml_backend_dev_t inner = lib.reg->iface.get_device(lib.reg, i);
        auto * d = new OuterDev;
        d->inner       = inner;
        d->name        = outer_name(inner->iface.get_name(inner));
        d->description = std::string("standin over ") + inner->iface.get_description(inner);
        d->dev         = ggml_backend_device{make_iface(inner->iface), &o->reg, d};
        d->local_kind  = local_kind_for(inner);
        Ownership::instance().add(&d->dev, ObjKind::device, Owner::ours, inner, true);
        {
            std::lock_guard<std::mutex> lock(map_lock());
            dev_map()[inner] = &d->dev;
        }
        o->devices.push_back(&d->dev);
        make_outer_buft(inner->iface.get_buffer_type(inner), &d->dev);
        if (inner->iface.get_host_buffer_type != nullptr) {
            if (ggml_backend_buffer_type_t hb = inner->iface.get_host_buffer_type(inner)) {
                make_outer_buft(hb, &d->dev);
            }
        }
    }
    g_reg = o;
    return &o->reg;
}

} // namespace standin::interpose
