// What `run` prints as it goes: the results table (columns sized before the first row from what the rows will
// hold, rows printed as they finish, a legend when a timing did not settle) and the per-case progress on stderr.
#pragma once
#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/measure.hpp"
#include "results/results.hpp"

namespace attnbench {

// A rate (TFLOP/s, GB/s) as the table prints it: one decimal from 10 up, three significant digits below.
std::string rate_text(double v);

// The names the rows of a run can carry, known before the first row: they size the text columns.
struct TableContents {
  std::vector<std::string> groups, shapes, dtypes, kernels, modes;
  std::vector<std::string> settings;  // a sweep's setting labels (S1, S2, ...); empty: no setting column
  bool peers = false;  // a peer kernel is selected: a "vs_peer" column (each row's vs_peer ratio) at the end
};

class ResultTable {
 public:
  ResultTable(std::ostream& out, const TableContents& contents, const StopRule& stop);
  void header();
  // Flushed, so a long run shows each row as it finishes; `setting`: its sweep setting's label.
  void row(const ResultRow& r, const std::string& setting = "");
  // --breakdown: one line with each stage's median, from the rows' "breakdown" field.
  void breakdown(const nlohmann::json& b);
  // The marker's meaning, when a printed row's timing did not settle; nothing otherwise.
  void legend();
  // A line after the table (the reference's summary); nothing for an empty one.
  void note(const std::string& line);

 private:
  struct Column {
    std::string title;
    size_t width;
    bool right;  // numbers align on the right
  };
  std::string line(const std::vector<std::string>& cells) const;
  std::ostream& out_;
  StopRule stop_;
  std::vector<Column> columns_;
  bool setting_column_ = false;
  bool peer_column_ = false;
  bool any_unsettled_ = false;
};

// The marker next to a median whose measurement did not meet the stop rule, and the legend line explaining it.
inline constexpr const char* kUnsettledMarker = "~";
std::string unsettled_legend(const StopRule& stop);

// One line per case as it starts: a rewritten `\r` line on a terminal, plain lines otherwise (a log, a pipe).
class Progress {
 public:
  Progress(bool enabled, bool terminal, size_t total)
      : enabled_(enabled), terminal_(terminal), total_(total), since_(std::chrono::steady_clock::now()) {}
  // From the second case on, the line ends with the time so far and an estimate of what is left: the mean time of
  // the cases this process started, times the cases from `index` on.
  void start(size_t index, const std::string& group, const std::string& shape, const std::string& dtype);
  void clear();  // before a table row, so the row does not land on the terminal's progress line

 private:
  bool enabled_, terminal_;
  size_t total_, started_ = 0;
  std::chrono::steady_clock::time_point since_;
};

// A duration as the progress line prints it: "42 s", "3 min 05 s", "1 h 02 min".
std::string duration_text(double seconds);

}  // namespace attnbench
