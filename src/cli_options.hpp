// Command-line options that `run` and `sweep` share: which cases (groups, shape files, kernel glob, backend,
// dtypes, filter, seed) and the timing stop rule; validators whose messages print the value as given.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runner.hpp"

namespace attnbench {

void add_case_options(CLI::App* cmd, RunOptions& o);
void add_stop_options(CLI::App* cmd, StopRule& stop);
// --rounds N, --settle S and --warmup S (run, sweep).
void add_timing_options(CLI::App* cmd, RunOptions& o);

// A finite number above `min` (or at least `min` when min_inclusive): nan and inf are refused.
CLI::Validator finite_number(double min, bool min_inclusive);
inline CLI::Validator positive_finite() { return finite_number(0, false); }
inline CLI::Validator non_negative_finite() { return finite_number(0, true); }
// A decimal integer in [lo, hi] (no exponent, no fraction).
CLI::Validator integer_in(long long lo, long long hi);

// --mode values (eager, graph), each at most once; UsageError otherwise.
std::vector<Mode> parse_modes(const std::vector<std::string>& modes);

// Creates the folder of a default output path (results/...); UsageError naming the folder, suggesting -o.
void make_default_out_folder(const std::string& out_path);

// At run/sweep start: a warning on `err` for each ATTNBENCH_* variable that is neither a knob nor known.
void warn_unknown_environment(std::ostream& err);

}  // namespace attnbench
