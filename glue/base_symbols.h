// The ggml-base functions the plugin module calls, one X(name) each (Note
// [ggml-base binding] in base_link.h). The module links with --no-undefined:
// a call to a function missing here fails its link, and a name here that
// the process's ggml-base lacks makes the entry points refuse to start.
#pragma once

// clang-format off
#define SI_GGML_BASE_SYMBOLS(X) \
    X(ggml_are_same_shape) \
    X(ggml_backend_buffer_free) \
    X(ggml_backend_buffer_get_usage) \
    X(ggml_backend_buffer_init) \
    X(ggml_backend_buffer_is_host) \
    X(ggml_blck_size) \
    X(ggml_can_repeat) \
    X(ggml_free) \
    X(ggml_get_glu_op) \
    X(ggml_get_unary_op) \
    X(ggml_glu_op_name) \
    X(ggml_graph_add_node) \
    X(ggml_graph_n_nodes) \
    X(ggml_graph_node) \
    X(ggml_graph_nodes) \
    X(ggml_graph_overhead_custom) \
    X(ggml_init) \
    X(ggml_is_contiguous) \
    X(ggml_is_empty) \
    X(ggml_is_quantized) \
    X(ggml_log_internal) \
    X(ggml_nbytes) \
    X(ggml_nelements) \
    X(ggml_new_graph_custom) \
    X(ggml_nrows) \
    X(ggml_op_desc) \
    X(ggml_op_name) \
    X(ggml_type_name) \
    X(ggml_type_size) \
    X(ggml_unary_op_name)
// clang-format on
