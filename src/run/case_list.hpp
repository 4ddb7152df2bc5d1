// `attnbench list --cases`: the expanded cases of a selection, as JSON (schema attnbench.cases/1) for tools that
// must agree with the harness on shapes, dims and the declared work model (the peers), or as a readable table.
#pragma once
#include <iosfwd>
#include <vector>

#include <nlohmann/json.hpp>

#include "cases/shapes.hpp"
#include "run/run_options.hpp"

namespace attnbench {

inline constexpr const char* kCasesSchema = "attnbench.cases/1";

// The cases `run` would take for `o` (select_cases, so every bad input is its UsageError), every shipped group
// when `o` names neither a group nor a shape file.
std::vector<ShapeCase> listed_cases(RunOptions o);

// One case: group, shape, file, op, dtype, types, dims (the result row's, plus num_seqs, total_q and seqlens
// always for attention), features, work {flops, bytes} (the result row's).
nlohmann::json case_to_json(const ShapeCase& c);

// {"schema": kCasesSchema, "cases": [case_to_json(c), ...]} in the order given.
nlohmann::json cases_document(const std::vector<ShapeCase>& cases);

// One line per case: group/shape/dtype, op, dims, GFLOP and MB of declared work; columns sized to the rows.
void print_case_table(const std::vector<ShapeCase>& cases, std::ostream& out);

}  // namespace attnbench
