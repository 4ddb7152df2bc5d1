#include "results/reference_summary.hpp"

#include <cstdio>
#include <set>

namespace attnbench {

nlohmann::json reference_summary(const std::vector<ResultRow>& rows, double wall_s) {
  std::set<std::string> seen;
  int gpu = 0, cpu = 0, complete = 0;
  double ms = 0;
  for (const ResultRow& r : rows) {
    if (!r.gate || r.gate->reference.empty() || !seen.insert(r.group + "/" + r.shape + "/" + r.dtype).second) continue;
    (r.gate->reference == "gpu" ? gpu : cpu) += 1;
    complete += r.gate->coverage.complete() ? 1 : 0;
    ms += r.gate->reference_ms;
  }
  if (seen.empty()) return nullptr;
  const double s = ms / 1e3;
  return {{"cases", gpu + cpu}, {"gpu_cases", gpu}, {"cpu_cases", cpu}, {"complete_cases", complete},
          {"seconds", s}, {"wall_s", wall_s}, {"share", wall_s > 0 ? s / wall_s : 0.0}};
}

std::string reference_summary_line(const nlohmann::json& j) {
  if (j.is_null()) return "";
  const int gpu = j["gpu_cases"], cpu = j["cpu_cases"], complete = j["complete_cases"];
  char buf[320];
  std::snprintf(buf, sizeof buf, "reference: %d case(s) on the GPU (every row), %d on the CPU", gpu, cpu);
  std::string s = buf;
  if (cpu > 0) {
    std::snprintf(buf, sizeof buf, " (%d of them with every (64-row tile, head) unit covered)", complete - gpu);
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "; %.3g s of the run's %.3g s (%.1f%%)", j["seconds"].get<double>(),
                j["wall_s"].get<double>(), 100.0 * j["share"].get<double>());
  return s + buf;
}

}  // namespace attnbench
