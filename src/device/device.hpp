// Where a backend's data lives and how its calls are timed. One implementation per backend; the runner and
// measurement use only this interface.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "attnbench/gpu_runtime.hpp"
#include "attnbench/kernel.hpp"
#include "core/measure.hpp"
#include "device/clocks.hpp"

namespace attnbench {

enum class L2Mode { hot, cold };
enum class Mode { eager, graph };
inline const char* mode_name(Mode m) { return m == Mode::eager ? "eager" : "graph"; }
inline const char* l2_name(L2Mode m) { return m == L2Mode::hot ? "hot" : "cold"; }

// Whether a backend's calls can be timed in a mode: a GPU's in both modes and either L2 state; the CPU's eagerly with
// a hot cache only (no graphs, no L2 of its own to flush). Every Device's can_time answers with this.
inline Support timing_support(Backend b, Mode mode, L2Mode l2) {
  if (is_gpu(b)) return Support::yes();
  if (mode == Mode::graph) return Support::no("graph mode needs the CUDA backend");
  if (l2 == L2Mode::cold) return Support::no("cold-L2 timing needs the CUDA backend");
  return Support::yes();
}


class Device {
 public:
  virtual ~Device() = default;
  virtual Backend backend() const = 0;
  virtual std::string name() const = 0;
  // Provenance facts (SM count, clocks, versions, temperature ...), as strings.
  virtual std::map<std::string, std::string> facts() const = 0;

  // Bytes this device can still allocate: the GPU's free memory, or the host's available memory for the CPU;
  // nullopt when it cannot tell.
  virtual std::optional<double> free_memory_bytes() const = 0;

  virtual void* alloc(std::size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void download(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void poison(void* p, std::size_t bytes) = 0;  // every byte 0xFF: NaN in fp16 and bf16
  virtual void* stream() = 0;
  virtual void synchronize() = 0;

  // A sampler for `call` in the given mode, or a Support::no reason (e.g. graph mode on the CPU).
  // `call` enqueues one complete call on stream(). A Sampler and its resources live until destroyed.
  virtual Support can_time(Mode mode, L2Mode l2) const = 0;
  virtual Sampler make_sampler(Mode mode, L2Mode l2, const std::function<void()>& call) = 0;
  // The sensors now (clocks, temperature, power, clock reasons), or nullopt with sensors_absent() saying why.
  virtual std::optional<gpu::SensorReadings> read_sensors() const { return std::nullopt; }
  virtual std::string sensors_absent() const { return "the CPU backend reads no clock sensors"; }
  // Spins the device until its SM clock is settled (clocks.hpp); nullopt where there is no clock to settle.
  virtual std::optional<SettleReport> settle_clocks(const SettleRule&) { return std::nullopt; }

  // Why the device can run no more work (a GPU context lost to a sticky error: an illegal address, a launch
  // failure), or empty while it can. Asked after a kernel failed, to tell a fault of the kernel's own call from
  // one that took the device with it.
  virtual std::string fault() { return ""; }

  // Optional second statistic for eager mode: device time per call (events); empty when not available.
  virtual Sampler make_device_sampler(const std::function<void()>& /*call*/) { return {}; }
};

// RAII allocation in a device's memory.
class Buffer {
 public:
  Buffer(Device& d, std::size_t bytes) : dev_(&d), bytes_(bytes), ptr_(bytes ? d.alloc(bytes) : nullptr) {}
  ~Buffer() {
    if (ptr_) dev_->release(ptr_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  Device* dev_;
  std::size_t bytes_;
  void* ptr_;
};

// The host's available memory (MemAvailable in /proc/meminfo), in bytes; nullopt where it cannot be read.
std::optional<double> host_available_bytes();

std::unique_ptr<Device> make_cpu_device();
// The CUDA device when the CUDA backend is built and a device is visible; nullptr otherwise, with the reason.
std::unique_ptr<Device> make_cuda_device(std::string* why_not);
#ifdef ATTNBENCH_WITH_HIP
// The HIP device when a HIP device is visible; nullptr otherwise, with the reason ("no HIP device").
std::unique_ptr<Device> make_hip_device(std::string* why_not);
#endif

}  // namespace attnbench
