// CUDA-device kernels (one op family per .cu file in kernels/cuda/). Entry
// points match kernels::KernelFn; they enqueue on the backend's CUDA stream and
// return without waiting.
#pragma once

#include "kernels/kernel.h"

namespace standin::kernels::cuda {

bool binary(rt::Stream & stream, ggml_tensor * node);  // ADD SUB MUL DIV, with broadcasting
bool scale(rt::Stream & stream, ggml_tensor * node);   // SCALE
bool copy(rt::Stream & stream, ggml_tensor * node);    // CPY DUP CONT between F32/F16/BF16

} // namespace standin::kernels::cuda
