// cuda.unified_bwd's mma.sync launchers (unified_bwd.cu): one per (dtype, head size), each enqueueing the preprocess
// (bwd_workspace.hpp), the dK/dV kernel (dQ added by fp32 atomics) and the postprocess (dQ to the dtype) on `stream`.
#pragma once
#include <cuda_runtime_api.h>

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

template <DType DT, int D>
void launch_attention_bwd(const AttentionBwdParams& p, cudaStream_t stream);

}  // namespace attnbench::cuda
