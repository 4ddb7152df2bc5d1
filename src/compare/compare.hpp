// compare: two result files (or kernels within files) row by row, with a noise-aware verdict per row.
#pragma once
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/measure.hpp"

namespace attnbench {

// The fields of a result row that compare reads; attnbench and peer rows alike.
struct TimedRow {
  std::string group, shape, dtype, kernel, mode, l2 = "hot", status, reason;
  std::map<std::string, std::string> knobs;
  // Knobs at their default in the row's own file (its provenance's knob_defaults; none in files older than that
  // field): left out of the matching key with those at today's defaults, since a default can change between builds.
  std::set<std::string> default_knobs;
  std::optional<Stats> time_us;
  bool settled = true;    // time_us met the stop rule; files without the field count as settled
  std::string unsettled;  // why not
};

// Reads the rows of a results file (read_results_json's checks, then each row's fields); UsageError naming the
// file and the row otherwise.
std::vector<TimedRow> load_timed_rows(const std::string& path);
std::vector<TimedRow> timed_rows_from_json(const nlohmann::json& doc, const std::string& path);

// SAME: no practical difference (or the very same measurement). FAST/SLOW: [q1, q3] of the two rows separate and
// the medians differ by more than the threshold. AMBIG: too noisy to say, or a side's timing did not meet its stop
// rule. GATE: ok in BASE, mismatch/error in NEW. LOST: timed in BASE, declined or not timed in NEW. NA: nothing to
// time on one side (declined or gate-only in BASE, failed in both). ONLY_BASE ("UNMATCHED"): a BASE row no NEW row
// matches; ONLY_NEW: a NEW row no BASE row matches.
enum class Verdict { same, fast, slow, ambig, gate, lost, na, only_base, only_new };
const char* verdict_name(Verdict v);

// The timing rule alone, on two rows' stats (lower is better); threshold is a fraction (0.02 = 2%).
Verdict timing_verdict(const Stats& base, const Stats& now, double threshold);

struct CompareRow {
  std::string group, shape, dtype, kernel, mode, l2;
  std::map<std::string, std::string> knobs;  // NEW's (BASE's for rows only in BASE)
  std::string key_knobs;                     // those of them away from their defaults, "NAME=VALUE;..."
  std::map<std::string, std::string> base_knobs;  // the matched BASE row's (they differ in ignored knobs only)
  std::string base_kernel;                   // the kernel it was compared against (differs under --against)
  std::string base_status, new_status;
  std::optional<Stats> base_time, new_time;
  std::optional<double> ratio;  // new median / base median; > 1 is slower
  Verdict verdict = Verdict::na;
  std::string note;
};

struct CompareOptions {
  double threshold = 0.02;
  // Non-empty: compare every other kernel's rows with these kernels' rows, on each case with the fastest of them
  // (the better peer), so one table answers "ahead of the best alternative?".
  std::vector<std::string> against;
  std::set<std::string> ignore_knobs;  // BASE vs NEW: left out of the matching key (an A/B of these knobs)
};

struct Comparison {
  std::vector<CompareRow> rows;
  std::map<Verdict, int> counts;
  int new_failures = 0;  // NEW rows with status mismatch or error (GATE or not)
  int matched() const;   // rows with a row on both sides
};

// BASE vs NEW: rows match by (group, shape, dtype, kernel, mode, l2, knobs); knobs at their default (in the row's
// own file, or in today's table) are left out of the key, so a default that changed or a knob added to the table
// later does not break matching against old baselines (the row's note names the defaults that differ), and so are
// o.ignore_knobs, so one binary's rows under two settings of a knob compare.
Comparison compare_rows(const std::vector<TimedRow>& base, const std::vector<TimedRow>& now, const CompareOptions& o);
// --against: within `rows`, every row of another kernel against a row of the `o.against` kernels with the same
// (group, shape, dtype, mode, l2), knobs not part of that key: of each such kernel's first row there, the fastest
// ok and timed one, else an ok one, else the first. UsageError naming a kernel of o.against that has no row at all.
Comparison compare_against(const std::vector<TimedRow>& rows, const CompareOptions& o);

// What fails CI. GATE rows fail under every policy.
struct FailPolicy {
  bool slow = false;      // SLOW rows
  bool lost = false;      // LOST rows: a timing BASE had and NEW lacks is no evidence of no regression
  bool mismatch = false;  // NEW rows with status mismatch or error
  bool missing = false;   // UNMATCHED rows: a BASE row with no NEW row
};
// Parses "slow" (SLOW, LOST and UNMATCHED: a baseline row that finds nothing is no evidence of no regression),
// "mismatch", "any" (all of them) items; UsageError otherwise.
FailPolicy parse_fail_on(const std::vector<std::string>& items);
// 1 when the policy is on and the comparison trips it, else 0. An empty policy never fails.
int compare_exit_code(const Comparison& c, const FailPolicy& p);

// "2%" or "0.02" -> 0.02; UsageError unless 0 < t < 1.
double parse_threshold(const std::string& text);

std::string format_comparison(const Comparison& c, const CompareOptions& o);  // table + summary line
std::string summary_line(const Comparison& c, const CompareOptions& o);
// Why nothing was compared ("" when some row matched): the two files' row counts and what the rows match on.
std::string nothing_compared(const Comparison& c, std::size_t base_rows, std::size_t new_rows);
nlohmann::json comparison_to_json(const Comparison& c, const CompareOptions& o, const std::string& base_path,
                                  const std::string& new_path);

inline constexpr const char* kCompareSchema = "attnbench.compare/1";

}  // namespace attnbench
