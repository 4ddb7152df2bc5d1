// Device peaks measured on the spot: a streaming read and a device-to-device copy, and a bf16 GEMM rate.
#pragma once
#include <string>

#include "device/device.hpp"

namespace attnbench {

struct Peaks {
  double read_gbps = 0;    // bytes read per second by a streaming read: the ceiling of decode and prefill
  double copy_gbps = 0;    // bytes read + written per second
  double gemm_tflops = 0;  // dense bf16 GEMM, fp32 accumulate, random data
  std::string gemm_what;
};

Peaks measure_peaks(Device& dev);

}  // namespace attnbench
