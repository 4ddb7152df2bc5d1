// The hip.unified kernels on the CPU emulator: each launcher runs the kernel body its device instance runs
// (kernels/hip/launch_*.hip), with the same grid, workgroup size and LDS, over host pointers. L is the lane layout
// the kernel is compiled with (HwLayouts for the hardware; the layout tests plant wrong ones).
#pragma once
#include <stdexcept>

#include "hip/device/decode.hpp"
#include "hip/device/flash.hpp"
#include "hip/device/narrow.hpp"
#include "hip/emulator/arch.hpp"
#include "hip/heuristics.hpp"

namespace attnbench::hip::emu {

inline Dim3 grid_of(const LaunchPlan& lp) { return {lp.grid_x, lp.grid_y, lp.grid_z}; }

template <class L, DType DT, int D, int W>
void run_flash(const AttentionParams& p, const LaunchPlan& lp) {
  launch(grid_of(lp), FlashTile<D, W>::kThreads, FlashTile<D, W>::kLdsBytes, [&](const EmuArch& a, unsigned char* lds) {
    flash_block<EmuArch, L, DT, D, W>(a, p, lp.q_major ? 1 : 0, lds);
  });
}

template <class L, DType DT, int D>
void run_narrow(const AttentionParams& p, const LaunchPlan& lp) {
  launch(grid_of(lp), NarrowTile<D>::kThreads, NarrowTile<D>::kLdsBytes, [&](const EmuArch& a, unsigned char* lds) {
    narrow_block<EmuArch, L, DT, D>(a, p, lp.q_major ? 1 : 0, lds);
  });
}

// The decode kernel, then the combine kernel when the plan splits the KV (one stream: the combine reads what every
// split wrote).
template <class L, DType DT, int D>
void run_decode(const AttentionParams& p, const LaunchPlan& lp) {
  launch(grid_of(lp), DecodeTile<D>::kThreads, DecodeTile<D>::kLdsBytes, [&](const EmuArch& a, unsigned char* lds) {
    decode_block<EmuArch, L, DT, D>(a, p, lp.splits, lds);
  });
  if (lp.splits > 1)
    launch({lp.combine_blocks, 1, 1}, kCombineThreads, 0,
           [&](const EmuArch& a, unsigned char*) { combine_block<EmuArch, DT, D>(a, p, lp.splits); });
}

// The instance `key` of the plan, as the device dispatch picks it; throws std::invalid_argument for a key no
// instance has.
template <class L>
void run_instance(const InstanceKey& key, const AttentionParams& p, const LaunchPlan& lp);

template <class L, DType DT, int D>
void run_instance_d(const InstanceKey& key, const AttentionParams& p, const LaunchPlan& lp) {
  switch (key.regime) {
    case Regime::decode: return run_decode<L, DT, D>(p, lp);
    case Regime::narrow:
      if (key.waves == narrow_waves(D)) return run_narrow<L, DT, D>(p, lp);
      break;
    case Regime::flash:
      if (key.waves == 1) return run_flash<L, DT, D, 1>(p, lp);
      if (key.waves == 2) return run_flash<L, DT, D, 2>(p, lp);
      if (key.waves == 4) return run_flash<L, DT, D, 4>(p, lp);
      break;
  }
  throw std::invalid_argument("emulator: no kernel for " + instance_name(key));
}

template <class L>
void run_instance(const InstanceKey& key, const AttentionParams& p, const LaunchPlan& lp) {
  if (key.dtype == DType::f16 && key.head_size == 64) return run_instance_d<L, DType::f16, 64>(key, p, lp);
  if (key.dtype == DType::f16 && key.head_size == 128) return run_instance_d<L, DType::f16, 128>(key, p, lp);
  if (key.dtype == DType::bf16 && key.head_size == 64) return run_instance_d<L, DType::bf16, 64>(key, p, lp);
  if (key.dtype == DType::bf16 && key.head_size == 128) return run_instance_d<L, DType::bf16, 128>(key, p, lp);
  throw std::invalid_argument("emulator: no kernel for " + instance_name(key));
}

}  // namespace attnbench::hip::emu
