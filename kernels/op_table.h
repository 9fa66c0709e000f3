// Note [op table]
// The one table of ops standin implements. Each row gives, per device kind, the
// support predicate and the kernel entry, and whether interposed mode may run
// the op locally. supports_op, graph_compute dispatch and the interposition
// router (interpose/router.cpp) all read this table and nothing else, so
// "claimed" and "runnable" cannot drift apart.
#pragma once

#include <vector>

#include "kernels/kernel.h"
#include "runtime/runtime.h"

namespace standin::kernels {

template <typename KernelFn> struct DeviceImpl {
    SupportFn supports = nullptr;  // nullptr: not available on this device
    KernelFn  run      = nullptr;  // nullptr with supports set: a no-op (views)
    // False for a kernel written but not yet run against ggml-cpu on its
    // device (test-backend-ops): claimed only with GGML_STANDIN_CUDA_UNPROVEN=1.
    bool      proven   = true;
};
using HostImpl = DeviceImpl<HostKernelFn>;
using CudaImpl = DeviceImpl<CudaKernelFn>;

struct OpRow {
    ggml_op    op;
    int        sub;     // ggml_unary_op / ggml_glu_op for UNARY/GLU rows, -1 otherwise
    HostImpl   host;
    CudaImpl   cuda;
    bool       local;   // interposed mode may dispatch it to standin's kernels
};

const std::vector<OpRow> & op_rows();

// The row for this node's op (and sub-op), or nullptr.
const OpRow * find_row(const ggml_tensor * node);

// The weight types the CUDA kernels decode and multiply, which its MUL_MAT,
// MUL_MAT_ID, GET_ROWS and block-to-float copies are limited to: the list of
// kernels/cuda/weight_types.h (Note [CUDA weight types]).
// The host device takes every type of quants.h's list (SI_QUANT_BLOCK_TYPES).
bool cuda_weight_type(ggml_type t);

// Whether a device of this kind can compute the node (the honest supports_op).
bool supports(rt::Kind kind, const ggml_tensor * node);

// True for ops that only reinterpret memory (VIEW, RESHAPE, ...): nothing to run.
bool is_view_op(ggml_op op);

// Runs one node: unsupported when no row of this kind claims it or the kernel
// refused it, out_of_memory when the kernel's scratch could not be had.
// `stream` must be a stream of a device of this kind.
Status run_node(rt::Kind kind, rt::Stream & stream, ggml_tensor * node);

} // namespace standin::kernels
