// The GPU device for the harness, for whichever GPU backend this binary builds: host code over the runtime
// shim (attnbench/gpu_runtime.hpp) only, so the harness names no runtime call or type.
#include <chrono>
#include <stdexcept>

#include "attnbench/gpu_runtime.hpp"
#include "core/measure.hpp"
#include "device/device.hpp"

namespace attnbench {
namespace {

class GpuDevice final : public Device {
 public:
  explicit GpuDevice(Backend backend) : backend_(backend), props_(gpu::device_props(0)) {
    gpu::set_device(0);
    sensors_ = std::make_unique<gpu::Sensors>(0);
    read_sensors(start_facts_, "_start");
    flag_ = std::make_unique<gpu::MappedHostMemory>(sizeof(int));
    flag_host_ = static_cast<volatile int*>(flag_->host());
    flag_dev_ = static_cast<volatile int*>(flag_->device());
    *flag_host_ = 0;
  }

  Backend backend() const override { return backend_; }
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
    read_sensors(f, "_end");
    return f;
  }

  std::optional<double> free_memory_bytes() const override {
    const std::optional<std::size_t> free = gpu::free_memory();
    if (!free) return std::nullopt;
    return static_cast<double>(*free);
  }
  void* alloc(std::size_t bytes) override { return gpu::device_malloc(bytes); }
  void release(void* p) override { gpu::device_free(p); }
  void upload(void* dst, const void* src, std::size_t n) override { gpu::copy_to_device(dst, src, n); }
  void download(void* dst, const void* src, std::size_t n) override { gpu::copy_to_host(dst, src, n); }
  void poison(void* p, std::size_t n) override {
    gpu::memset_async(p, 0xFF, n, stream_.get());
    stream_.synchronize();
  }
  void* stream() override { return stream_.get(); }
  void synchronize() override { stream_.synchronize(); }

  Support can_time(Mode mode, L2Mode l2) const override { return timing_support(backend(), mode, l2); }

  Sampler make_sampler(Mode mode, L2Mode l2, const std::function<void()>& call) override {
    std::shared_ptr<gpu::Graph> graph;
    std::function<void()> one = call;
    if (mode == Mode::graph) {
      graph = std::make_shared<gpu::Graph>(stream_.get(), call);
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

  std::string fault() override {
    try {
      gpu::DeviceBuffer probe(256);
      poison(probe.data(), probe.bytes());
      stream_.synchronize();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }

  std::optional<gpu::SensorReadings> read_sensors() const override {
    if (!sensors_->why_absent().empty()) return std::nullopt;
    return sensors_->read();
  }
  std::string sensors_absent() const override { return sensors_->why_absent(); }

  std::optional<SettleReport> settle_clocks(const SettleRule& rule) override {
    const auto t0 = std::chrono::steady_clock::now();
    const auto spin = [this](int ms) {
      gpu::launch_clock_spin(ms, props_.sm_count, stream_.get());
      stream_.synchronize();
    };
    const auto read = [this] { return sensors_->read().sm_clock_mhz; };
    const auto now = [t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    std::optional<unsigned> max = sensors_->read().max_sm_clock_mhz;
    if (!max) max = static_cast<unsigned>(props_.sm_clock_khz / 1000);
    return settle_sm_clock(spin, read, max, rule, now);
  }

 private:
  // "sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w" with the suffix, each absent when the sensors
  // lack it; "sensors" says why none came.
  void read_sensors(std::map<std::string, std::string>& out, const std::string& suffix) const {
    const gpu::SensorReadings r = sensors_->read();
    if (r.sm_clock_mhz) out["sm_clock_mhz" + suffix] = std::to_string(*r.sm_clock_mhz);
    if (r.mem_clock_mhz) out["mem_clock_mhz" + suffix] = std::to_string(*r.mem_clock_mhz);
    if (r.temperature_c) out["temperature_c" + suffix] = std::to_string(*r.temperature_c);
    if (r.power_w) out["power_w" + suffix] = std::to_string(*r.power_w);
    if (!sensors_->why_absent().empty()) out["sensors"] = sensors_->why_absent();
  }

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
    if (!flush_) flush_ = std::make_unique<gpu::DeviceBuffer>(2 * props_.l2_bytes + (16u << 20));
  }

  // Device time per call: the stream is held by a spin kernel while the work is queued, so the events
  // bracket only the kernels; for cold L2 the flush runs before the start event.
  double device_seconds(const std::function<void()>& one, int k, bool cold) {
    const gpu::StreamHandle s = stream_.get();
    *flag_host_ = 0;
    gpu::launch_hold_stream(flag_dev_, 200, s);
    if (cold) gpu::launch_l2_flush(flush_->data(), flush_->bytes(), s);
    start_.record(s);
    for (int i = 0; i < k; ++i) one();
    end_.record(s);
    *flag_host_ = 1;
    const double ms = gpu::Event::elapsed_ms(start_, end_);
    return ms * 1e-3 / k;
  }

  Backend backend_;
  gpu::DeviceProps props_;
  gpu::Stream stream_;
  gpu::Event start_, end_;
  std::unique_ptr<gpu::Sensors> sensors_;
  std::unique_ptr<gpu::MappedHostMemory> flag_;
  volatile int* flag_host_ = nullptr;
  volatile int* flag_dev_ = nullptr;
  std::unique_ptr<gpu::DeviceBuffer> flush_;
  std::map<std::string, std::string> start_facts_;
};

// The device of the GPU backend `b` that this binary's shim implements, or nullptr with the reason.
std::unique_ptr<Device> make_gpu_device(Backend b, std::string* why_not) {
  const std::string runtime = gpu::runtime_name();
  if (gpu::device_count() == 0) {
    if (why_not) *why_not = "no " + runtime + " device";
    return nullptr;
  }
  try {
    return std::make_unique<GpuDevice>(b);
  } catch (const std::exception& e) {
    if (why_not) *why_not = runtime + " device unusable: " + e.what();
    return nullptr;
  }
}

}  // namespace

#ifdef ATTNBENCH_WITH_CUDA
std::unique_ptr<Device> make_cuda_device(std::string* why_not) { return make_gpu_device(Backend::cuda, why_not); }
#endif
#ifdef ATTNBENCH_WITH_HIP
std::unique_ptr<Device> make_hip_device(std::string* why_not) { return make_gpu_device(Backend::hip, why_not); }
#endif

}  // namespace attnbench
