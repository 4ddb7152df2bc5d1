#include "results/printer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "results/peer_ratio.hpp"

namespace attnbench {

namespace {
// Widths of the number columns: fixed-point up to this many characters, else scientific (at most 10).
constexpr size_t kNumberWidth = 10;

// Fixed-point with `prec` decimals when that fits the column, scientific otherwise, so no value widens it.
std::string number(double v, int prec) {
  if (!std::isfinite(v)) return v > 0 ? "inf" : std::isnan(v) ? "nan" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  if (std::string(buf).size() <= kNumberWidth) return buf;
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

size_t widest(const std::string& title, const std::vector<std::string>& names) {
  size_t w = title.size();
  for (const auto& n : names) w = std::max(w, n.size());
  return w;
}

bool unsettled(const ResultRow& r) { return r.time_us && r.settled && !*r.settled; }
}  // namespace

// A rate (TFLOP/s, GB/s): one decimal from 10 up, else three significant digits, so a small CPU rate never
// prints as 0.0.
std::string rate_text(double v) {
  if (!std::isfinite(v) || std::fabs(v) >= 10 || v == 0) return number(v, 1);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string unsettled_legend(const StopRule& stop) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s the timing did not meet the stop rule (n >= %d and relative stdev <= %g, within %g s): the row's "
                "\"unsettled\" field says why",
                kUnsettledMarker, stop.min_samples, stop.max_noise, stop.timeout_s);
  return buf;
}

ResultTable::ResultTable(std::ostream& out, const TableContents& c, const StopRule& stop)
    : out_(out), stop_(stop), peer_column_(c.peers) {
  const std::vector<std::string> statuses = {"ok", "mismatch", "declined", "error"};
  columns_ = {{"group", widest("group", c.groups), false},
              {"shape", widest("shape", c.shapes), false},
              {"dtype", widest("dtype", c.dtypes), false},
              {"kernel", widest("kernel", c.kernels), false},
              {"mode", widest("mode", c.modes), false},
              {"status", widest("status", statuses), false},
              {"max_abs", kNumberWidth, false},
              {"median_us", kNumberWidth + 1, true},  // one more for the unsettled marker
              {"TFLOP/s", kNumberWidth, true},
              {"GB/s", kNumberWidth, true}};
  setting_column_ = !c.settings.empty();
  if (setting_column_) columns_.insert(columns_.begin() + 4, {"set", widest("set", c.settings), false});
  const std::string peer_title = "vs_peer";
  if (peer_column_) columns_.push_back({peer_title, std::max(peer_title.size(), kRatioTextWidth), true});
}

std::string ResultTable::line(const std::vector<std::string>& cells) const {
  std::string s;
  for (size_t i = 0; i < columns_.size(); ++i) {
    const std::string& v = i < cells.size() ? cells[i] : std::string();
    const std::string pad(columns_[i].width > v.size() ? columns_[i].width - v.size() : 0, ' ');
    if (i > 0) s += "  ";
    s += columns_[i].right ? pad + v : v + (i + 1 < columns_.size() ? pad : std::string());
  }
  return s;
}

void ResultTable::header() {
  std::vector<std::string> titles;
  for (const auto& c : columns_) titles.push_back(c.title);
  out_ << line(titles) << "\n";
}

void ResultTable::row(const ResultRow& r, const std::string& setting) {
  const bool marked = unsettled(r);
  any_unsettled_ = any_unsettled_ || marked;
  const std::string max_abs = r.gate ? (std::isfinite(r.gate->max_abs) ? number(r.gate->max_abs, 5) : "inf") : "-";
  const std::string median = r.time_us ? (marked ? kUnsettledMarker : "") + number(r.time_us->median, 2) : "-";
  std::vector<std::string> cells = {r.group, r.shape, r.dtype, r.kernel, r.mode, r.status, max_abs, median,
                                    r.tflops ? rate_text(*r.tflops) : "-", r.gbps ? rate_text(*r.gbps) : "-"};
  if (setting_column_) cells.insert(cells.begin() + 4, setting);
  if (peer_column_) cells.push_back(r.vs_peer ? ratio_text(r.vs_peer->ratio) : "-");
  out_ << line(cells);
  if (r.status == "declined" || r.status == "error" || r.status == "mismatch") out_ << "  " << r.reason;
  else if (marked) out_ << "  " << kUnsettledMarker << " " << r.unsettled;
  if (!r.throttled.empty()) {
    std::string reasons;
    for (const auto& t : r.throttled) reasons += (reasons.empty() ? "" : ",") + t;
    out_ << "  throttled: " << reasons;
  }
  out_ << "\n" << std::flush;
}

void ResultTable::breakdown(const nlohmann::json& b) {
  if (b.is_null()) return;
  out_ << "  breakdown (median us):";
  for (const auto& s : b.at("stages"))
    out_ << " " << s.at("name").get<std::string>() << " " << number(s.at("median_us").get<double>(), 1);
  out_ << " | sum " << number(b.at("sum_us").get<double>(), 1) << "\n" << std::flush;
}

void ResultTable::legend() {
  if (any_unsettled_) out_ << unsettled_legend(stop_) << "\n";
}

void ResultTable::note(const std::string& line) {
  if (!line.empty()) out_ << line << "\n";
}

std::string duration_text(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[64];
  if (s < 60) std::snprintf(buf, sizeof buf, "%ld s", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%ld min %02ld s", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ld h %02ld min", s / 3600, s / 60 % 60);
  return buf;
}

void Progress::start(size_t index, const std::string& group, const std::string& shape, const std::string& dtype) {
  if (!enabled_) return;
  std::string eta;
  if (started_ > 0 && index <= total_) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
    eta = "  (" + duration_text(elapsed) + " so far, about " +
          duration_text(elapsed / static_cast<double>(started_) * static_cast<double>(total_ - index + 1)) + " left)";
  }
  ++started_;
  std::cerr << (terminal_ ? "\r" : "") << "[" << index << "/" << total_ << "] " << group << "/" << shape << " "
            << dtype << eta << (terminal_ ? "\033[K" : "\n") << std::flush;
}

void Progress::clear() {
  if (enabled_ && terminal_) std::cerr << "\r\033[K" << std::flush;
}

}  // namespace attnbench
