// Host entry points of the cuda.unified kernels, one explicit instantiation per .cu file
// (prefill_hdim{64,128,256}_{fp16,bf16}_w{4,8}_sm90.cu, prefill_hdim{64,128}_{fp16,bf16}_w4r32_sm90.cu,
// decode_hdim{64,128,256}_{fp16,bf16}_sm90.cu).
// Each launcher only enqueues kernels on `stream` (graph-capturable) and throws on a launch error.
#pragma once
#include <cuda_runtime_api.h>

#include "attnbench/attention.hpp"
#include "cuda/heuristics.hpp"
#include "cuda/tensor_map.hpp"

namespace attnbench::cuda {

// 2D prefill: grid (lp.grid_x, lp.grid_y, lp.grid_z), W warps x RW query rows. Applies the output gate when
// p.gate is non-null.
template <DType DT, int D, int W, int RW>
void launch_prefill(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream);

// 2D prefill, wide regime (prefill_wide.cuh, prefill_wide_hdim{64,128,256}_{bf16,fp16}_sm90.cu): WG consumer
// warpgroups of 64 query rows plus one producer warpgroup (TMA K/V through `maps`, encoded by the caller, when
// lp.wide_kv_tma; else a cp.async gather and `maps` unused); head sizes 64 (WG 1-3), 128 and 256 (WG 1-2). Applies
// the output gate when p.gate is non-null.
template <DType DT, int D, int WG>
void launch_prefill_wide(const AttentionParams& p, const UnifiedLaunchPlan& lp, const KvTensorMaps* maps,
                         cudaStream_t stream);

// 3D split-KV decode (p.workspace: lp.workspace_bytes); with lp.splits > 1 the last split CTA of each
// (sequence, kv head, row tile) merges the splits. Applies the output gate when p.gate is non-null.
template <DType DT, int D>
void launch_decode(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream);

}  // namespace attnbench::cuda
