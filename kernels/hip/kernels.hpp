// The hip.unified device kernels: each __global__ wraps one kernel body (kernels/hip/device) with the hardware's
// arch policy and lane layouts, its LDS a static array sized by the budget model (geometry.hpp), so the compiler's
// LDS report equals the model. Included by the generated instance files (.hip) only.
#pragma once
#include <hip/hip_runtime.h>

#include "hip/device/decode.hpp"
#include "hip/device/device_arch.hpp"
#include "hip/device/flash.hpp"
#include "hip/device/narrow.hpp"
#include "hip/launch.hpp"
#include "hip/runtime.hpp"

namespace attnbench::hip {

template <DType DT, int D, int W>
__global__ void __launch_bounds__(kWaveSize * W) flash_kernel(const AttentionParams p, int q_major) {
  alignas(16) __shared__ unsigned char lds[FlashTile<D, W>::kLdsBytes];
  flash_block<DeviceArch, HwLayouts, DT, D, W>(DeviceArch{}, p, q_major, lds);
}

template <DType DT, int D>
__global__ void __launch_bounds__(NarrowTile<D>::kThreads) narrow_kernel(const AttentionParams p, int q_major) {
  alignas(16) __shared__ unsigned char lds[NarrowTile<D>::kLdsBytes];
  narrow_block<DeviceArch, HwLayouts, DT, D>(DeviceArch{}, p, q_major, lds);
}

template <DType DT, int D>
__global__ void __launch_bounds__(DecodeTile<D>::kThreads) decode_kernel(const AttentionParams p, int splits) {
  alignas(16) __shared__ unsigned char lds[DecodeTile<D>::kLdsBytes];
  decode_block<DeviceArch, HwLayouts, DT, D>(DeviceArch{}, p, splits, lds);
}

template <DType DT, int D>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const AttentionParams p, int splits) {
  combine_block<DeviceArch, DT, D>(DeviceArch{}, p, splits);
}

inline dim3 grid_of(const LaunchPlan& lp) {
  return dim3(static_cast<unsigned>(lp.grid_x), static_cast<unsigned>(lp.grid_y), static_cast<unsigned>(lp.grid_z));
}

template <DType DT, int D, int W>
void launch_flash(const AttentionParams& p, const LaunchPlan& lp, gpu::StreamHandle stream) {
  hipLaunchKernelGGL((flash_kernel<DT, D, W>), grid_of(lp), dim3(FlashTile<D, W>::kThreads), 0,
                     static_cast<hipStream_t>(stream), p, lp.q_major ? 1 : 0);
  check_last_launch("flash_kernel");
}

template <DType DT, int D>
void launch_narrow(const AttentionParams& p, const LaunchPlan& lp, gpu::StreamHandle stream) {
  hipLaunchKernelGGL((narrow_kernel<DT, D>), grid_of(lp), dim3(NarrowTile<D>::kThreads), 0,
                     static_cast<hipStream_t>(stream), p, lp.q_major ? 1 : 0);
  check_last_launch("narrow_kernel");
}

template <DType DT, int D>
void launch_decode(const AttentionParams& p, const LaunchPlan& lp, gpu::StreamHandle stream) {
  const hipStream_t s = static_cast<hipStream_t>(stream);
  hipLaunchKernelGGL((decode_kernel<DT, D>), grid_of(lp), dim3(DecodeTile<D>::kThreads), 0, s, p, lp.splits);
  check_last_launch("decode_kernel");
  if (lp.splits <= 1) return;
  hipLaunchKernelGGL((combine_kernel<DT, D>), dim3(static_cast<unsigned>(lp.combine_blocks)), dim3(kCombineThreads),
                     0, s, p, lp.splits);
  check_last_launch("combine_kernel");
}

#define ATTNBENCH_HIP_INSTANTIATE_FLASH(DT, D, W) \
  template void launch_flash<DT, D, W>(const AttentionParams&, const LaunchPlan&, gpu::StreamHandle);
#define ATTNBENCH_HIP_INSTANTIATE_NARROW(DT, D) \
  template void launch_narrow<DT, D>(const AttentionParams&, const LaunchPlan&, gpu::StreamHandle);
#define ATTNBENCH_HIP_INSTANTIATE_DECODE(DT, D) \
  template void launch_decode<DT, D>(const AttentionParams&, const LaunchPlan&, gpu::StreamHandle);

}  // namespace attnbench::hip
