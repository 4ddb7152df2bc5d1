// The measurement kernels of the runtime shim on HIP: the stream hold, the L2 flush and the clock spin. The device
// timer is s_memrealtime, a constant 100 MHz counter on gfx90a and gfx942.
#include <hip/hip_runtime.h>

#include <cstdint>

#include "attnbench/gpu_runtime.hpp"
#include "hip/runtime.hpp"

namespace attnbench::hip {
namespace {

constexpr long long kTicksPerMs = 100000;  // 100 MHz

__device__ long long device_ticks() { return static_cast<long long>(__builtin_amdgcn_s_memrealtime()); }

__global__ void hold_stream_kernel(const volatile int* flag, long long timeout_ticks) {
  const long long start = device_ticks();
  while (*flag == 0) {
    if (device_ticks() - start > timeout_ticks) break;  // never hang the device if the host forgets
    __builtin_amdgcn_s_sleep(8);
  }
}

__global__ void l2_flush_kernel(uint4* buf, std::size_t n) {
  const uint4 v = make_uint4(threadIdx.x, blockIdx.x, 0x5a5a5a5a, 0xa5a5a5a5);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    buf[i] = v;
}

// FMA chains on every CU until `ticks` passed on the device timer; the store never happens (a stays positive) but
// keeps the compiler from dropping the work.
__global__ void clock_spin_kernel(long long ticks, float* sink) {
  const long long start = device_ticks();
  float a = threadIdx.x * 1e-3f, b = 1.0001f;
  do {
    for (int i = 0; i < 256; ++i) a = fmaf(a, b, 1e-7f);
  } while (device_ticks() - start < ticks);
  if (a == -1.0f) *sink = a;
}

}  // namespace
}  // namespace attnbench::hip

namespace attnbench::gpu {

void launch_hold_stream(const volatile int* flag, int timeout_ms, StreamHandle s) {
  hipLaunchKernelGGL(hip::hold_stream_kernel, dim3(1), dim3(1), 0, static_cast<hipStream_t>(s), flag,
                     static_cast<long long>(timeout_ms) * hip::kTicksPerMs);
  hip::check_last_launch("hold_stream_kernel");
}

void launch_clock_spin(int ms, int sm_count, StreamHandle s) {
  hipLaunchKernelGGL(hip::clock_spin_kernel, dim3(2 * sm_count), dim3(256), 0, static_cast<hipStream_t>(s),
                     static_cast<long long>(ms) * hip::kTicksPerMs, nullptr);
  hip::check_last_launch("clock_spin_kernel");
}

void launch_l2_flush(void* buf, std::size_t bytes, StreamHandle s) {
  hipLaunchKernelGGL(hip::l2_flush_kernel, dim3(1024), dim3(256), 0, static_cast<hipStream_t>(s),
                     static_cast<uint4*>(buf), bytes / sizeof(uint4));
  hip::check_last_launch("l2_flush_kernel");
}

}  // namespace attnbench::gpu
