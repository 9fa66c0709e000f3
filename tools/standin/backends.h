// Loading standin (and ggml's own backends for reference) the way an
// unmodified llama.cpp tool does: through ggml's dynamic loader.
#pragma once

#include <string>
#include <vector>

#include "ggml-backend.h"

namespace standin::tools {

struct Loaded {
    ggml_backend_reg_t standin = nullptr;
    std::string        plugin_path;
    std::string        error;  // set when standin could not be loaded
};

// Where the plugin is: an explicit path, else GGML_BACKEND_PATH, else beside this build.
std::string default_plugin_path();

// Loads the plugin at `path` and, when `with_reference`, ggml's CPU backend from
// the pinned build (for side-by-side runs).
Loaded load_backends(const std::string & path, bool with_reference);

// The value of a feature the registry reports (ggml_backend_get_features), or "".
std::string reg_feature(ggml_backend_reg_t reg, const char * name);

} // namespace standin::tools
