// The data steps of `standin probe`: a set/get round trip through every
// allocated buffer, and one single-node graph per op family the device claims,
// checked against ggml's CPU backend when it is available.
#pragma once

#include <string>
#include <vector>

#include "ggml-backend.h"

namespace standin::tools {

// Returns "" on success (detail filled), else the cause.
std::string probe_copy(const std::vector<ggml_backend_buffer_t> & buffers, std::string & detail);
std::string probe_compute(ggml_backend_t backend, ggml_backend_dev_t dev, const std::string & ggml_bin_dir,
                          std::string & detail);

} // namespace standin::tools
