#include "interpose/procs.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "diag/check.h"
#include "diag/log.h"
#include "interpose/audit.h"
#include "interpose/router.h"
#include "runtime/ownership.h"

// Types of the well-known procs (ggml-backend.h, ggml-cpu.h, ggml-cuda.h); the
// CPU and CUDA headers are not ours to include, so their signatures are restated.
struct ggml_threadpool;
struct ggml_threadpool_params;

namespace standin::interpose {

namespace {

using set_n_threads_t   = void (*)(ggml_backend_t, int);
using set_abort_t       = void (*)(ggml_backend_t, ggml_abort_callback, void *);
using extra_bufts_t     = ggml_backend_buffer_type_t * (*)(ggml_backend_dev_t);
using features_t        = ggml_backend_feature * (*)(ggml_backend_reg_t);
using numa_init_t       = void (*)(int);
using is_numa_t         = bool (*)();
using set_use_ref_t     = void (*)(ggml_backend_t, bool);
using tp_new_t          = ggml_threadpool * (*)(ggml_threadpool_params *);
using tp_free_t         = void (*)(ggml_threadpool *);
using set_tp_t          = void (*)(ggml_backend_t, ggml_threadpool *);
using split_buft_t      = ggml_backend_buffer_type_t (*)(int, const float *);
using reg_host_t        = bool (*)(void *, size_t);
using unreg_host_t      = void (*)(void *);
using comm_init_t       = void * (*)(ggml_backend_t *, size_t);
using comm_free_t       = void (*)(void *);
using comm_allreduce_t  = bool (*)(void *, ggml_tensor **);

// The registry these procs belong to: the one outer registry (objects.cpp
// keeps it; proc_address checks that it is the one asked).
OuterReg & the_reg() { return outer_reg(current_registry()); }

template <typename F> F real(const char * name) {
    OuterReg & r = the_reg();
    return reinterpret_cast<F>(r.inner->iface.get_proc_address(r.inner, name));
}

// Opaque real handles (thread pools, communicators) get a standin handle.
struct OuterHandle {
    void * inner = nullptr;
    size_t n     = 0;  // communicator: number of backends
};
void * wrap_handle(void * inner, size_t n = 0) {
    if (inner == nullptr) return nullptr;
    auto * h = new OuterHandle{inner, n};
    rt::Ownership::instance().add(h, rt::ObjKind::opaque, rt::Owner::ours, inner);
    return h;
}
OuterHandle * handle(void * h) {
    return h != nullptr && rt::Ownership::instance().is_ours(h, rt::ObjKind::opaque) ? static_cast<OuterHandle *>(h)
                                                                                    : nullptr;
}
void free_handle(OuterHandle * h) {
    rt::Ownership::instance().remove(h);
    delete h;
}

// --- trampolines ---------------------------------------------------------------------

// The thread count reaches the real library and standin's own local stream
// (LOCAL_OPS), so both sides of an interposed graph use what the caller asked.
void t_set_n_threads(ggml_backend_t b, int n) {
    real<set_n_threads_t>("ggml_backend_set_n_threads")(unwrap(b), n);
    if (unwrap(b) != b) set_local_threads(outer_backend(b), n);
}
void t_set_abort(ggml_backend_t b, ggml_abort_callback cb, void * data) {
    real<set_abort_t>("ggml_backend_set_abort_callback")(unwrap(b), cb, data);
}
ggml_backend_buffer_type_t * t_extra_bufts(ggml_backend_dev_t d) {
    static std::map<ggml_backend_dev_t, std::vector<ggml_backend_buffer_type_t>> lists;
    std::lock_guard<std::recursive_mutex> lock(swap_lock());
    auto & out = lists[d];
    out.clear();
    ggml_backend_buffer_type_t * in = real<extra_bufts_t>("ggml_backend_dev_get_extra_bufts")(unwrap(d));
    for (; in != nullptr && *in != nullptr; ++in) {
        out.push_back(wrap_result(*in));
    }
    out.push_back(nullptr);
    return out.data();
}
ggml_backend_feature * t_features(ggml_backend_reg_t) {
    static std::vector<std::string> storage;
    static std::vector<ggml_backend_feature> list;
    std::lock_guard<std::recursive_mutex> lock(swap_lock());
    if (list.empty()) {
        auto fn = real<features_t>("ggml_backend_get_features");
        storage.reserve(64);
        auto add = [&](const char * k, const std::string & v) {
            storage.push_back(k);
            storage.push_back(v);
        };
        add("STANDIN", "1");
        OuterReg & r = the_reg();
        add("MODE", r.lib.mode);
        add("REAL", r.lib.path);
        for (ggml_backend_feature * f = fn ? fn(r.inner) : nullptr; f != nullptr && f->name != nullptr; ++f) {
            add(f->name, f->value != nullptr ? f->value : "");
        }
        for (size_t i = 0; i + 1 < storage.size(); i += 2) {
            list.push_back({storage[i].c_str(), storage[i + 1].c_str()});
        }
        list.push_back({nullptr, nullptr});
    }
    return list.data();
}
void t_numa_init(int strategy) { real<numa_init_t>("ggml_backend_cpu_numa_init")(strategy); }
bool t_is_numa() { return real<is_numa_t>("ggml_backend_cpu_is_numa")(); }
void t_set_use_ref(ggml_backend_t b, bool v) { real<set_use_ref_t>("ggml_backend_cpu_set_use_ref")(unwrap(b), v); }
ggml_threadpool * t_tp_new(ggml_threadpool_params * p) {
    return static_cast<ggml_threadpool *>(wrap_handle(real<tp_new_t>("ggml_threadpool_new")(p)));
}
void t_tp_free(ggml_threadpool * tp) {
    if (OuterHandle * h = handle(tp)) {
        real<tp_free_t>("ggml_threadpool_free")(static_cast<ggml_threadpool *>(h->inner));
        free_handle(h);
    }
}
void t_set_tp(ggml_backend_t b, ggml_threadpool * tp) {
    OuterHandle * h = handle(tp);
    real<set_tp_t>("ggml_backend_cpu_set_threadpool")(unwrap(b), h ? static_cast<ggml_threadpool *>(h->inner) : nullptr);
}
ggml_backend_buffer_type_t t_split_buft(int main_device, const float * split) {
    return wrap_result(real<split_buft_t>("ggml_backend_split_buffer_type")(main_device, split));
}
bool t_reg_host(void * p, size_t n) { return real<reg_host_t>("ggml_backend_register_host_buffer")(p, n); }
void t_unreg_host(void * p) { real<unreg_host_t>("ggml_backend_unregister_host_buffer")(p); }
void * t_comm_init(ggml_backend_t * backends, size_t n) {
    std::vector<ggml_backend_t> inner(backends, backends + n);
    for (auto & b : inner) b = unwrap(b);
    return wrap_handle(real<comm_init_t>("ggml_backend_comm_init")(inner.data(), n), n);
}
void t_comm_free(void * ctx) {
    if (OuterHandle * h = handle(ctx)) {
        real<comm_free_t>("ggml_backend_comm_free")(h->inner);
        free_handle(h);
    }
}
bool t_comm_allreduce(void * ctx, ggml_tensor ** tensors) {
    OuterHandle * h = handle(ctx);
    if (h == nullptr) return false;
    SwapScope scope;
    for (size_t i = 0; i < h->n; ++i) scope.collect(tensors[i]);
    return real<comm_allreduce_t>("ggml_backend_comm_allreduce_tensor")(h->inner, tensors);
}

// The audit on demand (Note [audit]): a standin proc, not a forwarded one.
const char * t_audit() {
    static std::string text;
    text = audit::report().text();
    return text.c_str();
}

struct Entry {
    const char * name;
    void *       fn;
};
const Entry kProcs[] = {
    {"ggml_backend_set_n_threads", reinterpret_cast<void *>(&t_set_n_threads)},
    {"ggml_backend_set_abort_callback", reinterpret_cast<void *>(&t_set_abort)},
    {"ggml_backend_dev_get_extra_bufts", reinterpret_cast<void *>(&t_extra_bufts)},
    {"ggml_backend_get_features", reinterpret_cast<void *>(&t_features)},
    {"ggml_backend_cpu_numa_init", reinterpret_cast<void *>(&t_numa_init)},
    {"ggml_backend_cpu_is_numa", reinterpret_cast<void *>(&t_is_numa)},
    {"ggml_backend_cpu_set_use_ref", reinterpret_cast<void *>(&t_set_use_ref)},
    {"ggml_threadpool_new", reinterpret_cast<void *>(&t_tp_new)},
    {"ggml_threadpool_free", reinterpret_cast<void *>(&t_tp_free)},
    {"ggml_backend_cpu_set_threadpool", reinterpret_cast<void *>(&t_set_tp)},
    {"ggml_backend_split_buffer_type", reinterpret_cast<void *>(&t_split_buft)},
    {"ggml_backend_register_host_buffer", reinterpret_cast<void *>(&t_reg_host)},
    {"ggml_backend_unregister_host_buffer", reinterpret_cast<void *>(&t_unreg_host)},
    {"ggml_backend_comm_init", reinterpret_cast<void *>(&t_comm_init)},
    {"ggml_backend_comm_free", reinterpret_cast<void *>(&t_comm_free)},
    {"ggml_backend_comm_allreduce_tensor", reinterpret_cast<void *>(&t_comm_allreduce)},
};

} // namespace

void * proc_address(OuterReg & reg, const char * name) {
    if (name == nullptr) {
        return nullptr;
    }
    SI_ASSERT_MSG(current_registry() == &reg.reg, "procs asked of a registry other than the outer one");
    if (std::strcmp(name, "ggml_backend_standin_audit") == 0) {
        return reinterpret_cast<void *>(&t_audit);
    }
    if (std::strcmp(name, "ggml_backend_get_features") == 0) {
        return reinterpret_cast<void *>(&t_features);  // ours, with the real list appended
    }
    // Offer a trampoline only where the real library offers the function.
    if (reg.inner->iface.get_proc_address == nullptr ||
        reg.inner->iface.get_proc_address(reg.inner, name) == nullptr) {
        return nullptr;
    }
    for (const Entry & e : kProcs) {
        if (std::strcmp(e.name, name) == 0) {
            return e.fn;
        }
    }
    SI_LOG_DEBUG("the real library offers '%s', which standin does not know how to wrap; not exposed", name);
    return nullptr;
}

} // namespace standin::interpose
