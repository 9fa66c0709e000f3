// Host-device kernels (one op family per file in kernels/host/). Each runs on
// the HostStream's worker pool. Entry points match kernels::KernelFn.
#pragma once

#include "kernels/kernel.h"

namespace standin::kernels::host {

bool binary(rt::Stream & stream, ggml_tensor * node);  // ADD SUB MUL DIV, with broadcasting
bool scale(rt::Stream & stream, ggml_tensor * node);   // SCALE (scale and bias)
bool copy(rt::Stream & stream, ggml_tensor * node);    // CPY DUP CONT between F32/F16/BF16

} // namespace standin::kernels::host
