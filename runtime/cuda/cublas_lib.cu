#include "runtime/cuda/cublas_lib.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <utility>

#include "diag/log.h"
#include "runtime/cuda/cuda_device.h"

namespace standin::rt::cuda::blas {

namespace {

// The soname matching the CUDA major version this plugin was built with
// (its runtime is linked statically), then the unversioned development name.
#define SI_STR2(x) #x
#define SI_STR(x) SI_STR2(x)
// Last, the toolkit this plugin was built against (often not on the loader's
// search path).
const char * const kLibNames[] = {
    "libcublas.so." SI_STR(CUBLAS_VER_MAJOR), "libcublas.so",
#ifdef STANDIN_CUDA_LIB_DIR
    STANDIN_CUDA_LIB_DIR "/libcublas.so." SI_STR(CUBLAS_VER_MAJOR),
#endif
};

template <typename F> bool resolve(void * lib, const char * name, F & out) {
    out = reinterpret_cast<F>(dlsym(lib, name));
    if (out == nullptr) {
        SI_LOG_WARN("cuBLAS: symbol %s missing; batched MUL_MAT uses standin's own kernels", name);
    }
    return out != nullptr;
}

Api * load() {
    void * lib = nullptr;
    for (const char * n : kLibNames) {
        lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
        if (lib != nullptr) break;
    }
    if (lib == nullptr) {
        SI_LOG_INFO("cuBLAS not found (%s); batched MUL_MAT uses standin's own kernels", dlerror());
        return nullptr;
    }
    static Api a;
    const bool ok = resolve(lib, "cublasCreate_v2", a.create) && resolve(lib, "cublasDestroy_v2", a.destroy) &&
                    resolve(lib, "cublasSetStream_v2", a.set_stream) &&
                    resolve(lib, "cublasSetWorkspace_v2", a.set_workspace) &&
                    resolve(lib, "cublasGemmStridedBatchedEx", a.gemm_strided_batched);
    // The library stays loaded for the life of the process: handles outlive
    // nothing that could unload it safely.
    return ok ? &a : nullptr;
}

// 32 MiB: the workspace size cuBLAS documents as enough for Hopper.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct Entry {
    cublasHandle_t handle = nullptr;
    void *         workspace = nullptr;
};

std::mutex                        g_mutex;
std::map<cudaStream_t, Entry> &   handles() {
    static auto * m = new std::map<cudaStream_t, Entry>();  // never destroyed: used until exit
    return *m;
}

// One small GEMM of the kind the batched products run (F16 x F16 -> F32,
// CUBLAS_COMPUTE_32F) on a new handle, waited for: cuBLAS sets up its kernels
// and heuristics in its first call, which otherwise lands in a process's first
// prompt (measured on the H200, results/h200/summary-68.txt: llama-batched-bench's
// first 128-token prompt took 113 ms with cuBLAS and 12 ms without, the
// handle and libraries already made). Best effort: a failure here only leaves
// that cost where it was.
void warm_up(const Api & a, cublasHandle_t h, cudaStream_t stream) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess || capturing != cudaStreamCaptureStatusNone) {
        cudaGetLastError();
        return;  // no allocation or wait inside a recording
    }
    constexpr int n = 128;
    void * mem = nullptr;
    if (cudaMalloc(&mem, size_t(n) * n * (2 + 2 + 4)) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    char * A = static_cast<char *>(mem);
    char * B = A + size_t(n) * n * 2;
    char * C = B + size_t(n) * n * 2;
    const float one = 1.0f, zero = 0.0f;
    if (cudaMemsetAsync(mem, 0, size_t(n) * n * (2 + 2 + 4), stream) == cudaSuccess) {
        (void) a.gemm_strided_batched(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, A, CUDA_R_16F, n, 0, B, CUDA_R_16F,
                                      n, 0, &zero, C, CUDA_R_32F, n, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    SI_CUDA_CHECK_WARN(cudaStreamSynchronize(stream));
    SI_CUDA_CHECK_WARN(cudaFree(mem));
}

} // namespace

const Api * api() {
    static Api * a = load();
    return a;
}

cublasHandle_t handle_for(int device, cudaStream_t stream) {
    const Api * a = api();
    if (a == nullptr) {
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = handles().find(stream);
    if (it != handles().end()) {
        return it->second.handle;
    }
    Entry e;
    SI_CUDA_CHECK(cudaSetDevice(device));
    if (a->create(&e.handle) != CUBLAS_STATUS_SUCCESS) {
        SI_LOG_WARN("cuBLAS: cublasCreate failed on device %d; batched MUL_MAT uses standin's own kernels", device);
        handles()[stream] = Entry{};
        return nullptr;
    }
    if (cudaMalloc(&e.workspace, kWorkspaceBytes) != cudaSuccess) {
        cudaGetLastError();
        a->destroy(e.handle);
        SI_LOG_WARN("cuBLAS: no memory for its workspace on device %d", device);
        handles()[stream] = Entry{};
        return nullptr;
    }
    a->set_stream(e.handle, stream);
    a->set_workspace(e.handle, e.workspace, kWorkspaceBytes);
    warm_up(*a, e.handle, stream);
    handles()[stream] = e;
    return e.handle;
}

void forget_stream(cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = handles().find(stream);
    if (it == handles().end()) {
        return;
    }
    if (it->second.handle != nullptr) {
        api()->destroy(it->second.handle);
        SI_CUDA_CHECK_WARN(cudaFree(it->second.workspace));
    }
    handles().erase(it);
}

} // namespace standin::rt::cuda::blas
