// TMA tensor maps of the paged K/V cache for the wide prefill kernel (host code, host compiler).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "attnbench/attention.hpp"

namespace attnbench::cuda {

// The paged cache [num_blocks][block_size][kv_heads][head_size] at `base` (element strides) as a 4D map, innermost
// first {d, kv head, token in page, page}, box {64, 1, 64, 1}, 128-byte swizzle: one box = one 8 KB d-slab of 64
// tokens of one kv head, the [d/64][token][64] shared-memory layout of the wide kernel. `pages` is the page
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

}  // namespace attnbench::cuda
