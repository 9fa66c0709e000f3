// The packed weight layout of Note [packed weights] (packed.h): packing,
// restoring and reading rows. Scalar byte moves: packing runs once per weight
// at upload, and the readers other than MUL_MAT move a few rows.
//
// Test: tests/kernels/test_packed.cpp (round trips, views, every reader).
#include "kernels/host/packed.h"

#include <cstring>
#include <vector>

#include "diag/check.h"

namespace standin::kernels::host::packed {

namespace {

// Each format's block as runs of equal units, in block order (Note [packed
// weights]): the one description of its layout that packing, restoring and
// the readers use. The kernels (mul_mat_x8.h, mul_mat_x8_k.h) hard-code the
// offsets that follow from it.
struct Run {
    size_t unit;   // bytes
    size_t count;  // units
};

struct Format {
    PackedLayout layout;
    Run          runs[2];
};

const Format kFormats[] = {
    {{GGML_TYPE_Q4_0, "q4_0x8"}, {{2, 1}, {4, 4}}},   // d; 16 bytes of nibbles
    {{GGML_TYPE_Q8_0, "q8_0x8"}, {{2, 1}, {4, 8}}},   // d; 32 codes
    {{GGML_TYPE_IQ4_NL, "iq4_nlx8"}, {{2, 1}, {4, 4}}},  // d; 16 bytes of nibbles
    {{GGML_TYPE_MXFP4, "mxfp4x8"}, {{1, 1}, {4, 4}}},    // e; 16 bytes of nibbles
    {{GGML_TYPE_Q2_K, "q2_Kx8"}, {{4, 20}, {2, 2}}},  // 16 scale bytes, 64 of qs; d, dmin
    {{GGML_TYPE_Q3_K, "q3_Kx8"}, {{4, 27}, {2, 1}}},  // 32 hmask bytes, 64 of qs, 12 of scales; d
    {{GGML_TYPE_Q4_K, "q4_Kx8"}, {{2, 2}, {4, 35}}},  // d, dmin; 12 scale bytes, 128 of nibbles
    {{GGML_TYPE_Q5_K, "q5_Kx8"}, {{2, 2}, {4, 43}}},  // d, dmin; 12 scale bytes, 32 of qh, 128 of nibbles
    {{GGML_TYPE_Q6_K, "q6_Kx8"}, {{4, 52}, {2, 1}}},  // 128 ql, 64 qh, 16 scales; d
    {{GGML_TYPE_IQ4_XS, "iq4_xsx8"}, {{2, 2}, {4, 33}}},  // d, scales_h; 4 scales_l bytes, 128 of nibbles
};

const Format * format_of(ggml_type type) {
    for (const Format & f : kFormats) {
        if (f.layout.type == type) {
            return &f;
        }
    }
    return nullptr;
}

struct Geometry {
    size_t      bs;      // block bytes
    size_t      rb;      // row bytes
    int64_t     blocks;  // blocks per row
    const Run * runs;    // the format's 2 runs
};

Geometry geometry(const ggml_tensor * base) {
    Geometry g;
    g.bs     = ggml_type_size(base->type);
    g.rb     = base->nb[1];
    g.blocks = base->ne[0] / ggml_blck_size(base->type);
    g.runs   = format_of(base->type)->runs;
    SI_ASSERT(g.runs[0].unit * g.runs[0].count + g.runs[1].unit * g.runs[1].count == g.bs);
    return g;
}

// Moves row r's block between its original bytes and its block8 unit by
// unit: the unit of u bytes at block offset i sits at 8i + u * r of the
// block8 (Note [packed weights]). src is the original block and dst the
// block8 when `to_block8`, else src the block8 and dst the original block.
void move_block(const Geometry & g, size_t r, const char * src, char * dst, bool to_block8) {
    size_t i = 0;
    for (int k = 0; k < 2; ++k) {
        const size_t u = g.runs[k].unit;
        for (size_t n = 0; n < g.runs[k].count; ++n, i += u) {
            const size_t at = kRows * i + u * r;
            std::memcpy(dst + (to_block8 ? at : i), src + (to_block8 ? i : at), u);
        }
    }
}

// Block b of the row at byte `row` (a row start, original layout) of the
// group-ordered bytes `packed`, restored into dst (g.bs bytes).
void unpack_block(const Geometry & g, const char * packed, size_t row, int64_t b, char * dst) {
    const size_t group = row / (kRows * g.rb);
    const size_t r     = (row % (kRows * g.rb)) / g.rb;
    const char * blk8  = packed + group * kRows * g.rb + size_t(b) * kRows * g.bs;
    move_block(g, r, blk8, dst, false);
}

} // namespace

const PackedLayout * layout_for(ggml_type type) {
    const Format * f = format_of(type);
    return f != nullptr ? &f->layout : nullptr;
}

bool can_pack(const ggml_tensor * t) {
    return layout_for(t->type) != nullptr && t->view_src == nullptr && t->ne[1] % kRows == 0 &&
           ggml_is_contiguous(t) && ggml_nbytes(t) > 0;
}

const PackedLayout * packed_of(const ggml_tensor * t) {
    const ggml_tensor * base = t->view_src != nullptr ? t->view_src : t;
    for (const Format & f : kFormats) {
        if (base->extra == &f.layout) {
            return &f.layout;
        }
    }
    return nullptr;
}

bool is_native(const ggml_tensor * t) {
    if (packed_of(t) == nullptr) {
        return false;
    }
    const ggml_tensor * base = t->view_src != nullptr ? t->view_src : t;
    if (base == t) {
        return true;
    }
    const size_t group = kRows * base->nb[1];
    const size_t off   = size_t(static_cast<const char *>(t->data) - static_cast<const char *>(base->data));
    return t->type == base->type && t->ne[0] == base->ne[0] && t->nb[0] == base->nb[0] && t->nb[1] == base->nb[1] &&
           off % group == 0 && t->ne[1] % kRows == 0 && (t->ne[2] == 1 || t->nb[2] % group == 0) &&
           (t->ne[3] == 1 || t->nb[3] % group == 0);
}

namespace {

// One group: the original bytes of its 8 rows at src, packed into dst.
void pack_group(const Geometry & g, const char * src, char * dst) {
    for (int64_t b = 0; b < g.blocks; ++b) {
        char * blk8 = dst + size_t(b) * kRows * g.bs;
        for (size_t r = 0; r < size_t(kRows); ++r) {
            move_block(g, r, src + r * g.rb + size_t(b) * g.bs, blk8, true);
        }
    }
}

} // namespace

void pack(ggml_tensor * t, const void * plain, void * dst) {
    SI_ASSERT(can_pack(t));
    const Geometry g = geometry(t);
    const int64_t groups = ggml_nrows(t) / kRows;
    for (int64_t gi = 0; gi < groups; ++gi) {
        const size_t base = size_t(gi) * kRows * g.rb;
        pack_group(g, static_cast<const char *>(plain) + base, static_cast<char *>(dst) + base);
    }
    t->extra = const_cast<PackedLayout *>(layout_for(t->type));
}

void pack_in_place(ggml_tensor * t) {
    SI_ASSERT(can_pack(t));
    const Geometry g = geometry(t);
    std::vector<char> group(kRows * g.rb);
    const int64_t groups = ggml_nrows(t) / kRows;
    for (int64_t gi = 0; gi < groups; ++gi) {
        char * at = static_cast<char *>(t->data) + size_t(gi) * kRows * g.rb;
        std::memcpy(group.data(), at, group.size());
        pack_group(g, group.data(), at);
    }
    t->extra = const_cast<PackedLayout *>(layout_for(t->type));
}

void read_plain(const ggml_tensor * t, size_t offset, size_t size, void * dst) {
    SI_ASSERT(packed_of(t) != nullptr && t->view_src == nullptr);
    if (size == 0) {
        return;
    }
    const Geometry g = geometry(t);
    const char * data = static_cast<const char *>(t->data);
    char *       out  = static_cast<char *>(dst);
    const size_t end  = offset + size;
    // Whole blocks overlapping the range, then the slice of each.
    for (size_t pos = offset; pos < end;) {
        const size_t row   = pos - pos % g.rb;
        const int64_t b    = int64_t((pos - row) / g.bs);
        const size_t start = row + size_t(b) * g.bs;
        char blk[256];  // the largest block of a packed type
        SI_ASSERT(g.bs <= sizeof(blk));
        unpack_block(g, data, row, b, blk);
        const size_t from = pos - start;
        const size_t n    = std::min(g.bs - from, end - pos);
        std::memcpy(out + (pos - offset), blk + from, n);
        pos += n;
    }
}

void unpack_in_place(ggml_tensor * t) {
    SI_ASSERT(packed_of(t) != nullptr && t->view_src == nullptr);
    const Geometry g = geometry(t);
    std::vector<char> group(kRows * g.rb);
    const int64_t groups = ggml_nrows(t) / kRows;
    for (int64_t gi = 0; gi < groups; ++gi) {
        char * at = static_cast<char *>(t->data) + size_t(gi) * kRows * g.rb;
        std::memcpy(group.data(), at, group.size());
        for (size_t r = 0; r < size_t(kRows); ++r) {
            for (int64_t b = 0; b < g.blocks; ++b) unpack_block(g, group.data(), r * g.rb, b, at + r * g.rb + size_t(b) * g.bs);
        }
    }
    t->extra = nullptr;
}

void read_blocks(const ggml_tensor * base, size_t row_offset, int64_t first_block, int64_t n, void * dst) {
    const Geometry g = geometry(base);
    char * out = static_cast<char *>(dst);
    for (int64_t b = 0; b < n; ++b) {
        unpack_block(g, static_cast<const char *>(base->data), row_offset, first_block + b, out + size_t(b) * g.bs);
    }
}

void read_row(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3, void * dst) {
    const ggml_tensor * base = t->view_src != nullptr ? t->view_src : t;
    const size_t off = size_t(static_cast<const char *>(t->data) - static_cast<const char *>(base->data)) +
                       size_t(i1) * t->nb[1] + size_t(i2) * t->nb[2] + size_t(i3) * t->nb[3];
    const size_t rb  = base->nb[1];
    const size_t row = off - off % rb;
    read_blocks(base, row, int64_t((off - row) / ggml_type_size(base->type)), t->ne[0] / ggml_blck_size(t->type), dst);
}

} // namespace standin::kernels::host::packed
