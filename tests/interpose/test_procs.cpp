// The forwarded procs of interposed mode (interpose/procs.cpp), over a fake real
// library whose tensor-parallel communicator refuses objects that are not its
// own, as ggml-cuda's does (tests/interpose/fake_comm.cpp).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "interpose/audit.h"
#include "interpose/wrap.h"
#include "runtime/ownership.h"

using namespace standin;

#ifdef STANDIN_FAKE_COMM_LIB
namespace {

template <typename F> F proc(ggml_backend_reg_t reg, const char * name) {
    return reinterpret_cast<F>(ggml_backend_reg_get_proc_address(reg, name));
}

int live_comms() {
    void * h = dlopen(STANDIN_FAKE_COMM_LIB, RTLD_NOW | RTLD_NOLOAD);
    auto   fn = h != nullptr ? reinterpret_cast<int (*)()>(dlsym(h, "fake_comm_live")) : nullptr;
    return fn != nullptr ? fn() : -1;
}

} // namespace

TEST(InterposeProcs, CommunicatorGetsInnerBackendsAndTensors) {
    interpose::RealLibrary real = interpose::load_real_library(STANDIN_FAKE_COMM_LIB);
    ASSERT_TRUE(real.ok()) << real.detail;
    ggml_backend_reg_t reg = interpose::make_registry(real);
    ASSERT_EQ(ggml_backend_reg_dev_count(reg), 2u);
    const size_t escapes_before = interpose::audit::escapes();
    const size_t leaks_before   = interpose::audit::report().leaks;

    auto init      = proc<ggml_backend_comm_init_t>(reg, "ggml_backend_comm_init");
    auto allreduce = proc<ggml_backend_comm_allreduce_tensor_t>(reg, "ggml_backend_comm_allreduce_tensor");
    auto comm_free = proc<ggml_backend_comm_free_t>(reg, "ggml_backend_comm_free");
    ASSERT_NE(init, nullptr);
    ASSERT_NE(allreduce, nullptr);
    ASSERT_NE(comm_free, nullptr);
    auto real_init = reinterpret_cast<ggml_backend_comm_init_t>(
        real.reg->iface.get_proc_address(real.reg, "ggml_backend_comm_init"));
    EXPECT_NE(reinterpret_cast<void *>(init), reinterpret_cast<void *>(real_init));  // a trampoline

    ggml_backend_t            backends[2];
    ggml_context *            ctxs[2];
    ggml_backend_buffer_t     bufs[2];
    ggml_tensor *             tensors[2];
    for (size_t i = 0; i < 2; ++i) {
        ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, i);
        backends[i] = ggml_backend_dev_init(dev, nullptr);
        ASSERT_NE(backends[i], nullptr);
        ASSERT_TRUE(rt::Ownership::instance().is_ours(backends[i], rt::ObjKind::backend));
        ggml_init_params params = {4 * ggml_tensor_overhead(), nullptr, true};
        ctxs[i]    = ggml_init(params);
        tensors[i] = ggml_new_tensor_1d(ctxs[i], GGML_TYPE_F32, 16);
        bufs[i]    = ggml_backend_alloc_ctx_tensors_from_buft(ctxs[i], ggml_backend_dev_buffer_type(dev));
        ASSERT_NE(bufs[i], nullptr);
        std::vector<float> v(16);
        for (int k = 0; k < 16; ++k) v[size_t(k)] = float(k) * float(i + 1) + 0.5f;
        ggml_backend_tensor_set(tensors[i], v.data(), 0, sizeof(float) * v.size());
    }

    // The real communicator refuses standin's backends as they are: this is
    // why the trampoline unwraps them.
    EXPECT_EQ(real_init(backends, 2), nullptr);
    void * comm = init(backends, 2);
    ASSERT_NE(comm, nullptr);
    EXPECT_TRUE(rt::Ownership::instance().is_ours(comm, rt::ObjKind::opaque));  // a standin handle
    EXPECT_EQ(live_comms(), 1);

    // With the caller's (outer) buffers on the tensors, the real allreduce
    // would refuse them; through the trampoline it sees its own and sums.
    ASSERT_TRUE(allreduce(comm, tensors));
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(tensors[i]->buffer, bufs[i]);  // the caller's view again
        std::vector<float> got(16);
        ggml_backend_tensor_get(tensors[i], got.data(), 0, sizeof(float) * got.size());
        for (int k = 0; k < 16; ++k) EXPECT_FLOAT_EQ(got[size_t(k)], 3.0f * float(k) + 1.0f) << i << " " << k;
    }

    // A handle standin did not make is refused, not forwarded.
    int foreign = 0;
    EXPECT_FALSE(allreduce(&foreign, tensors));
    comm_free(&foreign);
    EXPECT_EQ(live_comms(), 1);

    comm_free(comm);
    EXPECT_EQ(live_comms(), 0);
    EXPECT_FALSE(rt::Ownership::instance().is_ours(comm, rt::ObjKind::opaque));
    for (size_t i = 0; i < 2; ++i) {
        ggml_backend_buffer_free(bufs[i]);
        ggml_free(ctxs[i]);
        ggml_backend_free(backends[i]);
    }
    EXPECT_EQ(interpose::audit::report().leaks, leaks_before);
    EXPECT_EQ(interpose::audit::escapes(), escapes_before);
}
#endif
