// The wide prefill kernel's work walk (prefill_wide.cuh): which unit (q-tile, head, sequence) a CTA takes k-th, the
// rows and KV tiles of a unit, and the ring positions the producer and the consumers step through, one per KV tile.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attnbench/attention.hpp"

namespace attnbench::cuda {

// Launch parameters beside AttentionParams: ring depth and the work walk.
struct WideLaunch {
  int stages;      // K and V ring slots (2..kWideMaxStages)
  int q_bufs;      // Q tiles per consumer warpgroup: 2 = the next unit's Q loads while this one computes
  int q_major;     // non-persistent: the q-tile index on grid.x
  int persistent;  // 1: gridDim.x CTAs walk work_tiles in snake order
  int num_seqs;
  int64_t work_tiles;  // persistent: m_tiles x num_seqs x heads, rank-major (heaviest q-tiles first)
};

namespace dev {

// One unit of work: q-tile `rank` counted from the sequence's end (rank 0 = the last, heaviest q-tile under
// bottom-right causal masking) of query head `head` of sequence `seq`.
struct WideWork {
  int seq, head, rank;
};

// The k-th unit of this CTA, false when it has none. Non-persistent: the CTA's own (grid = heads x m-tiles x seqs
// or m-tiles x heads x seqs). Persistent: index k * G + (b, or G - 1 - b on odd rounds) of the rank-major order
// (rank, sequence, head), so every round hands the heaviest remaining tiles out and the snake evens the sums.
__device__ __forceinline__ bool wide_next_work(const WideLaunch& w, int heads, int k, WideWork& u) {
  if (!w.persistent) {
    if (k > 0) return false;
    u.rank = w.q_major ? blockIdx.x : blockIdx.y;
    u.head = w.q_major ? blockIdx.y : blockIdx.x;
    u.seq = blockIdx.z;
    return true;
  }
  const int g = gridDim.x, b = blockIdx.x;
  const int64_t idx = static_cast<int64_t>(k) * g + ((k & 1) ? g - 1 - b : b);
  if (idx >= w.work_tiles) return false;
  const int64_t per_rank = static_cast<int64_t>(w.num_seqs) * heads;
  u.rank = static_cast<int>(idx / per_rank);
  const int rem = static_cast<int>(idx - u.rank * per_rank);
  u.seq = rem / heads;
  u.head = rem - u.seq * heads;
  return true;
}

// The geometry of one unit: its query rows [m0, m0 + BM) of q_len, the keys it reads, its KV tiles.
template <int BM, int BN>
struct WideGeom {
  int q_start, q_len, kv_len, m0, diag, n_tiles, kvh;
  __device__ __forceinline__ bool make(const AttentionParams& p, const WideWork& u) {
    q_start = p.cu_seqlens_q[u.seq];
    q_len = p.cu_seqlens_q[u.seq + 1] - q_start;
    kv_len = p.seqused_k[u.seq];
    const int n_m = (q_len + BM - 1) / BM;
    if (u.rank >= n_m) return false;  // a shorter sequence of a ragged batch: no tile at this rank
    m0 = (n_m - 1 - u.rank) * BM;
    kvh = u.head / (p.heads / p.kv_heads);
    diag = kv_len - q_len;  // bottom-right alignment: row i sees keys [0, i + diag]
    const int n_end = max(0, p.causal ? min(kv_len, min(m0 + BM, q_len) + diag) : kv_len);
    n_tiles = (n_end + BN - 1) / BN;
    return true;
  }
};

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
template <int BM, int BN>
__device__ __forceinline__ bool wide_next_unit(const AttentionParams& p, const WideLaunch& w, int& k, WideWork& u,
                                               WideGeom<BM, BN>& g) {
  for (; wide_next_work(w, p.heads, k, u); ++k)
    if (g.make(p, u)) return true;
  return false;
}

}  // namespace dev
}  // namespace attnbench::cuda
