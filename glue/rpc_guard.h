// A device for ggml-rpc's server that no client graph can take down.
//
// Note [rpc guard]
// ggml-rpc's server (ggml_backend_rpc_start_server, pinned tree) computes
// each graph a client sends with ggml_backend_graph_compute and asserts that it
// succeeded: the protocol has no reply for a failed graph, and its client
// claims that the server supports every op. A node the served device refuses
// (standin then logs "node N ... is not supported here") aborted the whole
// server, for every client. The guarded device stands for the served one in
// the server: buffers, memory and names are the served device's own; only
// graph_compute differs:
//   - each node goes to the served device when it supports it, else to the
//     fallback device (ggml-cpu) when every tensor the node touches is in
//     host memory (a host device's buffers are) and the CPU supports it; runs
//     of nodes with the same place are computed as one graph each;
//   - when a node can run nowhere, or a backend fails, nothing (more) is
//     computed and on_failure is told why; graph_compute still reports
//     success, because the server would abort otherwise. The caller ends that
//     client's connection in on_failure (tools/standin/cmd_rpc_server.cpp),
//     so the client never reads a result that was not computed, and the
//     server goes on with the next client.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "ggml-backend.h"

namespace standin::rpc {

struct GuardOptions {
    ggml_backend_dev_t                        fallback = nullptr;  // ggml-cpu's device, or null (no fallback)
    std::function<void(const std::string &)>  on_failure;           // a graph could not be computed: why
};

// A device that stands for `dev` (Note [rpc guard]). It lives as long as the process.
ggml_backend_dev_t make_guarded_device(ggml_backend_dev_t dev, GuardOptions opt);

struct GuardStats {
    std::size_t graphs = 0;          // graphs computed (or refused)
    std::size_t fallback_nodes = 0;  // nodes the fallback device ran
    std::size_t failures = 0;        // graphs refused or failed
};
GuardStats guard_stats();

} // namespace standin::rpc
