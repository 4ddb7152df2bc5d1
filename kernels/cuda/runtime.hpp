// The CUDA side of the GPU runtime shim (attnbench/gpu_runtime.hpp, implemented in runtime.cpp), plus what the
// CUDA kernels and GPU tests use with CUDA types: checked calls, typed stream handles, the last launch's error.
// Host code (compiled by the host compiler, linked to cudart); every failure throws gpu::Error with file, line
// and the CUDA error string.
#pragma once
#include <cuda_runtime_api.h>

#include "attnbench/gpu_runtime.hpp"

namespace attnbench::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);

#define ATTNBENCH_CUDA_CHECK(expr)                                                             \
  do {                                                                                         \
    cudaError_t attnbench_err_ = (expr);                                                       \
    if (attnbench_err_ != cudaSuccess)                                                         \
      ::attnbench::cuda::throw_cuda_error(attnbench_err_, #expr, __FILE__, __LINE__);          \
  } while (0)

using gpu::device_count;
using gpu::device_props;
using gpu::DeviceBuffer;
using gpu::DeviceProps;
using gpu::Event;
using gpu::Graph;

// The shim's stream with a cudaStream_t handle, for launches.
class Stream : public gpu::Stream {
 public:
  cudaStream_t get() const { return static_cast<cudaStream_t>(gpu::Stream::get()); }
};

inline bool stream_is_capturing(cudaStream_t s) { return gpu::stream_is_capturing(s); }

// Checks the last launch error (throws).
void check_last_launch(const char* what);

}  // namespace attnbench::cuda
