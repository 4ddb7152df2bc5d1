// attnbench info: the machine, the backends, and (on a GPU) the measured device peaks.
#include <iostream>

#include "cases/registry.hpp"
#include "cli/commands.hpp"
#include "device/device.hpp"
#include "device/peaks.hpp"

namespace attnbench {
namespace {

// One line per GPU backend (not built / unavailable and why / its facts); the first device found, if any.
std::unique_ptr<Device> describe_gpus() {
  std::unique_ptr<Device> first;
  for (Backend b : {Backend::cuda, Backend::hip}) {
    const char* name = backend_name(b);
    if (!backend_built(b) && b != Backend::cuda) {
      std::cout << name << ": not built (this binary has no " << name << " kernels)\n";
      continue;
    }
    std::string why;
    auto dev = make_backend_device(b, &why);
    if (!dev) {
      std::cout << name << ": unavailable (" << why << ")\n";
      continue;
    }
    std::cout << name << ":\n";
    for (const auto& [k, v] : dev->facts()) std::cout << "  " << k << " = " << v << "\n";
    for (const auto& line : clock_state_lines(dev->read_sensors(), dev->sensors_absent()))
      std::cout << "  " << line << "\n";
    if (!first) first = std::move(dev);
  }
  return first;
}

}  // namespace

void add_info_command(CLI::App& app, Context& ctx) {
  CLI::App* cmd = app.add_subcommand("info", "Describe the devices and measure their peaks (read and copy GB/s, bf16 GEMM TFLOP/s)");
  auto skip = std::make_shared<bool>(false);
  cmd->add_flag("--no-measure", *skip, "Only describe, measure nothing");
  cmd->callback([skip, &ctx] {
    if (ctx.validate_only) return;
    auto cpu = make_cpu_device();
    std::cout << "cpu:";
    for (const auto& [k, v] : cpu->facts()) std::cout << " " << k << "=" << v;
    std::cout << "\n";
    const std::unique_ptr<Device> gpu = describe_gpus();
    if (!gpu || *skip) return;
    const Peaks p = measure_peaks(*gpu);
    std::cout << "peaks (measured now):\n  streaming read   " << p.read_gbps << " GB/s (bytes read)\n"
              << "  device copy      " << p.copy_gbps << " GB/s (bytes read + written)\n"
              << "  bf16 GEMM        " << p.gemm_tflops << " TFLOP/s (" << p.gemm_what << ")\n"
              << "use: attnbench run ... --peak-gbps " << p.read_gbps << " --peak-tflops " << p.gemm_tflops
              << "   (attention reads far more than it writes: the read peak is its bandwidth ceiling)\n";
  });
}

}  // namespace attnbench
