// The gate over a planted kernel's (or cpu.unified's) output: the harness's selected rows of a case, the reference's values for them,
// and gate_rows with the default tolerance (the tests of the planted-bug matrices).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/reference.hpp"
#include "cases/check_rows.hpp"
#include "cases/gate.hpp"
#include "cases/inputs.hpp"

namespace attnbench::testing {

struct Checked {
  std::vector<int64_t> rows;  // flat rows (token * heads + head)
  std::vector<float> ref;
};

// The reference on the rows the harness's CPU gate picks under budget_flops (every row of the matrix shapes at
// the default 8 GFLOP).
inline Checked reference_rows(const HostInputs& in, double budget_flops = 8e9) {
  const auto ids = select_check_rows(in.problem, budget_flops, 1);
  Checked c;
  c.ref.resize(ids.size() * in.problem.head_size);
  reference::paged_attention(in.params(), ids, c.ref.data());
  for (const auto& r : ids) c.rows.push_back(r.token * in.problem.heads + r.head);
  return c;
}

inline GateResult gate(const HostInputs& in, const Checked& c, const std::vector<uint16_t>& out) {
  return gate_rows(out.data(), static_cast<int64_t>(out.size()), in.problem.types.o, in.problem.head_size, c.rows,
                   c.ref.data(), attention_tolerance(in.problem.types, default_tolerance(in.problem.types.o)));
}

// cpu.unified's output for the case (poisoned first), with its default plan.
inline std::vector<uint16_t> run_cpu_unified(const HostInputs& in) {
  auto k = make_cpu_unified();
  const KnobValues knobs = KnobValues::resolve({}, false);
  EXPECT_TRUE(k->supports(in.problem, knobs).ok);
  auto plan = k->plan(in.problem, knobs);
  std::vector<uint16_t> out(in.q.size(), 0xFFFF);
  std::vector<unsigned char> ws(plan->workspace_bytes + 1);
  AttentionParams a = in.params();
  a.out = out.data();
  a.workspace = ws.data();
  k->run(*plan, a, nullptr);
  return out;
}

}  // namespace attnbench::testing
