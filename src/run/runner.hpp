// `run`: shapes -> inputs -> each applicable kernel -> gate -> timings -> rows. The library behind the CLI.
// Its options are run_options.hpp's, which the run's parts include instead of this entry.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "cases/shapes.hpp"
#include "results/results.hpp"
#include "run/run_options.hpp"

namespace attnbench {

// Resolves the selected cases; throws UsageError for unknown groups, bad files, bad filters.
std::vector<ShapeCase> select_cases(const RunOptions& o);

// Runs everything; prints the results table to `out`, a row as each finishes, and progress to stderr.
ResultsFile run_benchmarks(const RunOptions& o, std::ostream& out);
// The same under several knob settings at once: every case binds each kernel once per setting and times them all
// in the same interleaved rounds; rows carry their setting's knobs, the table labels them S1, S2, ...
ResultsFile run_benchmarks(const RunOptions& o, const std::vector<KnobSetting>& settings, std::ostream& out);
// The checks run_benchmarks makes before any work (options, cases, knob settings, kernel globs); UsageError.
void check_selection(const RunOptions& o, const std::vector<KnobSetting>& settings);

// The gate bounds of a run for one dtype: the table's, with --atol / --rtol in their place where given.
Tolerance run_tolerance(const RunOptions& o, DType d);

// 0 when every row is ok or declined, 1 otherwise; with fail_if_nothing_ran also 1 when every row is declined.
int exit_code_for(const ResultsFile& f, bool fail_if_nothing_ran = false);

// "nothing ran: all N rows declined (reasons: ...)", the distinct reasons with their counts (the five most
// frequent, then how many more), when every row is declined; empty otherwise.
std::string nothing_ran(const ResultsFile& f);

nlohmann::json base_provenance(const std::string& command_line, uint64_t seed);

}  // namespace attnbench
