// Random-weight llama models written as GGUF, for `standin make-model`.
//
// The file is what llama.cpp's converter would write for a llama-architecture
// model of the chosen shape: the llama.* hyper-parameters, every tokenizer.*
// key copied from a vocabulary-only GGUF (so real text tokenizes), and one
// tensor per weight. Only the values are random.
//
// The writer streams: it writes the metadata (header, keys, tensor infos), then
// generates, quantises and appends each tensor a block of rows at a time, so
// its memory use does not grow with the model (an 8B model needs well under
// 1 GB). Values are a pure function of (seed, tensor index, row), so the output
// does not depend on the thread count or on the block size.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ggml.h"

struct gguf_context;

namespace standin::tools::model {

// The llama hyper-parameters that decide the tensor shapes.
struct Shape {
    std::string name;
    int64_t     n_embd    = 0;
    int64_t     n_layer   = 0;
    int64_t     n_head    = 0;
    int64_t     n_head_kv = 0;
    int64_t     n_ff      = 0;
    int64_t     n_ctx     = 0;
    float       rope_theta = 10000.0f;
    float       rms_eps    = 1e-5f;
    bool        tied_embeddings = false;  // no output.weight: the output reuses token_embd
    // Mixture of experts (llama's MoE layout, as Mixtral's files): each
    // layer's FFN is n_expert experts of n_ff, n_expert_used of them per
    // token, picked by a router (ffn_gate_inp). 0: a dense FFN.
    int64_t     n_expert      = 0;
    int64_t     n_expert_used = 0;
};

// A shape by name, one of shape_names() (the table in gguf_model.cpp). False
// for any other name.
bool shape_by_name(const std::string & name, Shape & out);
std::vector<std::string> shape_names();
std::string shape_help();  // "NAME (what it is), ..." for the CLI

// The weight type of a file: "f32", "f16", "q8_0" or "q4_0", with the
// general.file_type value llama.cpp uses for it. False for any other name.
bool weight_type_by_name(const std::string & name, ggml_type & type, uint32_t & file_type);

// How a tensor's values are drawn.
enum class Init {
    Matrix,  // approximately normal, mean 0, std 1/sqrt(fan-in): unit-scale activations
    Norm,    // approximately normal, mean 1, std 0.1: RMS-norm gains
};

struct TensorPlan {
    std::string name;
    ggml_type   type;
    int64_t     ne0 = 0;  // row length (fan-in for matrices)
    int64_t     ne1 = 1;  // rows
    Init        init = Init::Matrix;
    int64_t     ne2 = 1;  // matrices (the experts of an expert tensor), ne1 rows each
};

// Every tensor of the model, in file order. Norms and an MoE router are F32
// (as llama-quantize keeps them); every other matrix, token_embd included, is
// `wtype` (a "pure" file: one type for all weights).
std::vector<TensorPlan> plan_tensors(const Shape & shape, int64_t n_vocab, ggml_type wtype);

// Fills `row` (ne0 values) with row `row_index` of tensor `tensor_index`.
void fill_row(uint64_t seed, int64_t tensor_index, const TensorPlan & t, int64_t row_index, float * row);

struct Progress {
    int64_t     tensors_done  = 0;
    int64_t     tensors_total = 0;
    uint64_t    bytes_done    = 0;  // file bytes written so far, metadata included
    uint64_t    bytes_total   = 0;
    const TensorPlan * current = nullptr;  // the tensor being written (null for the metadata)
    bool        tensor_finished = false;    // false for the metadata and for a block inside a tensor
};

struct WriteOptions {
    Shape       shape;
    ggml_type   wtype     = GGML_TYPE_F32;
    uint32_t    file_type = 0;
    std::string vocab_path;  // a GGUF with tokenizer.* keys (tensors, if any, are ignored)
    std::string out_path;
    uint64_t    seed    = 0;
    int         threads = 0;  // 0 = every available core
    std::function<void(const Progress &)> on_progress;  // after the metadata and after each tensor
};

struct WriteResult {
    bool        ok = false;
    std::string error;
    uint64_t    bytes    = 0;  // file size
    int64_t     n_params = 0;
    int64_t     n_vocab  = 0;
    int64_t     n_tensors = 0;
};

// Writes the model to opt.out_path (through "<out_path>.partial", renamed at
// the end, so an interrupted run never leaves a truncated model behind).
WriteResult write_model(const WriteOptions & opt);

} // namespace standin::tools::model
