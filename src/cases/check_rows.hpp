// Which output rows the gate checks on the Eigen reference: all of them when it is affordable, otherwise a
// deterministic sample with guaranteed coverage (README, "The gate"). The GPU reference checks every row.
#pragma once
#include <cstdint>
#include <vector>

#include "attnbench/attention.hpp"
#include "attnbench/reference.hpp"
#include "cases/gate.hpp"

namespace attnbench {

// The tile of the coverage rule: 64 query rows of a sequence (a decode sequence is one tile).
inline constexpr int kCoverageTile = 64;

// budget_flops: the reference work allowed (4 * visible keys * head_size per row). Above it, in this order: the
// first and the last row of every sequence under every head (so every (sequence, head) pair, whatever the
// budget); both rows of every 64-row boundary, heads rotating; then, while the budget lasts, one seeded random
// row of each (tile, head) unit not yet covered, head by head across all tiles; then seeded random rows.
std::vector<reference::RowId> select_check_rows(const AttentionProblem& p, double budget_flops, uint64_t seed);

// What the flat rows (token * heads + head) cover of p's output.
RowCoverage row_coverage(const AttentionProblem& p, const std::vector<int64_t>& flat_rows);

}  // namespace attnbench
