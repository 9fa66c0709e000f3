// The communicator procs of standin's registry (glue/comm.cpp), as ggml's meta
// backend calls them for `--split-mode tensor`: two backends (members) on the
// host device, tensors in their device buffers.
#include <gtest/gtest.h>

#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "glue/glue.h"
#include "runtime/ownership.h"

using namespace standin;

namespace {

template <typename F> F proc(const char * name) {
    return reinterpret_cast<F>(ggml_backend_reg_get_proc_address(glue::registry(), name));
}

struct Member {
    ggml_backend_t        backend = nullptr;
    ggml_context *        ctx     = nullptr;
    ggml_backend_buffer_t buf     = nullptr;
    ggml_tensor *         t       = nullptr;

    Member(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft, int64_t n, float scale) {
        backend = ggml_backend_dev_init(dev, nullptr);
        ggml_init_params params = {2 * ggml_tensor_overhead(), nullptr, true};
        ctx = ggml_init(params);
        t   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        t->flags |= GGML_TENSOR_FLAG_COMPUTE;
        buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
        std::vector<float> v(static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) v[size_t(k)] = scale * float(k % 97) - 1.0f;
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    }
    ~Member() {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
        ggml_backend_free(backend);
    }
    std::vector<float> get() const {
        std::vector<float> v(size_t(ggml_nelements(t)));
        ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
        return v;
    }
};

} // namespace

TEST(GlueComm, SumsMembersInPlaceAndDeclinesForeignObjects) {
    auto init      = proc<ggml_backend_comm_init_t>("ggml_backend_comm_init");
    auto allreduce = proc<ggml_backend_comm_allreduce_tensor_t>("ggml_backend_comm_allreduce_tensor");
    auto comm_free = proc<ggml_backend_comm_free_t>("ggml_backend_comm_free");
    ASSERT_NE(init, nullptr);
    ASSERT_NE(allreduce, nullptr);
    ASSERT_NE(comm_free, nullptr);

    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(glue::registry(), 0);
    ASSERT_NE(dev, nullptr);
    const int64_t n = 100000;  // several chunks of the host reduction
    Member a(dev, ggml_backend_dev_buffer_type(dev), n, 1.0f);
    Member b(dev, ggml_backend_dev_buffer_type(dev), n, 0.5f);
    ggml_backend_t backends[2] = {a.backend, b.backend};
    void * comm = init(backends, 2);
    ASSERT_NE(comm, nullptr);
    EXPECT_TRUE(rt::Ownership::instance().is_ours(comm, rt::ObjKind::opaque));

    ggml_tensor * tensors[2] = {a.t, b.t};
    ASSERT_TRUE(allreduce(comm, tensors));
    for (const auto & v : {a.get(), b.get()}) {
        for (int64_t k = 0; k < n; k += 997) {
            ASSERT_FLOAT_EQ(v[size_t(k)], 1.5f * float(k % 97) - 2.0f) << k;
        }
    }
    // A member whose slice was disabled (no COMPUTE flag) adds zeros and
    // receives the sum.
    b.t->flags &= ~GGML_TENSOR_FLAG_COMPUTE;
    ASSERT_TRUE(allreduce(comm, tensors));
    EXPECT_EQ(a.get(), b.get());
    EXPECT_FLOAT_EQ(a.get()[5], 1.5f * 5.0f - 2.0f);
    b.t->flags |= GGML_TENSOR_FLAG_COMPUTE;

    // A tensor outside the members' memory: declined, untouched (the meta
    // backend then runs its generic all-reduce).
    Member c(dev, ggml_backend_cpu_buffer_type(), n, 2.0f);
    const std::vector<float> before = c.get();
    ggml_tensor * foreign[2] = {a.t, c.t};
    EXPECT_FALSE(allreduce(comm, foreign));
    EXPECT_EQ(c.get(), before);
    // Another type: declined.
    int foreign_handle = 0;
    EXPECT_FALSE(allreduce(&foreign_handle, tensors));

    comm_free(comm);
    EXPECT_FALSE(rt::Ownership::instance().is_ours(comm, rt::ObjKind::opaque));
    comm_free(&foreign_handle);  // not ours: ignored
}

TEST(GlueComm, InitDeclinesBackendsThatAreNotStandins) {
    auto init = proc<ggml_backend_comm_init_t>("ggml_backend_comm_init");
    ASSERT_NE(init, nullptr);
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(glue::registry(), 0);
    ggml_backend_t ours = ggml_backend_dev_init(dev, nullptr);
    ggml_backend foreign{};  // never registered: not a standin backend
    ggml_backend_t backends[2] = {ours, &foreign};
    EXPECT_EQ(init(backends, 2), nullptr);
    EXPECT_EQ(init(nullptr, 0), nullptr);
    ggml_backend_free(ours);
}
