// The gradient gate's planted-bug matrix: every planted backward bug fails the gate on every shape of a matrix that
// spans rows over 16k keys, d256 with a GQA group of 16, a ragged batch, a non-causal batch, a window with softcap and
// queries shorter than their keys, in both dtypes; the bug-free planted kernel and cpu.unified_bwd pass everywhere.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "attnbench/attention_bwd.hpp"
#include "bwd_matrix_shapes.hpp"
#include "cases/bwd_inputs.hpp"
#include "cases/gate.hpp"
#include "planted_backward.hpp"

namespace attnbench {
namespace {

using testing::BwdBug;
using testing::BwdGrads;

BwdGrads run_cpu_unified_bwd(const BwdInputs& in) {
  auto k = make_cpu_unified_bwd();
  const KnobValues knobs = KnobValues::resolve({{"ATTNBENCH_CPU_MAX_GFLOP", "0"}}, false);
  EXPECT_TRUE(k->supports(in.problem, knobs).ok);
  auto plan = k->plan(in.problem, knobs);
  BwdGrads g{std::vector<uint16_t>(in.q.size(), 0xFFFF), std::vector<uint16_t>(in.k.size(), 0xFFFF),
             std::vector<uint16_t>(in.v.size(), 0xFFFF)};
  std::vector<unsigned char> ws(plan->workspace_bytes + 1);
  AttentionBwdParams a = in.params();
  a.dq = g.dq.data();
  a.dk = g.dk.data();
  a.dv = g.dv.data();
  a.workspace = ws.data();
  k->run(*plan, a, nullptr);
  return g;
}

GateResult gate(const BwdInputs& in, const BwdReference& ref, const BwdGrads& g) {
  return gate_gradients(in.problem, g.dq.data(), g.dk.data(), g.dv.data(), ref, default_tolerance(in.problem.types.o));
}

std::string failed_list(const GateResult& g) {
  std::string s;
  for (const auto& f : g.failed) s += (s.empty() ? "" : ",") + f;
  return s;
}

class GradientGateMatrix : public ::testing::TestWithParam<BwdShape> {};

TEST_P(GradientGateMatrix, EveryPlantedBugFailsAndCorrectKernelsPass) {
  const BwdShape& m = GetParam();
  for (DType dt : {DType::bf16, DType::f16}) {
    BwdReference ref;
    const BwdInputs in = build_bwd_inputs(problem_of(m, dt), 29, ref);
    const double rtol = gradient_tolerance(dt, default_tolerance(dt)).rtol;
    for (const auto& [who, g] : {std::pair{"planted", gate(in, ref, testing::run_planted_bwd(in, BwdBug::none))},
                                 {"cpu.unified_bwd", gate(in, ref, run_cpu_unified_bwd(in))}}) {
      EXPECT_TRUE(g.passed) << m.name << " " << dtype_name(dt) << " " << who << ": " << gate_failure_reason(g);
      // a margin: a bound at the edge of a correct kernel's error would flake on the next shape
      EXPECT_LT(g.max_row_rel, 0.5 * rtol) << m.name << " " << dtype_name(dt) << " " << who;
      std::printf("%-24s %-4s correct %-16s row_rel %.2e max_abs %.2e\n", m.name, dtype_name(dt), who,
                  g.max_row_rel, g.max_abs);
    }
    for (BwdBug b : testing::every_bwd_bug()) {
      const GateResult g = gate(in, ref, testing::run_planted_bwd(in, b));
      EXPECT_FALSE(g.passed) << m.name << " " << dtype_name(dt) << ": planted bug " << testing::bwd_bug_name(b)
                             << " passed (row_rel " << g.max_row_rel << ")";
      EXPECT_GT(g.max_row_rel, 2 * rtol) << m.name << " " << testing::bwd_bug_name(b) << ": too close";
      std::printf("%-24s %-4s %-21s row_rel %.2e max_abs %.2e failed %s\n", m.name, dtype_name(dt),
                  testing::bwd_bug_name(b), g.max_row_rel, g.max_abs, failed_list(g).c_str());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GradientGateMatrix, ::testing::ValuesIn(bwd_matrix()),
                         [](const ::testing::TestParamInfo<BwdShape>& i) { return std::string(i.param.name); });

// The merged gate names the tensor and the criterion that failed, and says so in the row's reason.
TEST(GradientGate, NamesTheTensorThatFailed) {
  BwdReference ref;
  const BwdInputs in = build_bwd_inputs(problem_of(bwd_matrix()[3], DType::bf16), 3, ref);
  BwdGrads g = testing::run_planted_bwd(in, BwdBug::none);
  for (std::size_t i = 0; i < g.dk.size(); i += 2) g.dk[i] = float_to_half(0.f, DType::bf16);
  const GateResult r = gate(in, ref, g);
  ASSERT_FALSE(r.passed);
  EXPECT_EQ(r.failed, (std::vector<std::string>{"dk.max_abs", "dk.row_rel_l2"}));
  ASSERT_EQ(r.tensors.size(), 3u);
  EXPECT_TRUE(r.tensors[0].passed && r.tensors[2].passed && !r.tensors[1].passed);
  EXPECT_EQ(r.rows_checked, in.problem.total_q() * in.problem.heads + 2 * total_k(in.problem) * in.problem.kv_heads);
  EXPECT_NE(gate_failure_reason(r).find("dk row_rel_l2"), std::string::npos) << gate_failure_reason(r);
  EXPECT_EQ(r.detail.rfind("dk: ", 0), 0u) << r.detail;
}

// An unwritten gradient (the poison left in place) fails as non-finite, whichever tensor it is.
TEST(GradientGate, AnUnwrittenGradientFails) {
  BwdReference ref;
  const BwdInputs in = build_bwd_inputs(problem_of(bwd_matrix()[5], DType::f16), 3, ref);
  BwdGrads g = testing::run_planted_bwd(in, BwdBug::none);
  g.dv.back() = 0xFFFF;
  const GateResult r = gate(in, ref, g);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.failed, (std::vector<std::string>{"dv.nonfinite"}));
}

}  // namespace
}  // namespace attnbench
