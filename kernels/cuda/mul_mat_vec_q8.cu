// MUL_MAT for few src1 columns (N <= 8, token generation) with weights in the
// 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, in integers:
//   - src1 is quantized first to ggml-cpu's activation blocks (act_round.cuh,
//     quantize_act): per 32 values int8 q and a float scale da;
//   - each weight block's 32 codes are multiplied with those q by dp4a (4
//     int8 products per instruction, summed exactly in int32), and the block
//     contributes dw * da * sum (+ m * da * sum(q) for the formats with a
//     minimum) - the products ggml-cpu forms, up to the order of additions.
// Memory: blocks are only 2-byte aligned, but 8 consecutive blocks are a
// multiple of 16 bytes for all five formats. Each warp therefore copies its
// next U runs of 8 blocks of the row with 16-byte loads into shared memory
// (coalesced), and issues the loads of the chunk after that before decoding
// this one, so about 2 KiB per warp are in flight. A warp takes a whole row
// when there are rows enough to fill the GPU; otherwise the 4 warps of a
// block share a row and meet in shared memory, so short matrices still
// spread over all SMs.
// Applies when K % 256 == 0 (whole runs) and the weights' rows are 16-byte
// aligned; mul_mat.cu falls back to mul_mat_vec.cu otherwise.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o MUL_MAT (-p 'type_a=q[458]_[01].*n=[1-8],');
// the logits ctests (model.logits.*.cuda); time with `perf`.
#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/mul_mat.cuh"

namespace standin::kernels::cuda::mm {

namespace {

constexpr int kWarps = 4;
constexpr int kRun = 8;  // blocks per 16-byte aligned run

// One format: its block size, how many runs a warp stages at a time (about
// 1 KiB), whether it has a minimum, and the decoding of part p (elements
// 4p..4p+3 and 16+4p..16+4p+3, or 8p..8p+7 for Q8_0) into two words of 4
// signed bytes, the scale and the minimum.
template <int T> struct Q8Fmt;

__device__ __forceinline__ uint32_t u32s(const uint8_t * p) {  // 2-byte aligned, from shared memory
    return dq::u32_at(p);
}

// Bit j (j = 0..3) of `bits` to bit 4 of byte j.
__device__ __forceinline__ uint32_t fifth_bits(uint32_t bits) {
    return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}

template <> struct Q8Fmt<GGML_TYPE_Q4_0> {
    static constexpr int kBytes = sizeof(quant::BlockQ4_0), kU = 8;
    static constexpr bool kMin = false;
    __device__ static void get(const uint8_t * b, int p, int & lo, int & hi, float & d, float & m) {
        const uint32_t q = u32s(b + 2 + 4 * p);
        lo = int(__vsub4(q & 0x0f0f0f0fu, 0x08080808u));
        hi = int(__vsub4((q >> 4) & 0x0f0f0f0fu, 0x08080808u));
        d = quant::half(*reinterpret_cast<const uint16_t *>(b));
        m = 0.0f;
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q4_1> {
    static constexpr int kBytes = sizeof(quant::BlockQ4_1), kU = 7;
    static constexpr bool kMin = true;
    __device__ static void get(const uint8_t * b, int p, int & lo, int & hi, float & d, float & m) {
        const uint32_t q = u32s(b + 4 + 4 * p);
        lo = int(q & 0x0f0f0f0fu);
        hi = int((q >> 4) & 0x0f0f0f0fu);
        d = quant::half(reinterpret_cast<const uint16_t *>(b)[0]);
        m = quant::half(reinterpret_cast<const uint16_t *>(b)[1]);
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q5_0> {
    static constexpr int kBytes = sizeof(quant::BlockQ5_0), kU = 6;
    static constexpr bool kMin = false;
    __device__ static void get(const uint8_t * b, int p, int & lo, int & hi, float & d, float & m) {
        const uint32_t qh = u32s(b + 2), q = u32s(b + 6 + 4 * p);
        lo = int(__vsub4((q & 0x0f0f0f0fu) | fifth_bits(qh >> (4 * p)), 0x10101010u));
        hi = int(__vsub4(((q >> 4) & 0x0f0f0f0fu) | fifth_bits(qh >> (16 + 4 * p)), 0x10101010u));
        d = quant::half(*reinterpret_cast<const uint16_t *>(b));
        m = 0.0f;
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q5_1> {
    static constexpr int kBytes = sizeof(quant::BlockQ5_1), kU = 6;
    static constexpr bool kMin = true;
    __device__ static void get(const uint8_t * b, int p, int & lo, int & hi, float & d, float & m) {
        const uint32_t qh = u32s(b + 4), q = u32s(b + 8 + 4 * p);
        lo = int((q & 0x0f0f0f0fu) | fifth_bits(qh >> (4 * p)));
        hi = int(((q >> 4) & 0x0f0f0f0fu) | fifth_bits(qh >> (16 + 4 * p)));
        d = quant::half(reinterpret_cast<const uint16_t *>(b)[0]);
        m = quant::half(reinterpret_cast<const uint16_t *>(b)[1]);
    }
};

template <> struct Q8Fmt<GGML_TYPE_Q8_0> {
    static constexpr int kBytes = sizeof(quant::BlockQ8_0), kU = 4;
    static constexpr bool kMin = false;
    __device__ static void get(const uint8_t * b, int p, int & lo, int & hi, float & d, float & m) {
        lo = int(u32s(b + 2 + 8 * p));
        hi = int(u32s(b + 6 + 8 * p));
        d = quant::half(*reinterpret_cast<const uint16_t *>(b));
        m = 0.0f;
    }
};

// Activation offsets of part p inside a block of 32.
template <int T> __device__ __forceinline__ int act_lo(int p) {
    return T == GGML_TYPE_Q8_0 ? 8 * p : 4 * p;
}
template <int T> __device__ __forceinline__ int act_hi(int p) {
    return T == GGML_TYPE_Q8_0 ? 8 * p + 4 : 16 + 4 * p;
}

// Up to kMaxGroup products sharing src1 (and so K, N, ne12, ne13) and the
// weight type, in one launch: rows [row0[j], row0[j] + m[j].M) of the
// launch's rows belong to member j; `rows` is their total.
constexpr int kMaxGroup = 4;
struct Q8Group {
    int     n;
    int64_t rows;
    int64_t row0[kMaxGroup];
    Q8Args  m[kMaxGroup];
};

// R warps per weight row (1 or kWarps), kWarps / R rows per block. Each warp
// streams its share of the row in chunks of U runs: the next chunk's 16-byte
// loads are issued before the current one is decoded, so a warp always has
// about 1 KiB of weights in flight.
template <int T, int NC, int R>
__global__ void __launch_bounds__(kWarps * 32, NC == 1 ? 8 : 1) mmv_q8_kernel(const __grid_constant__ Q8Group g) {
    using F = Q8Fmt<T>;
    constexpr int kChunk = F::kU * kRun * F::kBytes;  // bytes a warp stages at once
    static_assert(kChunk % 16 == 0, "runs of 8 blocks are whole 16-byte words");
    constexpr int kWords = kChunk / 16, kLoads = (kWords + 31) / 32;
    __shared__ uint4 stage[kWarps][kWords];
    __shared__ float part_sums[kWarps][NC];

    const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x / 32);
    const int64_t grow = int64_t(blockIdx.x) * (kWarps / R) + warp / R;  // this warp's row of the launch
    const bool live = grow < g.rows;
    int j = 0;
#pragma unroll
    for (int t = 1; t < kMaxGroup; ++t) {
        if (t < g.n && grow >= g.row0[t]) j = t;
    }
    const Q8Args & p = g.m[j];
    const int64_t m = grow - g.row0[j];
    const int64_t n_runs = p.K / (32 * kRun), n_chunks = (n_runs + F::kU - 1) / F::kU;
    const int ncols = int(p.N), sub = warp % R;
    const int part = lane & 3, blk_in_run = lane >> 2;

    for (int64_t z = blockIdx.y; z < p.ne12 * p.ne13; z += gridDim.y) {
        const int64_t i12 = z % p.ne12, i13 = z / p.ne12;
        const uint8_t * row = reinterpret_cast<const uint8_t *>(p.a + m * p.a_nb1 + (i12 / p.r2) * p.a_nb2 +
                                                                (i13 / p.r3) * p.a_nb3);
        const int64_t col0 = (i12 + i13 * p.ne12) * p.N;  // first activation column of this matrix
        float acc[NC];
#pragma unroll
        for (int c = 0; c < NC; ++c) acc[c] = 0.0f;

        uint4 buf[kLoads];
        auto fetch = [&](int64_t chunk) {
            const int64_t r0 = chunk * F::kU;
            const int words = int((n_runs - r0 < F::kU ? n_runs - r0 : F::kU) * kRun * F::kBytes / 16);
            const uint4 * src = reinterpret_cast<const uint4 *>(row + r0 * kRun * F::kBytes);
#pragma unroll
            for (int i = 0; i < kLoads; ++i) {
                const int w = lane + 32 * i;
                if (w < words) buf[i] = __ldg(src + w);
            }
        };
        int64_t chunk = live ? sub : n_chunks;
        if (chunk < n_chunks) fetch(chunk);
        for (; chunk < n_chunks; chunk += R) {
            const int64_t r0 = chunk * F::kU;
            const int runs = n_runs - r0 < F::kU ? int(n_runs - r0) : F::kU;
            __syncwarp();
#pragma unroll
            for (int i = 0; i < kLoads; ++i) {
                if (lane + 32 * i < kWords) stage[warp][lane + 32 * i] = buf[i];
            }
            __syncwarp();
            if (chunk + R < n_chunks) fetch(chunk + R);  // in flight while this chunk is decoded
            const uint8_t * sbytes = reinterpret_cast<const uint8_t *>(stage[warp]);
#pragma unroll
            for (int u = 0; u < F::kU; ++u) {
                if (u < runs) {
                    int lo, hi;
                    float d, mn;
                    F::get(sbytes + (u * kRun + blk_in_run) * F::kBytes, part, lo, hi, d, mn);
                    const int64_t ib = (r0 + u) * kRun + blk_in_run;  // block index in the row
#pragma unroll
                    for (int c = 0; c < NC; ++c) {
                        if (c < ncols) {
                            const int8_t * qa = p.q + (col0 + c) * p.K + ib * 32;
                            const int alo = *reinterpret_cast<const int *>(qa + act_lo<T>(part));
                            const int ahi = *reinterpret_cast<const int *>(qa + act_hi<T>(part));
                            const float da = p.da[(col0 + c) * (p.K / 32) + ib];
                            const int s = __dp4a(lo, alo, __dp4a(hi, ahi, 0));
                            acc[c] = fmaf(d * da, float(s), acc[c]);
                            if constexpr (F::kMin) {
                                const int sa = __dp4a(0x01010101, alo, __dp4a(0x01010101, ahi, 0));
                                acc[c] = fmaf(mn * da, float(sa), acc[c]);
                            }
                        }
                    }
                }
            }
        }
        store_row_sums<NC, R, kWarps>(acc, part_sums, live, ncols, p.d + i12 * p.d_nb2 + i13 * p.d_nb3 + m * 4,
                                      p.d_nb1);
    }
}

template <int T, int R> void launch_q8_r(const Q8Group & g, cudaStream_t st) {
    const Q8Args & p = g.m[0];
    const dim3 grid(unsigned((g.rows + kWarps / R - 1) / (kWarps / R)), grid_yz(p.ne12 * p.ne13));
    const dim3 block(kWarps * 32);
    if (p.N <= 1) {
        mmv_q8_kernel<T, 1, R><<<grid, block, 0, st>>>(g);
    } else if (p.N <= 2) {
        mmv_q8_kernel<T, 2, R><<<grid, block, 0, st>>>(g);
    } else if (p.N <= 4) {
        mmv_q8_kernel<T, 4, R><<<grid, block, 0, st>>>(g);
    } else {
        mmv_q8_kernel<T, 8, R><<<grid, block, 0, st>>>(g);
    }
}

// A warp per row while there are enough rows to fill the GPU with warps (or
// too few chunks per row to share); otherwise every warp of a block on one row.
template <int T> void launch_q8_t(const Q8Group & g, cudaStream_t st) {
    const int64_t n_chunks = (g.m[0].K / (32 * kRun) + Q8Fmt<T>::kU - 1) / Q8Fmt<T>::kU;
    if (g.rows * g.m[0].ne12 * g.m[0].ne13 >= 1024 || n_chunks < 2 * kWarps) {
        launch_q8_r<T, 1>(g, st);
    } else {
        launch_q8_r<T, kWarps>(g, st);
    }
}

void launch_q8(ggml_type t, const Q8Group & g, cudaStream_t st) {
    switch (t) {
        case GGML_TYPE_Q4_0: launch_q8_t<GGML_TYPE_Q4_0>(g, st); break;
        case GGML_TYPE_Q4_1: launch_q8_t<GGML_TYPE_Q4_1>(g, st); break;
        case GGML_TYPE_Q5_0: launch_q8_t<GGML_TYPE_Q5_0>(g, st); break;
        case GGML_TYPE_Q5_1: launch_q8_t<GGML_TYPE_Q5_1>(g, st); break;
        case GGML_TYPE_Q8_0: launch_q8_t<GGML_TYPE_Q8_0>(g, st); break;
        default:             break;
    }
}

Q8Args args_for(const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * d, const int8_t * q, const float * da) {
    Q8Args p;
    fill_common(p, a, b, d);
    p.q = q;
    p.da = da;
    return p;
}

} // namespace

bool q8_applies(const ggml_tensor * a, const ggml_tensor * b) {
    const ggml_type t = a->type;
    const bool type_ok = t == GGML_TYPE_Q4_0 || t == GGML_TYPE_Q4_1 || t == GGML_TYPE_Q5_0 ||
                         t == GGML_TYPE_Q5_1 || t == GGML_TYPE_Q8_0;
    // K % 256: whole runs of 8 blocks, and 16-byte aligned activation columns.
    return type_ok && b->ne[1] <= 8 && a->ne[0] % (32 * kRun) == 0 && aligned_to(a, 16) && a->nb[1] % 16 == 0 &&
           a->nb[2] % 16 == 0 && a->nb[3] % 16 == 0 && a->ne[1] <= int64_t(INT32_MAX);
}

bool same_src1(const ggml_tensor * x, const ggml_tensor * y) {
    if (x == y) return true;
    if (x->data != y->data || x->type != y->type) return false;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (x->ne[i] != y->ne[i] || x->nb[i] != y->nb[i]) return false;
    }
    return true;
}

bool mul_mat_q8_group(rt::cuda::CudaStream & stream, ggml_tensor * const * nodes, int n) {
    const ggml_tensor * b = nodes[0]->src[1];
    const int64_t K = b->ne[0], cols = ggml_nrows(b);
    const size_t q_bytes = size_t(K * cols), bytes = q_bytes + size_t(cols * (K / 32)) * sizeof(float);
    cudaStream_t st = stream.begin_launch();
    void * scratch = stream.scratch(bytes);
    const bool pooled = scratch == nullptr;
    if (pooled) {
        keep_pool_memory();
        if (!scratch_alloc(&scratch, bytes, st)) return false;
    }
    int8_t * q = static_cast<int8_t *>(scratch);
    float * da = reinterpret_cast<float *>(q + q_bytes);  // q_bytes is a multiple of 256
    quantize_act(b, q, da, st);
    SI_CUDA_LAUNCH_CHECK();
    // Consecutive members of one weight type share a launch, kMaxGroup at most.
    for (int i = 0; i < n;) {
        Q8Group g{};
        const ggml_type t = nodes[i]->src[0]->type;
        int64_t & rows = g.rows;
        while (i < n && g.n < kMaxGroup && nodes[i]->src[0]->type == t &&
               rows + nodes[i]->src[0]->ne[1] <= int64_t(INT32_MAX) / 2) {
            g.row0[g.n] = rows;
            g.m[g.n] = args_for(nodes[i]->src[0], b, nodes[i], q, da);
            rows += g.m[g.n].M;
            ++g.n;
            ++i;
        }
        launch_q8(t, g, st);
        SI_CUDA_LAUNCH_CHECK();
    }
    if (pooled) SI_CUDA_CHECK(cudaFreeAsync(scratch, st));
    return true;
}

} // namespace standin::kernels::cuda::mm

namespace standin::kernels::cuda {

bool mul_mat_group_ok(const ggml_tensor * first, const ggml_tensor * next) {
    return first->op == GGML_OP_MUL_MAT && next->op == GGML_OP_MUL_MAT && first->type == GGML_TYPE_F32 &&
           next->type == GGML_TYPE_F32 && mm::same_src1(first->src[1], next->src[1]) &&
           mm::q8_applies(first->src[0], first->src[1]) && mm::q8_applies(next->src[0], next->src[1]);
}

bool mul_mat_group(rt::Stream & stream, ggml_tensor * const * nodes, int n) {
    return mm::mul_mat_q8_group(static_cast<rt::cuda::CudaStream &>(stream), nodes, n);
}

} // namespace standin::kernels::cuda
