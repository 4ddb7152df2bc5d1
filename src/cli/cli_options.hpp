// Command-line options that `run` and `sweep` share: which cases (groups, shape files, kernel glob, backend,
// dtypes, filter, seed) and the timing stop rule; validators whose messages print the value as given.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "results/results.hpp"
#include "run/run_options.hpp"

namespace attnbench {

void add_case_options(CLI::App* cmd, RunOptions& o);
// --plugin PATH (repeatable): run and sweep through add_case_options, and list.
void add_plugin_option(CLI::App* cmd, std::vector<std::string>& paths);
void add_stop_options(CLI::App* cmd, StopRule& stop);
// --rounds N, --settle S and --warmup S (run, sweep).
void add_timing_options(CLI::App* cmd, RunOptions& o);

// A finite number above `min` (or at least `min` when min_inclusive): nan and inf are refused.
CLI::Validator finite_number(double min, bool min_inclusive);
inline CLI::Validator positive_finite() { return finite_number(0, false); }
inline CLI::Validator non_negative_finite() { return finite_number(0, true); }
// A decimal integer in [lo, hi] (no exponent, no fraction).
CLI::Validator integer_in(long long lo, long long hi);

// --isolate case|kernel|off and --case-timeout S (run, sweep); the command line's isolation is automatic unless given.
void add_isolation_options(CLI::App* cmd, RunOptions& o);
// --resume (run, sweep).
void add_resume_option(CLI::App* cmd, RunOptions& o);
// --force: an output path may replace a regular file that is not this command's own earlier output (output_guard.hpp).
void add_force_option(CLI::App* cmd, bool& force);
// The journal of a run or sweep writing `out`: its path and the command it records.
void set_journal(RunOptions& o, const std::string& out, const std::vector<std::string>& args);
// Writes the results JSON and CSV (atomically); a run that ran to its end removes its journal, an interrupted one
// keeps it.
void write_run_files(const ResultsFile& f, const ResultPaths& paths, const RunOptions& o);
// After the summary of an interrupted run: what it did and how to go on (printed to `out`); the exit code for the
// signal (130 SIGINT, 143 SIGTERM), 0 when the run was not interrupted.
int interrupted_exit(const ResultsFile& f, const RunOptions& o, std::ostream& out);

// --mode values (eager, graph), each at most once; UsageError otherwise.
std::vector<Mode> parse_modes(const std::vector<std::string>& modes);

// The default output's name: the groups joined by '+', else the first shape file's stem, else "inline".
std::string selection_stem(const RunOptions& o);

// Creates the folder of a default output path (results/...); UsageError naming the folder, suggesting -o.
void make_default_out_folder(const std::string& out_path);

// At run/sweep start: a warning on `err` for each ATTNBENCH_* variable that is neither a knob nor known.
void warn_unknown_environment(std::ostream& err);

}  // namespace attnbench
