// Command-line options that `run` and `sweep` share: which cases (groups, shape files, kernel glob, backend,
// dtypes, filter, seed) and the timing stop rule.
#pragma once
#include <CLI/CLI.hpp>

#include "runner.hpp"

namespace attnbench {

void add_case_options(CLI::App* cmd, RunOptions& o);
void add_stop_options(CLI::App* cmd, StopRule& stop);

}  // namespace attnbench
