// The CUDA device for the harness: host code over the runtime shim (kernels/cuda/runtime.hpp).
#include <dlfcn.h>

#include <chrono>
#include <stdexcept>

#include "cuda/runtime.hpp"
#include "cuda/timing.hpp"
#include "device.hpp"
#include "measure.hpp"

namespace attnbench {
namespace {

using namespace attnbench::cuda;

// NVML through dlopen: clocks and temperature for provenance, without a link-time dependency on the driver.
class Nvml {
 public:
  explicit Nvml(const std::string& pci_bus_id) {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
    auto by_pci = reinterpret_cast<int (*)(const char*, void**)>(dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib_, "nvmlDeviceGetClockInfo"));
    temp_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib_, "nvmlDeviceGetTemperature"));
    if (!init || !by_pci || !clock_ || !temp_ || init() != 0 || by_pci(pci_bus_id.c_str(), &dev_) != 0) dev_ = nullptr;
  }
  ~Nvml() {
    if (lib_) dlclose(lib_);
  }
  // "sm_clock_mhz", "mem_clock_mhz", "temperature_c" (absent when NVML is not there).
  void read(std::map<std::string, std::string>& out, const std::string& suffix) const {
    if (!dev_) return;
    unsigned v = 0;
    if (clock_(dev_, 1, &v) == 0) out["sm_clock_mhz" + suffix] = std::to_string(v);
    if (clock_(dev_, 2, &v) == 0) out["mem_clock_mhz" + suffix] = std::to_string(v);
    if (temp_(dev_, 0, &v) == 0) out["temperature_c" + suffix] = std::to_string(v);
  }

 private:
  void* lib_ = nullptr;
  void* dev_ = nullptr;
  int (*clock_)(void*, int, unsigned*) = nullptr;
  int (*temp_)(void*, int, unsigned*) = nullptr;
};

class CudaDevice final : public Device {
 public:
  CudaDevice() : props_(device_props(0)) {
    ATTNBENCH_CUDA_CHECK(cudaSetDevice(0));
    char bus[32] = {0};
    ATTNBENCH_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, 0));
    nvml_ = std::make_unique<Nvml>(bus);
    nvml_->read(start_facts_, "_start");
    void* host = nullptr;
    void* dev = nullptr;
    ATTNBENCH_CUDA_CHECK(cudaHostAlloc(&host, sizeof(int), cudaHostAllocMapped));
    ATTNBENCH_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    flag_host_ = static_cast<volatile int*>(host);
    flag_dev_ = static_cast<volatile int*>(dev);
    *flag_host_ = 0;
  }
  ~CudaDevice() override {
    if (flag_host_) cudaFreeHost(const_cast<int*>(const_cast<volatile int*>(flag_host_)));
  }

  Backend backend() const override { return Backend::cuda; }
  std::string name() const override { return props_.name; }
  std::map<std::string, std::string> facts() const override {
    std::map<std::string, std::string> f = start_facts_;
    f["device"] = props_.name;
    f["sm_count"] = std::to_string(props_.sm_count);
    f["compute_capability"] = std::to_string(props_.cc_major) + "." + std::to_string(props_.cc_minor);
    f["l2_bytes"] = std::to_string(props_.l2_bytes);
    f["memory_bytes"] = std::to_string(props_.global_mem_bytes);
    f["max_sm_clock_mhz"] = std::to_string(props_.sm_clock_khz / 1000);
    f["driver_version"] = std::to_string(props_.driver_version);
    f["runtime_version"] = std::to_string(props_.runtime_version);
    nvml_->read(f, "_end");
    return f;
  }

  std::optional<double> free_memory_bytes() const override {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();  // not sticky: the next checked call must not see it
      return std::nullopt;
    }
    return static_cast<double>(free);
  }
  void* alloc(std::size_t bytes) override {
    void* p = nullptr;
    ATTNBENCH_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  void upload(void* dst, const void* src, std::size_t n) override {
    ATTNBENCH_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
  }
  void download(void* dst, const void* src, std::size_t n) override {
    ATTNBENCH_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
  }
  void poison(void* p, std::size_t n) override {
    ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(p, 0xFF, n, stream_.get()));
    stream_.synchronize();
  }
  void* stream() override { return stream_.get(); }
  void synchronize() override { stream_.synchronize(); }

  Support can_time(Mode, L2Mode) const override { return Support::yes(); }

  Sampler make_sampler(Mode mode, L2Mode l2, const std::function<void()>& call) override {
    std::shared_ptr<Graph> graph;
    std::function<void()> one = call;
    if (mode == Mode::graph) {
      graph = std::make_shared<Graph>(stream_.get(), call);
      one = [graph, s = stream_.get()] { graph->replay(s); };
    }
    const int warm_k = warm_and_size(one);  // warms up in every mode: the first replay is never a sample
    const int k = l2 == L2Mode::cold ? 1 : warm_k;
    if (mode == Mode::eager && l2 == L2Mode::hot) {
      // What a caller sees: host wall clock over k back-to-back calls, dispatch included.
      return [this, one, k] {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < k; ++i) one();
        stream_.synchronize();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / k;
      };
    }
    if (l2 == L2Mode::cold) ensure_flush_buffer();
    return [this, one, k, graph, l2] { return device_seconds(one, k, l2 == L2Mode::cold); };
  }

  Sampler make_device_sampler(const std::function<void()>& call) override {
    const int k = warm_and_size(call);
    return [this, call, k] { return device_seconds(call, k, false); };
  }

 private:
  // Runs `one` a few times, returns how many calls make a ~1 ms sample (bounded so the held queue never fills).
  int warm_and_size(const std::function<void()>& one) {
    for (int i = 0; i < 2; ++i) one();
    stream_.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    one();
    stream_.synchronize();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return calls_per_sample(t, 1e-3, 100);
  }

  void ensure_flush_buffer() {
    if (!flush_) flush_ = std::make_unique<DeviceBuffer>(2 * props_.l2_bytes + (16u << 20));
  }

  // Device time per call: the stream is held by a spin kernel while the work is queued, so the events
  // bracket only the kernels; for cold L2 the flush runs before the start event.
  double device_seconds(const std::function<void()>& one, int k, bool cold) {
    cudaStream_t s = stream_.get();
    *flag_host_ = 0;
    launch_hold_stream(flag_dev_, 200, s);
    if (cold) launch_l2_flush(flush_->data(), flush_->bytes(), s);
    start_.record(s);
    for (int i = 0; i < k; ++i) one();
    end_.record(s);
    *flag_host_ = 1;
    const double ms = Event::elapsed_ms(start_, end_);
    return ms * 1e-3 / k;
  }

  DeviceProps props_;
  Stream stream_;
  Event start_, end_;
  volatile int* flag_host_ = nullptr;
  volatile int* flag_dev_ = nullptr;
  std::unique_ptr<DeviceBuffer> flush_;
  std::unique_ptr<Nvml> nvml_;
  std::map<std::string, std::string> start_facts_;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(std::string* why_not) {
  if (device_count() == 0) {
    if (why_not) *why_not = "no CUDA device";
    return nullptr;
  }
  try {
    return std::make_unique<CudaDevice>();
  } catch (const std::exception& e) {
    if (why_not) *why_not = std::string("CUDA device unusable: ") + e.what();
    return nullptr;
  }
}

}  // namespace attnbench
