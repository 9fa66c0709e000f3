// Asynchronous global-to-shared copies (cp.async, sm_80 and later): a thread
// issues copies of 4, 8 or 16 bytes, closes them into a group, and later
// waits until at most N of its groups are still in flight. The copies travel
// without occupying registers, so a kernel can keep several stages of its
// tiles in flight at once (mmq.cu). Completion is per thread: after cp_wait a
// block or warp barrier makes the other threads' bytes visible.
// (Tried for the one-column mat-vec of mul_mat_vec_q8.cu, a ring of 4 chunks
// per warp: 21.0 us against 18.6 for 4096 x 14336 Q4_0 on the H200, and 1B
// Q4_0 decode 720 against 758 t/s: that kernel is not short of bytes in flight.)
#pragma once

#include <cstdint>

namespace standin::kernels::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void * p) {
    return uint32_t(__cvta_generic_to_shared(p));
}

// cp.async of 16 (L2 only), 8 or 4 bytes; `valid` false writes zeros instead.
template <int kPiece> __device__ __forceinline__ void cp_async(void * dst, const void * src, bool valid) {
    if constexpr (kPiece == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                     "r"(valid ? 16 : 0)
                     : "memory");
    } else if constexpr (kPiece == 8) {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                     "r"(valid ? 8 : 0)
                     : "memory");
    } else {
        static_assert(kPiece == 4, "cp.async copies 4, 8 or 16 bytes");
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                     "r"(valid ? 4 : 0)
                     : "memory");
    }
}

__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N> __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Fragments of 8x8 matrices of 16-bit elements (ldmatrix): lanes 8j..8j+7
// give the 16-byte rows of matrix j, and lane l receives the 4 bytes at
// 4 (l % 4) of row l / 4 of each matrix, in r[j]. The tensor-core kernels
// read their operands from staged tiles this way (flash_attn_dec.cu, mmq.cu).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void * p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
// Two matrices: only lanes 0..15 give row addresses.
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void * p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(p)));
}
// Transposed: lane l receives elements 2 (l % 4) and 2 (l % 4) + 1 of column
// l / 4 instead (a row-major tile read as the column-major operand).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void * p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

} // namespace standin::kernels::cuda
