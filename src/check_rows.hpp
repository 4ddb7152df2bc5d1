// Which output rows the gate checks: all of them when the reference is affordable, otherwise a deterministic
// sample that always holds the first and last row of each sequence and rows at tile boundaries.
#pragma once
#include <cstdint>
#include <vector>

#include "attnbench/attention.hpp"
#include "attnbench/reference.hpp"

namespace attnbench {

// budget_flops: the reference work allowed (4 * keys * head_size per row).
std::vector<reference::RowId> select_check_rows(const AttentionProblem& p, double budget_flops, uint64_t seed);

}  // namespace attnbench
