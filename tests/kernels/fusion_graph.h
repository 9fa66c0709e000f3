// What the fusion tests (test_fusion.cpp, test_fusion_moe.cpp) build graphs
// in: a ggml context of tensors without data (the matchers read only ops,
// sources, views and shapes) with one graph, and the readers of a node
// counted by scanning the graph (glue's count comes from ggml's own counts;
// tests/glue checks that one).
#pragma once

#include <vector>

#include "ggml.h"

namespace standin::test {

struct FusionGraph {
    ggml_context * ctx = nullptr;
    ggml_cgraph *  g   = nullptr;
    FusionGraph() {
        ggml_init_params p{64 * 1024 * 1024, nullptr, true};
        ctx = ggml_init(p);
        g = ggml_new_graph(ctx);
    }
    ~FusionGraph() { ggml_free(ctx); }
    FusionGraph(const FusionGraph &) = delete;
    FusionGraph & operator=(const FusionGraph &) = delete;
    std::vector<ggml_tensor *> nodes() const {
        std::vector<ggml_tensor *> v;
        for (int i = 0; i < ggml_graph_n_nodes(g); ++i) v.push_back(ggml_graph_node(g, i));
        return v;
    }
    // Graph position of t, -1 if it is not a node.
    int pos(const ggml_tensor * t) const {
        for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
            if (ggml_graph_node(g, i) == t) return i;
        }
        return -1;
    }
};

inline int scan_uses(const ggml_cgraph * g, const ggml_tensor * t) {
    auto * gm = const_cast<ggml_cgraph *>(g);
    int n = 0;
    for (int i = 0; i < ggml_graph_n_nodes(gm); ++i) {
        for (const ggml_tensor * s : ggml_graph_node(gm, i)->src) n += s == t ? 1 : 0;
    }
    return n;
}

} // namespace standin::test
