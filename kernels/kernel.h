// What every kernel entry looks like, on every device: it computes one graph
// node on the stream of the backend running the graph. Returns false only when
// it meets a case its support predicate should have refused (the dispatcher
// reports that as an internal error); it never aborts for caller input.
#pragma once

#include "ggml.h"
#include "runtime/runtime.h"

namespace standin::kernels {

using KernelFn  = bool (*)(rt::Stream & stream, ggml_tensor * node);
using SupportFn = bool (*)(const ggml_tensor * node);

} // namespace standin::kernels
