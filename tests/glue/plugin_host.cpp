// A host program for the plugin module that links no ggml library: it opens
// a ggml (libggml) by path with RTLD_LOCAL, as an application that loads
// ggml at run time does (node-llama-cpp's addon), and reaches every ggml
// function through that handle. It checks Note [ggml-base binding]
// (glue/base_link.h) from the outside:
//
//   reload LIBGGML PLUGIN    the plugin loaded, scored and unloaded three
//                            times, then loaded, used (a graph on its first
//                            device) and closed twice, in one process; from
//                            its first call the module stays mapped
//                            (Note [module pinned], glue/reg.cpp)
//   foreign LIBGGML PLUGIN   the plugin (a copy, alone in a folder) loaded by
//                            another build's libggml, e.g. npm's prebuilt one:
//                            its devices work and the process maps exactly one
//                            ggml-base, the one beside LIBGGML
//   scan LIBGGML DIR DEVICE  ggml_backend_load_all_from_path(DIR), ggml's
//                            scoring loader (it opens and closes every
//                            candidate): DEVICE is listed once and is
//                            standin's, a graph runs on it, one ggml-base is
//                            mapped
//
// Prints "plugin_host: ok" and exits 0 on success; a line saying what failed
// and exit 1 otherwise.
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

namespace {

int fail(const std::string & what) {
    std::printf("plugin_host: FAIL: %s\n", what.c_str());
    return 1;
}

// The ggml functions this program uses, looked up in one libggml handle.
struct Ggml {
#define SI_FN(name) decltype(&::name) name = nullptr;
    SI_FN(ggml_backend_load)
    SI_FN(ggml_backend_load_all_from_path)
    SI_FN(ggml_backend_dev_count)
    SI_FN(ggml_backend_dev_get)
    SI_FN(ggml_backend_reg_dev_count)
    SI_FN(ggml_backend_reg_dev_get)
    SI_FN(ggml_backend_dev_name)
    SI_FN(ggml_backend_dev_backend_reg)
    SI_FN(ggml_backend_reg_get_proc_address)
    SI_FN(ggml_backend_dev_init)
    SI_FN(ggml_backend_free)
    SI_FN(ggml_init)
    SI_FN(ggml_free)
    SI_FN(ggml_new_tensor_1d)
    SI_FN(ggml_add)
    SI_FN(ggml_new_graph)
    SI_FN(ggml_build_forward_expand)
    SI_FN(ggml_tensor_overhead)
    SI_FN(ggml_graph_overhead)
    SI_FN(ggml_backend_alloc_ctx_tensors)
    SI_FN(ggml_backend_buffer_free)
    SI_FN(ggml_backend_tensor_set)
    SI_FN(ggml_backend_tensor_get)
    SI_FN(ggml_backend_graph_compute)
#undef SI_FN
    std::string missing;

    bool open(const char * path) {
        void * h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h == nullptr) {
            missing = dlerror();
            return false;
        }
#define SI_FN(name)                                                   \
    name = reinterpret_cast<decltype(name)>(dlsym(h, #name));         \
    if (name == nullptr && missing.empty()) missing = #name;
        SI_FN(ggml_backend_load)
        SI_FN(ggml_backend_load_all_from_path)
        SI_FN(ggml_backend_dev_count)
        SI_FN(ggml_backend_dev_get)
        SI_FN(ggml_backend_reg_dev_count)
        SI_FN(ggml_backend_reg_dev_get)
        SI_FN(ggml_backend_dev_name)
        SI_FN(ggml_backend_dev_backend_reg)
        SI_FN(ggml_backend_reg_get_proc_address)
    SI_FN(ggml_backend_dev_backend_reg)
    SI_FN(ggml_backend_reg_get_proc_address)
        SI_FN(ggml_backend_dev_init)
        SI_FN(ggml_backend_free)
        SI_FN(ggml_init)
        SI_FN(ggml_free)
        SI_FN(ggml_new_tensor_1d)
        SI_FN(ggml_add)
        SI_FN(ggml_new_graph)
        SI_FN(ggml_build_forward_expand)
        SI_FN(ggml_tensor_overhead)
        SI_FN(ggml_graph_overhead)
        SI_FN(ggml_backend_alloc_ctx_tensors)
        SI_FN(ggml_backend_buffer_free)
        SI_FN(ggml_backend_tensor_set)
        SI_FN(ggml_backend_tensor_get)
        SI_FN(ggml_backend_graph_compute)
#undef SI_FN
        return missing.empty();
    }

    // c = a + b over 64 floats on `dev`; "" when right.
    std::string add_graph(ggml_backend_dev_t dev) const {
        ggml_backend_t be = ggml_backend_dev_init(dev, nullptr);
        if (be == nullptr) return "ggml_backend_dev_init returned null";
        ggml_init_params ip = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, true};
        ggml_context * ctx = ggml_init(ip);
        const int n = 64;
        ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        ggml_tensor * c = ggml_add(ctx, a, b);
        ggml_cgraph * g = ggml_new_graph(ctx);
        ggml_build_forward_expand(g, c);
        ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, be);
        std::string err;
        if (buf == nullptr) {
            err = "no buffer";
        } else {
            float x[n], y[n], z[n];
            for (int i = 0; i < n; ++i) {
                x[i] = float(i) * 0.5f;
                y[i] = 3.0f - float(i);
                z[i] = NAN;
            }
            ggml_backend_tensor_set(a, x, 0, sizeof x);
            ggml_backend_tensor_set(b, y, 0, sizeof y);
            if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS) {
                err = "graph_compute failed";
            } else {
                ggml_backend_tensor_get(c, z, 0, sizeof z);
                for (int i = 0; i < n && err.empty(); ++i) {
                    if (z[i] != x[i] + y[i]) err = "wrong sum at " + std::to_string(i);
                }
            }
            ggml_backend_buffer_free(buf);
        }
        ggml_free(ctx);
        ggml_backend_free(be);
        return err;
    }
};

// The distinct ggml-base files mapped now (/proc/self/maps).
std::set<std::string> mapped_ggml_bases() {
    std::set<std::string> out;
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        const size_t slash = line.find('/');
        if (slash == std::string::npos) continue;
        const std::string path = line.substr(slash);
        const size_t base = path.rfind('/');
        if (path.compare(base + 1, 15, "libggml-base.so") == 0) out.insert(path);
    }
    return out;
}

std::string folder_of(const std::string & path) { return path.substr(0, path.rfind('/') + 1); }

std::string describe(const std::set<std::string> & s) {
    std::string out;
    for (const auto & p : s) out += (out.empty() ? "" : ", ") + p;
    return out.empty() ? "none" : out;
}

// One ggml-base is mapped, and it lies in `folder`.
std::string one_base_in(const std::string & folder) {
    const auto bases = mapped_ggml_bases();
    if (bases.size() != 1) return std::to_string(bases.size()) + " ggml-base copies mapped: " + describe(bases);
    std::string real(4096, '\0');
    if (realpath(folder.c_str(), real.data()) == nullptr) return "no folder " + folder;
    real.resize(strlen(real.c_str()));
    if (folder_of(*bases.begin()) != real + "/") return "the ggml-base mapped is " + *bases.begin() + ", not " + real;
    return "";
}

int cmd_reload(const Ggml & g, const char * plugin) {
    for (int i = 0; i < 3; ++i) {  // what ggml's loader does to score a candidate
        void * h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
        if (h == nullptr) return fail(std::string("dlopen: ") + dlerror());
        auto score = reinterpret_cast<int (*)()>(dlsym(h, "ggml_backend_score"));
        if (score == nullptr || score() <= 0) return fail("no positive ggml_backend_score");
        if (dlclose(h) != 0) return fail("dlclose failed");
        void * still = dlopen(plugin, RTLD_NOW | RTLD_NOLOAD);
        if (still == nullptr) return fail("the module was unmapped after its first call");
        dlclose(still);
    }
    for (int i = 0; i < 2; ++i) {
        void * h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
        if (h == nullptr) return fail(std::string("dlopen: ") + dlerror());
        auto init = reinterpret_cast<ggml_backend_reg_t (*)()>(dlsym(h, "ggml_backend_init"));
        ggml_backend_reg_t reg = init != nullptr ? init() : nullptr;
        if (reg == nullptr || g.ggml_backend_reg_dev_count(reg) == 0) return fail("no registry or no device");
        const std::string err = g.add_graph(g.ggml_backend_reg_dev_get(reg, 0));
        if (!err.empty()) return fail("round " + std::to_string(i) + ": " + err);
        std::printf("round %d: %s computed a graph\n", i, g.ggml_backend_dev_name(g.ggml_backend_reg_dev_get(reg, 0)));
        if (dlclose(h) != 0) return fail("dlclose failed");
        void * still = dlopen(plugin, RTLD_NOW | RTLD_NOLOAD);
        if (still == nullptr) return fail("the module was unmapped after its registry was built");
        dlclose(still);
    }
    return 0;
}

int cmd_foreign(const Ggml & g, const char * libggml, const char * plugin) {
    ggml_backend_reg_t reg = g.ggml_backend_load(plugin);
    if (reg == nullptr) return fail(std::string("ggml_backend_load refused ") + plugin);
    if (g.ggml_backend_reg_dev_count(reg) == 0) return fail("the plugin has no device");
    ggml_backend_dev_t dev = g.ggml_backend_reg_dev_get(reg, 0);
    const std::string err = g.add_graph(dev);
    if (!err.empty()) return fail(err);
    std::printf("%s computed a graph\n", g.ggml_backend_dev_name(dev));
    const std::string base = one_base_in(folder_of(libggml));
    return base.empty() ? 0 : fail(base);
}

int cmd_scan(const Ggml & g, const char * libggml, const char * dir, const char * device) {
    g.ggml_backend_load_all_from_path(dir);
    ggml_backend_dev_t found = nullptr;
    int seen = 0;
    for (size_t i = 0; i < g.ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t d = g.ggml_backend_dev_get(i);
        std::printf("device %zu: %s\n", i, g.ggml_backend_dev_name(d));
        if (std::strcmp(g.ggml_backend_dev_name(d), device) == 0) {
            found = d;
            ++seen;
        }
    }
    if (seen != 1) return fail(std::string(device) + " listed " + std::to_string(seen) + " times");
    // In replace mode the device has the real library's name (Note
    // [interposed names]): its registry must still be standin's.
    if (g.ggml_backend_reg_get_proc_address(g.ggml_backend_dev_backend_reg(found), "ggml_backend_standin_audit") ==
        nullptr) {
        return fail(std::string(device) + " is not standin's (its registry has no ggml_backend_standin_audit)");
    }
    const std::string err = g.add_graph(found);
    if (!err.empty()) return fail(err);
    const std::string base = one_base_in(folder_of(libggml));
    return base.empty() ? 0 : fail(base);
}

} // namespace

int main(int argc, char ** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: plugin_host reload|foreign LIBGGML PLUGIN | scan LIBGGML DIR DEVICE\n");
        return 2;
    }
    const std::string cmd = argv[1];
    Ggml g;
    if (!g.open(argv[2])) return fail(std::string("cannot use ") + argv[2] + ": " + g.missing);
    int rc = 2;
    if (cmd == "reload") {
        rc = cmd_reload(g, argv[3]);
    } else if (cmd == "foreign") {
        rc = cmd_foreign(g, argv[2], argv[3]);
    } else if (cmd == "scan" && argc >= 5) {
        rc = cmd_scan(g, argv[2], argv[3], argv[4]);
    } else {
        std::fprintf(stderr, "plugin_host: unknown command %s\n", argv[1]);
        return 2;
    }
    if (rc == 0) std::printf("plugin_host: ok\n");
    return rc;
}
