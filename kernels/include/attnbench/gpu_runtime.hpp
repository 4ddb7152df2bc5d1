// The GPU runtime shim: the few runtime calls host code needs (memory, streams, events, graphs, host-mapped
// memory, device facts), declared once over opaque handles. Each GPU backend implements it on its own runtime
// (kernels/cuda/runtime.cpp for CUDA); a binary links one implementation. Every failure throws gpu::Error.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnbench::gpu {

// A runtime stream (cudaStream_t, hipStream_t), opaque so that this header names no runtime type.
using StreamHandle = void*;

// A failed runtime call: "file:line: call: the runtime's error name (its error string)".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The runtime's name for messages: "CUDA" or "HIP".
const char* runtime_name();

// Number of visible devices; 0 when there is no driver or device (never throws).
int device_count();
void set_device(int ordinal);

struct DeviceProps {
  std::string name;
  int ordinal = 0;
  int cc_major = 0, cc_minor = 0;  // compute capability (CUDA) or gfx major/minor (HIP)
  int sm_count = 0;                // SMs or compute units
  std::size_t l2_bytes = 0;
  std::size_t global_mem_bytes = 0;
  std::size_t smem_per_block_optin = 0;
  int sm_clock_khz = 0;  // the rated maximum; Sensors reads the current clock
  int mem_clock_khz = 0;
  int driver_version = 0, runtime_version = 0;
};
DeviceProps device_props(int ordinal = 0);

// Free bytes on the current device; nullopt when the runtime cannot tell (the error is cleared, not sticky).
std::optional<std::size_t> free_memory();

// Raw device memory. device_free never throws (it runs in destructors).
void* device_malloc(std::size_t bytes);
void device_free(void* p) noexcept;
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void memset_async(void* p, int value, std::size_t bytes, StreamHandle s);

// RAII device allocation.
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
  void upload(const void* src, std::size_t n, std::size_t offset = 0);  // to bytes [offset, offset + n)
  void download(void* dst, std::size_t n) const;
  void fill_byte(unsigned char v);  // every byte v, done when it returns

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// A non-blocking stream.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  StreamHandle get() const { return s_; }
  void synchronize() const;

 private:
  StreamHandle s_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(StreamHandle s) const;
  // Milliseconds between two recorded events (waits for `end`).
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  void* e_ = nullptr;
};

// A call captured once on a stream and replayed.
class Graph {
 public:
  Graph(StreamHandle s, const std::function<void()>& launches);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void replay(StreamHandle s) const;

 private:
  void* graph_ = nullptr;
  void* exec_ = nullptr;
};

// Whether the stream is being captured right now (a kernel must not recommend its own graph then).
bool stream_is_capturing(StreamHandle s);

// Page-locked host memory the device reads and writes while kernels run (the flag that releases a held stream).
class MappedHostMemory {
 public:
  explicit MappedHostMemory(std::size_t bytes);
  ~MappedHostMemory();
  MappedHostMemory(const MappedHostMemory&) = delete;
  MappedHostMemory& operator=(const MappedHostMemory&) = delete;
  void* host() const { return host_; }
  void* device() const { return device_; }

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
};

// Spins on the device until *flag != 0 (flag: MappedHostMemory's device pointer, written by the host), or until
// ~timeout_ms passed, so that events recorded after it bracket only the kernels queued behind it.
void launch_hold_stream(const volatile int* flag, int timeout_ms, StreamHandle s);
// Writes every byte of buf (sized >= 2x the L2), evicting whatever the timed kernels left in L2.
void launch_l2_flush(void* buf, std::size_t bytes, StreamHandle s);

// Keeps every SM busy for ~ms milliseconds (light FMA work, bounded by the device timer): the load that brings
// an idle GPU's clocks up before timing.
void launch_clock_spin(int ms, int sm_count, StreamHandle s);

// Live sensor readings, from the vendor's management library when it loads; a reading the library or the device
// does not give is absent.
struct SensorReadings {
  std::optional<unsigned> sm_clock_mhz, mem_clock_mhz, temperature_c;
  std::optional<unsigned> max_sm_clock_mhz;                   // the highest SM clock the device reports it can run
  std::optional<unsigned> app_sm_clock_mhz, default_app_sm_clock_mhz;  // application clocks: target and default
  std::optional<double> power_w;
  // Why the clocks are below their maximum right now, by name (gpu_idle, sw_power_cap, hw_slowdown, ...).
  std::optional<std::vector<std::string>> clock_reasons;
  // Time spent held down by the power or thermal limit since the driver started (cumulative, microseconds).
  std::optional<double> power_limited_us, thermal_limited_us;
};
class Sensors {
 public:
  explicit Sensors(int ordinal);
  ~Sensors();
  Sensors(const Sensors&) = delete;
  Sensors& operator=(const Sensors&) = delete;
  SensorReadings read() const;
  // "" when readings come; otherwise why none do (the library did not load, or the device is not found in it).
  const std::string& why_absent() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnbench::gpu
