// attnbench info: the machine, the backends, and (on a GPU) the measured device peaks.
#include <iostream>

#include "commands.hpp"
#include "device.hpp"
#include "peaks.hpp"

namespace attnbench {

void add_info_command(CLI::App& app, Context&) {
  CLI::App* cmd = app.add_subcommand("info", "Describe the devices and measure their peaks (copy GB/s, bf16 GEMM TFLOP/s)");
  auto skip = std::make_shared<bool>(false);
  cmd->add_flag("--no-measure", *skip, "Only describe, measure nothing");
  cmd->callback([skip] {
    auto cpu = make_cpu_device();
    std::cout << "cpu:";
    for (const auto& [k, v] : cpu->facts()) std::cout << " " << k << "=" << v;
    std::cout << "\n";
    std::string why;
    auto cuda = make_cuda_device(&why);
    if (!cuda) {
      std::cout << "cuda: unavailable (" << why << ")\n";
      return;
    }
    std::cout << "cuda:\n";
    for (const auto& [k, v] : cuda->facts()) std::cout << "  " << k << " = " << v << "\n";
    if (*skip) return;
    const Peaks p = measure_peaks(*cuda);
    std::cout << "peaks (measured now):\n  device copy      " << p.copy_gbps << " GB/s (bytes read + written)\n"
              << "  bf16 GEMM        " << p.gemm_tflops << " TFLOP/s (" << p.gemm_what << ")\n"
              << "use: attnbench run ... --peak-gbps " << p.copy_gbps << " --peak-tflops " << p.gemm_tflops << "\n";
  });
}

}  // namespace attnbench
