#include "run/sweep.hpp"

#include <iomanip>
#include <ostream>
#include <set>
#include <sstream>

#include "attnbench/knobs.hpp"
#include "core/errors.hpp"
#include "results/printer.hpp"
#include "run/runner.hpp"

namespace attnbench {

KnobAxis parse_knob_axis(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw UsageError("--knob: expected NAME=v1,v2,..., got '" + spec + "'");
  KnobAxis a;
  a.name = spec.substr(0, eq);
  if (!find_knob(a.name)) throw UsageError("--knob: " + check_knob(a.name, ""));
  std::set<std::string> seen;
  std::stringstream values(spec.substr(eq + 1));
  std::string v;
  while (std::getline(values, v, ',')) {
    const std::string err = check_knob(a.name, v);
    if (!err.empty()) throw UsageError("--knob: " + err);
    if (!seen.insert(v).second) throw UsageError("--knob: " + a.name + ": value '" + v + "' listed twice");
    a.values.push_back(v);
  }
  if (spec.back() == ',') throw UsageError("--knob: " + a.name + ": empty value in '" + spec + "'");
  return a;
}

std::vector<KnobAxis> parse_knob_axes(const std::vector<std::string>& specs) {
  if (specs.empty()) throw UsageError("sweep: give at least one --knob NAME=v1,v2");
  std::vector<KnobAxis> axes;
  std::set<std::string> names;
  for (const auto& s : specs) {
    KnobAxis a = parse_knob_axis(s);
    if (!names.insert(a.name).second) throw UsageError("--knob: " + a.name + " given twice; list its values in one --knob");
    axes.push_back(std::move(a));
  }
  return axes;
}

std::vector<KnobSetting> knob_settings(const std::vector<KnobAxis>& axes) {
  std::vector<KnobSetting> out = {KnobSetting{}};
  for (const auto& a : axes) {
    std::vector<KnobSetting> next;
    for (const auto& s : out)
      for (const auto& v : a.values) {
        KnobSetting t = s;
        t[a.name] = v;
        next.push_back(std::move(t));
      }
    out = std::move(next);
  }
  return out;
}

namespace {
std::string setting_name(const KnobSetting& s) {
  std::string o;
  for (const auto& [k, v] : s) o += (o.empty() ? "" : " ") + k + "=" + v;
  return o;
}

bool row_has(const ResultRow& r, const KnobSetting& s) {
  for (const auto& [k, v] : s) {
    auto it = r.knobs.find(k);
    if (it == r.knobs.end() || it->second != v) return false;
  }
  return true;
}

std::string fmt(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}
}  // namespace

ResultsFile run_sweep(const RunOptions& base, const std::vector<KnobAxis>& axes, std::ostream& out) {
  const auto settings = knob_settings(axes);
  nlohmann::json sweep_knobs = nlohmann::json::object();
  for (const auto& a : axes) sweep_knobs[a.name] = a.values;
  for (size_t i = 0; i < settings.size(); ++i) out << "S" << i + 1 << ": " << setting_name(settings[i]) << "\n";
  ResultsFile all = run_benchmarks(base, settings, out);
  all.provenance.erase("knobs");  // they differ per setting; every row carries its own
  all.provenance["sweep"] = {{"knobs", sweep_knobs}, {"settings", settings}};
  return all;
}

std::string sweep_table(const ResultsFile& f, const std::vector<KnobSetting>& settings, const StopRule& stop) {
  std::ostringstream os;
  for (size_t i = 0; i < settings.size(); ++i) os << "S" << i + 1 << ": " << setting_name(settings[i]) << "\n";
  // (group, shape, dtype, kernel, mode) in first-seen order, and each setting's row.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const ResultRow*>> cells;
  for (const auto& r : f.rows) {
    const std::string key = r.group + "/" + r.shape + '\x1f' + r.dtype + '\x1f' + r.kernel + '\x1f' + r.mode;
    auto [it, fresh] = cells.emplace(key, std::vector<const ResultRow*>(settings.size(), nullptr));
    if (fresh) order.push_back(key);
    for (size_t i = 0; i < settings.size(); ++i)
      if (row_has(r, settings[i]) && !it->second[i]) it->second[i] = &r;
  }
  os << std::left << std::setw(48) << "shape" << std::setw(6) << "dtype" << std::setw(16) << "kernel" << std::setw(7)
     << "mode";
  for (size_t i = 0; i < settings.size(); ++i) os << std::right << std::setw(22) << ("S" + std::to_string(i + 1) + " us (x S1)");
  os << "\n";
  bool any_unsettled = false;
  for (const auto& key : order) {
    const auto& row = cells[key];
    const ResultRow* any = nullptr;
    for (const auto* r : row) any = any ? any : r;
    os << std::left << std::setw(48) << (any->group + "/" + any->shape) << std::setw(6) << any->dtype << std::setw(16)
       << any->kernel << std::setw(7) << any->mode;
    const ResultRow* first = row[0];
    for (const auto* r : row) {
      std::string cell = "-";
      if (r && r->time_us) {
        const bool unsettled = r->settled && !*r->settled;
        any_unsettled = any_unsettled || unsettled;
        cell = (unsettled ? kUnsettledMarker : "") + fmt(r->time_us->median, 2);
        if (first && first->time_us && first->time_us->median > 0)
          cell += " (" + fmt(r->time_us->median / first->time_us->median, 3) + ")";
      } else if (r) {
        cell = r->status;
      }
      os << std::right << std::setw(22) << cell;
    }
    os << "\n";
  }
  if (any_unsettled) os << unsettled_legend(stop) << "\n";
  return os.str();
}

}  // namespace attnbench
