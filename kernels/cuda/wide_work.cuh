// The wide prefill kernel's work walk (prefill_wide.cuh): which unit (q-tile, head group, sequence) a CTA takes
// k-th, the rows and KV tiles of a unit, which token and head each tile row holds, and the ring positions the
// producer and the consumers step through, one per KV tile.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attnbench/attention.hpp"
#include "common/device/fast_div.hpp"
#include "common/device/visibility.hpp"

namespace attnbench::cuda {

// Launch parameters beside AttentionParams: ring depth, the work walk and the GQA packing of a tile's rows.
struct WideLaunch {
  int stages;      // K and V ring slots (2..kWideMaxStages)
  int q_bufs;      // Q tiles per consumer warpgroup: 2 = the next unit's Q loads while this one computes
  int q_major;     // non-persistent: the q-tile index on grid.x
  int persistent;  // 1: gridDim.x CTAs walk work_tiles in snake order, or their lists in `walk`
  int qo_tma;      // 1: Q in by TMA (one mbarrier per Q tile), O out by a TMA store where a warpgroup's rows are full
  int num_seqs;
  int work_tiles;  // persistent: m_tiles x num_seqs x head_tiles, rank-major (heaviest q-tiles first)
  int pack;        // query heads of one KV group per tile (1: the tile's rows are tokens of one head)
  int tq;          // tokens per tile, BM / pack: row r holds token r % tq of the group's head r / tq
  uint32_t tq_magic;  // r / tq == (r * tq_magic) >> 16 for every tile row (heuristics.hpp, wide_pack_magic)
  int head_tiles;  // heads / pack
  // The work walk's divisors (num_seqs x head_tiles, head_tiles, tq, the GQA group size), fixed per launch.
  device::FastDiv per_rank_div, head_tiles_div, tq_div, group_div;
  // Persistent with the L2 walk (wide_walk.hpp): the host's table in the workspace, per CTA its first unit
  // (gridDim.x + 1 offsets) then the units' rank-major indices; nullptr: the snake.
  const int32_t* walk;
};

namespace dev {

// One unit of work: q-tile `rank` counted from the sequence's end (rank 0 = the last, heaviest q-tile under
// bottom-right causal masking) of head tile `head` (query heads head * pack ..) of sequence `seq`.
struct WideWork {
  int seq, head, rank;
};

// The k-th unit of this CTA, false when it has none. Non-persistent: the CTA's own (grid = head tiles x m-tiles x
// seqs or m-tiles x head tiles x seqs). Persistent: the k-th entry of the CTA's list in the L2 walk's table, or
// index k * G + (b, or G - 1 - b on odd rounds) of the rank-major order (rank, sequence, head tile), so every round
// hands the heaviest remaining tiles out and the snake evens the sums.
__device__ __forceinline__ bool wide_next_work(const WideLaunch& w, int k, WideWork& u) {
  if (!w.persistent) {
    if (k > 0) return false;
    u.rank = w.q_major ? blockIdx.x : blockIdx.y;
    u.head = w.q_major ? blockIdx.y : blockIdx.x;
    u.seq = blockIdx.z;
    return true;
  }
  const int g = gridDim.x, b = blockIdx.x;
  int idx;
  if (__builtin_expect(w.walk == nullptr, 1)) {  // the snake first: short units, which take no walk, pay for the branch
    const int64_t idx64 = static_cast<int64_t>(k) * g + ((k & 1) ? g - 1 - b : b);
    if (idx64 >= w.work_tiles) return false;
    idx = static_cast<int>(idx64);  // < work_tiles <= INT32_MAX (the plan's check)
  } else {
    const int at = __ldg(w.walk + b) + k;
    if (at >= __ldg(w.walk + b + 1)) return false;
    idx = __ldg(w.walk + g + 1 + at);
  }
  u.rank = w.per_rank_div.div(idx);
  const int rem = idx - u.rank * (w.num_seqs * w.head_tiles);
  u.seq = w.head_tiles_div.div(rem);
  u.head = rem - u.seq * w.head_tiles;
  return true;
}

// The geometry of one unit: its tokens [m0, m0 + tq) of q_len, its first query head and KV head, its KV tiles, and
// (vis) which keys each of its tokens sees.
template <int BN>
struct WideGeom {
  int q_start, q_len, kv_len, m0, diag, n_tiles, kvh, head0;
  // The unit's visibility rule: its alignment carried from make(), the mask flags read from p where used (a flag
  // carried through the unit loop instead costs the consumer a loop-carried register and changes its schedule).
  __device__ __forceinline__ device::Visibility vis(const AttentionParams& p) const {
    return device::Visibility::aligned(q_len, kv_len, diag, p.causal, -1, -1);
  }
  __device__ __forceinline__ bool make(const AttentionParams& p, const WideLaunch& w, const WideWork& u) {
    q_start = p.cu_seqlens_q[u.seq];
    q_len = p.cu_seqlens_q[u.seq + 1] - q_start;
    kv_len = p.seqused_k[u.seq];
    const int whole = w.tq_div.div(q_len);  // ceil(q_len / tq) from the floor: no tq - 1 held across units
    const int n_m = whole + (whole * w.tq < q_len);
    if (u.rank >= n_m) return false;  // a shorter sequence of a ragged batch: no tile at this rank
    m0 = (n_m - 1 - u.rank) * w.tq;
    head0 = u.head * w.pack;
    kvh = w.group_div.div(head0);
    const device::Visibility v(q_len, kv_len, p.causal, p.top_left, -1, -1);
    diag = v.diag;
    n_tiles = v.tiles_end(m0 + w.tq, BN);
    return true;
  }
};

// What tile row r (0 .. BM) of a unit holds: token m0 + r % tq of head head0 + r / tq; valid when that head is in
// the tile (rows from pack * tq on hold none) and the token is in the sequence.
struct WideRow {
  int tok, head;
  bool valid;
};
template <int BN>
__device__ __forceinline__ WideRow wide_row(const WideLaunch& w, const WideGeom<BN>& g, int r) {
  const int h = static_cast<int>((static_cast<uint32_t>(r) * w.tq_magic) >> 16);
  const int tok = g.m0 + r - h * w.tq;
  return {tok, g.head0 + h, h < w.pack && tok < g.q_len};
}

// Whether a consumer warpgroup's 64 tile rows from r0 (a TMA box: wide_qo_boxes) all hold tokens of the sequence:
// its last row holds the box's last token of its last head.
template <int BN>
__device__ __forceinline__ bool wide_rows_full(const WideLaunch& w, const WideGeom<BN>& g, int r0) {
  return wide_row(w, g, r0 + 63).valid;
}

// A consumer warpgroup's RW tile rows [r0, r0 + RW) of a unit hold tokens [t_lo, t_hi]: a slice of one head's
// tokens when they all belong to one head, else (rows of two heads or more) bounded by all the unit's tokens.
struct WgRows {
  bool any;  // some row holds a token of the sequence
  int t_lo, t_hi;
  template <int BN>
  __device__ __forceinline__ WgRows(const WideLaunch& w, const WideGeom<BN>& g, int r0, int rw) {
    const WideRow first = wide_row(w, g, r0), last = wide_row(w, g, r0 + rw - 1);
    const bool one_head = first.head == last.head;
    t_lo = one_head ? first.tok : g.m0;
    t_hi = min(one_head ? last.tok : g.m0 + w.tq - 1, g.q_len - 1);
    any = first.head < g.head0 + w.pack && t_lo < g.q_len;
  }
};

// The unit's visibility in a kernel with the features (F): its sliding window too; otherwise g.vis. The unit's
// tile count stays the windowless one (a right window's tiles past every row are taken without math).
template <bool F, int BN>
__device__ __forceinline__ device::Visibility wide_vis(const AttentionParams& p, const WideGeom<BN>& g) {
  if constexpr (F)
    return device::Visibility::aligned(g.q_len, g.kv_len, g.diag, p.causal, p.features.window_left,
                                       p.features.window_right);
  return g.vis(p);
}
// The unit's first KV tile: the one holding the first key its first row's window sees (0 without features or a
// left window); producer and consumers start there.
template <int BN, bool F>
__device__ __forceinline__ int wide_first_tile(const AttentionParams& p, const WideGeom<BN>& g) {
  if constexpr (!F) return 0;
  return wide_vis<F>(p, g).first_tile(g.m0, BN, g.n_tiles);
}

// Ring slot and phase parity of one KV tile; each role steps its own positions once per tile, in tile order
// across its units (no division by the run-time ring depth).
struct RingPos {
  uint32_t v = 0;  // slot | phase << 16: one register
  __device__ __forceinline__ int slot() const { return static_cast<int>(v & 0xFFFFu); }
  __device__ __forceinline__ uint32_t phase() const { return v >> 16; }
  __device__ __forceinline__ void advance(int stages) {
    ++v;
    if (slot() == stages) v = (v & 0x10000u) ^ 0x10000u;
  }
  // The position one tile earlier.
  __device__ __forceinline__ RingPos before(int stages) const {
    return slot() == 0 ? RingPos{(v ^ 0x10000u) + static_cast<uint32_t>(stages - 1)} : RingPos{v - 1};
  }
};

// The first unit at or after index k that has a q-tile (k is moved to it); false when the CTA has no more.
template <int BN>
__device__ __forceinline__ bool wide_next_unit(const AttentionParams& p, const WideLaunch& w, int& k, WideWork& u,
                                               WideGeom<BN>& g) {
  for (; wide_next_work(w, k, u); ++k)
    if (g.make(p, w, u)) return true;
  return false;
}

}  // namespace dev
}  // namespace attnbench::cuda
