// Workgroup-cooperative loads of one K/V tile (kBlockN keys) into LDS, gathered token by token through the block
// table: K row-major [key][d] (the A operand of S^T = K Q^T, the B operand of S = Q K^T: 4 consecutive d of a key),
// V transposed [d][key] (the operand of P V wants 4 consecutive keys of one d). Keys past kv_len load as zeros.
#pragma once

#include "attnbench/attention.hpp"
#include "common/device/paged.hpp"
#include "hip/device/common.hpp"
#include "hip/geometry.hpp"

namespace attnbench::hip {

// The element offset of (token, kv head, d = 0) in a paged cache.
ATTNBENCH_HD_INLINE int64_t kv_token_offset(const AttentionParams& p, const int32_t* table_row, int kvh, int tok) {
  const device::PagedPos pos = device::PageDivisor(p.block_size).pos(tok);
  return device::paged_offset(table_row[pos.page], pos.offset, p.kv_stride_block, p.kv_stride_token) +
         static_cast<int64_t>(kvh) * p.kv_stride_head;
}

// One 16-byte chunk of a cache row, zeros past the sequence's keys.
ATTNBENCH_HD_INLINE Chunk load_kv_chunk(const AttentionParams& p, const void* cache, const int32_t* table_row, int kvh,
                                        int tok, int kv_len, int d0) {
  if (tok >= kv_len) return Chunk{0, 0};
  return load_chunk(static_cast<const uint16_t*>(cache) + kv_token_offset(p, table_row, kvh, tok) + d0);
}

// K of keys [n0, n0 + kBlockN) into k_lds ([key][D + kPad]) and V transposed into vt_lds ([d][kBlockN + kPad]),
// either left out when null; NT threads share the 16-byte chunks.
template <int D, int NT, class A>
ATTNBENCH_HD_INLINE void load_kv_tile(const A& a, const AttentionParams& p, const int32_t* table_row, int kvh, int n0,
                                      int kv_len, uint16_t* k_lds, uint16_t* vt_lds) {
  constexpr int kParts = D / 8;
  for (int c = a.thread(); c < kBlockN * kParts; c += NT) {
    const int key = c / kParts, d0 = (c % kParts) * 8;
    if (k_lds)
      store_chunk(k_lds + key * (D + kPad) + d0, load_kv_chunk(p, p.k_cache, table_row, kvh, n0 + key, kv_len, d0));
    if (vt_lds) {
      const Chunk v = load_kv_chunk(p, p.v_cache, table_row, kvh, n0 + key, kv_len, d0);
      HIP_UNROLL
      for (int e = 0; e < 8; ++e) vt_lds[(d0 + e) * (kBlockN + kPad) + key] = v.get(e);
    }
  }
}

}  // namespace attnbench::hip
