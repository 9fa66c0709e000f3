// Staging for local dispatch over a real library whose device memory
// standin's kernels cannot address (ggml-vulkan, ggml-sycl, ...).
//
// Note [staging]
// A run of consecutive local nodes is computed by standin's host kernels on
// copies ("shadows") of its tensors in host memory, made and written back with
// the real library's own public tensor copies, never by reading its buffers:
//  - every tensor of the run that lives in the real device's default buffer
//    type is mapped into one host region per base tensor (views share their
//    base's region, so writes through one view are seen through another);
//  - stage in: the bytes the run reads are copied out with the real backend's
//    get_tensor_async, queued behind the graph it is computing, then one
//    synchronize; a base whose first touch in the run writes all of it is not
//    read;
//  - the host kernels run on shadow tensors (ggml_tensor copies whose data
//    points into the regions);
//  - stage out: the bytes the run wrote go back with set_tensor_async, in the
//    order of each base's last write (ggml-alloc may reuse one address for
//    two tensors of a run), queued before the real library's next graph.
// So a run costs one round trip however many nodes it holds. The regions live
// in an arena of the real device's host (pinned) buffer type when it has one:
// the real library copies to and from its own pinned memory asynchronously,
// where plain memory costs it a staging copy and a wait per call. Copies that
// are still queued keep the arena busy until the real backend synchronizes,
// which happens before the graph call returns (end_graph).
#pragma once

#include <cstddef>
#include <deque>
#include <unordered_map>
#include <vector>

#include "interpose/wrap.h"

namespace standin::interpose {

// How standin's host kernels reach a tensor's memory.
enum class Reach {
    direct,  // host memory: read and written in place
    staged,  // the real device's default buffer type: through copies (Note [staging])
    none,    // a layout of the real library's own (extra buffer types) or no memory at all
};

// `why` names the reason for Reach::none (a static string).
Reach reach_of(const ggml_tensor * t, ggml_backend_dev_t inner_dev, const char ** why);

// A node that computes nothing (a view, an empty tensor, not flagged for
// compute): it joins whichever run it sits in.
bool is_noop_node(const ggml_tensor * node);

// Copies moved by staging in one graph call (for the audit).
struct StagingStats {
    size_t runs      = 0;  // staged runs (round trips)
    size_t bytes_in  = 0;
    size_t bytes_out = 0;
};

// One staged run: nodes [i0, i1) of a graph, all of them local.
class StagedRun {
public:
    StagedRun(OuterBackend & backend, ggml_cgraph * graph, int i0, int i1);
    StagedRun(const StagedRun &) = delete;
    StagedRun & operator=(const StagedRun &) = delete;

    // Maps the run's tensors and copies in what it reads; false (logged) when
    // host memory for the regions cannot be had.
    bool stage_in(StagingStats & stats);
    // The tensor the kernel must run: the node itself when it touches no
    // staged memory, else its shadow.
    ggml_tensor * node_to_run(int i);
    // Queues the write-back of what the run wrote.
    void stage_out(StagingStats & stats);

private:
    struct Region {
        const ggml_tensor * base;
        size_t lo = 0, hi = 0;        // bytes of the base the run touches
        size_t wlo = 0, whi = 0;      // bytes it writes (wlo >= whi: none)
        int    last_write = -1;       // node index of the last write
        bool   read_first = false;    // first touch reads, or writes only part
        size_t first_lo = 0, first_hi = 0;  // range of the first touch
        char * host = nullptr;        // the host copy of bytes [lo, hi)
    };
    Region * region_of(const ggml_tensor * base);
    void touch(const ggml_tensor * t, int node, bool write, bool full_write);
    bool staged(const ggml_tensor * t) const;  // after the touches: t's base has a region
    ggml_tensor * shadow_of(ggml_tensor * t);

    OuterBackend & b_;
    ggml_cgraph *  g_;
    int            i0_, i1_;
    std::vector<Region> regions_;
    std::unordered_map<const ggml_tensor *, size_t> index_;  // base -> regions_ index
    // original -> shadow, for staged tensors; shadows of nodes that only read
    // staged tensors are not in it (their data is the original's).
    std::unordered_map<const ggml_tensor *, ggml_tensor *> shadows_;
    std::vector<ggml_tensor *> node_shadows_;  // per node of the run, nullptr: run the original
    std::deque<ggml_tensor>    storage_;       // the shadow structs (a deque never moves them)
};

// Called once per graph call that staged: waits for queued write-backs and
// frees the arena's space for the next call.
void end_graph_staging(OuterBackend & backend);
// Frees the backend's arena (backend free).
void release_staging(OuterBackend & backend);

} // namespace standin::interpose
