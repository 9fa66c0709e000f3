// The streaming-read ceiling of a GPU: how fast one kernel can read a buffer
// the size of a decoding product's weights (9.4, 33 and 66 MB: an 8B model's
// wq, wo/down and gate+up in Q4_0) and a large one, rotating over buffers
// that together exceed L2 so every read comes from DRAM. Per size: blocks per
// SM x threads, and 16-byte loads in flight per thread (U1, U4, U8). The
// mat-vec kernels are measured against this, not against the data sheet.
// Usage: read_ceiling (on the GPU machine; results/h200/summary-74.txt).
#include <cstdio>
#include <cuda_runtime.h>

namespace {

bool ok(cudaError_t e, const char * what) {
    if (e != cudaSuccess) std::fprintf(stderr, "read_ceiling: %s: %s\n", what, cudaGetErrorString(e));
    return e == cudaSuccess;
}

// Each thread keeps U 16-byte loads in flight (streaming: not kept in L1/L2),
// then folds them into a value nobody reads unless it is a sentinel, so the
// loads cannot be dropped. A block covers blockDim * U consecutive vectors per
// step; the last partial step is left out (under 0.1% of these sizes).
template <int U>
__global__ void rd(const uint4 * __restrict__ p, size_t n, unsigned * out) {
    unsigned acc = 0;
    size_t i = blockIdx.x * size_t(blockDim.x) * U + threadIdx.x;
    const size_t step = size_t(gridDim.x) * blockDim.x * U;
    for (; i + (U - 1) * blockDim.x < n; i += step) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcs(p + i + u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (acc == 0x12345678u) out[0] = acc;
}

// Microseconds per read of one buffer: a warm-up, then 40 reads rotating
// over the buffers, launched back to back (so the figure includes the gap
// between kernels in a stream, as a decoding graph's products have).
template <int U> float run(uint4 ** bufs, int nb, size_t n, int blocks, int threads, unsigned * out) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    for (int r = 0; r < 4; ++r) rd<U><<<blocks, threads>>>(bufs[r % nb], n, out);
    cudaEventRecord(a);
    const int reps = 40;
    for (int r = 0; r < reps; ++r) rd<U><<<blocks, threads>>>(bufs[r % nb], n, out);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms * 1000.f / reps;
}
} // namespace

int main() {
    int sms = 0;
    unsigned * out = nullptr;
    if (!ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "no CUDA device") ||
        !ok(cudaMalloc(&out, 4), "cudaMalloc")) {
        return 1;
    }
    const size_t sizes[] = {size_t(9.4e6), size_t(33e6), size_t(66e6), size_t(512e6)};
    for (size_t bytes : sizes) {
        const int nb = bytes < 100e6 ? 8 : 2;
        uint4 * bufs[8];
        for (int i = 0; i < nb; ++i) {
            if (!ok(cudaMalloc(&bufs[i], bytes), "cudaMalloc") || !ok(cudaMemset(bufs[i], i, bytes), "cudaMemset")) return 1;
        }
        const size_t n = bytes / 16;
        printf("%7.1f MB:", bytes / 1e6);
        for (int bps : {1, 2, 4, 8}) {
            for (int threads : {256, 512}) {
                float t1 = run<1>(bufs, nb, n, sms * bps, threads, out), t4 = run<4>(bufs, nb, n, sms * bps, threads, out),
                      t8 = run<8>(bufs, nb, n, sms * bps, threads, out);
                printf("  [%dx%d] U1 %.1fus %.2fTB/s U4 %.1fus %.2f U8 %.1fus %.2f |", bps, threads, t1, bytes / t1 / 1e6,
                       t4, bytes / t4 / 1e6, t8, bytes / t8 / 1e6);
            }
        }
        printf("\n");
        for (int i = 0; i < nb; ++i) cudaFree(bufs[i]);
    }
    return ok(cudaDeviceSynchronize(), "kernels") ? 0 : 1;
}
