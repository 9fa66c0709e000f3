// The streaming-read ceiling of a GPU: how fast one kernel can read a buffer
// the size of a decoding product's weights (9.4, 33 and 66 MB: an 8B model's
// wq, wo/down and gate+up in Q4_0) and a large one, rotating over buffers
// that together exceed L2 so every read comes from DRAM. Per size: blocks per
// SM x threads, and 16-byte loads in flight per thread (U1, U4, U8). The
// mat-vec kernels are measured against this, not against the data sheet.
// Usage: read_ceiling (on the GPU machine; results/h200/summary-74.txt).
// `read_ceiling rows`: instead, the one-column mat-vec's access pattern over
// Q4_0-shaped rows (Note [lane per block] in kernels/cuda/mul_mat_vec_q8.cu)
// against the same bytes read by 16-byte coalesced loads, each with a grid of
// one warp per row pair (waves, as the mat-vec launches) and a grid that fills
// the GPU once and strides over the row pairs: which of the two costs the
// mat-vec its distance to the ceiling, the loads or the last wave.
// Neither, on the H100 (results/h200/summary-77.txt): 4096 rows read in
// 13.7 us by the mat-vec's loads, 14.2 coalesced, 15.0 / 14.1 strided,
// where the kernel that decodes them takes 19.7-20.1.
#include <cstdint>
#include <cstdio>
#include <string>
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

// The mat-vec's pattern over rows of 14336 Q4_0 weights (448 blocks of 18
// bytes, 8064 bytes): a warp takes two rows; at step s lane l reads block
// 32 s + l of each, five 4-byte words from the word holding its first byte
// (kLaneBlock), or the step's 576 bytes of each row as 16-byte pieces (36:
// lanes 0..3 take two); the next step's words are in flight while this one's
// are folded. kStride: a grid of kBlocksPerSm blocks per SM striding over the
// row pairs; else one warp per row pair.
constexpr int kRowBytes = 8064, kStepBytes = 576, kSteps = kRowBytes / kStepBytes, kBlocksPerSm = 6;
enum Pattern { kLaneBlock, kCoalesced };
template <Pattern P> struct RowWords {
    static constexpr int kN = P == kLaneBlock ? 5 : 8;
    uint32_t w[2][kN];
    __device__ void load(const uint8_t * rows, int s, int lane) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const uint8_t * row = rows + r * kRowBytes + s * kStepBytes;
            if constexpr (P == kLaneBlock) {
                const uint32_t * src = reinterpret_cast<const uint32_t *>(row + ((lane * 18) & ~3));
#pragma unroll
                for (int k = 0; k < kN; ++k) w[r][k] = __ldg(src + k);
            } else {
                const uint4 a = __ldg(reinterpret_cast<const uint4 *>(row) + lane);
                const uint4 b = lane < 4 ? __ldg(reinterpret_cast<const uint4 *>(row) + 32 + lane) : make_uint4(0, 0, 0, 0);
                w[r][0] = a.x; w[r][1] = a.y; w[r][2] = a.z; w[r][3] = a.w;
                w[r][4] = b.x; w[r][5] = b.y; w[r][6] = b.z; w[r][7] = b.w;
            }
        }
    }
    __device__ unsigned fold() const {
        unsigned a = 0;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
#pragma unroll
            for (int k = 0; k < kN; ++k) a ^= w[r][k];
        }
        return a;
    }
};
template <Pattern P, bool kStride>
__global__ void __launch_bounds__(128, kBlocksPerSm) rd_rows(const uint8_t * __restrict__ p, int pairs, unsigned * out) {
    const int lane = threadIdx.x & 31;
    const int first = blockIdx.x * 4 + threadIdx.x / 32, stride = kStride ? gridDim.x * 4 : pairs;
    unsigned acc = 0;
    for (int pair = first; pair < pairs; pair += stride) {
        const uint8_t * rows = p + size_t(pair) * 2 * kRowBytes;
        RowWords<P> cur, nxt;
        cur.load(rows, 0, lane);
        for (int s = 0; s < kSteps; ++s) {
            if (s + 1 < kSteps) nxt.load(rows, s + 1, lane);
            acc ^= cur.fold();
            cur = nxt;
        }
    }
    if (acc == 0x12345678u) out[0] = acc;
}

// Microseconds per read of one buffer: a warm-up, then 40 reads rotating
// over the buffers, launched back to back (so the figure includes the gap
// between kernels in a stream, as a decoding graph's products have).
template <typename Launch> float run(int nb, Launch launch) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    for (int r = 0; r < 4; ++r) launch(r % nb);
    cudaEventRecord(a);
    const int reps = 40;
    for (int r = 0; r < reps; ++r) launch(r % nb);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms * 1000.f / reps;
}
template <int U> float run(uint4 ** bufs, int nb, size_t n, int blocks, int threads, unsigned * out) {
    return run(nb, [&](int i) { rd<U><<<blocks, threads>>>(bufs[i], n, out); });
}

// The mat-vec pattern table: 4096 rows (33 MB) and 14336 rows (116 MB).
int rows_table(int sms, unsigned * out) {
    for (int rows : {4096, 14336}) {
        const size_t bytes = size_t(rows) * kRowBytes;
        const int nb = 8, pairs = rows / 2;
        uint8_t * bufs[8];
        for (int i = 0; i < nb; ++i) {
            if (!ok(cudaMalloc(&bufs[i], bytes), "cudaMalloc") || !ok(cudaMemset(bufs[i], i, bytes), "cudaMemset")) return 1;
        }
        const int blocks = (pairs + 3) / 4, fill = sms * kBlocksPerSm;
        const float t[4] = {
            run(nb, [&](int i) { rd_rows<kLaneBlock, false><<<blocks, 128>>>(bufs[i], pairs, out); }),
            run(nb, [&](int i) { rd_rows<kLaneBlock, true><<<fill, 128>>>(bufs[i], pairs, out); }),
            run(nb, [&](int i) { rd_rows<kCoalesced, false><<<blocks, 128>>>(bufs[i], pairs, out); }),
            run(nb, [&](int i) { rd_rows<kCoalesced, true><<<fill, 128>>>(bufs[i], pairs, out); })};
        printf("%d rows (%.1f MB, %.2f waves of %d blocks): lane-block %.1f us (%.2f TB/s), strided %.1f (%.2f); "
               "coalesced %.1f (%.2f), strided %.1f (%.2f)\n",
               rows, bytes / 1e6, double(blocks) / fill, blocks, t[0], bytes / t[0] / 1e6, t[1], bytes / t[1] / 1e6, t[2],
               bytes / t[2] / 1e6, t[3], bytes / t[3] / 1e6);
        for (int i = 0; i < nb; ++i) cudaFree(bufs[i]);
    }
    return ok(cudaDeviceSynchronize(), "kernels") ? 0 : 1;
}
} // namespace

int main(int argc, char ** argv) {
    int sms = 0;
    unsigned * out = nullptr;
    if (!ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "no CUDA device") ||
        !ok(cudaMalloc(&out, 4), "cudaMalloc")) {
        return 1;
    }
    if (argc > 1 && std::string(argv[1]) == "rows") return rows_table(sms, out);
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
