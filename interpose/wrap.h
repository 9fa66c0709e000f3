// Wrappers ("outer" objects) around a real library's ABI objects ("inner").
//
// Note [outer and inner]
// Every object the caller receives in interposed mode is an outer object
// created here and entered in the ownership table with its inner object. Every
// call into the real library passes inner objects only:
//  - arguments that are outer objects are unwrapped (unwrap());
//  - tensors whose ->buffer is an outer buffer are shown to the real library
//    with the inner buffer for the duration of the call (SwapScope), because
//    real libraries identify their buffers through tensor->buffer;
//  - results that are real objects are wrapped before they are returned
//    (wrap_result()), and checked: a real pointer that would reach the caller
//    is counted by the audit (Note [audit]).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ggml-backend-impl.h"
#include "interpose/loader.h"
#include "runtime/runtime.h"

namespace standin::interpose {

struct LocalOps;  // router.h

struct OuterReg {
    ggml_backend_reg                  reg{};
    ggml_backend_reg *                inner = nullptr;
    RealLibrary                       lib;
    std::string                       name;  // STANDIN, or the real one (Note [interposed names])
    std::vector<ggml_backend_device *> devices;  // outer devices, in the real order
};

struct OuterDev {
    ggml_backend_device  dev{};
    ggml_backend_device * inner = nullptr;
    std::string          name;         // STANDIN_<real name>, or the real one (Note [interposed names])
    std::string          description;  // "standin over <real description>"
    std::string          device_id;    // our copy of the real props.device_id
    std::optional<rt::Kind> local_kind;  // of our kernels for local dispatch; none: forward everything
};

struct OuterBuft {
    ggml_backend_buffer_type  buft{};
    ggml_backend_buffer_type * inner = nullptr;
    std::string               name;
};

struct OuterBuffer {
    ggml_backend_buffer * inner = nullptr;
};

// Note [swap plan]
// Forwarding a graph swaps every tensor's buffer to the real one and back,
// about 25 ns per visited tensor (24 us per token for a 1B decode graph). Decode
// forwards the same graph token after token: ggml's scheduler gives each split
// graph a new uid whenever it splits or allocates again, and keeps it while the
// graph is reused (ggml-cuda relies on the same contract for its CUDA graphs).
// So a backend keeps the swaps of the last forwarded graph, and the next call
// with the same graph and uid replays them after checking that each buffer is
// still the one resolved and each tensor still points at it.
struct SwapPlan {
    const ggml_cgraph * graph = nullptr;
    uint64_t            uid   = 0;
    struct Swap {
        ggml_tensor *         tensor;
        ggml_backend_buffer * outer;
        ggml_backend_buffer * inner;
    };
    std::vector<Swap> swaps;
    std::vector<std::pair<ggml_backend_buffer *, ggml_backend_buffer *>> buffers;  // outer -> inner, each once
    long replays = 0;  // calls that reused the plan (for tests)
};

struct OuterBackend {
    ggml_backend * inner = nullptr;
    OuterDev *     dev   = nullptr;
    std::string    name;
    std::unique_ptr<rt::Stream> local_stream;  // for local dispatch (router.cpp), created lazily
    void *         staging = nullptr;       // host arena for staged runs (staging.cpp, Note [staging])
    int            n_threads = 0;           // set_n_threads, for the local stream too (0: its default)
    SwapPlan       swap_plan;               // of the last graph forwarded whole (Note [swap plan])
};

struct OuterEvent {
    ggml_backend_event * inner = nullptr;
};

// --- unwrap: outer -> inner; anything that is not ours passes unchanged ----------
ggml_backend_reg_t         unwrap(ggml_backend_reg_t r);
ggml_backend_dev_t         unwrap(ggml_backend_dev_t d);
ggml_backend_buffer_type_t unwrap(ggml_backend_buffer_type_t b);
ggml_backend_buffer_t      unwrap(ggml_backend_buffer_t b);
ggml_backend_t             unwrap(ggml_backend_t b);
ggml_backend_event_t       unwrap(ggml_backend_event_t e);
template <typename T> T    unwrap(T v) { return v; }

// --- wrap: inner -> outer (created on first sight for bufts and devices) -----------
ggml_backend_dev_t         wrap_result(ggml_backend_dev_t d);
ggml_backend_buffer_type_t wrap_result(ggml_backend_buffer_type_t b);
ggml_backend_buffer_t      wrap_result(ggml_backend_buffer_t b);
ggml_backend_t             wrap_result(ggml_backend_t b);
ggml_backend_event_t       wrap_result(ggml_backend_event_t e);
template <typename T> T    wrap_result(T v) { return v; }

// Shows the real library inner buffers on every tensor it will read, for the
// lifetime of the scope, then restores the caller's view. Holds the
// interposition lock: swapped tensors may be shared (weights) between backends.
class SwapScope {
public:
    SwapScope();
    ~SwapScope();
    SwapScope(const SwapScope &) = delete;
    SwapScope & operator=(const SwapScope &) = delete;

    void collect(const ggml_tensor * t);
    void collect(ggml_tensor * t) { collect(static_cast<const ggml_tensor *>(t)); }
    void collect(ggml_cgraph * g);
    void collect(const ggml_cgraph * g) { collect(const_cast<ggml_cgraph *>(g)); }
    // collect(g), replaying or recording `plan` (Note [swap plan]).
    void collect(ggml_cgraph * g, SwapPlan & plan);
    template <typename T> void collect(const T &) {}

private:
    bool replay(const SwapPlan & plan);
    void swap_one(ggml_tensor * t);
    ggml_backend_buffer * inner_buffer(ggml_backend_buffer * outer);
    std::unique_lock<std::recursive_mutex> lock_;
    std::vector<std::pair<ggml_tensor *, ggml_backend_buffer *>> saved_;
    // A graph's tensors live in a handful of buffers: resolving each buffer
    // once per scope keeps the ownership table off the per-tensor path.
    std::vector<std::pair<ggml_backend_buffer *, ggml_backend_buffer *>> resolved_;
    // Buffers ggml made itself over one of our buffer types (zero-size
    // placeholders used to ask supports_op about a weight's placement): their
    // buft is shown as the inner one for the call, then restored.
    std::vector<std::pair<ggml_backend_buffer *, ggml_backend_buffer_type *>> saved_bufts_;
};

// What the caller's names are (Note [interposed names], objects.cpp).
enum class Names {
    prefixed,  // STANDIN, STANDIN_CPU, ...: standin's devices beside the real ones (path, preload mode)
    real,      // the real library's own: standin in its place (replace mode)
};

// Builds the interposed registry over a loaded real library (never fails: a
// real library with zero devices gives a registry with zero devices).
ggml_backend_reg * make_registry(RealLibrary lib, Names names = Names::prefixed);

// The process-wide lock under which tensors are swapped.
std::recursive_mutex & swap_lock();

// Typed accessors (ownership-checked).
OuterReg &     outer_reg(ggml_backend_reg_t r);
OuterDev &     outer_dev(ggml_backend_dev_t d);
OuterBuft &    outer_buft(ggml_backend_buffer_type_t b);
OuterBuffer &  outer_buffer(ggml_backend_buffer_t b);
OuterBackend & outer_backend(ggml_backend_t b);
OuterEvent &   outer_event(ggml_backend_event_t e);

// The outer registry, once built (nullptr in standalone mode).
ggml_backend_reg * current_registry();

} // namespace standin::interpose
