// GLU on the CUDA device: gated activations y = act(x) * g, as
// kernels/host/glu.cpp, act chosen by the sub-op (ggml_glu_op): REGLU (relu),
// GEGLU (tanh gelu), SWIGLU (silu), GEGLU_ERF, GEGLU_QUICK, SWIGLU_OAI (x
// clamped above at `limit`, g clamped to [-limit, limit], y = x * sigmoid(alpha
// x) * (g + 1)), SWIGLU_CLAMP (same clamps, y = silu(x) * g); alpha / limit are
// the floats in op_params[2] / [3].
// Fused form (src1 null): each src0 row holds x then g (g then x when
// op_params[1], "swapped", is set); split form: x = src0, g = src1.
// F32 or F16 (src and dst of one type, as the predicate requires), any
// strides; the math is f32, rounded once into dst's type. One thread per
// output element.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o SWIGLU (GEGLU, REGLU, ...)
#include <cuda_fp16.h>

#include <cstring>

#include "kernels/common/activations.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

struct GluArgs {
    int     op;
    float   alpha, limit;
    int64_t xo, go;  // element offsets of x and g inside their rows
};

__device__ __forceinline__ float gate(const GluArgs & p, float x, float g) {
    switch (p.op) {
        case GGML_GLU_OP_REGLU:       return act::relu(x) * g;
        case GGML_GLU_OP_GEGLU:       return act::gelu(x) * g;
        case GGML_GLU_OP_SWIGLU:      return act::silu(x) * g;
        case GGML_GLU_OP_GEGLU_ERF:   return act::gelu_erf(x) * g;
        case GGML_GLU_OP_GEGLU_QUICK: return act::gelu_quick(x) * g;
        case GGML_GLU_OP_SWIGLU_OAI: {
            const float xc = fminf(x, p.limit);
            const float gc = fminf(fmaxf(g, -p.limit), p.limit);
            return xc / (1.0f + expf(p.alpha * (-xc))) * (gc + 1.0f);
        }
        case GGML_GLU_OP_SWIGLU_CLAMP: {
            const float xc = fminf(x, p.limit);
            const float gc = fminf(fmaxf(g, -p.limit), p.limit);
            return xc / (1.0f + expf(-xc)) * gc;
        }
        default: return NAN;
    }
}

// With q set (dst F32 and contiguous, ne0 % 32 == 0, so each warp holds
// whole 32-groups), the stored y is also quantized for the integer mat-vec
// exactly as quantize_act would (act_round.cuh): codes q[k], {d, d * sum} at
// ds[k / 32].
template <int OP>
__global__ void glu_kernel(Shape d, Shape a, Shape b, char * dd, const char * ad, const char * bd, GluArgs p,
                           int64_t n, int8_t * q, float2 * ds) {
    pdl_wait();  // Note [dependent launch]
    pdl_trigger();
    const int64_t ne0 = d.ne[0];
    if (OP >= 0) p.op = OP;
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i = k % ne0;
        int64_t i1, i2, i3;
        split_row(d, k / ne0, i1, i2, i3);
        const float x = load_f(a.type, row_at(ad, a, i1, i2, i3) + (p.xo + i) * a.nb[0]);
        const float g = load_f(b.type, row_at(bd, b, i1, i2, i3) + (p.go + i) * b.nb[0]);
        const float y = gate(p, x, g);
        store_f(d.type, row_at(dd, d, i1, i2, i3) + i * d.nb[0], y);
        if (q != nullptr) quantize_warp32(y, q + k, ds + k / 32);
    }
}

} // namespace

Status glu(rt::cuda::CudaStream & stream, ggml_tensor * node) { return glu_quant(stream, node, nullptr, nullptr); }

Status glu_quant(rt::cuda::CudaStream & stream, ggml_tensor * node, int8_t * q, float2 * ds) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    if ((a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16) || node->type != a->type ||
        (b != nullptr && b->type != a->type)) {
        return false;  // the support predicate (op_table.cpp) refuses these
    }
    GluArgs p{};
    p.op = int(ggml_get_glu_op(node));
    std::memcpy(&p.alpha, reinterpret_cast<const float *>(node->op_params) + 2, sizeof(float));
    std::memcpy(&p.limit, reinterpret_cast<const float *>(node->op_params) + 3, sizeof(float));
    const bool swapped = reinterpret_cast<const int32_t *>(node->op_params)[1] != 0;
    const int64_t ne0 = node->ne[0];
    p.xo = (b == nullptr && swapped) ? ne0 : 0;
    p.go = b != nullptr ? 0 : (swapped ? 0 : ne0);
    const int64_t n = ggml_nelements(node);
    if (n == 0) {
        return true;
    }
    const Shape dsh = shape_of(node), as = shape_of(a), bs = shape_of(b != nullptr ? b : a);
    char * dd = static_cast<char *>(node->data);
    const char * ad = static_cast<const char *>(a->data);
    const char * bd = static_cast<const char *>(b != nullptr ? b->data : a->data);
    const unsigned grid = grid_for(n, kBlock);
    cudaStream_t st = stream_of(stream);
    if (p.op == GGML_GLU_OP_SWIGLU) {
        launch(glu_kernel<GGML_GLU_OP_SWIGLU>, dim3(grid), dim3(kBlock), 0, st, dsh, as, bs, dd, ad, bd, p, n, q, ds);
    } else {
        launch(glu_kernel<-1>, dim3(grid), dim3(kBlock), 0, st, dsh, as, bs, dd, ad, bd, p, n, q, ds);
    }
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
