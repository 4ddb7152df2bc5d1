// Host entry points of the hip.unified kernels: templates explicitly instantiated once per key of instances.cmake
// (generated/instance_<key>.hip), reached through the generated key -> launcher table (built_instances). Each
// launcher only enqueues kernels on `stream` (a hipStream_t; graph-capturable) and throws gpu::Error on a launch
// error. No HIP types here, so the host side of the backend compiles without the HIP compiler.
#pragma once

#include "attnbench/attention.hpp"
#include "attnbench/gpu_runtime.hpp"
#include "hip/heuristics.hpp"

namespace attnbench::hip {

// 2D prefill, flash regime (fp16): W waves of 32 query rows (flash.hpp).
template <DType DT, int D, int W>
void launch_flash(const AttentionParams& p, const LaunchPlan& lp, gpu::StreamHandle stream);
// 2D prefill, narrow regime (narrow.hpp).
template <DType DT, int D>
void launch_narrow(const AttentionParams& p, const LaunchPlan& lp, gpu::StreamHandle stream);
// 3D split-KV decode, then the split combine when lp.splits > 1 (p.workspace: lp.workspace_bytes; decode.hpp).
template <DType DT, int D>
void launch_decode(const AttentionParams& p, const LaunchPlan& lp, gpu::StreamHandle stream);

using Launcher = void (*)(const AttentionParams&, const LaunchPlan&, gpu::StreamHandle);

// One built instance: its instances.cmake key (name, and parsed) and its launcher.
struct InstanceLauncher {
  const char* name;
  InstanceKey key;
  Launcher launch;
};
struct InstanceTable {
  const InstanceLauncher* begin;
  const InstanceLauncher* end;
};
// This build's instances, in instances.cmake's order (generated/instance_table.cpp).
InstanceTable built_instances();

}  // namespace attnbench::hip
