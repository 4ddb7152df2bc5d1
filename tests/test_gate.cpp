// The gate's rule (both bounds, NaN, unwritten elements, what a failure names) and the row sampling. The
// planted-bug matrix is in test_gate_matrix.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

#include "cases/check_rows.hpp"
#include "cases/gate.hpp"
#include "cases/shapes.hpp"
#include "run/runner.hpp"

using namespace attnbench;

TEST(Gate, NaNNeverPasses) {
  const std::vector<float> ref = {0.5f, 0.25f};
  std::vector<uint16_t> out = {float_to_bf16(0.5f), float_to_bf16(NAN)};
  const GateResult g = gate_rows(out.data(), 2, DType::bf16, 2, {0}, ref.data(), Tolerance{1e9, 1e9});
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.nonfinite, 1);
  out[1] = float_to_bf16(INFINITY);
  EXPECT_FALSE(gate_rows(out.data(), 2, DType::bf16, 2, {0}, ref.data(), Tolerance{1e9, 1e9}).passed);
}

TEST(Gate, UnwrittenElementOutsideTheCheckedRowsFails) {
  // Row 1 is not checked against the reference but is still poisoned: the full scan catches it.
  const std::vector<float> ref = {0.5f, 0.25f};
  std::vector<uint16_t> out = {float_to_f16(0.5f), float_to_f16(0.25f), 0xFFFF, float_to_f16(1.f)};
  const GateResult g = gate_rows(out.data(), 4, DType::f16, 2, {0}, ref.data(), Tolerance{2e-2, 1e9});
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.worst_index, 2);
}

TEST(Gate, ReportsWorstIndexAndRelL2) {
  const std::vector<float> ref = {1.f, 2.f, 3.f, 4.f};
  std::vector<uint16_t> out = {float_to_f16(1.f), float_to_f16(2.f), float_to_f16(3.1f), float_to_f16(4.f)};
  const GateResult g = gate_rows(out.data(), 4, DType::f16, 2, {0, 1}, ref.data(), Tolerance{2e-2, 1e9});
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.worst_index, 2);
  EXPECT_NEAR(g.max_abs, 0.1, 2e-3);
  EXPECT_NEAR(g.rel_l2, 0.1 / std::sqrt(30.0), 1e-3);
  EXPECT_EQ(g.rows_checked, 2);
}

TEST(Gate, ToleranceTable) {
  EXPECT_DOUBLE_EQ(default_atol(DType::f16), 2e-2);
  EXPECT_DOUBLE_EQ(default_atol(DType::bf16), 4e-2);
  EXPECT_DOUBLE_EQ(default_tolerance(DType::bf16).rtol, default_rtol(DType::bf16));
  EXPECT_LT(default_rtol(DType::f16), default_rtol(DType::bf16));  // fp16 keeps 3 more mantissa bits
}

// Small outputs (long-KV attention, ~1/sqrt(kv_len)): halving them stays far under max_abs's bound, and the
// per-row relative bound catches it; the failure names the criterion.
TEST(Gate, RelativeBoundCatchesWhatMaxAbsCannotOnSmallOutputs) {
  std::vector<float> ref(64);
  for (int i = 0; i < 64; ++i) ref[i] = 0.004f * std::sin(0.7f * i + 0.3f);
  std::vector<uint16_t> good(64), half(64);
  for (int i = 0; i < 64; ++i) {
    good[i] = float_to_bf16(ref[i]);
    half[i] = float_to_bf16(0.5f * ref[i]);
  }
  const Tolerance tol = default_tolerance(DType::bf16);
  const GateResult ok = gate_rows(good.data(), 64, DType::bf16, 64, {0}, ref.data(), tol);
  EXPECT_TRUE(ok.passed) << gate_failure_reason(ok);
  const GateResult bad = gate_rows(half.data(), 64, DType::bf16, 64, {0}, ref.data(), tol);
  EXPECT_FALSE(bad.passed);
  EXPECT_LT(bad.max_abs, tol.atol);
  EXPECT_NEAR(bad.max_row_rel, 0.5, 0.01);
  EXPECT_EQ(bad.failed, std::vector<std::string>{"row_rel_l2"});
  EXPECT_EQ(bad.worst_row, 0);
  EXPECT_NE(gate_failure_reason(bad).find("row_rel_l2 0.5"), std::string::npos) << gate_failure_reason(bad);
}

// One bad row among many good ones: the global rel_l2 dilutes it, the per-row bound does not.
TEST(Gate, OneWrongRowAmongManyFails) {
  const int rows = 4000, len = 32;
  std::vector<float> ref(rows * len);
  std::vector<uint16_t> out(rows * len);
  for (int i = 0; i < rows * len; ++i) {
    ref[i] = 0.01f * std::cos(0.37f * i);
    out[i] = float_to_f16(ref[i]);
  }
  for (int d = 0; d < len; ++d) out[123 * len + d] = float_to_f16(0.95f * ref[123 * len + d]);
  std::vector<int64_t> ids(rows);
  for (int r = 0; r < rows; ++r) ids[r] = r;
  const GateResult g = gate_rows(out.data(), rows * len, DType::f16, len, ids, ref.data(), default_tolerance(DType::f16));
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.worst_row, 123);
  EXPECT_LT(g.rel_l2, default_rtol(DType::f16));
}

// The LSE criterion: within the bound passes, past it fails; -inf passes only against -inf; a NaN anywhere in the
// buffer fails, the rows outside the checked ones included; the failure is named.
TEST(Gate, LseCriterion) {
  const float inf = INFINITY;
  auto run = [](std::vector<float> got, std::vector<float> ref) {
    GateResult g;
    g.passed = true;
    std::vector<int64_t> idx(ref.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
    gate_lse(g, got.data(), static_cast<int64_t>(got.size()), idx, ref.data(), 1e-3);
    return g;
  };
  EXPECT_TRUE(run({5.0f, -inf, 0.2f}, {5.004f, -inf, 0.2005f}).passed);
  const GateResult far = run({5.0f, 1.f}, {5.1f, 1.f});
  EXPECT_FALSE(far.passed);
  EXPECT_NEAR(far.lse_max_err, 0.1 / 5.1, 1e-6);
  EXPECT_NE(gate_failure_reason(far).find("lse error"), std::string::npos) << gate_failure_reason(far);
  EXPECT_FALSE(run({-inf}, {3.f}).passed);
  EXPECT_FALSE(run({3.f}, {-inf}).passed);
  EXPECT_FALSE(run({NAN}, {3.f}).passed);
  EXPECT_FALSE(run({3.f, NAN}, {3.f}).passed);  // an unwritten row outside the checked ones
  EXPECT_FALSE(run({3.f * 1.4426950f}, {3.f}).passed);  // base 2 instead of e
}

TEST(Gate, NoRowsCheckedNeverPasses) {
  const std::vector<uint16_t> out = {float_to_bf16(0.5f)};
  const GateResult g = gate_rows(out.data(), 1, DType::bf16, 1, {}, nullptr, default_tolerance(DType::bf16));
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.failed, std::vector<std::string>{"no_rows"});
}

TEST(CheckRows, SampledRowsHoldFirstAndLastRowOfEachSequence) {
  AttentionProblem p;
  p.q_lens = {1000, 3000};
  p.kv_lens = {1000, 3000};
  p.heads = 16;
  p.kv_heads = 4;
  p.head_size = 128;
  const auto rows = select_check_rows(p, 1e8, 3);
  ASSERT_LT(static_cast<int64_t>(rows.size()), p.total_q() * p.heads);
  auto has_token = [&](int64_t t) {
    for (const auto& r : rows)
      if (r.token == t) return true;
    return false;
  };
  for (int64_t t : {0, 999, 1000, 3999, 63, 64, 1063, 1064}) EXPECT_TRUE(has_token(t)) << t;
  std::vector<bool> head_seen(p.heads, false);
  for (const auto& r : rows) head_seen[r.head] = true;
  for (int h = 0; h < p.heads; ++h) EXPECT_TRUE(head_seen[h]) << h;
  const auto again = select_check_rows(p, 1e8, 3);
  ASSERT_EQ(rows.size(), again.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    EXPECT_TRUE(rows[i].token == again[i].token && rows[i].head == again[i].head) << "sampling must be deterministic";
}

// Every (sequence, head) pair holds a checked row whatever the budget (decode: every row, with no cap on the
// heads per token); every 64-row boundary of a sequence is checked on both sides.
TEST(CheckRows, EverySequenceHeadAndEveryBoundaryWhateverTheBudget) {
  AttentionProblem d;
  d.q_lens.assign(128, 1);
  d.kv_lens.assign(128, 4096);
  d.heads = 32;
  d.kv_heads = 8;
  d.head_size = 128;
  const auto rows = select_check_rows(d, 1e6, 1);
  EXPECT_EQ(static_cast<int64_t>(rows.size()), d.total_q() * d.heads);
  AttentionProblem p;
  p.q_lens = {1000, 3000};
  p.kv_lens = {1000, 3000};
  p.heads = 16;
  p.kv_heads = 4;
  p.head_size = 128;
  std::vector<int64_t> flat;
  std::set<int64_t> tokens;
  for (const auto& r : select_check_rows(p, 1e6, 3)) {
    flat.push_back(r.token * p.heads + r.head);
    tokens.insert(r.token);
  }
  const RowCoverage c = row_coverage(p, flat);
  EXPECT_EQ(c.sequence_heads_covered, c.sequence_heads);
  EXPECT_EQ(c.sequence_heads, 2 * 16);
  EXPECT_EQ(c.tile_heads, (16 + 47) * 16);
  EXPECT_LT(c.tile_heads_covered, c.tile_heads);  // a budget this small covers only the fixed rows' units
  for (int64_t b = 64; b < 1000; b += 64) EXPECT_TRUE(tokens.count(b - 1) && tokens.count(b)) << b;
  for (int64_t b = 64; b < 3000; b += 64) EXPECT_TRUE(tokens.count(1000 + b - 1) && tokens.count(1000 + b)) << b;
}

// Past the fixed rows, the budget buys one row of every (64-row tile, head) unit before any other: the default
// budget covers every unit of a causal S8192 H32 prefill (a wrong tile of one head is always seen).
TEST(CheckRows, TheBudgetCoversEveryTileHeadUnitFirst) {
  AttentionProblem p;
  p.q_lens = {8192};
  p.kv_lens = {8192};
  p.heads = 32;
  p.kv_heads = 32;
  p.head_size = 128;
  std::vector<int64_t> flat;
  for (const auto& r : select_check_rows(p, 16e9, 1234)) flat.push_back(r.token * p.heads + r.head);
  const RowCoverage c = row_coverage(p, flat);
  EXPECT_EQ(c.tile_heads, 128 * 32);
  EXPECT_EQ(c.tile_heads_covered, c.tile_heads);
  EXPECT_LT(static_cast<int64_t>(flat.size()), p.total_q() * p.heads / 16);
}

TEST(CheckRows, CoverageCountsUnitsOfEverySequence) {
  AttentionProblem p;
  p.q_lens = {5, 129};
  p.kv_lens = {18, 463};
  p.heads = 2;
  p.kv_heads = 1;
  p.head_size = 64;
  const RowCoverage none = row_coverage(p, {});
  EXPECT_EQ(none.sequence_heads, 4);
  EXPECT_EQ(none.tile_heads, (1 + 3) * 2);
  EXPECT_EQ(none.tile_heads_covered, 0);
  // token 5 + 128 (the second sequence's last row, tile 2) under head 1; token 0 under head 0
  const RowCoverage some = row_coverage(p, {(5 + 128) * 2 + 1, 0});
  EXPECT_EQ(some.sequence_heads_covered, 2);
  EXPECT_EQ(some.tile_heads_covered, 2);
  EXPECT_FALSE(some.complete());
}

// At the default budget the CPU's sample covers every (sequence, head) pair of every shipped attention case, and
// every (tile, head) unit of the long prefill rows (the S8192 causal row's wrong tile of head 0 is seen); the
// table's numbers are the README's ("The gate").
TEST(CheckRows, ShippedCasesAtTheDefaultBudget) {
  const double budget = RunOptions().reference_gflop * 1e9;
  int cases = 0, complete = 0;
  for (const std::string& g : list_groups())
    for (const ShapeCase& c : load_group(g)) {
      if (c.op != Op::attention || c.dtype != DType::bf16) continue;
      std::vector<int64_t> flat;
      for (const auto& r : select_check_rows(c.attention, budget, 1234)) flat.push_back(r.token * c.attention.heads + r.head);
      const RowCoverage cov = row_coverage(c.attention, flat);
      EXPECT_EQ(cov.sequence_heads_covered, cov.sequence_heads) << g << "/" << c.name;
      if (g == "long_prefill" && c.name == "d128_h32kv32_b1_s8192") {
        EXPECT_TRUE(cov.complete());
      }
      ++cases;
      complete += cov.complete();
      if (!cov.complete())
        std::printf("%-14s %-44s rows %9zu of %10lld, tile-head units %6lld of %6lld\n", g.c_str(), c.name.c_str(),
                    flat.size(), static_cast<long long>(c.attention.total_q() * c.attention.heads),
                    static_cast<long long>(cov.tile_heads_covered), static_cast<long long>(cov.tile_heads));
    }
  std::printf("%d of %d shipped bf16 attention cases fully covered at %.0f GFLOP\n", complete, cases, budget / 1e9);
  EXPECT_GT(cases, 30);
}
