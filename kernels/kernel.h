// What every kernel entry looks like, on every device: it computes one graph
// node on the stream of the backend running the graph, and says why when it
// did not. It never aborts for caller input.
#pragma once

#include <cstdint>

#include "ggml.h"
#include "runtime/runtime.h"

namespace standin::rt::host {
class HostStream;
}
namespace standin::rt::cuda {
class CudaStream;
}

namespace standin::kernels {

// A kernel's outcome. unsupported: a case its support predicate should have
// refused (the dispatcher reports an internal error); out_of_memory: scratch
// or workspace memory could not be had (the caller may free memory and retry).
// Built from bool so that `return true` / `return false` read as ok /
// unsupported; tests as true only when ok.
struct Status {
    enum Code : uint8_t { ok, unsupported, out_of_memory };
    Code code;
    constexpr Status(bool done) : code(done ? ok : unsupported) {}  // NOLINT: implicit on purpose
    constexpr Status(Code c) : code(c) {}                            // NOLINT
    constexpr explicit operator bool() const { return code == ok; }
};

// A kernel entry per device kind, taking that kind's stream: the op table
// narrows the stream once (kernels::run_node, through HostStream::of and
// CudaStream::of in runtime/), so no kernel casts one.
using HostKernelFn = Status (*)(rt::host::HostStream & stream, ggml_tensor * node);
using CudaKernelFn = Status (*)(rt::cuda::CudaStream & stream, ggml_tensor * node);
using SupportFn    = bool (*)(const ggml_tensor * node);

} // namespace standin::kernels
