#include "tools/standin/backends.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace standin::tools {

namespace fs = std::filesystem;

std::string default_plugin_path() {
    if (const char * p = std::getenv("GGML_BACKEND_PATH"); p != nullptr && *p != '\0') {
        return p;
    }
    // Installed or built layout: <prefix>/bin/standin next to <prefix>/lib/libggml-standin.so.
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        fs::path beside = exe.parent_path().parent_path() / "lib" / "libggml-standin.so";
        if (fs::exists(beside, ec)) {
            return beside.string();
        }
    }
    return STANDIN_PLUGIN_BUILD_PATH;
}

Loaded load_backends(const std::string & path, bool with_reference) {
    Loaded out;
    out.plugin_path = path;
    if (with_reference && ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU) == nullptr) {
        // Also loads GGML_BACKEND_PATH when set, as every llama.cpp tool does.
        const char * dir = std::getenv("GGML_BACKEND_DIR");
        ggml_backend_load_all_from_path(dir != nullptr ? dir : STANDIN_GGML_BIN_DIR);
    }
    out.standin = ggml_backend_reg_by_name("STANDIN");
    if (out.standin != nullptr) {
        return out;
    }
    if (!fs::exists(path)) {
        out.error = "plugin not found: " + path;
        return out;
    }
    out.standin = ggml_backend_load(path.c_str());
    if (out.standin == nullptr) {
        out.error = "ggml could not load " + path + " (see the log above)";
    }
    return out;
}

std::string reg_feature(ggml_backend_reg_t reg, const char * name) {
    auto fn = reinterpret_cast<ggml_backend_get_features_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
    if (fn == nullptr) {
        return {};
    }
    for (ggml_backend_feature * f = fn(reg); f != nullptr && f->name != nullptr; ++f) {
        if (std::string(f->name) == name) {
            return f->value;
        }
    }
    return {};
}

} // namespace standin::tools
