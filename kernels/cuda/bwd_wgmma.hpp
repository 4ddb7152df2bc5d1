// cuda.unified_bwd's Hopper dK/dV kernels: wgmma, TMA, a producer and two consumer warpgroups per key tile; 128 keys
// at d64 and d128 (bwd_wgmma.cu), 64 at d256 (bwd_wgmma256.cu).
#pragma once
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "attnbench/attention_bwd.hpp"
#include "cuda/bwd_workspace.hpp"

namespace attnbench::cuda {

constexpr int kWgBwdQueries = 64;  // rows of a query tile
constexpr bool wg_bwd_head_size(int d) { return d == 64 || d == 128 || d == 256; }
// Keys per CTA: 64 per consumer warpgroup up to d128; at d256 both warpgroups share 64 (dK in one, dV in the other).
constexpr int wg_bwd_key_rows(int d) { return d == 256 ? 64 : 128; }

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

// The preprocess, the dK/dV kernel and the postprocess on `stream`; `splits` divides the GQA group (1: a CTA walks
// all its heads) and p.workspace holds bwd_workspace_bytes(p, splits). `maps` is re-encoded when p's buffers or
// extents differ from those it holds.
template <DType DT, int D>
void launch_attention_bwd_wgmma(const AttentionBwdParams& p, int splits, WgBwdMapCache& maps, cudaStream_t stream);

// d256's dK/dV kernel alone over `grid` (bwd_wgmma256.cu), for launch_attention_bwd_wgmma.
template <DType DT>
void launch_dkdv_wgmma256(dim3 grid, const AttentionBwdParams& p, const BwdWorkspace& ws, const WgBwdMapCache& maps,
                          cudaStream_t stream);

}  // namespace attnbench::cuda
