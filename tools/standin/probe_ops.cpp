#include "tools/standin/probe_ops.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "ggml-alloc.h"
#include "ggml.h"

namespace standin::tools {

namespace {

using Builder = std::function<ggml_tensor *(ggml_context *)>;

struct Family {
    const char * name;
    double       max_nmse;
    Builder      build;
};

ggml_tensor * f32(ggml_context * c, int64_t a, int64_t b = 1, int64_t d = 1) {
    return ggml_new_tensor_3d(c, GGML_TYPE_F32, a, b, d);
}

const std::vector<Family> & families() {
    static const std::vector<Family> f = {
        {"ADD", 1e-12, [](ggml_context * c) { return ggml_add(c, f32(c, 64, 8), f32(c, 64)); }},
        {"MUL", 1e-12, [](ggml_context * c) { return ggml_mul(c, f32(c, 64, 8), f32(c, 64)); }},
        {"SCALE", 1e-12, [](ggml_context * c) { return ggml_scale(c, f32(c, 64, 8), 0.25f); }},
        {"CPY", 1e-6, [](ggml_context * c) { return ggml_cast(c, f32(c, 64, 8), GGML_TYPE_F16); }},
        {"GET_ROWS", 1e-12, [](ggml_context * c) {
             return ggml_get_rows(c, f32(c, 32, 16), ggml_new_tensor_1d(c, GGML_TYPE_I32, 5));
         }},
        {"RMS_NORM", 1e-8, [](ggml_context * c) { return ggml_rms_norm(c, f32(c, 64, 8), 1e-5f); }},
        {"MUL_MAT", 1e-8, [](ggml_context * c) { return ggml_mul_mat(c, f32(c, 64, 16), f32(c, 64, 4)); }},
        {"MUL_MAT q4_0", 1e-3, [](ggml_context * c) {
             return ggml_mul_mat(c, ggml_new_tensor_2d(c, GGML_TYPE_Q4_0, 64, 16), f32(c, 64, 4));
         }},
        {"ROPE", 1e-8, [](ggml_context * c) {
             return ggml_rope(c, f32(c, 64, 4, 3), ggml_new_tensor_1d(c, GGML_TYPE_I32, 3), 64, GGML_ROPE_TYPE_NEOX);
         }},
        {"SOFT_MAX", 1e-8, [](ggml_context * c) { return ggml_soft_max(c, f32(c, 64, 8)); }},
        {"SWIGLU", 1e-8, [](ggml_context * c) { return ggml_swiglu_split(c, f32(c, 64, 4), f32(c, 64, 4)); }},
        {"SILU", 1e-8, [](ggml_context * c) { return ggml_silu(c, f32(c, 64, 4)); }},
        {"FLASH_ATTN_EXT", 1e-5, [](ggml_context * c) {
             ggml_tensor * q = ggml_new_tensor_4d(c, GGML_TYPE_F32, 64, 4, 4, 1);
             ggml_tensor * k = ggml_new_tensor_4d(c, GGML_TYPE_F16, 64, 32, 2, 1);
             ggml_tensor * v = ggml_new_tensor_4d(c, GGML_TYPE_F16, 64, 32, 2, 1);
             return ggml_flash_attn_ext(c, q, k, v, nullptr, 0.125f, 0.0f, 0.0f);
         }},
    };
    return f;
}

// Deterministic inputs: floats in [-1, 1); indices within range of what they index.
void fill(ggml_tensor * t, uint32_t seed) {
    std::mt19937 rng(seed);
    const int64_t n = ggml_nelements(t);
    if (t->type == GGML_TYPE_I32) {
        std::vector<int32_t> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) v[size_t(i)] = int32_t((i * 7 + 3) % 16);
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        return;
    }
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float & x : v) x = dist(rng);
    if (t->type == GGML_TYPE_F32) {
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        return;
    }
    std::vector<uint8_t> q(ggml_nbytes(t));
    ggml_quantize_chunk(t->type, v.data(), q.data(), 0, ggml_nrows(t), t->ne[0], nullptr);
    ggml_backend_tensor_set(t, q.data(), 0, q.size());
}

// Runs one family on a backend; empty on failure (reason in `error`).
std::vector<float> run(ggml_backend_t backend, const Family & f, std::string & error, bool * supported) {
    ggml_init_params params = {32 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * out = f.build(ctx);
    std::vector<float> result;
    if (supported != nullptr) {
        *supported = ggml_backend_supports_op(backend, out);
        if (!*supported) {
            ggml_free(ctx);
            return result;
        }
    }
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    if (buf == nullptr) {
        error = "allocation failed";
    } else {
        uint32_t seed = 1;
        for (ggml_tensor * s : out->src) {
            if (s != nullptr) fill(s, seed++);
        }
        ggml_status st = ggml_backend_graph_compute(backend, gf);
        if (st != GGML_STATUS_SUCCESS) {
            error = std::string("graph_compute: ") + ggml_status_to_string(st);
        } else {
            ggml_tensor * o32 = out;
            std::vector<uint8_t> raw(ggml_nbytes(o32));
            ggml_backend_tensor_get(o32, raw.data(), 0, raw.size());
            result.resize(size_t(ggml_nelements(o32)));
            if (o32->type == GGML_TYPE_F32) {
                std::memcpy(result.data(), raw.data(), raw.size());
            } else {
                const auto * traits = ggml_get_type_traits(o32->type);
                traits->to_float(raw.data(), result.data(), ggml_nelements(o32));
            }
        }
        ggml_backend_buffer_free(buf);
    }
    ggml_free(ctx);
    return result;
}

} // namespace

std::string probe_copy(const std::vector<ggml_backend_buffer_t> & buffers, std::string & detail) {
    for (ggml_backend_buffer_t b : buffers) {
        ggml_init_params params = {2 * ggml_tensor_overhead(), nullptr, true};
        ggml_context * ctx = ggml_init(params);
        ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4096);
        ggml_backend_tensor_alloc(b, t, ggml_backend_buffer_get_base(b));
        std::vector<float> in(4096), out(4096, 0.0f);
        for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) * 0.5f - 7.0f;
        ggml_backend_tensor_set(t, in.data(), 0, ggml_nbytes(t));
        ggml_backend_tensor_get(t, out.data(), 0, ggml_nbytes(t));
        ggml_free(ctx);
        if (std::memcmp(in.data(), out.data(), in.size() * sizeof(float)) != 0) {
            return std::string("data read back from ") + ggml_backend_buft_name(ggml_backend_buffer_get_type(b)) +
                   " differs from what was written";
        }
        detail += (detail.empty() ? "16 KiB round trip: " : ", ") +
                  std::string(ggml_backend_buft_name(ggml_backend_buffer_get_type(b)));
    }
    return {};
}

std::string probe_compute(ggml_backend_t backend, ggml_backend_dev_t dev, const std::string & ggml_bin_dir,
                          std::string & detail) {
    (void) dev;
    // The reference: ggml's CPU backend from the pinned build, when present.
    ggml_backend_t cpu = nullptr;
    if (ggml_backend_dev_t c = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)) {
        cpu = ggml_backend_dev_init(c, nullptr);
    } else if (ggml_backend_reg_t r = ggml_backend_load((ggml_bin_dir + "/libggml-cpu.so").c_str())) {
        cpu = ggml_backend_dev_init(ggml_backend_reg_dev_get(r, 0), nullptr);
    }
    int checked = 0, skipped = 0;
    std::string error;
    for (const Family & f : families()) {
        bool supported = false;
        std::vector<float> ours = run(backend, f, error, &supported);
        if (!supported) {
            ++skipped;
            continue;
        }
        if (!error.empty()) {
            error = std::string(f.name) + ": " + error;
            break;
        }
        if (cpu != nullptr) {
            std::string ref_error;
            std::vector<float> ref = run(cpu, f, ref_error, nullptr);
            double num = 0, den = 0;
            for (size_t i = 0; i < ref.size() && i < ours.size(); ++i) {
                num += (double(ours[i]) - ref[i]) * (double(ours[i]) - ref[i]);
                den += double(ref[i]) * ref[i];
            }
            const double nmse = den > 0 ? num / den : num;
            if (ref.size() != ours.size() || !(nmse <= f.max_nmse)) {
                error = std::string(f.name) + ": result differs from ggml-cpu (NMSE " + std::to_string(nmse) + ")";
                break;
            }
        }
        ++checked;
        detail += (checked > 1 ? " " : "") + std::string(f.name);
    }
    if (cpu != nullptr) ggml_backend_free(cpu);
    if (!error.empty()) return error;
    detail = std::to_string(checked) + " op families " + (cpu ? "match ggml-cpu" : "ran (no ggml-cpu to compare)") +
             " (" + detail + ")" + (skipped ? ", " + std::to_string(skipped) + " not claimed" : "");
    return {};
}

} // namespace standin::tools
