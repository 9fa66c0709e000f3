// SQR SQRT LOG SIN COS CLAMP LEAKY_RELU on the CUDA device: the formulas of
// kernels/common/math_ops.h, one thread per element. F32/F16 src and dst of
// the same shape and type, any strides.
//
// Test: test-backend-ops -b STANDIN_CUDA0 -o SQR (SQRT LOG SIN COS CLAMP LEAKY_RELU)
#include "kernels/common/math_ops.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace standin::kernels::cuda {

namespace {

constexpr int kBlock = 256;

__global__ void math_kernel(Shape d, Shape a, char * dd, const char * ad, mathop::Params p, int64_t n) {
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
        store_f(d.type, dd + offset_of(d, k), mathop::apply(p, load_f(a.type, ad + offset_of(a, k))));
    }
}

} // namespace

Status math(rt::cuda::CudaStream & stream, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return true;
    const ggml_tensor * a = node->src[0];
    math_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(stream)>>>(shape_of(node), shape_of(a),
                                                                          static_cast<char *>(node->data),
                                                                          static_cast<const char *>(a->data),
                                                                          mathop::params_of(node), n);
    SI_CUDA_LAUNCH_CHECK();
    return true;
}

} // namespace standin::kernels::cuda
