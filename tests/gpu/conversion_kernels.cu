// The device conversions against the shared rules on every input (conversion_kernels.hpp).
#include "conversion_kernels.hpp"

#include <cuda_runtime.h>

#include "common/device/mx_rules.hpp"
#include "cuda/elementwise.cuh"
#include "cuda/runtime.hpp"

namespace attnbench::gputest {
namespace {

// Pattern b in the low byte and ~b in the high one, so each byte of the pair sees every pattern.
__global__ void e4m3_pair_sweep(unsigned long long* mismatches, uint32_t* first_bits) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  unsigned local = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < (1ull << 32); i += stride) {
    const uint32_t b = static_cast<uint32_t>(i);
    const float lo = __uint_as_float(b), hi = __uint_as_float(~b);
    const uint32_t got = cuda::dev::e4m3_codes2(lo, hi);
    const uint32_t want = device::e4m3_code(lo) | static_cast<uint32_t>(device::e4m3_code(hi)) << 8;
    if (got != want) {
      ++local;
      *first_bits = b;
    }
  }
  if (local != 0) atomicAdd(mismatches, static_cast<unsigned long long>(local));
}

}  // namespace

ConversionSweep run_e4m3_pair_sweep() {
  cuda::DeviceBuffer count(sizeof(unsigned long long)), first(sizeof(uint32_t));
  count.fill_byte(0);
  first.fill_byte(0);
  e4m3_pair_sweep<<<132 * 8, 256>>>(static_cast<unsigned long long*>(count.data()),
                                    static_cast<uint32_t*>(first.data()));
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
  ATTNBENCH_CUDA_CHECK(cudaDeviceSynchronize());
  ConversionSweep r;
  count.download(&r.mismatches, sizeof r.mismatches);
  first.download(&r.first_bits, sizeof r.first_bits);
  return r;
}

}  // namespace attnbench::gputest
