// Weight types that `standin make-model` does not write itself (the K and
// i-quant mixes: q4_k_m, q6_k, iq4_xs, mxfp4_moe, ...) are made the way a user
// makes them: an F16 model is written, then the pinned llama.cpp tree's
// llama-quantize converts it with the requested type name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ggml.h"

namespace standin::tools::model {

// $STANDIN_LLAMA_BIN_DIR/llama-quantize when that is set, else the
// llama-quantize beside the pinned build's tools (test-backend-ops).
std::string default_quantize_tool();

struct QuantizeResult {
    bool        ok = false;
    bool        usage_error = false;  // a missing tool or a type name it does not know
    std::string error;                // one line saying what went wrong and what to do
    bool        uniform_imatrix = false;  // quantize_file: done with write_uniform_imatrix's matrix
};

// Whether `tool` exists and takes `type` as a type name (llama-quantize checks
// the name before it opens its input, so this costs no model).
QuantizeResult check_quantize_type(const std::string & tool, const std::string & type);

// A block type of ggml that llama-quantize has no whole-model mix for
// (mxfp4, nvfp4, q1_0, ...: its MXFP4 mix quantizes only MoE experts): the
// model is quantized with `base` (Q8_0: embeddings and output) and every
// layer matrix overridden to the type, and general.file_type set to llama's
// name for the type where it has one (LLAMA_FTYPE_MOSTLY_MXFP4_MOE ...), so
// llama-bench names the model by its layers' type, not by Q8_0. False when
// `type` names no quantized ggml type.
struct LayerOverride {
    std::string              base;
    std::vector<std::string> args;  // llama-quantize options before its positional arguments
};
bool layer_type_override(const std::string & type, LayerOverride & out);

// A uniform importance matrix for the matrices of the GGUF model at
// model_path, in the GGUF form llama-quantize reads (the imatrix.* keys, a
// <tensor>.in_sum2 of ones and a <tensor>.counts of one per matrix, per
// expert for 3-D ones): every column weighs the same. Random weights have no
// activation statistics to weigh by; the very low-bit types need a matrix all
// the same. false: the model could not be read or the file written (error).
bool write_uniform_imatrix(const std::string & model_path, const std::string & out_path, std::string & error);

// Runs `tool [options] in out type [threads]`; its log goes to log_path. A
// type the tool refuses without an importance matrix is run again with the
// uniform one (uniform_imatrix in the result).
QuantizeResult quantize_file(const std::string & tool, const std::string & in, const std::string & out,
                             const std::string & type, int threads, const std::string & log_path,
                             const std::vector<std::string> & options = {});

// The number of tensors of each type in a GGUF file, read with ggml's GGUF
// reader; empty when the file cannot be read.
std::map<ggml_type, int> tensor_type_counts(const std::string & path);

// "q4_K x 21, q6_K x 4, f32 x 9" for a map as above.
std::string describe_type_counts(const std::map<ggml_type, int> & counts);

} // namespace standin::tools::model
