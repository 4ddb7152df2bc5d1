// cuda.unified_bwd's Hopper dK/dV kernel (bwd_wgmma.cu): wgmma, TMA, a producer and two consumer warpgroups per
// 128-key tile. Instances for head sizes 64 and 128.
#pragma once
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "attnbench/attention_bwd.hpp"

namespace attnbench::cuda {

constexpr int kWgBwdKeys = 128;    // keys per CTA: 64 per consumer warpgroup
constexpr int kWgBwdQueries = 64;  // rows of a query tile
constexpr bool wg_bwd_head_size(int d) { return d == 64 || d == 128; }

// The dK/dV kernel's seven tensor maps, encoded on the host for one set of pointers and extents and kept by the
// plan, so that a run over the same buffers (every timed call) encodes none.
struct WgBwdMapCache {
  struct Key {
    const void *q, *k, *v, *d_o, *workspace;
    int64_t total_q, total_k, q_stride_token, q_stride_head, k_stride_token, k_stride_head;
    int heads, kv_heads, num_seqs, head_size, dtype;
    bool operator==(const Key& o) const;
  };
  Key key{};
  bool valid = false;
  CUtensorMap q, k, v, d_o, lse2, dsum, dq;
};

// The preprocess, the dK/dV kernel and the postprocess on `stream`; p.workspace holds bwd_workspace_bytes(p).
// `maps` is re-encoded when p's buffers or extents differ from those it holds.
template <DType DT, int D>
void launch_attention_bwd_wgmma(const AttentionBwdParams& p, WgBwdMapCache& maps, cudaStream_t stream);

}  // namespace attnbench::cuda
