// sweep: every knob setting (cartesian over the swept knobs) in one run: each case binds each kernel once per
// setting and times them in the same interleaved rounds; one results file.
#pragma once
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "results/results.hpp"
#include "run/run_options.hpp"

namespace attnbench {

struct KnobAxis {
  std::string name;
  std::vector<std::string> values;
};
// "NAME=v1,v2,..." -> an axis. UsageError for a bad form, an unknown knob (listing the known ones), a value
// outside the knob's allowed set, or a value listed twice.
KnobAxis parse_knob_axis(const std::string& spec);
// Every --knob; a knob given twice is an error.
std::vector<KnobAxis> parse_knob_axes(const std::vector<std::string>& specs);
// The cartesian product, the first axis varying slowest.
std::vector<KnobSetting> knob_settings(const std::vector<KnobAxis>& axes);

// Runs `base` under every setting (the setting's values override base.knob_overrides), the settings of a case
// interleaved; provenance gets "sweep": {"knobs": {name: [values]}, "settings": [...]}.
ResultsFile run_sweep(const RunOptions& base, const std::vector<KnobAxis>& axes, std::ostream& out);

// Side-by-side table: per (group, shape, dtype, kernel, mode), each setting's median and its ratio to the first
// setting's. A row belongs to the setting whose values its knobs carry. A median whose timing did not meet
// `stop` is marked, and a legend line follows the table.
std::string sweep_table(const ResultsFile& f, const std::vector<KnobSetting>& settings, const StopRule& stop);

}  // namespace attnbench
