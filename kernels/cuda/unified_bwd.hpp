// cuda.unified_bwd's mma.sync launchers (unified_bwd.cu): one per (dtype, head size), each enqueueing the preprocess
// (bwd_workspace.hpp), the dK/dV kernel (dQ added by fp32 atomics) and the postprocess (dQ to the dtype) on `stream`.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "attnbench/attention_bwd.hpp"

namespace attnbench::cuda {

// The dK/dV kernel's tiles, one CTA per (sequence, kv head, key tile, column chunk). Up to d128 a CTA owns all
// head_size columns of its keys' dK and dV; d256 splits them (and dQ's) into chunks of 128, each CTA recomputing S
// and dP over all 256, so that its accumulators take d128's registers, and walks 32-row query tiles so that two
// CTAs still share an SM's shared memory.
struct BwdTile {
  int key_rows, query_rows, cols, chunks;
};
constexpr BwdTile bwd_tile(int head_size) {
  return head_size > 128 ? BwdTile{64, 32, 128, head_size / 128} : BwdTile{64, 64, head_size, 1};
}

// A GQA group's query heads split over this many CTAs per key tile (each walks group / splits heads; their dK, dV
// partials added in fp32): the smallest divisor of the group that gives the grid kBwdTargetCtas CTAs, for a kernel
// of `key_rows`-key tiles in `chunks` column chunks. A group's heads in one CTA left the gated 397B block's S2048
// backward (d256, GQA 16) 128 CTAs, one wave with half the SMs idle and the heaviest causal tile twice the mean.
// The wgmma kernel's target is twice that: splits 4 over 2 took GQA 8 (512 CTAs) 3680 -> 3557 us, GQA 16 (256)
// 6320 -> 6092 us at 8 over 4 (kernels/NOTES.md, backward v6).
constexpr int64_t kBwdTargetCtas = 1024, kBwdWgmmaTargetCtas = 2048;
inline int bwd_group_splits(const AttentionBwdParams& p, int key_rows, int chunks,
                            int64_t target = kBwdTargetCtas) {
  const int64_t ctas = (p.max_seqlen_k + key_rows - 1) / key_rows * chunks * p.kv_heads * p.num_seqs;
  const int group = p.heads / p.kv_heads;
  for (int s = 1; s < group; ++s)
    if (group % s == 0 && ctas * s >= target) return s;
  return group;
}
inline int bwd_group_splits(const AttentionBwdParams& p) {
  const BwdTile t = bwd_tile(p.head_size);
  return bwd_group_splits(p, t.key_rows, t.chunks);
}

// `splits` divides the group; p.workspace holds bwd_workspace_bytes(p, splits).
template <DType DT, int D>
void launch_attention_bwd(const AttentionBwdParams& p, int splits, cudaStream_t stream);

}  // namespace attnbench::cuda
