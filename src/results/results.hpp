// Result rows and files: JSON {schema, provenance, rows} and CSV (one flat line per row, same fields).
// Printers only read rows; writes are atomic (temporary file + rename).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cases/gate.hpp"
#include "core/measure.hpp"
#include "results/output_guard.hpp"

namespace attnbench {

inline constexpr const char* kResultsSchema = "attnbench.results/1";

// A row timed in interleaved rounds: the median of each round (time_us.median is their median) and their spread.
struct RoundsInfo {
  int count = 0;
  std::vector<double> medians_us;
  double spread = 0;  // (max - min) / median of the round medians
};

// A row's time against the case's peer kernel (peer_ratio.hpp): peer median / this row's median, > 1 is faster.
struct PeerRatio {
  std::string kernel;
  double ratio = 0;
};

struct ResultRow {
  std::string group, shape, op, dtype, kernel, backend, mode, l2 = "hot";
  std::string status;  // ok | mismatch | declined | error
  std::string reason;
  nlohmann::json dims = nlohmann::json::object();  // the problem's dimensions
  std::optional<GateResult> gate;
  std::optional<Stats> time_us;         // the mode's time per call (eager: host wall clock)
  std::optional<Stats> device_time_us;  // eager only: device time per call from events
  std::optional<RoundsInfo> rounds;     // how time_us was taken
  std::optional<bool> settled;          // time_us met the stop rule; empty when nothing was timed
  std::string unsettled;                // why not (and why device_time_us did not); empty when both did
  double flops = 0, bytes = 0;
  std::optional<double> tflops, gbps, pct_peak_flops, pct_peak_bw;
  std::map<std::string, std::string> knobs;
  std::string plan;                     // the plan's summary
  std::optional<bool> graph_recommended;
  std::string repro;
  nlohmann::json breakdown;             // --breakdown: {"stages": [{name, median_us, ...}], "sum_us"}; null otherwise
  // Sensor readings at the start and end of the row's timing {start, end}, the clock settle that preceded it
  // {settle}, or why a GPU had none {sensors}; null for untimed rows and the CPU.
  nlohmann::json clocks;
  std::vector<std::string> throttled;   // throttle reasons seen while the row was timed (clocks.hpp)
  std::optional<PeerRatio> vs_peer;     // JSON "vs_peer" {kernel, ratio}, absent when there is none
  // The plugin file that provided the kernel and its sha256 (JSON "plugin" {path, sha256}); empty for ours.
  std::string plugin, plugin_sha256;
};

nlohmann::json row_to_json(const ResultRow& r);
// The inverse of row_to_json (a row read back from a journal or a worker): row_to_json(row_from_json(j)) == j for
// every j that row_to_json wrote. UsageError naming the field when one is missing or of the wrong type.
ResultRow row_from_json(const nlohmann::json& j);
// A row's "vs_peer" field: empty when absent or null; UsageError naming the field when it is malformed.
std::optional<PeerRatio> vs_peer_from_json(const nlohmann::json& row);

struct ResultsFile {
  nlohmann::json provenance = nlohmann::json::object();
  std::vector<ResultRow> rows;
  int interrupted_by = 0;  // the signal that stopped the run before its last case (provenance "interrupted"); 0: none
};

nlohmann::json results_to_json(const ResultsFile& f);
std::string results_to_csv(const ResultsFile& f);

// Writes text to path through a temporary file in the same folder and a rename. Throws UsageError when the
// folder is not writable.
void write_file_atomic(const std::string& path, const std::string& text);
// Fails early (UsageError) when `path` could not be written, before any work is done.
void check_writable(const std::string& path);

// The JSON and CSV paths of a run: csv defaults to the JSON path with a .csv extension. Both must be writable and
// distinct (a CSV written over the JSON would lose the results); UsageError otherwise.
// Each path is also held to the output rules (output_guard.hpp).
struct ResultPaths {
  std::string json, csv;
};
ResultPaths result_paths(const std::string& json_path, const std::string& csv_path, const OutputGuard& guard);

// Reads a results JSON file, checking the schema (UsageError naming the file otherwise).
nlohmann::json read_results_json(const std::string& path);

}  // namespace attnbench
