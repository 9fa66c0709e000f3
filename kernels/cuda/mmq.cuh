// Interface of the integer tensor-core product (mmq.cu; Note [product plan]
// in mm_plan.h says when it runs).
#pragma once

#include <cstdint>

#include "ggml.h"
#include "kernels/cuda/mm_plan.h"
#include "kernels/cuda/mul_mat.cuh"

namespace standin::kernels::cuda::mm {

// Weights a (rows of K elements in blocks; row stride a_nb1), src1 quantized
// to int8 codes q and per-32 scales ds = {da, da * sum of the codes} (column
// c, linear over N, ne12, ne13, at q + c * K and ds + c * K / 32), dst d.
// MUL_MAT_ID (mul_mat_id.cu): the tiles come from a list on the device,
// built there from the expert ids, instead of the grid. Tile i covers columns
// [tile_n0[i], + 8 nt) of expert tile_x[i], whose columns are activation
// columns [offs[x], offs[x] + counts[x]) (quantized in that order); column j
// there is pair pairs[j], whose result goes to dst + (pair % n_used) * d_nb1 +
// (pair / n_used) * d_nb2. No K split, no fused ADD. tile_x null: MUL_MAT.
struct MmqRoute {
    const int * tile_x = nullptr;
    const int * tile_n0 = nullptr;
    const int * n_tiles = nullptr;  // tiles in use, at most max_tiles
    const int * counts = nullptr;
    const int * offs = nullptr;
    const int * pairs = nullptr;
    int64_t     n_used = 1, max_tiles = 0;
};

struct MmqArgs {
    const char *   a;
    int64_t        a_nb1, a_nb2, a_nb3;
    const int8_t * q;
    const float2 * ds;
    char *         d;
    int64_t        d_nb1, d_nb2, d_nb3;
    int64_t        K, M, N, ne12, ne13, r2, r3;
    RowAdd         add;        // a fused ADD (one matrix only); add.dst null: none
    bool           early = false;  // a may be read before pdl_wait (weights_fixed)
    int64_t        split = 1;  // set by the launcher
    MmqRoute       route;      // MUL_MAT_ID's tile list; a, d, K, M as for MUL_MAT, the rest unused
};

// Launches one product in the shape `c` (path mmq). false: no kernel for the
// type or shape (the plan never asks for one).
bool mmq_launch(ggml_type t, const plan::Choice & c, const MmqArgs & p, cudaStream_t st);

// The whole MUL_MAT (and its fused ADD, when `add` is given): src1 quantized
// into the stream's scratch (Note [integer activations], mul_mat.cuh), then
// the product. out_of_memory only when no scratch memory could be had (logged).
Status mul_mat_mmq(rt::cuda::CudaStream & stream, ggml_tensor * node, const plan::Choice & c,
                 const ggml_tensor * add = nullptr);

} // namespace standin::kernels::cuda::mm
