// The backend (a stream on a device): async copies, synchronize, events, and
// graph_compute, which walks the graph and runs each node through the op table
// (Note [op table]).
#include <algorithm>
#include <chrono>
#include <shared_mutex>

// ggml_cgraph::uid (the graph-reuse shortcut of graph_compute) and its use
// counts (graph_use_count); the header's other static helpers are unused here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "ggml-impl.h"
#pragma GCC diagnostic pop

#include "diag/crash.h"
#include "diag/log.h"
#include "glue/glue.h"
#include "interpose/audit.h"
#include "kernels/fusion.h"
#include "kernels/host/packed.h"
#include "kernels/op_table.h"
#include "runtime/ownership.h"

namespace standin::glue {

namespace {

const char * backend_get_name(ggml_backend_t backend) { return backend_ctx(backend).dev->name.c_str(); }

// The GGML_STANDIN_PROFILE table: ops by total time, through the log.
void log_profile(const BackendContext & ctx) {
    if (ctx.profile.empty()) {
        return;
    }
    std::vector<std::pair<std::string, ProfileEntry>> rows(ctx.profile.begin(), ctx.profile.end());
    std::sort(rows.begin(), rows.end(), [](const auto & a, const auto & b) { return a.second.ms > b.second.ms; });
    double total = 0.0;
    for (const auto & r : rows) total += r.second.ms;
    SI_LOG_INFO("%s profile: %ld graphs, %.3f ms in kernels", ctx.dev->name.c_str(), ctx.profiled_graphs, total);
    SI_LOG_INFO("  %-28s %10s %12s %7s %10s", "op", "calls", "total ms", "share", "us/call");
    for (const auto & r : rows) {
        SI_LOG_INFO("  %-28s %10ld %12.3f %6.1f%% %10.2f", r.first.c_str(), r.second.calls, r.second.ms,
                    total > 0 ? 100.0 * r.second.ms / total : 0.0, 1000.0 * r.second.ms / double(r.second.calls));
    }
}

void backend_free(ggml_backend_t backend) {
    BackendContext * ctx = &backend_ctx(backend);
    ctx->stream->synchronize();
    log_profile(*ctx);
    if (ctx->dev->config->debug) {
        const std::string stats = ctx->stream->recording_stats();
        if (!stats.empty()) SI_LOG_INFO("%s: %s", ctx->dev->name.c_str(), stats.c_str());
    }
    rt::Ownership::instance().remove(backend);
    delete ctx;
    delete backend;
}

// The async copies are only reached for tensors in this device's buffers
// (ggml checks the buffer type first), so plain-memory devices can memcpy.
// Weights go through the buffer's own calls, which know the packed layout
// (Note [packed weights], kernels/host/packed.h).
void backend_set_tensor_async(ggml_backend_t backend, ggml_tensor * tensor, const void * data, size_t offset,
                              size_t size) {
    ggml_backend_buffer_t buf = tensor->view_src != nullptr ? tensor->view_src->buffer : tensor->buffer;
    if (buf != nullptr && (buf->usage == GGML_BACKEND_BUFFER_USAGE_WEIGHTS || kernels::host::packed::packed_of(tensor))) {
        buf->iface.set_tensor(buf, tensor, data, offset, size);
        return;
    }
    backend_ctx(backend).stream->copy_to_device(static_cast<char *>(tensor->data) + offset, data, size);
}

void backend_get_tensor_async(ggml_backend_t backend, const ggml_tensor * tensor, void * data, size_t offset,
                              size_t size) {
    if (kernels::host::packed::packed_of(tensor) != nullptr) {
        ggml_backend_buffer_t buf = tensor->view_src != nullptr ? tensor->view_src->buffer : tensor->buffer;
        buf->iface.get_tensor(buf, tensor, data, offset, size);
        return;
    }
    backend_ctx(backend).stream->copy_to_host(data, static_cast<const char *>(tensor->data) + offset, size);
}

// Between two standin backends whose streams can copy to each other (two CUDA
// devices: a split across GPUs), without the host waiting; anything else is
// left to ggml's synchronous copy through the host.
bool backend_cpy_tensor_async(ggml_backend_t backend_src, ggml_backend_t backend_dst, const ggml_tensor * src,
                              ggml_tensor * dst) {
    const rt::Ownership & own = rt::Ownership::instance();
    if (backend_src == nullptr || !own.is_ours(backend_src, rt::ObjKind::backend) || src->buffer == nullptr ||
        dst->buffer == nullptr || !own.is_ours(src->buffer, rt::ObjKind::buffer) ||
        !own.is_ours(dst->buffer, rt::ObjKind::buffer) || buffer_ctx(src->buffer).host ||
        buffer_ctx(dst->buffer).host || !ggml_is_contiguous(src) || !ggml_is_contiguous(dst) ||
        ggml_nbytes(src) != ggml_nbytes(dst) || buffer_ctx(src->buffer).dev != backend_ctx(backend_src).dev ||
        buffer_ctx(dst->buffer).dev != backend_ctx(backend_dst).dev) {
        return false;
    }
    return backend_ctx(backend_dst).stream->copy_from_stream(*backend_ctx(backend_src).stream, dst->data, src->data,
                                                             ggml_nbytes(src));
}

void backend_synchronize(ggml_backend_t backend) { backend_ctx(backend).stream->synchronize(); }

// Everything a node's launch depends on, appended to `key`: equal keys mean
// the same kernels with the same arguments, so a recording can be replayed.
// The use counts are in it since a fused launch may skip a result nothing
// else reads (kernels::UseCount).
void append_node_key(std::vector<uint8_t> & key, const ggml_cgraph * g, const ggml_tensor * t) {
    auto put = [&key](const void * p, size_t n) {
        const auto * b = static_cast<const uint8_t *>(p);
        key.insert(key.end(), b, b + n);
    };
    const int uses = graph_use_count(g, t);
    put(&uses, sizeof(uses));
    put(&t->op, sizeof(t->op));
    put(&t->type, sizeof(t->type));
    put(&t->flags, sizeof(t->flags));
    put(t->ne, sizeof(t->ne));
    put(t->nb, sizeof(t->nb));
    put(&t->data, sizeof(t->data));
    put(t->op_params, sizeof(t->op_params));
    for (const ggml_tensor * s : t->src) {
        if (s == nullptr) {
            const void * none = nullptr;
            put(&none, sizeof(none));
            continue;
        }
        // A view has no key of its own (no work), so its count goes with its
        // reader's; other sources are work nodes keyed themselves, or leaves.
        if (s->view_src != nullptr) {
            const int view_uses = graph_use_count(g, s);
            put(&view_uses, sizeof(view_uses));
        }
        put(&s->data, sizeof(s->data));
        put(&s->type, sizeof(s->type));
        put(s->ne, sizeof(s->ne));
        put(s->nb, sizeof(s->nb));
    }
}

// GGML_STANDIN_FAULT=perturb:OP (diag/config.h): a planted wrong kernel, so the
// tests of `standin ab` can show it finds one. Host devices only (their memory
// is the process's), contiguous F32 outputs only.
void perturb_output(BackendContext & ctx, ggml_tensor * node) {
    if (ctx.dev->rt->kind() != rt::Kind::host || node->type != GGML_TYPE_F32 || !ggml_is_contiguous(node)) {
        return;
    }
    ctx.stream->synchronize();
    float * p = static_cast<float *>(node->data);
    for (int64_t i = 0; i < ggml_nelements(node); ++i) p[i] = p[i] * 1.5f + 0.01f;
}

// Runs every node through the op table; marks after each one when profiling.
ggml_status run_nodes(BackendContext & ctx, ggml_cgraph * cgraph, bool profile, std::vector<int> * ran) {
    const rt::Kind kind = ctx.dev->rt->kind();
    const int n_nodes = ggml_graph_n_nodes(cgraph);
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor * node = ggml_graph_node(cgraph, i);
        if (!kernels::has_work(node)) {
            continue;
        }
        diag::crash_context_node("graph_compute", ctx.dev->name.c_str(), ggml_op_desc(node), i);
        if (ctx.dev->config->fusion) {
            const kernels::FusedRun fused = kernels::run_fused(kind, *ctx.stream, cgraph, i, graph_use_count);
            if (fused.covered > 0) {
                if (!fused.status) {
                    diag::crash_context_clear();
                    const bool oom = fused.status.code == kernels::Status::out_of_memory;
                    SI_LOG_ERROR("%s: fused launch from node %d (%s) %s", ctx.dev->name.c_str(), i, ggml_op_desc(node),
                                 oom ? "ran out of memory for its scratch" : "failed");
                    return oom ? GGML_STATUS_ALLOC_FAILED : GGML_STATUS_FAILED;
                }
                if (profile) {
                    ctx.stream->profile_mark();
                    ran->push_back(i);
                }
                i += fused.covered - 1;
                continue;
            }
        }
        const kernels::Status st = ctx.dev->config->declines(ggml_op_desc(node))
                                       ? kernels::Status(kernels::Status::unsupported)
                                       : kernels::run_node(kind, *ctx.stream, node);
        if (!st) {
            diag::crash_context_clear();
            if (st.code == kernels::Status::out_of_memory) {
                SI_LOG_ERROR("%s: node %d (%s, %s '%s') ran out of memory for its scratch", ctx.dev->name.c_str(), i,
                             ggml_op_desc(node), ggml_type_name(node->type), node->name);
                return GGML_STATUS_ALLOC_FAILED;
            }
            SI_LOG_ERROR("%s: node %d (%s, %s '%s') is not supported here", ctx.dev->name.c_str(), i,
                         ggml_op_desc(node), ggml_type_name(node->type), node->name);
            return GGML_STATUS_FAILED;
        }
        if (ctx.dev->config->perturbs(ggml_op_desc(node))) {
            perturb_output(ctx, node);
        }
        if (profile) {
            ctx.stream->profile_mark();
            ran->push_back(i);
        }
    }
    diag::crash_context_clear();
    return GGML_STATUS_SUCCESS;
}

void add_profile(BackendContext & ctx, ggml_cgraph * cgraph, const std::vector<int> & ran,
                 const std::vector<double> & ms) {
    for (size_t j = 0; j < ran.size() && j < ms.size(); ++j) {
        const ggml_tensor * node = ggml_graph_node(cgraph, ran[j]);
        std::string name = ggml_op_desc(node);
        if (node->src[0] != nullptr) {
            name += std::string(" ") + ggml_type_name(node->src[0]->type);
        }
        ProfileEntry & e = ctx.profile[name];
        ++e.calls;
        e.ms += ms[j];
    }
    ++ctx.profiled_graphs;
}

// Logged at 1, 2, 4, 8, ... replays: the proof, without a line per token.
void log_replays(BackendContext & ctx, const diag::Config & cfg) {
    const long n = ++ctx.replays;
    if (cfg.debug && (n & (n - 1)) == 0) {
        SI_LOG_INFO("%s: %s (%ld by graph uid)", ctx.dev->name.c_str(), ctx.stream->recording_stats().c_str(),
                    ctx.uid_replays);
    }
}

ggml_status compute_graph(BackendContext & ctx, ggml_cgraph * cgraph) {
    const diag::Config & cfg = *ctx.dev->config;
    if (cfg.fault_at("compute")) {
        SI_LOG_ERROR("%s: fault injected (GGML_STANDIN_FAULT=compute)", ctx.dev->name.c_str());
        return GGML_STATUS_FAILED;
    }
    ggml_status status = GGML_STATUS_SUCCESS;
    std::shared_lock<std::shared_mutex> weights;
    if (ctx.dev->rt->kind() == rt::Kind::host) {
        pack_graph_weights(*ctx.dev, cgraph);
        weights = std::shared_lock<std::shared_mutex>(ctx.dev->weights_mu);
    }
    if (cfg.profile) {
        std::vector<int> ran;
        ctx.stream->profile_begin();
        status = run_nodes(ctx, cgraph, true, &ran);
        const std::vector<double> ms = ctx.stream->profile_end();
        add_profile(ctx, cgraph, ran, ms);
    } else if (cfg.cuda_graphs && ctx.dev->rt->kind() == rt::Kind::cuda) {
        // ggml gives a graph a new uid whenever it splits (and so allocates)
        // it again; llama keeps the uid while it reuses a graph unchanged
        // (only input contents differ). Building and comparing the key of a
        // few hundred nodes per token is then skipped.
        const uint64_t uid = cgraph->uid;
        const bool same_graph = uid != 0 && cgraph == ctx.recorded_graph && uid == ctx.recorded_uid;
        ctx.recorded_graph = nullptr;
        if (same_graph && ctx.stream->replay_current()) {
            ctx.recorded_graph = cgraph;
            ++ctx.uid_replays;
            log_replays(ctx, cfg);
            return GGML_STATUS_SUCCESS;
        }
        std::vector<uint8_t> & key = ctx.graph_key;
        key.clear();
        const int n_nodes = ggml_graph_n_nodes(cgraph);
        for (int i = 0; i < n_nodes; ++i) {
            const ggml_tensor * node = ggml_graph_node(cgraph, i);
            if (kernels::has_work(node)) append_node_key(key, cgraph, node);
        }
        if (ctx.stream->replay(key)) {
            ctx.recorded_graph = cgraph;
            ctx.recorded_uid = uid;
            log_replays(ctx, cfg);
            return GGML_STATUS_SUCCESS;
        }
        if (ctx.stream->begin_recording()) {
            status = run_nodes(ctx, cgraph, false, nullptr);
            // A failed recording ran nothing: fall through to run eagerly.
            if (ctx.stream->end_recording(std::move(key))) {
                if (status == GGML_STATUS_SUCCESS) {
                    ctx.recorded_graph = cgraph;
                    ctx.recorded_uid = uid;
                }
                return status;
            }
            if (status != GGML_STATUS_SUCCESS) {
                return status;
            }
        }
        status = run_nodes(ctx, cgraph, false, nullptr);
    } else {
        status = run_nodes(ctx, cgraph, false, nullptr);
    }
    return status;
}

// The audit's dispatch counts: every node of a standalone graph that runs a
// kernel runs on standin's (one relaxed add per node, next to its launch).
void count_local_nodes(ggml_cgraph * cgraph) {
    for (int i = 0; i < ggml_graph_n_nodes(cgraph); ++i) {
        const ggml_tensor * node = ggml_graph_node(cgraph, i);
        if (kernels::has_work(node)) {
            interpose::audit::count_local(node, false);
        }
    }
}

ggml_status backend_graph_compute(ggml_backend_t backend, ggml_cgraph * cgraph) {
    BackendContext & ctx = backend_ctx(backend);
    const auto t0 = std::chrono::steady_clock::now();
    const ggml_status status = compute_graph(ctx, cgraph);
    if (status == GGML_STATUS_SUCCESS) {
        count_local_nodes(cgraph);
    }
    if (ctx.dev->config->debug) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        SI_LOG_INFO("%s: %d nodes enqueued in %.3f ms (%s)", ctx.dev->name.c_str(), ggml_graph_n_nodes(cgraph), ms,
                    status == GGML_STATUS_SUCCESS ? "ok" : "failed");
    }
    return status;
}

// Called by ggml's scheduler on each split before it allocates the split, so
// a new node order is also the order memory is planned for (Note [fusion]).
void backend_graph_optimize(ggml_backend_t backend, ggml_cgraph * cgraph, ggml_backend_graph_optimize_params *) {
    BackendContext & ctx = backend_ctx(backend);
    if (!ctx.dev->config->fusion || cgraph == nullptr) {
        return;
    }
    const int moved = kernels::order_for_fusion(ctx.dev->rt->kind(), ggml_graph_nodes(cgraph), ggml_graph_n_nodes(cgraph));
    if (moved > 0 && ctx.dev->config->debug) {
        SI_LOG_DEBUG("%s: %d nodes moved next to a MUL_MAT with the same src1", ctx.dev->name.c_str(), moved);
    }
}

void backend_event_record(ggml_backend_t backend, ggml_backend_event_t event) {
    backend_ctx(backend).stream->record(*event_ctx(event).event);
}

void backend_event_wait(ggml_backend_t backend, ggml_backend_event_t event) {
    backend_ctx(backend).stream->wait(*event_ctx(event).event);
}

const ggml_backend_i backend_iface = {
    /* .get_name            = */ backend_get_name,
    /* .free                = */ backend_free,
    /* .set_tensor_async    = */ backend_set_tensor_async,
    /* .get_tensor_async    = */ backend_get_tensor_async,
    /* .set_tensor_2d_async = */ nullptr,
    /* .get_tensor_2d_async = */ nullptr,
    /* .cpy_tensor_async    = */ backend_cpy_tensor_async,
    /* .synchronize         = */ backend_synchronize,
    /* .graph_plan_create   = */ nullptr,
    /* .graph_plan_free     = */ nullptr,
    /* .graph_plan_update   = */ nullptr,
    /* .graph_plan_compute  = */ nullptr,
    /* .graph_compute       = */ backend_graph_compute,
    /* .event_record        = */ backend_event_record,
    /* .event_wait          = */ backend_event_wait,
    /* .graph_optimize      = */ backend_graph_optimize,
};

} // namespace

// From the counts ggml keeps while building a graph (a split shares them with
// the graph it views); -1 when the graph holds none or does not know the node.
int graph_use_count(const ggml_cgraph * g, const ggml_tensor * node) {
    if (g == nullptr || g->use_counts == nullptr || g->visited_hash_set.size == 0 ||
        g->visited_hash_set.keys == nullptr) {
        return -1;
    }
    const size_t pos = ggml_hash_find(&g->visited_hash_set, node);
    if (pos == GGML_HASHSET_FULL || !ggml_bitset_get(g->visited_hash_set.used, pos)) {
        return -1;
    }
    return g->use_counts[pos];
}

ggml_backend_t make_backend(DeviceContext & dev) {
    if (dev.config->fault_at("backend")) {
        SI_LOG_ERROR("%s: fault injected (GGML_STANDIN_FAULT=backend)", dev.name.c_str());
        return nullptr;
    }
    std::unique_ptr<rt::Stream> stream = dev.rt->create_stream();
    if (!stream) {
        SI_LOG_ERROR("%s: could not create a stream", dev.name.c_str());
        return nullptr;
    }
    auto * ctx = new BackendContext();
    ctx->dev = &dev;
    ctx->stream = std::move(stream);
    auto * backend = new ggml_backend{backend_guid(), backend_iface, &dev.device, ctx};
    rt::Ownership::instance().add(backend, rt::ObjKind::backend);
    return backend;
}

} // namespace standin::glue
