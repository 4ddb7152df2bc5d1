#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <new>
#include <thread>

#include "device/device.hpp"

namespace attnbench {
namespace {

class CpuDevice final : public Device {
 public:
  Backend backend() const override { return Backend::cpu; }
  std::string name() const override { return "cpu"; }
  std::map<std::string, std::string> facts() const override {
    return {{"threads", std::to_string(std::thread::hardware_concurrency())}};
  }
  std::optional<double> free_memory_bytes() const override { return host_available_bytes(); }
  void* alloc(std::size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void release(void* p) override { std::free(p); }
  void upload(void* dst, const void* src, std::size_t n) override { std::memcpy(dst, src, n); }
  void download(void* dst, const void* src, std::size_t n) override { std::memcpy(dst, src, n); }
  void poison(void* p, std::size_t n) override { std::memset(p, 0xFF, n); }
  void* stream() override { return nullptr; }
  void synchronize() override {}

  Support can_time(Mode mode, L2Mode l2) const override { return timing_support(Backend::cpu, mode, l2); }
  Sampler make_sampler(Mode, L2Mode, const std::function<void()>& call) override {
    return [call] {
      const auto t0 = std::chrono::steady_clock::now();
      call();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
  }
};

}  // namespace

std::optional<double> host_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (f >> key >> kib) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return std::nullopt;
}

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

#ifndef ATTNBENCH_WITH_CUDA
std::unique_ptr<Device> make_cuda_device(std::string* why_not) {
  if (why_not) *why_not = "built without the CUDA backend";
  return nullptr;
}
#endif

}  // namespace attnbench
