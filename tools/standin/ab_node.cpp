#include "tools/standin/ab_node.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "ggml-alloc.h"

namespace standin::tools::ab {

namespace {

void snap_layout(const ggml_tensor * t, TensorSnap & s) {
    s.present = true;
    s.type    = t->type;
    for (int i = 0; i < 4; ++i) s.ne[i] = t->ne[i], s.nb[i] = t->nb[i];
}

// The bytes of a tensor's span, read through its backend (it may live on a GPU).
std::vector<uint8_t> read_span(const ggml_tensor * t) {
    std::vector<uint8_t> v(ggml_nbytes(t));
    if (!v.empty()) {
        ggml_backend_tensor_get(t, v.data(), 0, v.size());
    }
    return v;
}

// A fresh tensor with the captured layout. The strides are set before
// allocation, so the allocator reserves the whole span (ggml_nbytes reads nb).
ggml_tensor * new_like(ggml_context * ctx, const TensorSnap & s) {
    ggml_tensor * t = ggml_new_tensor(ctx, s.type, 4, s.ne);
    for (int i = 0; i < 4; ++i) t->nb[i] = s.nb[i];
    return t;
}

} // namespace

std::string replay_blocker(const ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2:
        case GGML_OP_MAP_CUSTOM3:
        case GGML_OP_CUSTOM:
            return "op params hold a host function pointer";
        case GGML_OP_OPT_STEP_ADAMW:
        case GGML_OP_OPT_STEP_SGD:
            return "updates its sources in place (optimizer state)";
        default:
            break;
    }
    for (const ggml_tensor * s : node->src) {
        if (s != nullptr && s->buffer == nullptr) {
            return "a source has no buffer";
        }
    }
    return {};
}

NodeSnap capture_inputs(const ggml_tensor * node, int index) {
    NodeSnap snap;
    snap.index = index;
    snap.name  = node->name;
    snap.op    = node->op;
    std::memcpy(snap.op_params, node->op_params, sizeof(snap.op_params));
    snap_layout(node, snap.out);
    // An output that is a view of earlier memory may keep part of it (SET_ROWS
    // writes some rows of the cache): the replay starts from the same content.
    snap.aliases = node->view_src != nullptr;
    if (snap.aliases) {
        snap.out.bytes = read_span(node);
    }
    for (int k = 0; k < GGML_MAX_SRC; ++k) {
        if (const ggml_tensor * s = node->src[k]) {
            snap_layout(s, snap.src[k]);
            snap.src[k].bytes = read_span(s);
        }
    }
    return snap;
}

void capture_result(const ggml_tensor * node, NodeSnap & snap) { snap.result = read_span(node); }

std::string op_key(const NodeSnap & snap) {
    std::string key = ggml_op_name(snap.op);
    if (snap.op == GGML_OP_UNARY) {
        key = ggml_unary_op_name(ggml_unary_op(snap.op_params[0]));
    } else if (snap.op == GGML_OP_GLU) {
        key = ggml_glu_op_name(ggml_glu_op(snap.op_params[0]));
    }
    const char * sep = " ";
    for (const TensorSnap & s : snap.src) {
        if (s.present) {
            key += sep, key += ggml_type_name(s.type), sep = ",";
        }
    }
    return key + "->" + ggml_type_name(snap.out.type);
}

std::string shape_str(const int64_t ne[4]) {
    return std::to_string(ne[0]) + "x" + std::to_string(ne[1]) + "x" + std::to_string(ne[2]) + "x" +
           std::to_string(ne[3]);
}

Replay::Replay(ggml_backend_t backend, const NodeSnap & snap) : backend_(backend) {
    ggml_init_params params = {ggml_tensor_overhead() * (GGML_MAX_SRC + 2) + ggml_graph_overhead(), nullptr, true};
    ctx_ = ggml_init(params);
    ggml_tensor * src[GGML_MAX_SRC] = {};
    ggml_tensor * out = new_like(ctx_, snap.out);
    for (int k = 0; k < GGML_MAX_SRC; ++k) {
        if (snap.src[k].present) {
            src[k] = new_like(ctx_, snap.src[k]);
            out->src[k] = src[k];
        }
    }
    out->op = snap.op;
    std::memcpy(out->op_params, snap.op_params, sizeof(snap.op_params));
    ggml_set_name(out, snap.name.c_str());
    graph_ = ggml_new_graph(ctx_);
    ggml_build_forward_expand(graph_, out);

    if (!ggml_backend_supports_op(backend, out)) {
        supported_ = false;
        return;
    }
    buf_ = ggml_backend_alloc_ctx_tensors(ctx_, backend);
    if (buf_ == nullptr) {
        error_ = "allocation failed";
        return;
    }
    for (int k = 0; k < GGML_MAX_SRC; ++k) {
        if (src[k] != nullptr && !snap.src[k].bytes.empty()) {
            ggml_backend_tensor_set(src[k], snap.src[k].bytes.data(), 0, snap.src[k].bytes.size());
        }
    }
    // A fresh output starts as all-ones bytes (NaN in every float type), so an
    // element a kernel forgets to write cannot pass for a computed one.
    if (snap.aliases) {
        ggml_backend_tensor_set(out, snap.out.bytes.data(), 0, snap.out.bytes.size());
    } else {
        ggml_backend_tensor_memset(out, 0xff, 0, ggml_nbytes(out));
    }
    const ggml_status st = ggml_backend_graph_compute(backend, graph_);
    if (st != GGML_STATUS_SUCCESS) {
        error_ = std::string("graph_compute: ") + ggml_status_to_string(st);
        return;
    }
    out_.resize(ggml_nbytes(out));
    ggml_backend_tensor_get(out, out_.data(), 0, out_.size());
}

Replay::~Replay() {
    ggml_backend_buffer_free(buf_);  // accepts nullptr
    ggml_free(ctx_);
}

void Replay::time_once() {
    if (!supported_ || !error_.empty()) {
        return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const ggml_status st = ggml_backend_graph_compute(backend_, graph_);
    ms_.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (st != GGML_STATUS_SUCCESS) {
        error_ = std::string("graph_compute (timed): ") + ggml_status_to_string(st);
    }
}

double Replay::median_ms() const {
    if (ms_.empty()) {
        return 0;
    }
    std::vector<double> v = ms_;
    std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
    return v[v.size() / 2];
}

namespace {

// One element of a scalar type as float; false for block (quantized) types.
bool scalar_to_float(ggml_type type, const uint8_t * e, float & v) {
    switch (type) {
        case GGML_TYPE_F32: std::memcpy(&v, e, 4); return true;
        case GGML_TYPE_F16: v = ggml_fp16_to_fp32(*reinterpret_cast<const ggml_fp16_t *>(e)); return true;
        case GGML_TYPE_BF16: v = ggml_bf16_to_fp32(*reinterpret_cast<const ggml_bf16_t *>(e)); return true;
        case GGML_TYPE_I32: { int32_t x; std::memcpy(&x, e, 4); v = float(x); } return true;
        case GGML_TYPE_I64: { int64_t x; std::memcpy(&x, e, 8); v = float(x); } return true;
        case GGML_TYPE_I16: { int16_t x; std::memcpy(&x, e, 2); v = float(x); } return true;
        case GGML_TYPE_I8:  v = float(int8_t(*e)); return true;
        default: return false;
    }
}

} // namespace

std::vector<float> to_floats(const TensorSnap & l, const std::vector<uint8_t> & span) {
    std::vector<float> out;
    out.reserve(size_t(l.ne[0] * l.ne[1] * l.ne[2] * l.ne[3]));
    const ggml_type_traits * tt = ggml_get_type_traits(l.type);
    float probe = 0;
    const bool scalar = scalar_to_float(l.type, span.data(), probe) || span.empty();
    std::vector<float> row(size_t(l.ne[0]));
    for (int64_t i3 = 0; i3 < l.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < l.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < l.ne[1]; ++i1) {
                const uint8_t * p = span.data() + i1 * l.nb[1] + i2 * l.nb[2] + i3 * l.nb[3];
                if (scalar) {
                    for (int64_t i0 = 0; i0 < l.ne[0]; ++i0) {
                        float v = NAN;
                        scalar_to_float(l.type, p + i0 * l.nb[0], v);
                        out.push_back(v);
                    }
                } else if (tt->to_float != nullptr) {
                    // Block types: a row's blocks are always adjacent.
                    tt->to_float(p, row.data(), l.ne[0]);
                    out.insert(out.end(), row.begin(), row.end());
                } else {
                    out.insert(out.end(), size_t(l.ne[0]), NAN);
                }
            }
        }
    }
    return out;
}

Diff compare(const std::vector<float> & a, const std::vector<float> & b) {
    Diff d;
    d.n = std::min(a.size(), b.size());
    double num = 0, den = 0;
    for (size_t i = 0; i < d.n; ++i) {
        const float x = a[i], y = b[i];
        if (!std::isfinite(x) || !std::isfinite(y)) {
            // -inf logits under a causal mask are expected; they must match exactly.
            const bool same = (std::isnan(x) && std::isnan(y)) || x == y;
            d.nonfinite_mismatch += !same;
            continue;
        }
        const double diff = double(x) - double(y);
        num += diff * diff;
        den += double(y) * double(y);
        d.max_abs = std::max(d.max_abs, std::fabs(diff));
    }
    d.nmse = den > 0 ? num / den : (num > 0 ? INFINITY : 0.0);
    if (d.nonfinite_mismatch != 0 || a.size() != b.size()) {
        d.nmse = INFINITY;
    }
    return d;
}

} // namespace standin::tools::ab
