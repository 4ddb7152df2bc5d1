// TMA tensor maps of the paged K/V cache for the wide prefill kernel (host code, host compiler).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "attnbench/attention.hpp"

namespace attnbench::cuda {

// The paged cache [num_blocks][block_size][kv_heads][head_size] at `base` (element strides) as a 4D map, innermost
// first {d, kv head, token in page, page}, box {64, 1, 64, 1}, 128-byte swizzle: one box = one 8 KB d-slab of 64
// tokens of one kv head, the [d/64][token][64] shared-memory layout of the wide kernel; pages of 16 or 32 tokens
// (wide_kv_box_tokens), box {64, 1, block_size, 1}: a page's rows of that slab. `pages` is the page
// extent; the wide kernel passes INT32_MAX (coordinates come from the block table, no page is out of bounds). An
// 8-bit cache's map is of bytes, box {head_size, 1, 64, 1}, unswizzled: one box = 64 tokens' plain code rows; with
// swizzle_codes (the FP8 SDPA, head size 128) 128-byte swizzled: the [token][128 B] tile an 8-bit wgmma reads.
// cuTensorMapEncodeTiled is reached through the runtime's driver entry point (no libcuda link). Throws when it is
// unavailable or refuses the layout. Allocates nothing.
CUtensorMap encode_paged_kv_map(const void* base, DType dt, int head_size, int kv_heads, int block_size,
                                int64_t stride_head, int64_t stride_token, int64_t stride_block,
                                bool swizzle_codes = false, int64_t pages = 0x7fffffff);

// Both maps of one call: what a plan encodes once per (K, V, strides) and passes to every launch.
struct KvTensorMaps {
  CUtensorMap k, v;
};
// The codes swizzled when Q is 8-bit too (the FP8 SDPA: K read as is, V transposed), else an 8-bit cache's plain.
KvTensorMaps encode_kv_maps(const AttentionParams& p);

// Q or O [tokens][heads][head_size] at `base` (16-bit, element strides) as a 3D map, innermost first {d, token,
// head}, box {64, box_tokens, box_heads}, 128-byte swizzle: one box = one 64-column slab of a wide tile's rows
// (row r: token r % box_tokens of head r / box_tokens), the [d/64][row][64] shared-memory layout. Boxes past the
// last token or head read zeros and write nothing. Throws as encode_paged_kv_map.
CUtensorMap encode_rows_map(const void* base, DType dt, int head_size, int64_t tokens, int heads, int64_t stride_token,
                            int64_t stride_head, int box_tokens, int box_heads);
// Q's and O's maps of one call for tiles of tq tokens per head (wide_qo_boxes(tq)): a consumer warpgroup's 64 rows
// are 64 tokens of one head, or 64 / tq heads of tq tokens.
struct QoTensorMaps {
  CUtensorMap q, o;
};
QoTensorMaps encode_qo_maps(const AttentionParams& p, int tq);

// An fp32 matrix [rows][cols] (row_stride elements apart, a multiple of 4) as a 2D map {col, row}, box {box_cols,
// box_rows}: unswizzled (the backward's LSE and D per head, box_rows 1), or with rows of 128 bytes (box_cols 32)
// 128-byte swizzled (its dQ tiles, added by TMA reductions). A box's first column must sit on 16 bytes; columns and
// rows past the extent read zeros and are not written.
CUtensorMap encode_f32_map(const float* base, int64_t cols, int64_t rows, int64_t row_stride, int box_cols, int box_rows,
                           bool swizzle128);

}  // namespace attnbench::cuda
