// Note [staging] (staging.h): host copies of a local run's tensors, made with
// the real library's public tensor copies.
#include "interpose/staging.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "diag/log.h"
#include "kernels/op_table.h"
#include "runtime/host/host_device.h"

namespace standin::interpose {

namespace {

constexpr size_t kAlign = 64;            // host kernels' preferred alignment
constexpr size_t kMinChunk = size_t(1) << 20;

const ggml_tensor * base_of(const ggml_tensor * t) { return t->view_src != nullptr ? t->view_src : t; }

size_t offset_in_base(const ggml_tensor * t) {
    return size_t(static_cast<const char *>(t->data) - static_cast<const char *>(base_of(t)->data));
}

rt::Device & host_memory() {
    static rt::host::HostDevice host(0, 1);
    return host;
}

// Host memory for the regions of one graph call, reused from call to call.
// Chunks come from the real device's host buffer type when it has one (memory
// the real library copies to and from without a wait per call), else from
// standin's host device.
struct Arena {
    struct Chunk {
        ggml_backend_buffer_t real = nullptr;  // a buffer of the real host buffer type, or nullptr
        char *                base = nullptr;
        size_t                size = 0;
        size_t                used = 0;
    };
    std::vector<Chunk> chunks;
    bool   pending = false;  // real-library copies that read the arena are queued
    size_t used_last = 0;    // bytes the last call used (sizes one chunk for the next)

    ~Arena() {
        for (Chunk & c : chunks) release(c);
    }
    static void release(Chunk & c) {
        if (c.real != nullptr) {
            ggml_backend_buffer_free(c.real);
        } else {
            host_memory().free(c.base);
        }
        c = Chunk{};
    }

    Chunk make_chunk(ggml_backend_dev_t inner_dev, size_t size) {
        Chunk c;
        c.size = size;
        if (inner_dev->iface.get_host_buffer_type != nullptr) {
            ggml_backend_buffer_type_t hb = inner_dev->iface.get_host_buffer_type(inner_dev);
            if (hb != nullptr && hb->iface.is_host != nullptr && hb->iface.is_host(hb)) {
                c.real = hb->iface.alloc_buffer(hb, size + kAlign);
                if (c.real != nullptr && c.real->iface.get_base != nullptr) {
                    auto p = reinterpret_cast<uintptr_t>(c.real->iface.get_base(c.real));
                    c.base = reinterpret_cast<char *>((p + kAlign - 1) / kAlign * kAlign);
                    return c;
                }
                if (c.real != nullptr) ggml_backend_buffer_free(c.real);
                c.real = nullptr;
            }
        }
        c.base = static_cast<char *>(host_memory().alloc(size));
        return c;
    }

    char * alloc(ggml_backend_dev_t inner_dev, size_t bytes) {
        bytes = (bytes + kAlign - 1) / kAlign * kAlign;
        for (Chunk & c : chunks) {
            if (c.size - c.used >= bytes) {
                char * p = c.base + c.used;
                c.used += bytes;
                return p;
            }
        }
        size_t total = 0;
        for (const Chunk & c : chunks) total += c.size;
        Chunk c = make_chunk(inner_dev, std::max({bytes, total, used_last, kMinChunk}));
        if (c.base == nullptr) return nullptr;
        c.used = bytes;
        chunks.push_back(c);
        return c.base;
    }

    // After the real library's queued copies are done: one chunk next time.
    void reset() {
        size_t used = 0;
        for (const Chunk & c : chunks) used += c.used;
        used_last = std::max(used_last, used);
        if (chunks.size() > 1) {
            for (Chunk & c : chunks) release(c);
            chunks.clear();
        }
        for (Chunk & c : chunks) c.used = 0;
    }
};

Arena & arena_of(OuterBackend & b) {
    if (b.staging == nullptr) b.staging = new Arena;
    return *static_cast<Arena *>(b.staging);
}

} // namespace

bool is_noop_node(const ggml_tensor * node) {
    return (node->flags & GGML_TENSOR_FLAG_COMPUTE) == 0 || kernels::is_view_op(node->op) || ggml_is_empty(node);
}

Reach reach_of(const ggml_tensor * t, ggml_backend_dev_t inner_dev, const char ** why) {
    if (t == nullptr) return Reach::direct;
    const ggml_tensor * base = base_of(t);
    if (base->buffer == nullptr || base->data == nullptr) {
        *why = "a tensor without memory";
        return Reach::none;
    }
    ggml_backend_buffer_t in = unwrap(base->buffer);
    ggml_backend_buffer_type_t buft = in->buft;
    if (buft->iface.is_host != nullptr && buft->iface.is_host(buft)) return Reach::direct;
    if (buft == inner_dev->iface.get_buffer_type(inner_dev) && in->iface.get_tensor != nullptr &&
        in->iface.set_tensor != nullptr) {
        return Reach::staged;
    }
    // Split and repacked ("extra") buffer types keep a layout of their own.
    *why = "a tensor in a buffer type whose layout is the real library's own";
    return Reach::none;
}

StagedRun::StagedRun(OuterBackend & backend, ggml_cgraph * graph, int i0, int i1)
    : b_(backend), g_(graph), i0_(i0), i1_(i1) {}

StagedRun::Region * StagedRun::region_of(const ggml_tensor * base) {
    auto it = index_.find(base);
    return it != index_.end() ? &regions_[it->second] : nullptr;
}

void StagedRun::touch(const ggml_tensor * t, int node, bool write, bool full_write) {
    const ggml_tensor * base = base_of(t);
    const size_t lo = offset_in_base(t), hi = lo + ggml_nbytes(t);
    Region * r = region_of(base);
    if (r == nullptr) {
        index_.emplace(base, regions_.size());
        regions_.push_back(Region{base});
        r = &regions_.back();
        r->lo = lo, r->hi = hi;
        r->wlo = SIZE_MAX, r->whi = 0;
        r->read_first = !write || !full_write;
        r->first_lo = lo, r->first_hi = hi;
    }
    r->lo = std::min(r->lo, lo), r->hi = std::max(r->hi, hi);
    if (write) {
        r->wlo = std::min(r->wlo, lo), r->whi = std::max(r->whi, hi);
        r->last_write = node;
    }
}

bool StagedRun::staged(const ggml_tensor * t) const {
    return t != nullptr && index_.count(base_of(t)) != 0;
}

ggml_tensor * StagedRun::shadow_of(ggml_tensor * t) {
    auto it = shadows_.find(t);
    if (it != shadows_.end()) return it->second;
    Region * r = region_of(base_of(t));
    storage_.push_back(*t);
    ggml_tensor * sh = &storage_.back();
    sh->data      = r->host + (offset_in_base(t) - r->lo);
    sh->buffer    = nullptr;  // host memory of no ggml buffer: kernels read data only
    sh->view_src  = nullptr;
    sh->view_offs = 0;
    sh->extra     = nullptr;
    shadows_.emplace(t, sh);
    return sh;
}

bool StagedRun::stage_in(StagingStats & stats) {
    ggml_backend_dev_t inner_dev = b_.dev->inner;
    const char * why = nullptr;
    auto is_staged = [&](const ggml_tensor * t) { return t != nullptr && reach_of(t, inner_dev, &why) == Reach::staged; };
    // Which bytes of which base the run reads and writes, in node order.
    for (int i = i0_; i < i1_; ++i) {
        ggml_tensor * node = ggml_graph_node(g_, i);
        if (is_noop_node(node)) continue;
        for (const ggml_tensor * s : node->src) {
            if (is_staged(s)) touch(s, i, false, false);
        }
        // SET_ROWS writes some rows of its destination; a strided view has gaps.
        if (is_staged(node)) touch(node, i, true, node->op != GGML_OP_SET_ROWS && ggml_is_contiguous(node));
    }
    Arena & arena = arena_of(b_);
    if (arena.pending) {  // an earlier call left copies queued (end_graph_staging was skipped)
        b_.inner->iface.synchronize(b_.inner);
        arena.pending = false;
        arena.reset();
    }
    for (Region & r : regions_) {
        // A base whose first touch writes all the run touches is not read.
        r.read_first = r.read_first || r.first_lo > r.lo || r.first_hi < r.hi;
        r.lo = r.lo / kAlign * kAlign;  // the shadow keeps the original's alignment modulo kAlign
        r.host = arena.alloc(inner_dev, r.hi - r.lo);
        if (r.host == nullptr) {
            SI_LOG_ERROR("%s: no host memory for %zu bytes of staging", b_.name.c_str(), r.hi - r.lo);
            return false;
        }
    }
    ggml_backend_t in = b_.inner;
    const bool async = in->iface.get_tensor_async != nullptr;
    // Synchronous copies must come after the graph the real library is computing.
    if (!async) in->iface.synchronize(in);
    {
        SwapScope scope;
        for (Region & r : regions_) {
            if (!r.read_first) continue;
            ggml_tensor * base = const_cast<ggml_tensor *>(r.base);
            scope.collect(base);
            if (async) {
                in->iface.get_tensor_async(in, base, r.host, r.lo, r.hi - r.lo);
            } else {
                base->buffer->iface.get_tensor(base->buffer, base, r.host, r.lo, r.hi - r.lo);
            }
            stats.bytes_in += r.hi - r.lo;
        }
    }
    // One wait for everything: the graph before the run, and the copies.
    if (async) in->iface.synchronize(in);
    ++stats.runs;

    node_shadows_.assign(size_t(i1_ - i0_), nullptr);
    for (int i = i0_; i < i1_; ++i) {
        ggml_tensor * node = ggml_graph_node(g_, i);
        if (is_noop_node(node)) continue;
        bool any = staged(node);
        for (const ggml_tensor * s : node->src) any = any || staged(s);
        if (!any) continue;
        ggml_tensor * sh = staged(node) ? shadow_of(node) : &storage_.emplace_back(*node);
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            if (staged(node->src[k])) sh->src[k] = shadow_of(node->src[k]);
        }
        node_shadows_[size_t(i - i0_)] = sh;
    }
    return true;
}

ggml_tensor * StagedRun::node_to_run(int i) {
    ggml_tensor * sh = node_shadows_[size_t(i - i0_)];
    return sh != nullptr ? sh : ggml_graph_node(g_, i);
}

void StagedRun::stage_out(StagingStats & stats) {
    std::vector<Region *> written;
    for (Region & r : regions_) {
        if (r.wlo < r.whi) written.push_back(&r);
    }
    // ggml-alloc may place two tensors of the run at one address, the second
    // after the first's last use: the later write must land last.
    std::sort(written.begin(), written.end(), [](const Region * a, const Region * b) { return a->last_write < b->last_write; });
    ggml_backend_t in = b_.inner;
    const bool async = in->iface.set_tensor_async != nullptr;
    SwapScope scope;
    for (Region * r : written) {
        ggml_tensor * base = const_cast<ggml_tensor *>(r->base);
        scope.collect(base);
        const char * src = r->host + (r->wlo - r->lo);
        if (async) {
            in->iface.set_tensor_async(in, base, src, r->wlo, r->whi - r->wlo);
        } else {
            base->buffer->iface.set_tensor(base->buffer, base, src, r->wlo, r->whi - r->wlo);
        }
        stats.bytes_out += r->whi - r->wlo;
    }
    if (async && !written.empty()) arena_of(b_).pending = true;
}

void end_graph_staging(OuterBackend & b) {
    if (b.staging == nullptr) return;
    Arena & arena = arena_of(b);
    if (arena.pending) {
        b.inner->iface.synchronize(b.inner);
        arena.pending = false;
    }
    arena.reset();
}

void release_staging(OuterBackend & b) {
    if (b.staging == nullptr) return;
    end_graph_staging(b);
    delete static_cast<Arena *>(b.staging);
    b.staging = nullptr;
}

} // namespace standin::interpose
