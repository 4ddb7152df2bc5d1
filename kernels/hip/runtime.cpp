// The GPU runtime shim on the HIP runtime.
#include "hip/runtime.hpp"

#include <string>

namespace attnbench::hip {

void throw_hip_error(hipError_t err, const char* expr, const char* file, int line) {
  throw gpu::Error(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " + hipGetErrorName(err) + " (" +
                   hipGetErrorString(err) + ")");
}

void check_last_launch(const char* what) {
  const hipError_t e = hipGetLastError();
  if (e != hipSuccess) throw_hip_error(e, what, __FILE__, __LINE__);
}

}  // namespace attnbench::hip

namespace attnbench::gpu {
namespace {

hipStream_t as_stream(StreamHandle s) { return static_cast<hipStream_t>(s); }

}  // namespace

const char* runtime_name() { return "HIP"; }

int device_count() {
  int n = 0;
  if (hipGetDeviceCount(&n) != hipSuccess) {
    (void)hipGetLastError();  // hipErrorNoDevice on a machine without one: not sticky
    return 0;
  }
  return n;
}

void set_device(int ordinal) { ATTNBENCH_HIP_CHECK(hipSetDevice(ordinal)); }

DeviceProps device_props(int ordinal) {
  hipDeviceProp_t p{};
  ATTNBENCH_HIP_CHECK(hipGetDeviceProperties(&p, ordinal));
  DeviceProps d;
  d.name = std::string(p.name) + " (" + p.gcnArchName + ")";  // the gfx target says which code object runs
  d.ordinal = ordinal;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  d.global_mem_bytes = p.totalGlobalMem;
  d.smem_per_block_optin = p.sharedMemPerBlock;
  d.sm_clock_khz = p.clockRate;
  d.mem_clock_khz = p.memoryClockRate;
  ATTNBENCH_HIP_CHECK(hipDriverGetVersion(&d.driver_version));
  ATTNBENCH_HIP_CHECK(hipRuntimeGetVersion(&d.runtime_version));
  return d;
}

std::optional<std::size_t> free_memory() {
  std::size_t free = 0, total = 0;
  if (hipMemGetInfo(&free, &total) != hipSuccess) {
    (void)hipGetLastError();
    return std::nullopt;
  }
  return free;
}

void* device_malloc(std::size_t bytes) {
  void* p = nullptr;
  ATTNBENCH_HIP_CHECK(hipMalloc(&p, bytes));
  return p;
}
void device_free(void* p) noexcept { (void)hipFree(p); }
void copy_to_device(void* dst, const void* src, std::size_t n) {
  ATTNBENCH_HIP_CHECK(hipMemcpy(dst, src, n, hipMemcpyHostToDevice));
}
void copy_to_host(void* dst, const void* src, std::size_t n) {
  ATTNBENCH_HIP_CHECK(hipMemcpy(dst, src, n, hipMemcpyDeviceToHost));
}
void memset_async(void* p, int value, std::size_t n, StreamHandle s) {
  ATTNBENCH_HIP_CHECK(hipMemsetAsync(p, value, n, as_stream(s)));
}

Stream::Stream() {
  hipStream_t s = nullptr;
  ATTNBENCH_HIP_CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  s_ = s;
}
Stream::~Stream() {
  if (s_) (void)hipStreamDestroy(as_stream(s_));
}
void Stream::synchronize() const { ATTNBENCH_HIP_CHECK(hipStreamSynchronize(as_stream(s_))); }

Event::Event() {
  hipEvent_t e = nullptr;
  ATTNBENCH_HIP_CHECK(hipEventCreate(&e));
  e_ = e;
}
Event::~Event() {
  if (e_) (void)hipEventDestroy(static_cast<hipEvent_t>(e_));
}
void Event::record(StreamHandle s) const {
  ATTNBENCH_HIP_CHECK(hipEventRecord(static_cast<hipEvent_t>(e_), as_stream(s)));
}
float Event::elapsed_ms(const Event& start, const Event& end) {
  ATTNBENCH_HIP_CHECK(hipEventSynchronize(static_cast<hipEvent_t>(end.e_)));
  float ms = 0.f;
  ATTNBENCH_HIP_CHECK(hipEventElapsedTime(&ms, static_cast<hipEvent_t>(start.e_), static_cast<hipEvent_t>(end.e_)));
  return ms;
}

Graph::Graph(StreamHandle stream, const std::function<void()>& launches) {
  const hipStream_t s = as_stream(stream);
  ATTNBENCH_HIP_CHECK(hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal));
  try {
    launches();
  } catch (...) {
    hipGraph_t g = nullptr;
    (void)hipStreamEndCapture(s, &g);
    if (g) (void)hipGraphDestroy(g);
    throw;
  }
  hipGraph_t graph = nullptr;
  ATTNBENCH_HIP_CHECK(hipStreamEndCapture(s, &graph));
  graph_ = graph;
  hipGraphExec_t exec = nullptr;
  const hipError_t err = hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0);
  if (err != hipSuccess) {
    (void)hipGraphDestroy(graph);  // the destructor does not run for a constructor that throws
    hip::throw_hip_error(err, "hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0)", __FILE__, __LINE__);
  }
  exec_ = exec;
}
Graph::~Graph() {
  if (exec_) (void)hipGraphExecDestroy(static_cast<hipGraphExec_t>(exec_));
  if (graph_) (void)hipGraphDestroy(static_cast<hipGraph_t>(graph_));
}
void Graph::replay(StreamHandle s) const {
  ATTNBENCH_HIP_CHECK(hipGraphLaunch(static_cast<hipGraphExec_t>(exec_), as_stream(s)));
}

bool stream_is_capturing(StreamHandle s) {
  hipStreamCaptureStatus st = hipStreamCaptureStatusNone;
  ATTNBENCH_HIP_CHECK(hipStreamIsCapturing(as_stream(s), &st));
  return st != hipStreamCaptureStatusNone;
}

MappedHostMemory::MappedHostMemory(std::size_t bytes) {
  ATTNBENCH_HIP_CHECK(hipHostMalloc(&host_, bytes, hipHostMallocMapped));
  const hipError_t err = hipHostGetDevicePointer(&device_, host_, 0);
  if (err != hipSuccess) {
    (void)hipHostFree(host_);  // the destructor does not run for a constructor that throws
    hip::throw_hip_error(err, "hipHostGetDevicePointer(&device_, host_, 0)", __FILE__, __LINE__);
  }
}
MappedHostMemory::~MappedHostMemory() {
  if (host_) (void)hipHostFree(host_);
}

// No sensor reader for AMD GPUs yet (ROCm SMI is not loaded): rows record why, and the clock settle spins its
// fixed time unwatched (settle_sm_clock).
struct Sensors::Impl {
  std::string why_absent = "no sensor reader for HIP devices in this build (ROCm SMI is not loaded)";
};
Sensors::Sensors(int) : impl_(std::make_unique<Impl>()) {}
Sensors::~Sensors() = default;
const std::string& Sensors::why_absent() const { return impl_->why_absent; }
SensorReadings Sensors::read() const { return {}; }

}  // namespace attnbench::gpu
