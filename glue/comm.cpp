// The tensor-parallel communicator procs of standin's registry
// (ggml_backend_comm_init, _free, _allreduce_tensor, ggml-backend.h). ggml's
// meta backend (llama's `--split-mode tensor`) asks the registry of its first
// device for them; when init returns NULL or allreduce returns false, it runs
// its own generic all-reduce (copies and ADD graphs) instead. So these answer
// only for what runtime/collective.h covers (host devices; CUDA devices with
// peer access to each other, with GGML_STANDIN_CUDA_COMM=1) and decline
// everything else.
#include <cstring>

#include "diag/log.h"
#include "glue/glue.h"
#include "runtime/collective.h"
#include "runtime/ownership.h"

namespace standin::glue {

namespace {

struct CommContext {
    std::vector<DeviceContext *>      devices;  // member i's device
    std::unique_ptr<rt::Communicator> comm;
};

CommContext * comm_ctx(void * c) {
    return c != nullptr && rt::Ownership::instance().is_ours(c, rt::ObjKind::opaque) ? static_cast<CommContext *>(c)
                                                                                     : nullptr;
}

void * comm_init(ggml_backend_t * backends, size_t n) {
    if (backends == nullptr || n == 0) {
        return nullptr;
    }
    std::vector<rt::CommMember> members;
    auto ctx = std::make_unique<CommContext>();
    for (size_t i = 0; i < n; ++i) {
        if (backends[i] == nullptr || !rt::Ownership::instance().is_ours(backends[i], rt::ObjKind::backend)) {
            return nullptr;  // another backend's: the generic all-reduce handles mixed sets
        }
        BackendContext & b = backend_ctx(backends[i]);
        if (b.dev->rt->kind() == rt::Kind::cuda && !b.dev->config->cuda_comm) {
            SI_LOG_DEBUG("CUDA devices without GGML_STANDIN_CUDA_COMM=1: ggml's generic all-reduce is used");
            return nullptr;
        }
        members.push_back({b.dev->rt, b.stream.get()});
        ctx->devices.push_back(b.dev);
    }
    ctx->comm = rt::make_communicator(members);
    if (ctx->comm == nullptr) {
        SI_LOG_DEBUG("no communicator for these %zu devices; ggml's generic all-reduce is used", n);
        return nullptr;
    }
    rt::Ownership::instance().add(ctx.get(), rt::ObjKind::opaque);
    std::string names;
    for (const DeviceContext * d : ctx->devices) names += (names.empty() ? "" : ",") + d->name;
    SI_LOG_INFO("all-reduce across %s by standin", names.c_str());
    return ctx.release();
}

void comm_free(void * c) {
    if (CommContext * ctx = comm_ctx(c)) {
        rt::Ownership::instance().remove(ctx);
        delete ctx;
    }
}

// tensors[i] is the last node of member i's slice of the graph: F32, the same
// element count on every member, in member i's own memory. Nodes the meta
// backend disabled (a zero-sized slice: no GGML_TENSOR_FLAG_COMPUTE) add zeros.
bool comm_allreduce(void * c, ggml_tensor ** tensors) {
    CommContext * ctx = comm_ctx(c);
    if (ctx == nullptr || tensors == nullptr || tensors[0] == nullptr) {
        return false;
    }
    const size_t  m  = ctx->devices.size();
    const int64_t ne = ggml_nelements(tensors[0]);
    std::vector<float *> bufs(m);
    std::vector<bool>    contributes(m);
    for (size_t i = 0; i < m; ++i) {
        ggml_tensor * t = tensors[i];
        if (t == nullptr || t->type != GGML_TYPE_F32 || ggml_nelements(t) != ne || !ggml_is_contiguous(t) ||
            t->buffer == nullptr || !rt::Ownership::instance().is_ours(t->buffer, rt::ObjKind::buffer) ||
            buffer_ctx(t->buffer).dev != ctx->devices[i]) {
            return false;
        }
        bufs[i]        = static_cast<float *>(t->data);
        contributes[i] = (t->flags & GGML_TENSOR_FLAG_COMPUTE) != 0;
    }
    if (ne == 0) {
        return true;
    }
    return ctx->comm->allreduce_sum_f32(bufs, contributes, size_t(ne));
}

} // namespace

void * comm_proc(const char * name) {
    if (std::strcmp(name, "ggml_backend_comm_init") == 0) {
        return reinterpret_cast<void *>(&comm_init);
    }
    if (std::strcmp(name, "ggml_backend_comm_free") == 0) {
        return reinterpret_cast<void *>(&comm_free);
    }
    if (std::strcmp(name, "ggml_backend_comm_allreduce_tensor") == 0) {
        return reinterpret_cast<void *>(&comm_allreduce);
    }
    return nullptr;
}

} // namespace standin::glue
