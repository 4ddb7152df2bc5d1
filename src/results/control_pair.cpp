#include "results/control_pair.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/json_file.hpp"

namespace attnbench {

namespace {
// Knobs included: in a sweep the control copy pairs with its own setting's row.
std::string pair_key(const ResultRow& r, const std::string& kernel) {
  std::string knobs;
  for (const auto& [k, v] : r.knobs) knobs += k + '=' + v + ';';
  return r.group + '\x1f' + r.shape + '\x1f' + r.dtype + '\x1f' + r.mode + '\x1f' + r.l2 + '\x1f' + kernel + '\x1f' + knobs;
}
bool timed(const ResultRow& r) { return r.status == "ok" && r.time_us && r.time_us->median > 0; }
}  // namespace

nlohmann::json control_pair_summary(const std::vector<ResultRow>& rows) {
  std::map<std::string, const ResultRow*> firsts;
  for (const auto& r : rows)
    if (timed(r)) firsts.emplace(pair_key(r, r.kernel), &r);
  std::vector<double> ratios;
  std::string kernel;
  for (const auto& r : rows) {
    if (!timed(r) || control_of(r.kernel).empty()) continue;
    kernel = control_of(r.kernel);
    const auto it = firsts.find(pair_key(r, kernel));
    if (it != firsts.end()) ratios.push_back(r.time_us->median / it->second->time_us->median);
  }
  if (ratios.empty()) return nullptr;
  std::vector<double> diffs;
  for (double x : ratios) diffs.push_back(std::abs(x - 1));
  const auto worst = std::max_element(diffs.begin(), diffs.end()) - diffs.begin();
  std::vector<double> sorted = diffs;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  return {{"kernel", kernel},          {"pairs", n},         {"worst_ratio", ratios[worst]},
          {"median_abs_diff", median}, {"noise_floor", diffs[worst]}};
}

std::string control_pair_line(const nlohmann::json& s) {
  if (s.is_null()) return "";
  char buf[256];
  const std::string k = s["kernel"].get<std::string>();
  std::snprintf(buf, sizeof buf, "control pair: %d rows of %s%s / %s, worst ratio %.3f, noise floor %.1f%%",
                s["pairs"].get<int>(), k.c_str(), kControlSuffix, k.c_str(), s["worst_ratio"].get<double>(),
                100.0 * s["noise_floor"].get<double>());
  return buf;
}

std::optional<double> control_noise_floor(const std::string& results_path) {
  const nlohmann::json doc = read_json_file(results_path, "results file");
  const nlohmann::json* p = doc.contains("provenance") ? &doc["provenance"] : nullptr;
  if (!p || !p->contains("control") || !(*p)["control"].is_object()) return std::nullopt;
  const auto& f = (*p)["control"]["noise_floor"];
  if (!f.is_number()) return std::nullopt;
  return f.get<double>();
}

}  // namespace attnbench
