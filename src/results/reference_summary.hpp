// What the run's references cost and where they ran: the provenance's "reference" and the line after the table.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "results/results.hpp"

namespace attnbench {

// Over the rows' cases (one reference per group/shape/dtype): {"gpu_cases", "cpu_cases", "complete_cases" (every
// (tile, head) unit covered), "cases", "seconds", "wall_s", "share"}; null when no row was gated.
nlohmann::json reference_summary(const std::vector<ResultRow>& rows, double wall_s);

// "reference: 12 cases on the GPU (every row), 3 on the CPU (2 of them every unit covered); 1.2 s of the run's
// 45.6 s (2.6%)", or "" for a null summary.
std::string reference_summary_line(const nlohmann::json& summary);

}  // namespace attnbench
