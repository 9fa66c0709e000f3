// The crash handler: a child process crashes on purpose inside a real kernel
// dispatch (an ADD whose input points at an unmapped page); the report names
// the op and node, has symbolized frames, and the handler that was installed
// before standin's still runs.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "diag/crash.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "glue/glue.h"

using namespace standin;

namespace {

void previous_handler(int) {
    const char msg[] = "previous handler ran\n";
    (void) !write(STDERR_FILENO, msg, sizeof(msg) - 1);
}

void crash_inside_add() {
    struct sigaction sa {};
    sa.sa_handler = previous_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    diag::install_crash_handler("standalone");

    ggml_backend_reg_t reg = glue::registry();
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
    ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
    ggml_init_params params = {8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 64);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 64);
    ggml_tensor * out = ggml_add(ctx, a, b);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_backend_alloc_ctx_tensors(ctx, backend);
    a->data = reinterpret_cast<void *>(uintptr_t(64));  // unmapped: the kernel faults reading it
    ggml_backend_graph_compute(backend, gf);
}

} // namespace

// With libdw the frames name standin's own (hidden) functions; without it only
// exported symbols can be named, so only the frame list itself is required.
#ifdef STANDIN_HAVE_LIBDW
#define SI_FRAMES ".*standin::kernels::"
#else
#define SI_FRAMES ".*#[0-9]+ "
#endif

TEST(CrashHandlerDeathTest, NamesTheOpSymbolizesAndChains) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(crash_inside_add(), ::testing::KilledBySignal(SIGSEGV),
                "standin crash report.*signal: SIGSEGV.*mode: standalone.*stage: graph_compute.*device: STANDIN_HOST0"
                ".*op: ADD.*node: 0.*backtrace:" SI_FRAMES ".*end of standin crash report.*previous handler ran");
}

TEST(CrashHandlerDeathTest, OutsideDispatchSaysSo) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            diag::install_crash_handler("standalone");
            diag::crash_context_node("graph_compute", "X", "ADD", 3);
            diag::crash_context_clear();  // dispatch over: the report must not blame ADD
            raise(SIGABRT);
        },
        ::testing::KilledBySignal(SIGABRT), "signal: SIGABRT.*not inside a standin dispatch");
}
