#include "compare/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <iomanip>
#include <set>
#include <sstream>
#include <unordered_map>

#include "attnbench/knobs.hpp"
#include "core/errors.hpp"
#include "results/results.hpp"

using nlohmann::json;

namespace attnbench {

namespace {

[[noreturn]] void row_error(const std::string& path, size_t index, const std::string& field, const std::string& why) {
  throw UsageError(path + ": row #" + std::to_string(index) + ": field '" + field + "': " + why);
}

std::string get_string(const json& row, const char* field, const std::string& path, size_t i, const char* fallback) {
  if (!row.contains(field) || row[field].is_null()) {
    if (fallback) return fallback;
    row_error(path, i, field, "missing");
  }
  if (!row[field].is_string()) row_error(path, i, field, "expected a string, got " + row[field].dump());
  return row[field].get<std::string>();
}

std::optional<Stats> get_stats(const json& row, const std::string& path, size_t i) {
  if (!row.contains("time_us") || row["time_us"].is_null()) return std::nullopt;
  const json& t = row["time_us"];
  if (!t.is_object()) row_error(path, i, "time_us", "expected an object or null, got " + t.dump());
  Stats s;
  auto num = [&](const char* k, double& dst, bool required) {
    if (!t.contains(k)) {
      if (required) row_error(path, i, std::string("time_us.") + k, "missing");
      return;
    }
    if (!t[k].is_number()) row_error(path, i, std::string("time_us.") + k, "expected a number, got " + t[k].dump());
    dst = t[k].get<double>();
  };
  num("median", s.median, true);
  num("q1", s.q1, true);
  num("q3", s.q3, true);
  num("min", s.min, false);
  num("mean", s.mean, false);
  num("stdev", s.stdev, false);
  if (t.contains("n") && t["n"].is_number_integer()) s.n = t["n"].get<int>();
  return s;
}

// Whether knob k of row r is at a default: its file's (TimedRow::default_knobs) or today's table's.
bool at_default(const TimedRow& r, const std::string& k, const std::string& v) {
  const KnobSpec* spec = find_knob(k);
  return r.default_knobs.count(k) || (spec && spec->default_value == v);
}

// The row's knobs away from their defaults (unknown knobs always count), as "NAME=VALUE;...", but those in `ignore`.
std::string knob_key(const TimedRow& r, const std::set<std::string>& ignore = {}) {
  std::string key;
  for (const auto& [k, v] : r.knobs) {
    if (at_default(r, k, v) || ignore.count(k)) continue;
    key += (key.empty() ? "" : ";") + k + "=" + v;
  }
  return key;
}

std::string row_key(const TimedRow& r, bool with_kernel_and_knobs, const std::set<std::string>& ignore = {}) {
  std::string k = r.group + '\x1f' + r.shape + '\x1f' + r.dtype + '\x1f' + r.mode + '\x1f' + r.l2;
  if (with_kernel_and_knobs) k += '\x1f' + r.kernel + '\x1f' + knob_key(r, ignore);
  return k;
}

// "defaults differ: NAME 1 -> auto; ..." for the knobs two matched rows hold at different default values.
std::string default_differences(const TimedRow& base, const TimedRow& now) {
  std::string out;
  for (const auto& [k, v] : now.knobs) {
    const auto b = base.knobs.find(k);
    if (b == base.knobs.end() || b->second == v || !at_default(base, k, b->second) || !at_default(now, k, v)) continue;
    out += (out.empty() ? "defaults differ: " : "; ") + k + " " + b->second + " -> " + v;
  }
  return out;
}

// The knobs of a row that its file ran at their default: those its provenance's knob_defaults gives the value the
// row holds. A file older than that field says nothing of its defaults: its knobs count as set unless they hold
// today's defaults (at_default).
std::set<std::string> file_defaults(const json& doc, const std::map<std::string, std::string>& knobs) {
  std::set<std::string> out;
  if (!doc.contains("provenance") || !doc["provenance"].is_object()) return out;
  const json& p = doc["provenance"];
  if (!p.contains("knob_defaults") || !p["knob_defaults"].is_object()) return out;
  for (const auto& [k, v] : knobs)
    if (p["knob_defaults"].contains(k) && p["knob_defaults"][k] == v) out.insert(k);
  return out;
}

bool failed(const std::string& status) { return status == "mismatch" || status == "error"; }

double spread(const Stats& s) { return s.median > 0 ? (s.q3 - s.q1) / s.median : INFINITY; }

CompareRow describe(const TimedRow& r) {
  CompareRow c;
  c.group = r.group;
  c.shape = r.shape;
  c.dtype = r.dtype;
  c.kernel = r.kernel;
  c.mode = r.mode;
  c.l2 = r.l2;
  c.knobs = r.knobs;
  c.key_knobs = knob_key(r);
  return c;
}

std::string unsettled_note(const TimedRow& base, const TimedRow& now) {
  std::string note;
  for (const auto& [side, r] : {std::pair<const char*, const TimedRow*>{"BASE", &base}, {"NEW", &now}}) {
    if (r->settled) continue;
    note += std::string(note.empty() ? "" : " | ") + side + " unsettled" + (r->unsettled.empty() ? "" : ": " + r->unsettled);
  }
  return note;
}

CompareRow judge_timing(const TimedRow& base, const TimedRow& now, double threshold) {
  CompareRow c = describe(now);
  c.base_knobs = base.knobs;
  c.base_kernel = base.kernel;
  c.base_status = base.status;
  c.new_status = now.status;
  c.base_time = base.time_us;
  c.new_time = now.time_us;
  if (base.status == "ok" && failed(now.status)) {
    c.verdict = Verdict::gate;
    c.note = "ok in BASE, " + now.status + " in NEW";
    return c;
  }
  const bool base_timed = base.status == "ok" && base.time_us;
  const bool new_timed = now.status == "ok" && now.time_us;
  if (base_timed && !new_timed) {
    c.verdict = Verdict::lost;
    c.note = "timed in BASE, " + (now.status == "ok" ? std::string("ok without time_us") : now.status) + " in NEW" +
             (now.reason.empty() ? "" : ": " + now.reason);
    return c;
  }
  if (base_timed && new_timed) {
    if (base.time_us->median > 0) c.ratio = now.time_us->median / base.time_us->median;
    if (!base.settled || !now.settled) {  // a median the stop rule did not accept supports no verdict
      c.verdict = Verdict::ambig;
      c.note = unsettled_note(base, now);
      return c;
    }
    c.verdict = c.ratio ? timing_verdict(*base.time_us, *now.time_us, threshold) : Verdict::ambig;
    if (c.verdict == Verdict::ambig)
      c.note = "IQR/median " + std::to_string(static_cast<int>(std::lround(100 * spread(*base.time_us)))) + "% | " +
               std::to_string(static_cast<int>(std::lround(100 * spread(*now.time_us)))) + "%";
    return c;
  }
  c.verdict = Verdict::na;
  if (base.status != "ok" || now.status != "ok") c.note = "BASE " + base.status + ", NEW " + now.status;
  else c.note = "not timed";
  return c;
}

CompareRow judge(const TimedRow& base, const TimedRow& now, double threshold) {
  CompareRow c = judge_timing(base, now, threshold);
  const std::string differ = default_differences(base, now);
  if (!differ.empty()) c.note = c.note.empty() ? differ : c.note + " | " + differ;
  return c;
}

Comparison finish(std::vector<CompareRow> rows, int new_failures) {
  Comparison c;
  c.rows = std::move(rows);
  for (Verdict v : {Verdict::same, Verdict::fast, Verdict::slow, Verdict::ambig, Verdict::gate, Verdict::lost,
                    Verdict::na, Verdict::only_base, Verdict::only_new})
    c.counts[v] = 0;
  for (const auto& r : c.rows) ++c.counts[r.verdict];
  c.new_failures = new_failures;
  return c;
}

std::string fmt(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

template <typename Names>
std::string join_names(const Names& names, const char* sep = ",") {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : sep) + n;
  return out;
}

std::string percent(double fraction) {
  std::ostringstream os;
  os << fraction * 100 << "%";
  return os.str();
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::same: return "SAME";
    case Verdict::fast: return "FAST";
    case Verdict::slow: return "SLOW";
    case Verdict::ambig: return "AMBIG";
    case Verdict::gate: return "GATE";
    case Verdict::lost: return "LOST";
    case Verdict::na: return "n/a";
    case Verdict::only_base: return "UNMATCHED";
    case Verdict::only_new: return "only-in-new";
  }
  return "?";
}

std::vector<TimedRow> timed_rows_from_json(const json& doc, const std::string& path) {
  std::vector<TimedRow> out;
  const json& rows = doc.at("rows");
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& r = rows[i];
    if (!r.is_object()) throw UsageError(path + ": row #" + std::to_string(i) + ": expected an object");
    TimedRow t;
    t.group = get_string(r, "group", path, i, nullptr);
    t.shape = get_string(r, "shape", path, i, nullptr);
    t.dtype = get_string(r, "dtype", path, i, nullptr);
    t.kernel = get_string(r, "kernel", path, i, nullptr);
    t.mode = get_string(r, "mode", path, i, nullptr);
    t.status = get_string(r, "status", path, i, nullptr);
    t.l2 = get_string(r, "l2", path, i, "hot");
    if (r.contains("knobs") && !r["knobs"].is_null()) {
      if (!r["knobs"].is_object()) row_error(path, i, "knobs", "expected an object, got " + r["knobs"].dump());
      for (auto it = r["knobs"].begin(); it != r["knobs"].end(); ++it)
        t.knobs[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    }
    t.default_knobs = file_defaults(doc, t.knobs);
    t.time_us = get_stats(r, path, i);
    if (r.contains("reason") && r["reason"].is_string()) t.reason = r["reason"].get<std::string>();  // for notes only
    if (r.contains("settled") && !r["settled"].is_null()) {
      if (!r["settled"].is_boolean()) row_error(path, i, "settled", "expected true, false or null, got " + r["settled"].dump());
      t.settled = r["settled"].get<bool>();
    }
    t.unsettled = get_string(r, "unsettled", path, i, "");
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<TimedRow> load_timed_rows(const std::string& path) {
  return timed_rows_from_json(read_results_json(path), path);
}

Verdict timing_verdict(const Stats& base, const Stats& now, double threshold) {
  if (!(base.median > 0) || !(now.median > 0)) return Verdict::ambig;
  if (base.median == now.median && base.q1 == now.q1 && base.q3 == now.q3) return Verdict::same;  // one measurement
  const double ratio = now.median / base.median;
  const bool separate = now.q1 > base.q3 || now.q3 < base.q1;
  if (separate && std::abs(ratio - 1) > threshold) return ratio > 1 ? Verdict::slow : Verdict::fast;
  // Not a practical difference that the quartiles support: SAME when both rows are quiet enough to tell.
  return spread(base) < threshold && spread(now) < threshold ? Verdict::same : Verdict::ambig;
}

Comparison compare_rows(const std::vector<TimedRow>& base, const std::vector<TimedRow>& now,
                        const CompareOptions& o) {
  std::unordered_map<std::string, std::deque<size_t>> by_key;
  for (size_t i = 0; i < base.size(); ++i) by_key[row_key(base[i], true, o.ignore_knobs)].push_back(i);
  std::vector<bool> used(base.size(), false);
  std::vector<CompareRow> rows;
  int new_failures = 0;
  for (const auto& n : now) {
    new_failures += failed(n.status);
    auto it = by_key.find(row_key(n, true, o.ignore_knobs));
    if (it == by_key.end() || it->second.empty()) {
      CompareRow c = describe(n);
      c.new_status = n.status;
      c.new_time = n.time_us;
      c.verdict = Verdict::only_new;
      rows.push_back(std::move(c));
      continue;
    }
    const size_t b = it->second.front();
    it->second.pop_front();
    used[b] = true;
    rows.push_back(judge(base[b], n, o.threshold));
  }
  for (size_t i = 0; i < base.size(); ++i) {
    if (used[i]) continue;
    CompareRow c = describe(base[i]);
    c.base_kernel = base[i].kernel;
    c.base_status = base[i].status;
    c.base_time = base[i].time_us;
    c.verdict = Verdict::only_base;
    rows.push_back(std::move(c));
  }
  return finish(std::move(rows), new_failures);
}

namespace {

// The reference row of each case. Per kernel its first row there (one --against kernel: that row, as ever); of
// those, the fastest ok and timed one, else an ok one (a failed NEW row against it is still a GATE), else the first.
std::unordered_map<std::string, size_t> reference_rows(const std::vector<TimedRow>& all,
                                                       const std::vector<std::string>& refs) {
  std::unordered_map<std::string, std::vector<size_t>> firsts;  // per case, each kernel's first row
  for (size_t i = 0; i < all.size(); ++i) {
    if (std::find(refs.begin(), refs.end(), all[i].kernel) == refs.end()) continue;
    auto& rows = firsts[row_key(all[i], false)];
    if (std::none_of(rows.begin(), rows.end(), [&](size_t j) { return all[j].kernel == all[i].kernel; }))
      rows.push_back(i);
  }
  const auto rank = [&](size_t i) { return all[i].status != "ok" ? 2 : all[i].time_us ? 0 : 1; };
  std::unordered_map<std::string, size_t> ref;
  for (const auto& [key, rows] : firsts)
    ref[key] = *std::min_element(rows.begin(), rows.end(), [&](size_t x, size_t y) {
      if (rank(x) != rank(y)) return rank(x) < rank(y);
      return rank(x) == 0 && all[x].time_us->median < all[y].time_us->median;
    });
  return ref;
}

std::string kernels_in(const std::vector<TimedRow>& all) {
  std::set<std::string> kernels;
  for (const auto& r : all) kernels.insert(r.kernel);
  return join_names(kernels, ", ");
}

}  // namespace

Comparison compare_against(const std::vector<TimedRow>& all, const CompareOptions& o) {
  const std::set<std::string> refs(o.against.begin(), o.against.end());
  std::set<std::pair<std::string, std::string>> ref_shapes;  // (group, shape) a reference kernel ran
  std::set<std::string> seen;
  for (const auto& r : all) {
    if (!refs.count(r.kernel)) continue;
    seen.insert(r.kernel);
    ref_shapes.insert({r.group, r.shape});
  }
  for (const auto& k : o.against)
    if (!seen.count(k))
      throw UsageError("--against: no row of kernel '" + k + "' (kernels in the files: " + kernels_in(all) + ")");
  const auto ref = reference_rows(all, o.against);
  std::vector<CompareRow> rows;
  int new_failures = 0;
  for (const auto& r : all) {
    new_failures += failed(r.status);
    if (refs.count(r.kernel)) continue;
    // Shapes no reference kernel ran (another op, another group in the same files) are not comparisons.
    if (!ref_shapes.count({r.group, r.shape})) continue;
    auto it = ref.find(row_key(r, false));
    if (it == ref.end()) {
      CompareRow c = describe(r);
      c.base_kernel = o.against.size() == 1 ? o.against[0] : "";  // several: no one kernel's row was missing
      c.new_status = r.status;
      c.new_time = r.time_us;
      c.verdict = Verdict::only_new;
      c.note = "no " + join_names(o.against, " or ") + " row";
      rows.push_back(std::move(c));
      continue;
    }
    CompareRow c = judge(all[it->second], r, o.threshold);
    if (o.against.size() > 1) c.note = "vs " + c.base_kernel + (c.note.empty() ? "" : "; " + c.note);
    rows.push_back(std::move(c));
  }
  return finish(std::move(rows), new_failures);
}

FailPolicy parse_fail_on(const std::vector<std::string>& items) {
  FailPolicy p;
  for (const auto& s : items) {
    if (s == "slow") p.slow = p.lost = p.missing = true;
    else if (s == "mismatch") p.mismatch = true;
    else if (s == "any") p.slow = p.lost = p.mismatch = p.missing = true;
    else throw UsageError("--fail-on: '" + s + "' is not slow|mismatch|any");
  }
  return p;
}

int compare_exit_code(const Comparison& c, const FailPolicy& p) {
  if (!p.slow && !p.lost && !p.mismatch && !p.missing) return 0;
  const auto count = [&](Verdict v) { return c.counts.count(v) ? c.counts.at(v) : 0; };
  if (count(Verdict::gate) > 0) return 1;
  if (p.slow && count(Verdict::slow) > 0) return 1;
  if (p.lost && count(Verdict::lost) > 0) return 1;
  if (p.mismatch && c.new_failures > 0) return 1;
  if (p.missing && count(Verdict::only_base) > 0) return 1;
  return 0;
}

double parse_threshold(const std::string& text) {
  const std::string bad = "--threshold: '" + text + "' is not a fraction such as 0.02 or a percentage such as 2%";
  if (text.empty()) throw UsageError(bad);
  const bool pct = text.back() == '%';
  const std::string num = pct ? text.substr(0, text.size() - 1) : text;
  char* end = nullptr;
  const double v = std::strtod(num.c_str(), &end);
  if (num.empty() || end != num.c_str() + num.size() || !std::isfinite(v)) throw UsageError(bad);
  const double t = pct ? v / 100 : v;
  if (!(t > 0 && t < 1)) throw UsageError("--threshold: " + text + " must lie between 0 and 1 (0% and 100%)");
  return t;
}

int Comparison::matched() const {
  int n = 0;
  for (const auto& r : rows) n += r.verdict != Verdict::only_base && r.verdict != Verdict::only_new;
  return n;
}

std::string nothing_compared(const Comparison& c, std::size_t base_rows, std::size_t new_rows) {
  if (c.matched() > 0) return "";
  return "compare: nothing compared: none of NEW's " + std::to_string(new_rows) + " row(s) matches one of BASE's " +
         std::to_string(base_rows) + " on group, shape, dtype, kernel, mode, l2 and the knobs away from their defaults "
         "(a file without provenance.knob_defaults, older than it, has only today's defaults; --ignore-knob NAME "
         "matches rows whatever NAME's value) (exit 1)";
}

std::string summary_line(const Comparison& c, const CompareOptions& o) {
  const auto n = [&](Verdict v) { return std::to_string(c.counts.count(v) ? c.counts.at(v) : 0); };
  std::ostringstream os;
  os << "compare: " << c.rows.size() << " rows (threshold " << percent(o.threshold) << "): SAME " << n(Verdict::same)
     << ", FAST " << n(Verdict::fast) << ", SLOW " << n(Verdict::slow) << ", AMBIG " << n(Verdict::ambig) << ", GATE "
     << n(Verdict::gate) << ", LOST " << n(Verdict::lost) << ", n/a " << n(Verdict::na) << ", UNMATCHED (only in base) " << n(Verdict::only_base)
     << ", only in new " << n(Verdict::only_new) << "; mismatch/error in new " << c.new_failures;
  return os.str();
}

std::string format_comparison(const Comparison& c, const CompareOptions& o) {
  std::ostringstream os;
  const bool against = !o.against.empty();
  if (against)
    os << "ratio = kernel median / " << (o.against.size() > 1 ? "the fastest of " : "") << join_names(o.against)
       << " median (same group, shape, dtype, mode, l2)\n";
  else os << "ratio = NEW median / BASE median; < 1 is faster\n";
  if (!o.ignore_knobs.empty()) {
    os << "matched whatever their setting (the note gives NEW's; BASE's in --json):";
    for (const auto& k : o.ignore_knobs) os << " " << k;
    os << "\n";
  }
  os << std::left << std::setw(48) << "shape" << std::setw(6) << "dtype" << std::setw(22) << "kernel" << std::setw(11)
     << "mode" << std::right << std::setw(11) << (against ? "ref_us" : "base_us") << std::setw(11) << "new_us"
     << std::setw(8) << "ratio" << "  " << std::left << std::setw(13) << "verdict" << "note\n";
  for (const auto& r : c.rows) {
    std::string note = r.note;
    if (!r.key_knobs.empty() && !against) note += (note.empty() ? "[" : " [") + r.key_knobs + "]";
    os << std::left << std::setw(48) << (r.group + "/" + r.shape) << std::setw(6) << r.dtype << std::setw(22)
       << r.kernel << std::setw(11) << (r.l2 == "hot" ? r.mode : r.mode + "/" + r.l2) << std::right << std::setw(11)
       << (r.base_time ? fmt(r.base_time->median, 2) : r.base_status.empty() ? "-" : r.base_status) << std::setw(11)
       << (r.new_time ? fmt(r.new_time->median, 2) : r.new_status.empty() ? "-" : r.new_status) << std::setw(8)
       << (r.ratio ? fmt(*r.ratio, 3) : "-") << "  " << std::left << std::setw(13) << verdict_name(r.verdict) << note
       << "\n";
  }
  os << summary_line(c, o) << "\n";
  return os.str();
}

json comparison_to_json(const Comparison& c, const CompareOptions& o, const std::string& base_path,
                        const std::string& new_path) {
  auto stats = [](const std::optional<Stats>& s) -> json {
    if (!s) return nullptr;
    return {{"median", s->median}, {"q1", s->q1}, {"q3", s->q3}, {"min", s->min}, {"n", s->n}};
  };
  json rows = json::array();
  for (const auto& r : c.rows) {
    rows.push_back({{"group", r.group},
                    {"shape", r.shape},
                    {"dtype", r.dtype},
                    {"kernel", r.kernel},
                    {"base_kernel", r.base_kernel.empty() ? json(nullptr) : json(r.base_kernel)},
                    {"mode", r.mode},
                    {"l2", r.l2},
                    {"knobs", r.knobs},
                    {"base_knobs", r.base_knobs.empty() ? json(nullptr) : json(r.base_knobs)},
                    {"verdict", verdict_name(r.verdict)},
                    {"base_status", r.base_status.empty() ? json(nullptr) : json(r.base_status)},
                    {"new_status", r.new_status.empty() ? json(nullptr) : json(r.new_status)},
                    {"base_time_us", stats(r.base_time)},
                    {"new_time_us", stats(r.new_time)},
                    {"ratio", r.ratio ? json(*r.ratio) : json(nullptr)},
                    {"speedup", r.ratio && *r.ratio > 0 ? json(1.0 / *r.ratio) : json(nullptr)},
                    {"note", r.note}});
  }
  json summary = json::object();
  for (const auto& [v, n] : c.counts) summary[verdict_name(v)] = n;
  summary["new_mismatch_or_error"] = c.new_failures;
  return {{"schema", kCompareSchema},
          {"base", base_path},
          {"new", new_path},
          {"threshold", o.threshold},
          {"against", o.against.empty() ? json(nullptr) : json(join_names(o.against))},
          {"ignore_knobs", o.ignore_knobs},
          {"summary", summary},
          {"rows", rows}};
}

}  // namespace attnbench
