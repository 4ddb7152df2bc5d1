// A streaming read of a device buffer: the ceiling of kernels that read far more than they write (decode reads
// every K/V byte once and writes a few rows), which a copy's read + write rate overstates.
#include <cstdint>

#include "cuda/peaks.hpp"
#include "cuda/runtime.hpp"

namespace attnbench::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 8;  // independent 16-byte loads in flight per thread

// XOR of every word of src: the loads cannot be dropped, and sink is written only if the XOR hits a value the
// fill pattern never gives.
__global__ void __launch_bounds__(kThreads) read_stream(const uint4* __restrict__ src, std::size_t n, unsigned* sink) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  uint32_t acc = 0;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldcs(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

}  // namespace

void launch_read_stream(const void* src, std::size_t bytes, unsigned* sink, int sm_count, cudaStream_t s) {
  read_stream<<<sm_count * 4, kThreads, 0, s>>>(static_cast<const uint4*>(src), bytes / sizeof(uint4), sink);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace attnbench::cuda
