// Which inputs a CUDA kernel may read before its wait on the kernel before it
// (Note [dependent launch], kernels/cuda/common.cuh): weights_fixed() is true
// only for a tensor in a buffer marked as a model's weights, as llama.cpp marks
// the buffers it loads a model into; a tensor in any other buffer (a KV cache,
// the graph's compute buffer, test-backend-ops' tensors) or in none is read
// after the wait. Built by nvcc as a host program, so it runs in CI on a
// machine without a GPU. Prints "dependent launch: ok" and exits 0, or names
// the first case that fails and exits 1.
#include <cstdio>

#include "ggml-backend.h"
#include "ggml.h"
#include "kernels/cuda/common.cuh"

namespace cuda = standin::kernels::cuda;

namespace {

bool expect(const char * what, bool got, bool want) {
    if (got != want) std::printf("weights_fixed(%s) is %s\n", what, got ? "true" : "false");
    return got == want;
}

} // namespace

int main() {
    ggml_init_params ip{};
    ip.mem_size = 4 * ggml_tensor_overhead();
    ip.no_alloc = true;
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 64, 4);
    ggml_tensor * view = ggml_view_1d(ctx, w, 32, 0);
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), ggml_nbytes(w));
    bool ok = expect("a tensor in no buffer", cuda::weights_fixed(w), false);
    w->buffer = view->buffer = buf;
    ok &= expect("a tensor in a buffer of any use", cuda::weights_fixed(w), false);
    ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_COMPUTE);
    ok &= expect("a tensor in a compute buffer", cuda::weights_fixed(w), false);
    ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    ok &= expect("a tensor in a weights buffer", cuda::weights_fixed(w), true);
    ok &= expect("a view of a tensor in a weights buffer", cuda::weights_fixed(view), true);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    std::printf(ok ? "dependent launch: ok\n" : "dependent launch: FAILED\n");
    return ok ? 0 : 1;
}
