// The gate catches planted bugs (a test-only kernel with switchable defects) and passes the real kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/reference.hpp"
#include "check_rows.hpp"
#include "gate.hpp"
#include "inputs.hpp"

using namespace attnbench;

namespace {

enum class Bug { none, mask_off_by_one, wrong_gqa_head, missing_scale, skip_one_tile, skip_last_row };

// A deliberately simple kernel (per row: scores over visible keys, softmax, weight V) with one planted bug.
std::vector<uint16_t> buggy_kernel(const HostInputs& in, Bug bug) {
  const auto& p = in.problem;
  const AttentionParams a = in.params();
  std::vector<uint16_t> out(in.q.size());
  const int hs = p.head_size, group = p.heads / p.kv_heads;
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int q_len = p.q_lens[s], kv_len = p.kv_lens[s];
    for (int i = 0; i < q_len; ++i) {
      const int64_t tok = in.cu_seqlens_q[s] + i;
      for (int h = 0; h < p.heads; ++h) {
        int kvh = h / group;
        if (bug == Bug::wrong_gqa_head) kvh = h % p.kv_heads;
        int end = p.causal ? std::min(kv_len, causal_visible_end(i, q_len, kv_len)) : kv_len;
        if (bug == Bug::mask_off_by_one && p.causal) end = std::min(kv_len, end + 1);
        const float scale = bug == Bug::missing_scale ? 1.f : a.scale;
        std::vector<double> sc(end);
        double m = -INFINITY;
        for (int j = 0; j < end; ++j) {
          if (bug == Bug::skip_one_tile && j / p.block_size == 1) {
            sc[j] = -INFINITY;
            continue;
          }
          const int64_t blk = in.block_table[static_cast<std::size_t>(s) * a.block_table_stride + j / p.block_size];
          const int64_t off = blk * a.kv_stride_block + (j % p.block_size) * a.kv_stride_token + kvh * a.kv_stride_head;
          double d = 0;
          for (int x = 0; x < hs; ++x)
            d += half_to_float(in.q[tok * a.q_stride_token + h * a.q_stride_head + x], p.dtype) *
                 half_to_float(in.k_cache[off + x], p.dtype);
          sc[j] = d * scale;
          m = std::max(m, sc[j]);
        }
        double l = 0;
        std::vector<double> acc(hs, 0.0);
        for (int j = 0; j < end; ++j) {
          if (sc[j] == -INFINITY) continue;
          const double w = std::exp(sc[j] - m);
          l += w;
          const int64_t blk = in.block_table[static_cast<std::size_t>(s) * a.block_table_stride + j / p.block_size];
          const int64_t off = blk * a.kv_stride_block + (j % p.block_size) * a.kv_stride_token + kvh * a.kv_stride_head;
          for (int x = 0; x < hs; ++x) acc[x] += w * half_to_float(in.v_cache[off + x], p.dtype);
        }
        const bool skip = bug == Bug::skip_last_row && i == q_len - 1 && s == p.num_seqs() - 1;
        for (int x = 0; x < hs; ++x)
          out[tok * a.o_stride_token + h * a.o_stride_head + x] =
              skip ? uint16_t(0xFFFF) : float_to_half(static_cast<float>(acc[x] / l), p.dtype);
      }
    }
  }
  return out;
}

AttentionProblem small_problem(DType dt) {
  AttentionProblem p;
  p.q_lens = {5, 70, 1};
  p.kv_lens = {18, 200, 150};
  p.heads = 8;
  p.kv_heads = 2;
  p.head_size = 64;
  p.block_size = 64;
  p.causal = true;
  p.dtype = dt;
  return p;
}

GateResult gate_against_reference(const HostInputs& in, const std::vector<uint16_t>& out, double budget = 1e12) {
  const auto rows = select_check_rows(in.problem, budget, 1);
  std::vector<float> ref(rows.size() * in.problem.head_size);
  reference::paged_attention(in.params(), rows, ref.data());
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.push_back(r.token * in.problem.heads + r.head);
  return gate_rows(out.data(), static_cast<int64_t>(out.size()), in.problem.dtype, in.problem.head_size, flat,
                   ref.data(), default_tolerance(in.problem.dtype));
}

}  // namespace

class GatePlantedBug : public ::testing::TestWithParam<Bug> {};

TEST_P(GatePlantedBug, FailsTheGate) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const HostInputs in = build_inputs(small_problem(dt), 42, BlockOrder::shuffled);
    const GateResult g = gate_against_reference(in, buggy_kernel(in, GetParam()));
    EXPECT_FALSE(g.passed) << dtype_name(dt) << " max_abs " << g.max_abs;
  }
}

INSTANTIATE_TEST_SUITE_P(Bugs, GatePlantedBug,
                         ::testing::Values(Bug::mask_off_by_one, Bug::wrong_gqa_head, Bug::missing_scale,
                                           Bug::skip_one_tile, Bug::skip_last_row));

TEST(Gate, PassesTheBugFreeTestKernel) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const HostInputs in = build_inputs(small_problem(dt), 42, BlockOrder::shuffled);
    const GateResult g = gate_against_reference(in, buggy_kernel(in, Bug::none));
    EXPECT_TRUE(g.passed) << g.max_abs << " " << g.detail;
    EXPECT_LT(g.max_abs, 1e-2);
    EXPECT_EQ(g.rows_checked, in.problem.total_q() * in.problem.heads);
  }
}

TEST(Gate, PassesTheCpuKernel) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const HostInputs in = build_inputs(small_problem(dt), 7, BlockOrder::shuffled);
    auto k = make_cpu_unified();
    ASSERT_TRUE(k->supports(in.problem, KnobValues::resolve({}, false)).ok);
    auto plan = k->plan(in.problem, KnobValues::resolve({}, false));
    std::vector<uint16_t> out(in.q.size(), 0xFFFF);
    std::vector<unsigned char> ws(plan->workspace_bytes + 1);
    AttentionParams a = in.params();
    a.out = out.data();
    a.workspace = ws.data();
    k->run(*plan, a, nullptr);
    const GateResult g = gate_against_reference(in, out);
    EXPECT_TRUE(g.passed) << g.max_abs << " " << g.detail;
  }
}

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
