// Hopper's bulk copies from global into shared memory (cp.async.bulk, the
// copy engine's 1-D form) and the transaction barriers they complete
// (mbarrier with an expected byte count). A thread asks for a run of bytes
// and goes on; whoever reads the run waits on the barrier's phase. The copy
// holds no registers while in flight, so a warp can keep several steps of
// weights on their way where registers held one (mul_mat_vec_bulk.cu).
// sm_90 and later only: below it they compile to nothing, and their callers
// are never launched by a build that targets such a device
// (mul_mat_vec_bulk.cu, every_target_copies).
#pragma once

#include <cstdint>

namespace standin::kernels::cuda::bulk {

__device__ __forceinline__ uint32_t smem_addr(const void * p) {
    return uint32_t(__cvta_generic_to_shared(p));
}

// A barrier that one arrival (with its byte count) and the bytes complete.
__device__ __forceinline__ void barrier_init(uint64_t * bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}

// Makes initialised barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void barrier_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// Orders this thread's earlier shared-memory reads (by the warp, after a
// __syncwarp) before the copies it issues next into the same bytes.
__device__ __forceinline__ void reuse_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// The arrival of this phase, announcing `bytes` of copies to come.
__device__ __forceinline__ void expect_bytes(uint64_t * bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
#endif
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) from src to dst,
// completing on `bar`.
__device__ __forceinline__ void copy(void * dst, const void * src, uint32_t bytes, uint64_t * bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
            smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar))
        : "memory");
#endif
}

// Waits until the barrier's phase of this parity has completed.
__device__ __forceinline__ void wait(uint64_t * bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
#endif
}

} // namespace standin::kernels::cuda::bulk
