// Note [kernel limits]
// The shapes the CUDA kernels are built for, stated once beside them: each
// kernel checks its launch against these (returning unsupported past them),
// and the op table's CUDA predicates (kernels/op_table.cpp, op_rows_*.cpp)
// read the same numbers to refuse such nodes up front, so that the scheduler
// places them elsewhere instead of a kernel failing at compute time. Plain C++
// (no CUDA headers): the op table compiles in builds without CUDA.
#pragma once

#include <cstdint>

namespace standin::kernels::cuda::limits {

// Grid dimensions y and z (the hardware's limit); kernels loop over larger
// extents only along x, whose grid is capped at kGridX blocks.
constexpr int64_t kGridYZ = 65535;
constexpr int64_t kGridX  = 65535 * 16;

// flash_attn.cu: a V row is held in registers across a lane's share.
constexpr int64_t kFlashAttnMaxDV = 512;

// rope.cu: one position's cos/sin cache (n_dims floats) in dynamic shared
// memory, within the 48 KiB a kernel gets without opting in to more.
constexpr int64_t kRopeCacheBytes = 48 * 1024;

// ssm.cu: SSM_SCAN's states of a head, at most 4 per thread of a 1024-thread block.
constexpr int64_t kSsmStatesPerThread = 4;
constexpr int64_t kSsmMaxStates       = kSsmStatesPerThread * 1024;

// linear_attn.cu: the head size of RWKV_WKV6/7, GATED_LINEAR_ATTN and the
// delta net, a head's state held by one block.
constexpr int64_t kLinearAttnMaxHead = 128;

} // namespace standin::kernels::cuda::limits
