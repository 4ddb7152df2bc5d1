// Host entry points of the cuda.unified kernels: templates explicitly instantiated once per key of instances.cmake
// (generated/instance_<key>.cu), reached through the generated key -> launcher table (built_instances).
// Each launcher only enqueues kernels on `stream` (graph-capturable) and throws on a launch error.
#pragma once
#include <cuda_runtime_api.h>

#include "attnbench/attention.hpp"
#include "cuda/heuristics.hpp"
#include "cuda/tensor_map.hpp"

namespace attnbench::cuda {

// 2D prefill: grid (lp.grid_x, lp.grid_y, lp.grid_z), W warps x RW query rows, K/V stored as KV (DT or 8-bit codes),
// the attention features applied when F. Applies the output gate when p.gate is non-null.
template <DType DT, int D, int W, int RW, DType KV, bool F>
void launch_prefill(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream);

// 2D prefill, wide regime (prefill_wide.cuh): WG consumer warpgroups of 64 query rows plus one producer warpgroup
// (TMA K/V through `kv`, encoded by the caller, when lp.wide_kv_tma; else a cp.async gather and `kv` unused; Q and
// O by TMA through `qo` when lp.wide_qo_tma, else `qo` unused);
// head sizes 64 (WG 1-3), 128 and 256 (WG 1-2); K/V stored as KV (DT, or 8-bit codes at d128 by TMA); the
// attention features applied when F; with Q8 Q in KV's codes too (the FP8 SDPA; DT is O's dtype). Applies the
// output gate when p.gate is non-null.
template <DType DT, int D, int WG, DType KV, bool F, bool Q8>
void launch_prefill_wide(const AttentionParams& p, const UnifiedLaunchPlan& lp, const KvTensorMaps* kv,
                         const QoTensorMaps* qo, cudaStream_t stream);

// 3D split-KV decode (p.workspace: lp.workspace_bytes); with lp.splits > 1 the last split CTAs of each
// (sequence, kv head, row tile) merge the splits, or (lp.merge == separate) a second, programmatically dependent
// launch does; K/V and features as launch_prefill's; with Q8 Q in KV's codes too
// (the FP8 SDPA; DT is O's dtype). Applies the output gate when p.gate is non-null.
template <DType DT, int D, DType KV, bool F, bool Q8>
void launch_decode(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream);

using PlainLauncher = void (*)(const AttentionParams&, const UnifiedLaunchPlan&, cudaStream_t);
using WideLauncher = void (*)(const AttentionParams&, const UnifiedLaunchPlan&, const KvTensorMaps*,
                              const QoTensorMaps*, cudaStream_t);

// One built instance: its instances.cmake key (name, and parsed), and its launcher: `wide` for the wide variant,
// `plain` (launch_prefill or launch_decode) otherwise.
struct InstanceLauncher {
  const char* name;
  InstanceKey key;
  PlainLauncher plain;
  WideLauncher wide;
};
struct InstanceTable {
  const InstanceLauncher* begin;
  const InstanceLauncher* end;
};
// This build's instances (ATTNBENCH_CUDA_INSTANCES), in instances.cmake's order (generated/instance_table.cpp).
InstanceTable built_instances();
// The ATTNBENCH_CUDA_INSTANCES value the table was generated from ("all", "ci", or the expressions).
const char* built_instance_selection();

}  // namespace attnbench::cuda
