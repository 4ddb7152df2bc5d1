// Host entry points of the cuda.unified kernels, one explicit instantiation per .cu file
// (prefill_hdim{64,128,256}_{fp16,bf16}_w{4,8}_sm90.cu, decode_hdim{64,128,256}_{fp16,bf16}_sm90.cu).
// Each launcher only enqueues kernels on `stream` (graph-capturable) and throws on a launch error.
#pragma once
#include <cuda_runtime_api.h>

#include "attnbench/attention.hpp"
#include "cuda/heuristics.hpp"

namespace attnbench::cuda {

// 2D prefill: grid (lp.grid_x, lp.grid_y, lp.grid_z), W warps.
template <DType DT, int D, int W>
void launch_prefill(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream);

// 3D split-KV decode, plus the combine kernel when lp.splits > 1 (p.workspace: lp.workspace_bytes).
template <DType DT, int D>
void launch_decode(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream);

}  // namespace attnbench::cuda
