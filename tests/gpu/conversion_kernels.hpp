// Host launchers of the device conversions' sweeps (conversion_kernels.cu): each runs a conversion over every
// input it can take and counts where it differs from the shared rule computed on the device.
#pragma once
#include <cstdint>

namespace attnbench::gputest {

struct ConversionSweep {
  uint64_t mismatches = 0;
  uint32_t first_bits = 0;  // an input that mismatched (any, when several did)
};

// elementwise.cuh's e4m3_codes2 against device::e4m3_code on every fp32 bit pattern, in both bytes of the pair.
ConversionSweep run_e4m3_pair_sweep();

}  // namespace attnbench::gputest
