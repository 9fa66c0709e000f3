// Weights in the host device's own layout (Note [packed weights]): what the
// upload path, the readers of a weight and the MUL_MAT kernels share.
//
// Note [packed weights]
// A Q4_0, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K or IQ4_XS
// weight matrix uploaded into a host device's own buffer for weights
// (ggml_backend_buffer_set_usage(..., WEIGHTS), llama.cpp's model buffers)
// is stored in groups of 8 rows: the 8 rows' blocks b sit together as one
// "block8". A block is described as runs of equal units (packed.cpp,
// kFormats): 1-byte E8M0 scales, 2-byte half scales, or 4-byte words. The unit of u bytes at block offset i becomes the 8 rows' units side
// by side at block8 offset 8i, row r's at 8i + u * r: a 4-byte word w of the
// block becomes a 32-byte word holding word w of every row.
//   Q4_0 (18 bytes): d; 4 words, the low nibbles of word w are elements
//     4w..4w+3 and its high nibbles elements 16+4w..;
//   Q8_0 (34): d; 8 words, elements 4w..4w+3;
//   IQ4_NL (18): as Q4_0, the nibbles indexing the 16 levels;
//   MXFP4 (17): e (the 8 rows' the first 8 bytes of the block8); 4 words
//     as Q4_0's, the nibbles indexing twice the E2M1 values;
//   Q2_K (84): 4 words of the 16 scale/min bytes (word u: runs 4u..4u+3),
//     16 words of qs, word 4 + 8h + w holding in its 2-bit field f elements
//     128h + 32f + 4w..; then d, dmin;
//   Q3_K (110, d last): 8 words of hmask (word w: bit j of its byte e is
//     the third bit of element 32j + 4w + e), 16 words of qs as Q2_K's,
//     3 words of the 12 scale bytes; then d, its 8 copies the last 16 bytes;
//   IQ4_XS (136): d, scales_h; the scales_l word; 32 words of nibbles,
//     word 4j + u holding elements 32j + 4u.. (low) and 32j + 16 + 4u..
//     (high) of sub-block j;
//   Q4_K (144): d, dmin; 3 words of the 12 packed bytes of sub-block scales
//     and mins (so 6-bit fields of 8 rows are unpacked by a few vector shifts
//     and masks, once per super-block); 32 words of quants, word 3 + 8i + w
//     holding in its low nibbles elements 64i + 4w.. (sub-block 2i) and in
//     its high nibbles 64i + 32 + 4w.. (sub-block 2i + 1);
//   Q5_K (176): d, dmin; the 3 scale words as Q4_K's; 8 words of qh, word
//     3 + w holding at bit j of its byte e the fifth bit of element
//     32j + 4w + e (sub-block j, j < 8), so one qh word serves word w of
//     every sub-block; 32 words of nibbles, word 11 + 8i + w holding
//     elements 64i + 4w.. (low) and 64i + 32 + 4w.. (high) as Q4_K's word
//     3 + 8i + w does;
//   Q6_K (210, its d last): 32 words of ql, 16 of qh, 4 of the 16 int8
//     scales (word k: scales 4k..4k+3, one per 16 elements); then d, whose 2
//     bytes end the block (210 is no multiple of 4), its 8 copies the last
//     16 bytes of the block8. Element 128h + 32t + 4w + e (t < 4, w < 8,
//     e < 4) has its low 4 bits in byte e of ql word 16h + 8(t % 2) + w (high
//     nibble for t >= 2) and its top 2 bits at bit 2t of byte e of qh word
//     8h + w: each 32-byte word is 4 elements of 8 rows.
// One 256-bit load then holds 4 elements of 8 rows, so a maddubs/dpbusd
// against the activation's 4 bytes broadcast leaves the integer sums of 8
// rows in the 8 lanes, and the scales, the float multiply-add and the store
// serve 8 rows at once (mul_mat_x8.h, mul_mat_x8_k.h) instead of one row per
// horizontal sum.
// The layout is a permutation of the bytes within each group of 8 rows, so
// the tensor keeps its size, a group occupies exactly the bytes of its 8 rows
// in the original layout (a view of whole groups is itself packed), and a
// buffer filled with one byte value reads the same either way.
// Packing happens when a whole tensor is written with set_tensor, or, for
// weights a loader wrote into the buffer's memory itself (llama.cpp without
// mmap, the host device's case), before the first graph that multiplies by
// them (glue's pack_graph_weights, under a lock no graph holds meanwhile).
// A packed tensor is marked by tensor->extra pointing at its PackedLayout.
// Every reader understands it: MUL_MAT and MUL_MAT_ID (packed kernels, or rows
// restored into scratch for a view that cuts groups), GET_ROWS and the
// quantized copies (rows restored), and the buffer's get_tensor, which
// returns the original bytes, as does a copy out of the buffer by standin.
// Memory is read by another library directly only where ggml's scheduler runs
// an op on a weight of a device that does not support that op, and the host
// device supports every op that reads these types (op_table.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace standin::kernels::host::packed {

struct PackedLayout {
    ggml_type   type;
    const char * name;
};

constexpr int kRows = 8;  // rows per group

// The layout a tensor of this type is packed into, or nullptr if none.
const PackedLayout * layout_for(ggml_type type);

// Whether a tensor (not a view) can be packed: a type with a layout, rows
// contiguous and dense, and every 2-D slice a whole number of groups.
bool can_pack(const ggml_tensor * t);

// The layout of the tensor t or of the tensor it views, nullptr if neither is packed.
const PackedLayout * packed_of(const ggml_tensor * t);

// Whether t (a packed tensor or a view of one) can be read by the packed
// kernels directly: whole rows of the base, starting on group boundaries,
// every slice (dims 2, 3) too.
bool is_native(const ggml_tensor * t);

// Rewrites `plain` (the tensor's original bytes, nbytes(t) of them) into
// `dst` in the packed layout and marks t. plain and dst must not overlap.
void pack(ggml_tensor * t, const void * plain, void * dst);

// Packs a tensor in place (its memory holds the original bytes) and marks
// it; group by group, so the scratch is 8 rows.
void pack_in_place(ggml_tensor * t);

// Restores a packed tensor to the original layout in place and unmarks it.
void unpack_in_place(ggml_tensor * t);

// Copies bytes [offset, offset + size) of the original layout of packed
// tensor t (not a view) into dst.
void read_plain(const ggml_tensor * t, size_t offset, size_t size, void * dst);

// The original bytes of n blocks of one row of a packed tensor or view: the
// row that starts (in the original layout) at byte `row_offset` of the view's
// base tensor, from its block `first_block`.
void read_blocks(const ggml_tensor * base, size_t row_offset, int64_t first_block, int64_t n, void * dst);

// Row (i1, i2, i3) of t (a packed tensor or view) in the original layout, all
// ne[0] / block elements of it, into dst.
void read_row(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3, void * dst);

} // namespace standin::kernels::host::packed
