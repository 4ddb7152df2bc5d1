// The thin CUDA runtime layer: checked calls, device buffers, streams, events, graphs, device properties.
// Host code (compiled by the host compiler, linked to cudart); every failure throws with file, line and the
// CUDA error string.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>

namespace attnbench::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);

#define ATTNBENCH_CUDA_CHECK(expr)                                                             \
  do {                                                                                         \
    cudaError_t attnbench_err_ = (expr);                                                       \
    if (attnbench_err_ != cudaSuccess)                                                         \
      ::attnbench::cuda::throw_cuda_error(attnbench_err_, #expr, __FILE__, __LINE__);          \
  } while (0)

// Number of visible CUDA devices; 0 when there is no driver or device (never throws).
int device_count();

struct DeviceProps {
  std::string name;
  int ordinal = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::size_t l2_bytes = 0;
  std::size_t global_mem_bytes = 0;
  std::size_t smem_per_block_optin = 0;
  int sm_clock_khz = 0;   // current SM clock (NVML-free: cudaDevAttrClockRate is the max), see clocks.hpp
  int mem_clock_khz = 0;
  int driver_version = 0, runtime_version = 0;
};
DeviceProps device_props(int ordinal = 0);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* src, std::size_t n);
  void download(void* dst, std::size_t n) const;
  void fill_byte(unsigned char v);

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void synchronize() const;

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }
  void record(cudaStream_t s) const;
  // Milliseconds between two recorded events (waits for `end`).
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  cudaEvent_t e_ = nullptr;
};

// A call captured once on a stream and replayed.
class Graph {
 public:
  Graph(cudaStream_t s, const std::function<void()>& launches);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void replay(cudaStream_t s) const;

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Whether the stream is being captured right now (a kernel must not recommend its own graph then).
bool stream_is_capturing(cudaStream_t s);

// Checks the last launch error (throws).
void check_last_launch(const char* what);

}  // namespace attnbench::cuda
