#include "cuda/runtime.hpp"

#include <utility>

namespace attnbench::cuda {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " +
                           cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

DeviceProps device_props(int ordinal) {
  cudaDeviceProp p{};
  ATTNBENCH_CUDA_CHECK(cudaGetDeviceProperties(&p, ordinal));
  DeviceProps d;
  d.name = p.name;
  d.ordinal = ordinal;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  d.global_mem_bytes = p.totalGlobalMem;
  d.smem_per_block_optin = p.sharedMemPerBlockOptin;
  ATTNBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&d.sm_clock_khz, cudaDevAttrClockRate, ordinal));
  ATTNBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&d.mem_clock_khz, cudaDevAttrMemoryClockRate, ordinal));
  ATTNBENCH_CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
  ATTNBENCH_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
  return d;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes) ATTNBENCH_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
void DeviceBuffer::upload(const void* src, std::size_t n) {
  if (n > bytes_) throw std::length_error("DeviceBuffer::upload past the end");
  ATTNBENCH_CUDA_CHECK(cudaMemcpy(ptr_, src, n, cudaMemcpyHostToDevice));
}
void DeviceBuffer::download(void* dst, std::size_t n) const {
  if (n > bytes_) throw std::length_error("DeviceBuffer::download past the end");
  ATTNBENCH_CUDA_CHECK(cudaMemcpy(dst, ptr_, n, cudaMemcpyDeviceToHost));
}
void DeviceBuffer::fill_byte(unsigned char v) {
  if (bytes_) ATTNBENCH_CUDA_CHECK(cudaMemset(ptr_, v, bytes_));
}

Stream::Stream() { ATTNBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}
void Stream::synchronize() const { ATTNBENCH_CUDA_CHECK(cudaStreamSynchronize(s_)); }

Event::Event() { ATTNBENCH_CUDA_CHECK(cudaEventCreate(&e_)); }
Event::~Event() {
  if (e_) cudaEventDestroy(e_);
}
void Event::record(cudaStream_t s) const { ATTNBENCH_CUDA_CHECK(cudaEventRecord(e_, s)); }
float Event::elapsed_ms(const Event& start, const Event& end) {
  ATTNBENCH_CUDA_CHECK(cudaEventSynchronize(end.e_));
  float ms = 0.f;
  ATTNBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, end.e_));
  return ms;
}

Graph::Graph(cudaStream_t s, const std::function<void()>& launches) {
  ATTNBENCH_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    launches();
  } catch (...) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(s, &g);
    if (g) cudaGraphDestroy(g);
    throw;
  }
  ATTNBENCH_CUDA_CHECK(cudaStreamEndCapture(s, &graph_));
  const cudaError_t err = cudaGraphInstantiate(&exec_, graph_, 0);
  if (err != cudaSuccess) {
    cudaGraphDestroy(graph_);  // the destructor does not run for a constructor that throws
    throw_cuda_error(err, "cudaGraphInstantiate(&exec_, graph_, 0)", __FILE__, __LINE__);
  }
}
Graph::~Graph() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
}
void Graph::replay(cudaStream_t s) const { ATTNBENCH_CUDA_CHECK(cudaGraphLaunch(exec_, s)); }

bool stream_is_capturing(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  ATTNBENCH_CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  return st != cudaStreamCaptureStatusNone;
}

void check_last_launch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(e, what, __FILE__, __LINE__);
}

}  // namespace attnbench::cuda
