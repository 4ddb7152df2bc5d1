// Peer ratios: each timed row of a case and mode against the case's peer kernel (is_peer_kernel in registry.hpp),
// and the run's summary of them per (peer, kernel, mode).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "results/results.hpp"

namespace attnbench {

// Sets vs_peer = peer median / row median on every ok, timed row whose (group, shape, dtype, mode, l2) has an ok,
// timed row of the peer, and clears it on the others. The peer is the first peer kernel in row order (the run's
// selection order), so a second peer's rows carry their ratio to the first. The peer's own rows get none, and
// neither do control copies: they measure the noise of their kernel's row, which the control line reports.
void set_peer_ratios(std::vector<ResultRow>& rows);

// [{peer, kernel, mode, rows, faster, geomean, worst_ratio, worst_case}] over the rows that carry vs_peer, one
// entry per (peer, kernel, mode) in row order; worst_case is the lowest ratio's "group/shape/dtype". Empty when
// no row carries one.
nlohmann::json peer_summary(const std::vector<ResultRow>& rows);

// One line per summary entry: "vs P (MODE): K faster on F/N rows, geomean 1.08x, worst 0.93x (group/shape/dtype)".
std::vector<std::string> peer_summary_lines(const nlohmann::json& summary);

// A ratio as the table and the summary print it: "1.08x"; outside [0.01, 1000) "1.2e+03x".
std::string ratio_text(double ratio);
inline constexpr std::size_t kRatioTextWidth = 8;  // the longest ratio_text: "1.2e+03x"

}  // namespace attnbench
