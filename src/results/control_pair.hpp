// The control pair (run --control): the first selected kernel timed twice, as two independent entries; the ratio
// of their medians over a run is its noise floor, which the summary prints and compare honours.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "results/results.hpp"

namespace attnbench {

// The kernel name of the control copy's rows: "<kernel>#control".
inline constexpr const char* kControlSuffix = "#control";
// The kernel a control row repeats ("k" for "k#control"); empty for any other name.
inline std::string control_of(const std::string& kernel) {
  const std::string suffix = kControlSuffix;
  const bool is = kernel.size() > suffix.size() && kernel.compare(kernel.size() - suffix.size(), suffix.size(), suffix) == 0;
  return is ? kernel.substr(0, kernel.size() - suffix.size()) : "";
}

// {kernel, pairs, worst_ratio, median_abs_diff, noise_floor} over the rows of KERNEL#control and their KERNEL rows
// (same group, shape, dtype, mode, l2), both timed; null when there is no such pair.
nlohmann::json control_pair_summary(const std::vector<ResultRow>& rows);
// The summary line: "control pair: N rows of K#control / K, worst ratio R, noise floor P%"; empty for null.
std::string control_pair_line(const nlohmann::json& summary);
// A results file's control noise floor (provenance.control.noise_floor), when it has one.
std::optional<double> control_noise_floor(const std::string& results_path);

}  // namespace attnbench
