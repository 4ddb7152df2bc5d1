// Which packed rows and keys a workgroup takes. 2D prefill: grid (kv heads, q blocks, sequences), or (q blocks,
// kv heads, sequences) under q_major; the heaviest q blocks (the last rows, which see the most keys) start first.
// 3D decode: grid (splits, kv heads x row tiles, sequences), each split a run of the row tile's K/V tiles.
#pragma once

#include "attnbench/attention.hpp"
#include "common/device/paged.hpp"
#include "common/device/visibility.hpp"
#include "hip/device/common.hpp"
#include "hip/geometry.hpp"

namespace attnbench::hip {

struct WorkRows {
  PackedRows rows;
  int seq = 0;
  int r0 = 0;          // first packed row
  int n_tiles = 0;     // K/V tiles any of the rows [r0, r0 + block_m) sees
  int mask_from = 0;   // keys from here on are masked for some row (the first row's visible end)
  bool active = false;
  const int32_t* table_row = nullptr;
  device::Visibility vis;
  // One past the last key row r sees.
  ATTNBENCH_HD_INLINE int visible_end(int r) const { return vis.visible_end(rows.token(r)); }
};

ATTNBENCH_HD_INLINE WorkRows work_rows(const AttentionParams& p, int seq, int kvh, int r0, int block_m) {
  WorkRows w;
  w.seq = seq;
  w.rows.q_start = p.cu_seqlens_q[seq];
  w.rows.q_len = p.cu_seqlens_q[seq + 1] - w.rows.q_start;
  w.rows.kv_len = p.seqused_k[seq];
  w.rows.group = p.heads / p.kv_heads;
  w.rows.kvh = kvh;
  w.r0 = r0;
  w.active = r0 < w.rows.count();
  if (!w.active) return w;
  w.vis = device::Visibility(w.rows.q_len, w.rows.kv_len, p.causal, p.top_left, -1, -1);
  const int last = device::imin(r0 + block_m, w.rows.count()) - 1;
  w.n_tiles = (w.visible_end(last) + kBlockN - 1) / kBlockN;
  w.mask_from = w.visible_end(r0);
  w.table_row = p.block_table + device::block_table_row_offset(seq, p.block_table_stride);
  return w;
}

template <class A>
ATTNBENCH_HD_INLINE WorkRows prefill_rows(const A& a, const AttentionParams& p, int q_major, int block_m) {
  const int kvh = q_major ? a.block_y() : a.block_x();
  const int qb = q_major ? a.block_x() : a.block_y();
  const int seq = a.block_z();
  const int rows = (p.cu_seqlens_q[seq + 1] - p.cu_seqlens_q[seq]) * (p.heads / p.kv_heads);
  const int n_qb = (rows + block_m - 1) / block_m;
  return work_rows(p, seq, kvh, qb < n_qb ? (n_qb - 1 - qb) * block_m : rows, block_m);
}

// The split's K/V tiles [begin, end) of a decode workgroup's rows.
struct SplitTiles {
  int begin = 0, end = 0;
};
ATTNBENCH_HD_INLINE SplitTiles split_tiles(int n_tiles, int splits, int split) {
  const int per = (n_tiles + splits - 1) / splits;
  SplitTiles t;
  t.begin = device::imin(n_tiles, split * per);
  t.end = device::imin(n_tiles, t.begin + per);
  return t;
}

// The element offset of packed row r's (token, head) in Q or O.
ATTNBENCH_HD_INLINE int64_t row_offset(const PackedRows& rows, int r, int64_t stride_token, int64_t stride_head) {
  return (rows.q_start + static_cast<int64_t>(rows.token(r))) * stride_token +
         static_cast<int64_t>(rows.head(r)) * stride_head;
}

}  // namespace attnbench::hip
