// Local dispatch in interposed mode (GGML_STANDIN_LOCAL_OPS): the nodes of a
// graph whose op is selected and claimed by standin's op table for the
// device's kind run on standin's kernels, on the real library's memory in
// place where they can address it (host memory; a real CUDA device's own
// buffers for the CUDA kernels) and through host copies where they cannot
// (Note [staging]). Every other maximal run of nodes goes to the real library
// as one graph view. A selected node that cannot run locally is forwarded and
// counted by reason (audit::Refusal); the first of each reason is logged.
#pragma once

#include <set>
#include <string>

#include "interpose/wrap.h"

namespace standin::interpose {

struct LocalOps {
    bool                  all = false;
    std::set<std::string> names;  // ggml_op_desc names: ADD, MUL_MAT, SILU, SWIGLU, ...
    bool none() const { return !all && names.empty(); }
    bool selects(const ggml_tensor * node) const;
};

// Parses none|all|OP,OP,...; unknown names are reported in `warnings` and skipped.
LocalOps parse_local_ops(const std::string & spec, std::string & warnings);

// The selection in force (set once when the interposed registry is built).
void set_local_ops(const LocalOps & ops);
const LocalOps & local_ops();

// The kind of kernels local dispatch uses on this real device: CUDA for a
// real CUDA device when standin has CUDA, host otherwise.
rt::Kind local_kind_for(ggml_backend_dev_t inner);

ggml_status route_graph(OuterBackend & backend, ggml_cgraph * graph);
void        release_local_stream(OuterBackend & backend);
// The caller's thread count for the local stream (now, or when it is created).
void        set_local_threads(OuterBackend & backend, int n);

} // namespace standin::interpose
