#include "cli_options.hpp"

namespace attnbench {

void add_case_options(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("--group,-g", o.groups, "Shape group (repeatable): decode, short_prefill, ...");
  cmd->add_option("--shapes", o.shape_files, "A shape file in the shapes/ schema (repeatable)");
  cmd->add_option("--kernel,-k", o.kernel_glob, "Kernel name glob, e.g. 'cuda.*'")->capture_default_str();
  cmd->add_option("--backend", o.backend, "auto (cuda when a GPU is visible, else cpu) | cpu | cuda | all")
      ->capture_default_str();
  cmd->add_option("--dtype", o.dtypes, "Keep only these dtypes (bf16, fp16)")->delimiter(',');
  cmd->add_option("--filter", o.filter, "Regex over 'group/shape/dtype'");
  cmd->add_option("--seed", o.seed, "Input RNG seed")->capture_default_str();
}

void add_stop_options(CLI::App* cmd, StopRule& stop) {
  cmd->add_option("--min-samples", stop.min_samples, "Timing samples at least")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-noise", stop.max_noise, "Stop when relative stdev <= this")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--timeout", stop.timeout_s, "Seconds per measurement at most")->capture_default_str()
      ->check(CLI::PositiveNumber);
}

}  // namespace attnbench
