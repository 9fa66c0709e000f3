// Tensor-split awareness for supports_op: Note [declining inside a tensor split]
// (glue/meta_split.h).
#include "glue/meta_split.h"

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace standin::glue::meta_split {

namespace {

struct Slice {
    ggml_backend_buffer_t buffer;
    int64_t               ne[GGML_MAX_DIMS];
};

std::mutex & mu() {
    static std::mutex m;
    return m;
}

// Named tensors held by our non-compute buffers: the slices of split tensors.
std::unordered_map<std::string, std::vector<Slice>> & slices() {
    static std::unordered_map<std::string, std::vector<Slice>> s;
    return s;
}

bool in_meta_buffer(const ggml_tensor * t) {
    const ggml_backend_buffer_t b = t->buffer;
    return b != nullptr && b->buft != nullptr && b->buft->device != nullptr &&
           b->buft->device->iface.get_type != nullptr &&
           b->buft->device->iface.get_type(b->buft->device) == GGML_BACKEND_DEVICE_TYPE_META;
}

// The dims along which a leaf of the meta device (a weight or cache tensor)
// is split, as a bit mask; 0 when whole on every device. A graph input (in a
// compute buffer) is whole. A weight no buffer of ours holds a slice of is
// one llama is still placing: it probes supports_op with the weight in an
// empty meta buffer, and a decline there moves the weight out of the meta
// device, which aborts the split as surely; it counts as split.
unsigned split_dims(const ggml_tensor * leaf) {
    std::lock_guard<std::mutex> lock(mu());
    const auto it = slices().find(leaf->name);
    if (it == slices().end()) {
        return leaf->buffer->usage == GGML_BACKEND_BUFFER_USAGE_COMPUTE ? 0u : ~0u;
    }
    unsigned mask = 0;
    for (const Slice & s : it->second) {
        unsigned m = 0;
        bool fits = true;
        for (int d = 0; d < GGML_MAX_DIMS; ++d) {
            if (s.ne[d] > leaf->ne[d]) fits = false;
            if (s.ne[d] < leaf->ne[d]) m |= 1u << d;
        }
        if (fits) mask |= m;
    }
    return mask;
}

const ggml_tensor * leaf_of(const ggml_tensor * t) {
    while (t->view_src != nullptr) t = t->view_src;
    return t;
}

bool is_meta_leaf(const ggml_tensor * t) { return t->op == GGML_OP_NONE && in_meta_buffer(t); }

} // namespace

void note_tensor(ggml_backend_buffer_t buffer, const ggml_tensor * t) {
    if (buffer->usage == GGML_BACKEND_BUFFER_USAGE_COMPUTE || t->view_src != nullptr || t->name[0] == '\0') {
        return;
    }
    Slice s{buffer, {}};
    std::memcpy(s.ne, t->ne, sizeof(s.ne));
    std::lock_guard<std::mutex> lock(mu());
    slices()[t->name].push_back(s);
}

void forget_buffer(ggml_backend_buffer_t buffer) {
    std::lock_guard<std::mutex> lock(mu());
    for (auto it = slices().begin(); it != slices().end();) {
        auto & v = it->second;
        for (size_t i = 0; i < v.size();) {
            if (v[i].buffer == buffer) {
                v[i] = v.back();
                v.pop_back();
            } else {
                ++i;
            }
        }
        it = v.empty() ? slices().erase(it) : std::next(it);
    }
}

// Walks what the node is computed from, each tensor once (bounded; the walk
// stops at products, so it stays within a layer or two). A product is split when its weight's rows are (a
// weight split along K gives partial sums that the meta device reduces to a
// whole tensor), so the walk does not go on into a product's activations.
// A split weight read directly makes the node's own work split. Other leaves
// (a KV cache) do not count: the CPU reads them whole, and what it computed
// from them came back whole in every case measured (the DeepSeek indexer over
// its split key cache). A weight still being placed counts as split.
bool decline_would_abort(const ggml_tensor * node) {
    // A meta leaf that makes the decline fatal: a weight still being placed,
    // or a split weight.
    const auto fatal_leaf = [](const ggml_tensor * leaf) {
        const unsigned dims = split_dims(leaf);
        return dims == ~0u || (dims != 0 && leaf->buffer->usage == GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    };
    std::vector<const ggml_tensor *> todo;
    std::unordered_set<const ggml_tensor *> seen;
    const auto push = [&](const ggml_tensor * t) {
        if (t != nullptr && seen.insert(t).second) todo.push_back(t);
    };
    for (int i = 0; i < GGML_MAX_SRC; ++i) push(node->src[i]);
    push(node->view_src);
    while (!todo.empty() && seen.size() < 4096) {
        const ggml_tensor * x = todo.back();
        todo.pop_back();
        const ggml_tensor * leaf = leaf_of(x);
        if (is_meta_leaf(leaf)) {
            if (fatal_leaf(leaf)) return true;
            continue;
        }
        if (x->op == GGML_OP_MUL_MAT || x->op == GGML_OP_MUL_MAT_ID) {
            const ggml_tensor * w = x->src[0] != nullptr ? leaf_of(x->src[0]) : nullptr;
            if (w != nullptr && is_meta_leaf(w) && (split_dims(w) & 2u) != 0) return true;
            continue;
        }
        for (int i = 0; i < GGML_MAX_SRC; ++i) push(x->src[i]);
        push(x->view_src);
    }
    return false;
}

bool is_placement_probe(const ggml_tensor * node) {
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        const ggml_tensor * s = node->src[i];
        if (s != nullptr && s->buffer != nullptr && s->buffer->size == 0) return true;
    }
    return false;
}

} // namespace standin::glue::meta_split
