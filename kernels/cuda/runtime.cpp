// The GPU runtime shim on the CUDA runtime.
#include "cuda/runtime.hpp"

#include <dlfcn.h>

#include <string>
#include <utility>
#include <vector>

namespace attnbench::cuda {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw gpu::Error(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " + cudaGetErrorName(err) +
                   " (" + cudaGetErrorString(err) + ")");
}

void check_last_launch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(e, what, __FILE__, __LINE__);
}

}  // namespace attnbench::cuda

namespace attnbench::gpu {
namespace {

cudaStream_t as_stream(StreamHandle s) { return static_cast<cudaStream_t>(s); }

}  // namespace

const char* runtime_name() { return "CUDA"; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

void set_device(int ordinal) { ATTNBENCH_CUDA_CHECK(cudaSetDevice(ordinal)); }

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

std::optional<std::size_t> free_memory() {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: the next checked call must not see it
    return std::nullopt;
  }
  return free;
}

void* device_malloc(std::size_t bytes) {
  void* p = nullptr;
  ATTNBENCH_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}
void device_free(void* p) noexcept { cudaFree(p); }
void copy_to_device(void* dst, const void* src, std::size_t n) {
  ATTNBENCH_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
}
void copy_to_host(void* dst, const void* src, std::size_t n) {
  ATTNBENCH_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}
void memset_async(void* p, int value, std::size_t n, StreamHandle s) {
  ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(p, value, n, as_stream(s)));
}

Stream::Stream() {
  cudaStream_t s = nullptr;
  ATTNBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  s_ = s;
}
Stream::~Stream() {
  if (s_) cudaStreamDestroy(as_stream(s_));
}
void Stream::synchronize() const { ATTNBENCH_CUDA_CHECK(cudaStreamSynchronize(as_stream(s_))); }

Event::Event() {
  cudaEvent_t e = nullptr;
  ATTNBENCH_CUDA_CHECK(cudaEventCreate(&e));
  e_ = e;
}
Event::~Event() {
  if (e_) cudaEventDestroy(static_cast<cudaEvent_t>(e_));
}
void Event::record(StreamHandle s) const {
  ATTNBENCH_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e_), as_stream(s)));
}
float Event::elapsed_ms(const Event& start, const Event& end) {
  ATTNBENCH_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(end.e_)));
  float ms = 0.f;
  ATTNBENCH_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.e_), static_cast<cudaEvent_t>(end.e_)));
  return ms;
}

Graph::Graph(StreamHandle stream, const std::function<void()>& launches) {
  const cudaStream_t s = as_stream(stream);
  ATTNBENCH_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    launches();
  } catch (...) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(s, &g);
    if (g) cudaGraphDestroy(g);
    throw;
  }
  cudaGraph_t graph = nullptr;
  ATTNBENCH_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  graph_ = graph;
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  if (err != cudaSuccess) {
    cudaGraphDestroy(graph);  // the destructor does not run for a constructor that throws
    cuda::throw_cuda_error(err, "cudaGraphInstantiate(&exec, graph, 0)", __FILE__, __LINE__);
  }
  exec_ = exec;
}
Graph::~Graph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}
void Graph::replay(StreamHandle s) const {
  ATTNBENCH_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), as_stream(s)));
}

bool stream_is_capturing(StreamHandle s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  ATTNBENCH_CUDA_CHECK(cudaStreamIsCapturing(as_stream(s), &st));
  return st != cudaStreamCaptureStatusNone;
}

MappedHostMemory::MappedHostMemory(std::size_t bytes) {
  ATTNBENCH_CUDA_CHECK(cudaHostAlloc(&host_, bytes, cudaHostAllocMapped));
  const cudaError_t err = cudaHostGetDevicePointer(&device_, host_, 0);
  if (err != cudaSuccess) {
    cudaFreeHost(host_);  // the destructor does not run for a constructor that throws
    cuda::throw_cuda_error(err, "cudaHostGetDevicePointer(&device_, host_, 0)", __FILE__, __LINE__);
  }
}
MappedHostMemory::~MappedHostMemory() {
  if (host_) cudaFreeHost(host_);
}

// NVML through dlopen: sensors without a link-time dependency on the driver. Enum values are NVML's (nvml.h).
namespace {
using NvmlUnsigned2 = int (*)(void*, int, unsigned*);
using NvmlUnsigned = int (*)(void*, unsigned*);
using NvmlMask = int (*)(void*, unsigned long long*);
struct NvmlViolation {
  unsigned long long reference_time_us, violation_time_ns;
};
using NvmlViolationFn = int (*)(void*, int, NvmlViolation*);
constexpr int kClockSm = 1, kClockMem = 2, kTempGpu = 0, kPolicyPower = 0, kPolicyThermal = 1;
constexpr int kClockIdAppTarget = 1, kClockIdAppDefault = 2;

// NVML's clocks-event (throttle) reason bits, by name.
std::vector<std::string> reason_names(unsigned long long mask) {
  static const std::pair<unsigned long long, const char*> bits[] = {
      {0x1, "gpu_idle"},          {0x2, "applications_clocks_setting"}, {0x4, "sw_power_cap"},
      {0x8, "hw_slowdown"},       {0x10, "sync_boost"},                 {0x20, "sw_thermal_slowdown"},
      {0x40, "hw_thermal_slowdown"}, {0x80, "hw_power_brake_slowdown"}, {0x100, "display_clock_setting"}};
  std::vector<std::string> out;
  for (const auto& [bit, name] : bits)
    if (mask & bit) out.emplace_back(name);
  return out;
}
}  // namespace

struct Sensors::Impl {
  void* lib = nullptr;
  void* dev = nullptr;
  std::string why_absent;
  NvmlUnsigned2 clock = nullptr, max_clock = nullptr, temp = nullptr;
  int (*clock_id)(void*, int, int, unsigned*) = nullptr;
  NvmlUnsigned power = nullptr;
  NvmlMask reasons = nullptr;
  NvmlViolationFn violation = nullptr;
  template <class F>
  void sym(F& f, const char* name) { f = reinterpret_cast<F>(dlsym(lib, name)); }
};

Sensors::Sensors(int ordinal) : impl_(std::make_unique<Impl>()) {
  char bus[32] = {0};
  ATTNBENCH_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal));
  Impl& m = *impl_;
  m.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!m.lib) {
    m.why_absent = "NVML (libnvidia-ml.so.1) did not load";
    return;
  }
  int (*init)() = nullptr;
  int (*by_pci)(const char*, void**) = nullptr;
  m.sym(init, "nvmlInit_v2");
  m.sym(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
  m.sym(m.clock, "nvmlDeviceGetClockInfo");
  m.sym(m.max_clock, "nvmlDeviceGetMaxClockInfo");
  m.sym(m.clock_id, "nvmlDeviceGetClock");
  m.sym(m.temp, "nvmlDeviceGetTemperature");
  m.sym(m.power, "nvmlDeviceGetPowerUsage");
  m.sym(m.reasons, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!m.reasons) m.sym(m.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");  // its name before 12.2
  m.sym(m.violation, "nvmlDeviceGetViolationStatus");
  if (!init || !by_pci || !m.clock || !m.temp || init() != 0 || by_pci(bus, &m.dev) != 0) {
    m.dev = nullptr;
    m.why_absent = std::string("NVML loaded but does not know device ") + bus;
  }
}
Sensors::~Sensors() {
  if (impl_->lib) dlclose(impl_->lib);
}
const std::string& Sensors::why_absent() const { return impl_->why_absent; }

SensorReadings Sensors::read() const {
  SensorReadings r;
  const Impl& m = *impl_;
  if (!m.dev) return r;
  const auto get = [](auto fn, auto&&... args) -> std::optional<unsigned> {
    unsigned v = 0;
    if (fn && fn(args..., &v) == 0) return v;
    return std::nullopt;
  };
  r.sm_clock_mhz = get(m.clock, m.dev, kClockSm);
  r.mem_clock_mhz = get(m.clock, m.dev, kClockMem);
  r.max_sm_clock_mhz = get(m.max_clock, m.dev, kClockSm);
  r.app_sm_clock_mhz = get(m.clock_id, m.dev, kClockSm, kClockIdAppTarget);
  r.default_app_sm_clock_mhz = get(m.clock_id, m.dev, kClockSm, kClockIdAppDefault);
  r.temperature_c = get(m.temp, m.dev, kTempGpu);
  if (const auto mw = get(m.power, m.dev)) r.power_w = *mw / 1000.0;
  unsigned long long mask = 0;
  if (m.reasons && m.reasons(m.dev, &mask) == 0) r.clock_reasons = reason_names(mask);
  NvmlViolation v{};
  if (m.violation && m.violation(m.dev, kPolicyPower, &v) == 0) r.power_limited_us = v.violation_time_ns * 1e-3;
  if (m.violation && m.violation(m.dev, kPolicyThermal, &v) == 0) r.thermal_limited_us = v.violation_time_ns * 1e-3;
  return r;
}

}  // namespace attnbench::gpu
