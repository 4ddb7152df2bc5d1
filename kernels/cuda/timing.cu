#include "cuda/timing.hpp"

#include <cstdint>

#include "attnbench/gpu_runtime.hpp"

namespace attnbench::cuda {
namespace {

__global__ void hold_stream_kernel(const volatile int* flag, long long timeout_cycles) {
  const long long start = clock64();
  while (*flag == 0) {
    if (clock64() - start > timeout_cycles) break;  // never hang the device if the host forgets
    __nanosleep(1000);
  }
}

__global__ void l2_flush_kernel(uint4* buf, std::size_t n) {
  const uint4 v = make_uint4(threadIdx.x, blockIdx.x, 0x5a5a5a5a, 0xa5a5a5a5);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    buf[i] = v;
}

// FMA chains on every SM until `duration_ns` passed on the device timer; the store never happens (a stays
// positive) but keeps the compiler from dropping the work.
__global__ void clock_spin_kernel(unsigned long long duration_ns, float* sink) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  float a = threadIdx.x * 1e-3f, b = 1.0001f;
  do {
    for (int i = 0; i < 256; ++i) a = fmaf(a, b, 1e-7f);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < duration_ns);
  if (a == -1.0f) *sink = a;
}

}  // namespace

void launch_clock_spin(int ms, int sm_count, cudaStream_t s) {
  clock_spin_kernel<<<2 * sm_count, 256, 0, s>>>(static_cast<unsigned long long>(ms) * 1000000ULL, nullptr);
}

void launch_hold_stream(const volatile int* flag, int timeout_ms, cudaStream_t s) {
  // ~2 GHz: cycles per ms bound; the timeout is a safety net only.
  hold_stream_kernel<<<1, 1, 0, s>>>(flag, static_cast<long long>(timeout_ms) * 2000000LL);
}

void launch_l2_flush(void* buf, std::size_t bytes, cudaStream_t s) {
  const std::size_t n = bytes / sizeof(uint4);
  l2_flush_kernel<<<1024, 256, 0, s>>>(static_cast<uint4*>(buf), n);
}

}  // namespace attnbench::cuda

namespace attnbench::gpu {

void launch_hold_stream(const volatile int* flag, int timeout_ms, StreamHandle s) {
  cuda::launch_hold_stream(flag, timeout_ms, static_cast<cudaStream_t>(s));
}

void launch_clock_spin(int ms, int sm_count, StreamHandle s) {
  cuda::launch_clock_spin(ms, sm_count, static_cast<cudaStream_t>(s));
}

void launch_l2_flush(void* buf, std::size_t bytes, StreamHandle s) {
  cuda::launch_l2_flush(buf, bytes, static_cast<cudaStream_t>(s));
}

}  // namespace attnbench::gpu
