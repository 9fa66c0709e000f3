// Note [audit]
// The ownership audit (GGML_STANDIN_AUDIT=1, `standin audit`): objects alive by
// kind, leaks (objects created per call that are still alive at unload), and
// escapes: real-library pointers that reached the caller. Escapes are checked
// where they could happen: every object a slot returns, and every tensor
// buffer after a forwarded call restored it.
#pragma once

#include <string>
#include <vector>

#include "ggml.h"

namespace standin::interpose::audit {

// Counts an escape when `obj` is a real object (or not ours at all) about to
// be handed to the caller. Returns true when it was clean.
bool check_escape(const void * obj, const char * what);

size_t escapes();

// The mode the registry was built in ("standalone", "interposed", "preload"),
// named in the report. Static strings only.
void set_mode(const char * mode);

// Dispatch statistics of interposed graph_compute (shown in the report); a
// forwarded graph whose swaps were replayed (Note [swap plan]) also counts as
// a replayed plan.
void count_forwarded(size_t nodes, size_t graphs);  // nodes handed to the real library (views included)
void count_local(const ggml_tensor * node, bool staged);  // a node run on standin's kernels
void count_staging(size_t runs, size_t bytes_in, size_t bytes_out);  // Note [staging]
void count_plan_replay();

// Why a node that GGML_STANDIN_LOCAL_OPS selects runs on the real library.
enum class Refusal {
    no_kernel,    // standin has no kernel for the op (or may not run it interposed)
    unsupported,  // standin's kernel does not take these types or shapes
    memory,       // a tensor lives where standin's kernels can neither read nor stage it
    no_device,    // no standin device of the kind the kernels need
    count
};
const char * refusal_name(Refusal why);
// Counts the node; the first node of each reason is logged with `detail`.
void count_refused(Refusal why, const char * backend, const ggml_tensor * node, const char * detail);

// The ggml-base files mapped in this process ("libggml-base.so*"), in load
// order. More than one means two ggml runtimes whose state (log callback,
// scheduler types, terminate handler) is not shared; Note [ggml-base binding].
std::vector<std::string> loaded_ggml_bases();

struct Report {
    const char * mode = "standalone";
    size_t alive_by_kind[8] = {};
    size_t leaks   = 0;  // transient objects still alive
    size_t escapes = 0;
    size_t local_nodes = 0;       // nodes run on standin's kernels
    size_t staged_nodes = 0;      // of which on host copies of the real library's memory
    size_t forwarded_nodes = 0;   // nodes handed to the real library
    size_t forwarded_graphs = 0;  // graphs (or sub-graphs) handed to the real library
    size_t refused[size_t(Refusal::count)] = {};  // selected nodes forwarded, by reason
    size_t staged_runs = 0, staged_bytes_in = 0, staged_bytes_out = 0;
    std::vector<std::pair<std::string, size_t>> local_by_op;  // op (ggml_op_desc) -> nodes, in op order
    size_t plan_replays = 0;      // forwarded graphs whose swaps were replayed
    size_t ggml_bases = 0;        // ggml-base copies mapped in the process
    std::string text() const;
};

Report report();

// Installs the at-exit report when GGML_STANDIN_AUDIT is on (once).
void enable_at_exit();

} // namespace standin::interpose::audit
