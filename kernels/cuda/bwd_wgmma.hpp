// cuda.unified_bwd's Hopper dK/dV kernel (bwd_wgmma.cu): wgmma, TMA, a producer and two consumer warpgroups per
// 128-key tile. Instances for head sizes 64 and 128.
#pragma once
#include <cuda_runtime_api.h>

#include "attnbench/attention_bwd.hpp"

namespace attnbench::cuda {

constexpr int kWgBwdKeys = 128;    // keys per CTA: 64 per consumer warpgroup
constexpr int kWgBwdQueries = 64;  // rows of a query tile
constexpr bool wg_bwd_head_size(int d) { return d == 64 || d == 128; }

// The preprocess, the dK/dV kernel and the postprocess on `stream`; p.workspace holds bwd_workspace_bytes(p).
template <DType DT, int D>
void launch_attention_bwd_wgmma(const AttentionBwdParams& p, cudaStream_t stream);

}  // namespace attnbench::cuda
