// cuBLAS, loaded at run time. The plugin must boot on machines without the
// CUDA toolkit's libraries (and for the host device alone), so libcublas is
// not a link dependency: the first use dlopen()s it and resolves the few entry
// points used by the batched MUL_MAT path (kernels/cuda/mul_mat_blas.cu).
// Absent or incomplete, it is reported once through the log and callers fall
// back to standin's own kernels.
//
// Handles are per (device, stream), created on first use outside any graph
// recording, each with its own workspace so that cuBLAS never allocates while
// a CUDA graph is being recorded.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace standin::rt::cuda::blas {

struct Api {
    decltype(&cublasCreate_v2)              create = nullptr;
    decltype(&cublasDestroy_v2)             destroy = nullptr;
    decltype(&cublasSetStream_v2)           set_stream = nullptr;
    decltype(&cublasSetWorkspace_v2)        set_workspace = nullptr;
    // Spelled out: the header overloads this name for C++ callers.
    using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                                     int, const void *, const void *, cudaDataType, int, long long,
                                                     const void *, cudaDataType, int, long long, const void *, void *,
                                                     cudaDataType, int, long long, int, cublasComputeType_t,
                                                     cublasGemmAlgo_t);
    GemmStridedBatchedEx gemm_strided_batched = nullptr;
};

// The loaded library, or nullptr when cuBLAS is unavailable (logged once).
const Api * api();

// The handle bound to `stream` on `device`; nullptr when unavailable.
cublasHandle_t handle_for(int device, cudaStream_t stream);

// Releases the handle of a stream that is being destroyed.
void forget_stream(cudaStream_t stream);

} // namespace standin::rt::cuda::blas
