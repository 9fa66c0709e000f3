// The glue: standin's side of ggml's backend ABI (ggml-backend-impl.h). It
// translates ggml's C vtables into calls on runtime/ and kernels/ and holds no
// logic of its own beyond that. One file per ABI object.
//
// Contexts are reached through the typed accessors below, which check the
// object against the ownership table (Note [object ownership]) before casting:
// a foreign object reaching a standin slot is an internal error, reported with
// the slot name instead of a silent mis-cast.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "diag/config.h"
#include "ggml-backend-impl.h"
#include "runtime/runtime.h"

namespace standin::glue {

struct DeviceContext {
    rt::Device *               rt = nullptr;
    const diag::Config *       config = nullptr;
    std::string                name;         // STANDIN_HOST0, STANDIN_CUDA0, ...
    std::string                description;
    std::string                pci_bus_id;
    ggml_backend_device        device{};     // the ABI object handed out
    ggml_backend_buffer_type   buft{};       // device memory
    ggml_backend_buffer_type   host_buft{};  // pinned/staging host memory
    // Host devices: held shared by every graph compute, exclusively while
    // weights are packed in place (pack_graph_weights, buffer.cpp).
    std::shared_mutex          weights_mu;
    // Live buffers of `buft` (device memory): whether the device computes part
    // of a model (Note [host device placement], device.cpp).
    std::atomic<int>           own_buffers{0};
};

struct BufferTypeContext {
    DeviceContext * dev = nullptr;
    bool            host = false;  // the device's host (pinned) buffer type
    std::string     name;
};

struct BufferContext {
    DeviceContext * dev  = nullptr;
    void *          base = nullptr;
    bool            host = false;  // allocated with alloc_host
};

// Per-op totals of GGML_STANDIN_PROFILE, keyed by "OP type" (e.g. "MUL_MAT q4_0").
struct ProfileEntry {
    long   calls = 0;
    double ms    = 0.0;
};

struct BackendContext {
    DeviceContext *                     dev = nullptr;
    std::unique_ptr<rt::Stream>         stream;
    std::map<std::string, ProfileEntry> profile;
    long                                profiled_graphs = 0;
    long                                replays = 0;  // graphs launched as recordings
    std::vector<uint8_t>                graph_key;    // reused per graph_compute (its capacity persists)
    // The ggml graph (and its uid) whose recording the stream launched last:
    // the same graph with the same uid is replayed without building its key.
    const ggml_cgraph * recorded_graph = nullptr;
    uint64_t            recorded_uid   = 0;
    long                uid_replays    = 0;
};

struct EventContext {
    std::unique_ptr<rt::Event> event;
};

// --- typed accessors (assert ownership, then cast) ---------------------------
DeviceContext &     device_ctx(ggml_backend_dev_t dev);
BufferTypeContext & buft_ctx(ggml_backend_buffer_type_t buft);
BufferContext &     buffer_ctx(ggml_backend_buffer_t buffer);
BackendContext &    backend_ctx(ggml_backend_t backend);
EventContext &      event_ctx(ggml_backend_event_t event);

// --- constructors used across files ------------------------------------------
// The registry (built once, thread-safe, never freed).
ggml_backend_reg_t registry();
// Keeps this module mapped for the rest of the process (Note [module pinned],
// glue/reg.cpp); the module's entry points call it first. Idempotent.
void pin_module();
// The same registry, reached from a preloaded registration function
// (Note [preload mode] in interpose/preload.h): when it is not built yet, it
// is built interposing `real`. *built_for is the symbol it was built for in
// preload mode, or nullptr when ggml_backend_init built it first.
ggml_backend_reg_t registry_preloaded(ggml_backend_reg_t (*real)(), const char * symbol, const char ** built_for);
// Fills ctx.device/buft/host_buft for a runtime device.
void init_device(DeviceContext & ctx, ggml_backend_reg_t reg);
void init_buffer_types(DeviceContext & ctx);
ggml_backend_t make_backend(DeviceContext & dev);
// Packs the weights a host device's graph multiplies that reached its weight
// buffers without set_tensor (llama.cpp reads them into host memory directly),
// in place, under weights_mu held exclusively (Note [packed weights]).
void pack_graph_weights(DeviceContext & dev, ggml_cgraph * graph);
ggml_backend_event_t make_event(DeviceContext & dev);
void free_event(ggml_backend_event_t event);
// How many nodes of graph g read `node` (ggml's own counts; kernels::UseCount).
int graph_use_count(const ggml_cgraph * g, const ggml_tensor * node);

// Whether a buffer type is one of standin's (any device).
bool is_standin_buft(ggml_backend_buffer_type_t buft);

// Whether a device of `kind` asks the scheduler for an op whose weights are in
// host memory (offload_op; glue/device.cpp says when).
bool offload_pays(rt::Kind kind, const ggml_tensor * op, int min_batch);

// The guid shared by every standin backend.
ggml_guid_t backend_guid();

// The tensor-parallel communicator procs (ggml_backend_comm_init, _free,
// _allreduce_tensor; glue/comm.cpp) by name; nullptr for any other name.
void * comm_proc(const char * name);

} // namespace standin::glue
