// The options of a run or sweep (RunOptions) and their vocabulary: what the run's parts (case timing, selection,
// repro lines, sweeps) and the command line share, apart from the run's entry (runner.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cases/gate.hpp"
#include "cases/inputs.hpp"
#include "cases/registry.hpp"
#include "core/measure.hpp"
#include "device/device.hpp"

namespace attnbench {

// Where the cases run: in this process (off), each case in a worker process of its own (per_case), or each kernel
// of each case in its own (per_kernel: a kernel is then timed alone, not interleaved with the case's others);
// automatic: per_case when a GPU kernel runs, else kCpuIsolation.
enum class Isolation { automatic, off, per_case, per_kernel };
const char* isolation_name(Isolation i);

struct RunOptions {
  std::vector<std::string> groups;
  std::vector<std::string> shape_files;
  std::vector<std::string> inline_shapes;  // --shape specs (inline_shape.hpp)
  bool selects_cases() const { return !groups.empty() || !shape_files.empty() || !inline_shapes.empty(); }
  std::string kernel_glob = "*";    // comma-separated globs
  std::vector<std::string> plugins;  // --plugin files, loaded (with ATTNBENCH_PLUGINS') before the kernels are selected
  std::string backend = "auto";  // auto (cuda when a device is visible, else cpu) | cpu | cuda | all
  std::vector<std::string> dtypes;  // empty: every dtype of the shape
  std::vector<Mode> modes = {Mode::eager, Mode::graph};
  std::vector<std::string> swept_knobs;  // sweep's --knob names: one no selected kernel reads is warned about
  bool modes_given = false;  // --mode given: a kernel gets a (declined) row even in a mode its backend cannot time
  std::string filter;               // regex over "group/shape/dtype"
  uint64_t seed = 1234;
  std::optional<double> atol, rtol;  // gate bounds; default: the dtype's (gate.hpp)
  bool gate_only = false;
  bool no_gate = false;
  L2Mode l2 = L2Mode::hot;
  BlockOrder block_order = BlockOrder::contiguous;
  StopRule stop;
  double reference_gflop = 16.0;    // reference work before the gate samples rows (the CPU reference)
  ReferenceWhere reference = ReferenceWhere::automatic;
  int threads = 0;                  // OpenMP threads of the CPU kernels and the reference; 0: OMP_NUM_THREADS or all
  std::map<std::string, std::string> knob_overrides;
  std::pair<int, int> shard{1, 1};  // K-th of N (1-based): keeps selected cases whose index % N == K - 1
  std::optional<double> peak_tflops, peak_gbps;
  std::string command_line;
  bool progress = false;
  bool breakdown = false;           // time each stage of kernels that have stages (gated block): row "breakdown"
  int rounds = 5;                   // interleaved rounds per mode (the kernels of a case alternate in each)
  bool control = false;             // time the first selected kernel twice (kControlSuffix): the noise floor
  double settle_s = 3.0;            // bound on each clock settle before timing (0: no settling)
  double settle_gap_s = 1.0;        // a case whose timing starts this long after the last one settles again
  // Untimed interleaved sampling of a mode's kernels before its rounds; unset: kGpuWarmupS on a GPU, none on the CPU.
  std::optional<double> warmup_s;
  // The journal (journal.hpp): each finished case's rows appended as it finishes; empty: none. With `resume`,
  // the journal's finished cases are taken from it and the rest run; journal_command is what it records (and a
  // resume must match) as the command.
  std::string journal;
  bool resume = false;
  std::vector<std::string> journal_command;
  // Worker processes (worker.hpp): the library runs in-process unless asked; the command line asks for automatic.
  Isolation isolate = Isolation::off;
  // Seconds a worker may take before it is killed and its kernel's rows are errors; unset: case_timeout_default.
  std::optional<double> case_timeout_s;
  // Kernels besides the registry's, for tests (the test-only faulty kernels); never set by the command line.
  std::vector<KernelEntry> extra_kernels;
};

// What automatic isolation is on the CPU backend (README: Isolation says why).
inline constexpr Isolation kCpuIsolation = Isolation::per_case;

// The default --case-timeout for a worker running `kernel_modes` (kernel, mode) timings: 120 s, plus four times
// the stop rule's timeout and warm-up for each, plus twice the settle bound.
double case_timeout_default(const RunOptions& o, std::size_t kernel_modes);

inline constexpr double kGpuWarmupS = 0.5;

// Knob values by name, on top of RunOptions::knob_overrides: one setting of a sweep.
using KnobSetting = std::map<std::string, std::string>;

}  // namespace attnbench
