// Note [declining inside a tensor split]
// ggml's meta device (llama's -sm tensor) supports a node when every member
// does; a node one member declines runs on the CPU and its result comes back
// as a whole (mirrored) tensor. That is harmless when the node's data was
// whole on every device anyway (MoE routing after a mirrored gate, say), but
// when it was a per-device slice (after a projection whose rows are split, or
// from a head-split KV cache), the pinned tree cannot split the graph around
// it and aborts (ggml-backend-meta.cpp: split_states_equal, buffer_is_meta
// asserts), taking the process down.
//
// So supports_op tells the two apart: a node standin cannot run is still
// declined, unless its data comes from a split tensor (decline_would_abort).
// Then standin accepts it, logs once which op it cannot run, and the graph
// compute reports the node (GGML_STATUS_FAILED): llama_decode fails with that
// error instead of the process aborting.
//
// Which tensors are split: the meta device places each device's slice of a
// weight or cache tensor in that device's buffer, under the same name; our
// buffers note the shapes of the named tensors they hold outside compute
// buffers (note_tensor), and a meta tensor whose slice here is smaller along a
// dimension is split along it. While llama places its weights it asks
// supports_op with each weight in an empty meta buffer (no slice yet): a
// decline there would move the weight out of the meta device, which aborts as
// well, so such a weight counts as split.
#pragma once

#include "ggml-backend-impl.h"

namespace standin::glue::meta_split {

// Buffer init_tensor / free_buffer hooks.
void note_tensor(ggml_backend_buffer_t buffer, const ggml_tensor * t);
void forget_buffer(ggml_backend_buffer_t buffer);

// Whether declining this node inside a tensor split would abort the process.
bool decline_would_abort(const ggml_tensor * node);

// Whether the node is llama's placement probe (a weight in an empty buffer):
// accepting it decides where a weight goes, not what a graph computes.
bool is_placement_probe(const ggml_tensor * node);

} // namespace standin::glue::meta_split
