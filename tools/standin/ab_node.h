// One graph node, captured while a model runs and replayed alone on two
// backends: the pieces of `standin ab` that do not know about llama.
//
// A node is captured in two steps, at the two moments ggml's scheduler calls
// the eval callback (ggml_backend_sched_eval_callback): on `ask`, every earlier
// node has run and this one has not, so the sources and the node's own memory
// hold exactly what its kernel will read (even when the allocator later lets
// the node overwrite a source in place, or the node writes into a view of the
// KV cache); after it ran, the output. Each tensor is kept with its exact
// layout (type, ne, nb) and the bytes of its span, so a replay sees the same
// strides, views and padding the model's graph had. Aliasing is not kept: each
// source and the output get memory of their own, which computes the same
// values for every op whose result does not depend on reading what it writes
// (all ops of llama graphs; an in-place op's output starts from the captured
// prior content, see NodeSnap::aliases).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"

namespace standin::tools::ab {

struct TensorSnap {
    bool                 present = false;
    ggml_type            type    = GGML_TYPE_F32;
    int64_t              ne[4]   = {1, 1, 1, 1};
    size_t               nb[4]   = {0, 0, 0, 0};
    std::vector<uint8_t> bytes;  // the span ggml_nbytes covers, from the first element
};

struct NodeSnap {
    int         index = 0;  // position in the model's graph (scheduler order)
    std::string name;       // the model's tensor name (attn_norm-0, ...)
    ggml_op     op = GGML_OP_NONE;
    int32_t     op_params[GGML_MAX_OP_PARAMS / sizeof(int32_t)] = {};
    TensorSnap  out;        // layout; bytes = the memory before the node ran, when it aliases (see below)
    bool        aliases = false;  // the output is a view of memory that existed before (SET_ROWS, CPY, in-place)
    TensorSnap  src[GGML_MAX_SRC];
    std::vector<uint8_t> result;  // the output's span after the model ran it
};

// Why a node cannot be replayed faithfully, or "" when it can.
std::string replay_blocker(const ggml_tensor * node);

// The "ask" half of a capture: layout, op params, sources and the prior content of an aliased output.
NodeSnap capture_inputs(const ggml_tensor * node, int index);
// The "after" half: the output the model computed.
void capture_result(const ggml_tensor * node, NodeSnap & snap);

// The op type a node is grouped under: "MUL_MAT q4_0,f32->f32".
std::string op_key(const NodeSnap & snap);
// "4096x7x1x1"
std::string shape_str(const int64_t ne[4]);

// A node rebuilt alone on one backend: fresh tensors with the captured
// layouts, the inputs copied in, run once for its output. Then time_once()
// as often as wanted; the backend's memory is held until the Replay dies.
class Replay {
public:
    Replay(ggml_backend_t backend, const NodeSnap & snap);
    ~Replay();
    Replay(const Replay &) = delete;
    Replay & operator=(const Replay &) = delete;

    bool                         supported() const { return supported_; }
    const std::string &          error() const { return error_; }
    const std::vector<uint8_t> & out() const { return out_; }  // the output's span after the first run
    void                         time_once();                  // one more timed run (no-op after an error)
    double                       median_ms() const;

private:
    ggml_backend_t        backend_;
    ggml_context *        ctx_ = nullptr;
    ggml_cgraph *         graph_ = nullptr;
    ggml_backend_buffer_t buf_ = nullptr;
    bool                  supported_ = true;
    std::string           error_;
    std::vector<uint8_t>  out_;
    std::vector<double>   ms_;
};

// The logical elements of a tensor span (any layout, any type with a to_float), as float.
std::vector<float> to_floats(const TensorSnap & layout, const std::vector<uint8_t> & span);

struct Diff {
    double max_abs = 0;
    double nmse    = 0;  // sum((a-b)^2) / sum(b^2); infinite when the non-finite values disagree
    size_t n       = 0;
    size_t nonfinite_mismatch = 0;
};
// `a` against the reference `b` (same size).
Diff compare(const std::vector<float> & a, const std::vector<float> & b);

} // namespace standin::tools::ab
