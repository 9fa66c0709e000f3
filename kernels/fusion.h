// Note [fusion]
// Decoding a token runs a few hundred small nodes, so on a GPU the launches
// themselves cost as much as the arithmetic. Eight patterns of llama graphs
// are run as one launch each on the CUDA device:
//   - RMS_NORM followed by the MUL with its weight (the norm's own result is
//     still written, so other readers of it are served), and when the
//     products after it read that result through the integer mat-vec, the
//     norm also writes their quantized input and they follow without a
//     quantize launch;
//   - MUL_MAT nodes that share src1 (Q/K/V, gate/up): src1 is quantized once
//     and the products share one mat-vec launch;
//   - a mat-vec MUL_MAT followed by the ADD of its result and a same-shaped
//     tensor (the residual connection after the output projections): the
//     mat-vec's epilogue writes the product and the sum;
//   - a GLU (SwiGLU) whose result the integer mat-vec of the next product
//     reads (the down projection, with its residual ADD): the GLU writes the
//     quantized input too;
//   - likewise FLASH_ATTN_EXT and the output projection that reads its
//     reshaped result: decoding's attention combine writes the quantized
//     input (one launch fewer, not one launch: the attention is two).
//   - ROPE followed by the SET_ROWS that stores its rotated rows into a KV
//     cache; and, decoding, Q's ROPE, K's ROPE with that cache write and the
//     SET_ROWS of V into its cache, three launches as one (rope_qkv). ggml
//     may place K's rotated result over Q's unrotated source (free once Q's
//     ROPE ran, one by one); when nothing but the cache write reads that
//     result (the graph's use counts say so), the launch does not write it,
//     else it declines such an overlap. Where the three products came just
//     before as one launch after their RMS_NORM x MUL (the first pattern),
//     that launch's epilogue does all of it instead (Note [rope epilogue] in
//     kernels/cuda/mul_mat.cuh; cuda::QkvRope), one launch fewer again.
//   - a mixture-of-experts router: the gate (SOFT_MAX or SIGMOID of the
//     logits, or none), the bias that only steers the choice (ADD), the
//     ARGSORT whose first k entries are the experts, the GET_ROWS of their
//     weights, and the weights' own SOFT_MAX, normalisation (SUM_ROWS, CLAMP,
//     DIV) and SCALE where the graph has them: up to nine launches as one,
//     every node's result written (MoeRoute, match_moe_route);
//   - the experts' results weighted (MUL by the router's weights) and summed
//     over the k experts (k - 1 ADDs of views of the MUL): one launch writes
//     the MUL and the last sum, and a partial sum only where something else
//     reads it (MoeSum, match_moe_sum).
// The second needs the products adjacent, which llama's graphs are not (Q is
// roped before K is computed), so order_for_fusion moves such a MUL_MAT up to
// its partner when nothing between them can change what it reads; it runs in
// the backend's graph_optimize, before ggml allocates the graph, so memory
// reuse follows the new order. All are on unless GGML_STANDIN_FUSION=0, and
// every fused launch computes exactly what the nodes compute one by one.
#pragma once

#include <cstdint>

#include "ggml.h"
#include "kernels/kernel.h"
#include "runtime/runtime.h"

namespace standin::kernels {

// Whether the node has work: COMPUTE flag set, not empty, not a view op.
bool has_work(const ggml_tensor * node);

// Moves MUL_MAT nodes next to an earlier MUL_MAT with the same src1 when that
// is safe (see the note); returns how many nodes moved.
int order_for_fusion(rt::Kind kind, ggml_tensor ** nodes, int n_nodes);

// How many nodes of the graph read a node (ggml counts them as it builds a
// graph, and a split is a view of that graph); negative when the graph holds
// no counts. glue supplies it: the counts live in ggml's private headers.
using UseCount = int (*)(const ggml_cgraph * graph, const ggml_tensor * node);

// Whether the cache write `set` (reading t through its view, set->src[0]) is
// all that reads t, so a fused launch need not write t itself.
bool read_only_by(ggml_cgraph * g, const ggml_tensor * t, const ggml_tensor * set, UseCount uses);

// Whether `reader` is all that reads t, through its src[0]: t itself or a
// chain of views each read only by the next; none of them a graph output.
bool feeds_only(ggml_cgraph * g, const ggml_tensor * t, const ggml_tensor * reader, UseCount uses);

// The next node after position i that has work, or -1.
int next_work(ggml_cgraph * g, int i);

// The nodes of a mixture-of-experts router (Note [fusion]), in graph order;
// nullptr where the graph has no such step. `weights` is read through a
// reshape by each later step, and the last non-null node is the result.
struct MoeRoute {
    ggml_tensor * gate     = nullptr;  // SOFT_MAX or UNARY SIGMOID of the logits; none: the logits are the probabilities
    ggml_tensor * bias     = nullptr;  // ADD(gate, b): the values the experts are chosen by
    ggml_tensor * argsort  = nullptr;  // ARGSORT (falling) of the choice values; its first k are the experts
    ggml_tensor * weights  = nullptr;  // GET_ROWS of the probabilities at the k experts, [1, k, T]
    ggml_tensor * wsoftmax = nullptr;  // SOFT_MAX of the k weights
    ggml_tensor * sum      = nullptr;  // SUM_ROWS of the weights,
    ggml_tensor * clamp    = nullptr;  // CLAMPed,
    ggml_tensor * div      = nullptr;  // and the weights DIVided by it
    ggml_tensor * scale    = nullptr;  // SCALE of the weights
    int           last     = -1;       // graph position of the last node
};
// The router starting at position i (a gate or an ARGSORT), matched by graph
// structure alone (ops, sources, views); the kernel's own limits are
// cuda::moe_route_ok's. False: no router starts there.
bool match_moe_route(ggml_cgraph * g, int i, MoeRoute & r);

constexpr int kMoeSumMaxAdds = 31;
// The experts' weighted sum: MUL(experts [n, k, T], weights [1, k, T]) and the
// ADDs folding its k views [n, T] left to right. write_mask bit a: ADD a is
// read by something besides the next ADD (or the uses are unknown), so its
// partial sum is written; the last ADD always is.
struct MoeSum {
    ggml_tensor * mul = nullptr;
    ggml_tensor * adds[kMoeSumMaxAdds] = {};
    int           n_adds = 0;
    uint32_t      write_mask = 0;
    int           last = -1;
};
bool match_moe_sum(ggml_cgraph * g, int i, MoeSum & s, UseCount uses);

struct FusedRun {
    int  covered = 0;  // graph positions the fused launch stands for; 0: none matched
    Status status = Status::ok;
};

// Runs the nodes starting at position i as one fused launch if a pattern
// matches there on this kind of device.
FusedRun run_fused(rt::Kind kind, rt::Stream & stream, ggml_cgraph * graph, int i, UseCount uses);

} // namespace standin::kernels
