// The planted-bug matrix: every planted bug fails the gate on every shape of a matrix that spans long-KV decode
// (kv 32768 and 131072), short KV, chunked and speculative prefill, head sizes 64/128/256 and GQA groups 1/4/7/16,
// in both dtypes, on shuffled paged inputs; the bug-free planted kernel and cpu.unified pass everywhere.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/reference.hpp"
#include "cases/check_rows.hpp"
#include "cases/gate.hpp"
#include "gate_matrix_shapes.hpp"
#include "planted_attention.hpp"
#include "planted_gate.hpp"

namespace attnbench {
namespace {

using testing::Bug;
using testing::PlantedKernel;

using testing::Checked;
using testing::gate;
using testing::reference_rows;
using testing::run_cpu_unified;

class GateMatrix : public ::testing::TestWithParam<MatrixShape> {};

TEST_P(GateMatrix, EveryPlantedBugFailsAndCorrectKernelsPass) {
  const MatrixShape& m = GetParam();
  for (DType dt : {DType::bf16, DType::f16}) {
    const HostInputs in = build_inputs(problem_of(m, dt), 17, BlockOrder::shuffled);
    const Checked c = reference_rows(in);
    const PlantedKernel kernel(in);
    const GateResult good = gate(in, c, kernel.run(Bug::none));
    const GateResult cpu = gate(in, c, run_cpu_unified(in));
    EXPECT_TRUE(good.passed) << m.name << " " << dtype_name(dt) << ": " << gate_failure_reason(good);
    EXPECT_TRUE(cpu.passed) << m.name << " " << dtype_name(dt) << " cpu.unified: " << gate_failure_reason(cpu);
    // correct kernels keep a margin: a bound set at the edge of their error would flake on the next shape
    EXPECT_LT(good.max_row_rel, 0.5 * default_rtol(dt)) << m.name << " " << dtype_name(dt);
    EXPECT_LT(cpu.max_row_rel, 0.5 * default_rtol(dt)) << m.name << " " << dtype_name(dt);
    std::printf("%-28s %-4s correct: planted row_rel %.2e max_abs %.2e | cpu.unified row_rel %.2e max_abs %.2e\n",
                m.name, dtype_name(dt), good.max_row_rel, good.max_abs, cpu.max_row_rel, cpu.max_abs);
    for (Bug b : testing::every_bug()) {
      const GateResult g = gate(in, c, kernel.run(b));
      EXPECT_FALSE(g.passed) << m.name << " " << dtype_name(dt) << ": planted bug " << testing::bug_name(b)
                             << " passed (row_rel " << g.max_row_rel << ", max_abs " << g.max_abs << ")";
      EXPECT_GT(g.max_row_rel, 2 * default_rtol(dt)) << m.name << " " << testing::bug_name(b) << ": too close";
      std::string failed;
      for (const auto& f : g.failed) failed += (failed.empty() ? "" : ",") + f;
      std::printf("%-28s %-4s %-19s row_rel %.2e max_abs %.2e rel_l2 %.2e failed %s\n", m.name, dtype_name(dt),
                  testing::bug_name(b), g.max_row_rel, g.max_abs, g.rel_l2, failed.c_str());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GateMatrix, ::testing::ValuesIn(matrix_shapes()),
                         [](const ::testing::TestParamInfo<MatrixShape>& i) { return std::string(i.param.name); });

// Reading past a sequence's end lands on poison: a kernel that leaks one such key fails even at kv 131072,
// where one ordinary key more or less is below the output's rounding.
TEST(GateInputs, SlotsNoSequenceOwnsHoldPoisonAndTheTableHasASpareSlot) {
  AttentionProblem p;
  p.q_lens = {1, 1};
  p.kv_lens = {100, 128};
  p.heads = 2;
  p.kv_heads = 1;
  p.head_size = 64;
  p.block_size = 64;
  const HostInputs in = build_inputs(p, 3, BlockOrder::shuffled);
  ASSERT_EQ(in.block_table_stride, 3);
  EXPECT_EQ(in.num_blocks, 5);
  EXPECT_EQ(in.block_table[2], in.sentinel_block);
  EXPECT_EQ(in.block_table[5], in.sentinel_block);
  const std::size_t token = static_cast<std::size_t>(p.kv_heads) * p.head_size;
  const int64_t tail_block = in.block_table[1];
  EXPECT_EQ(half_to_float(in.k_cache.halves()[(tail_block * 64 + 36) * token], p.types.q), kPoisonK);
  EXPECT_EQ(half_to_float(in.v_cache.halves()[(tail_block * 64 + 63) * token + 5], p.types.q), kPoisonV);
  EXPECT_NE(half_to_float(in.k_cache.halves()[(tail_block * 64 + 35) * token], p.types.q), kPoisonK);
  EXPECT_EQ(half_to_float(in.v_cache.halves()[(in.sentinel_block * 64 + 7) * token], p.types.q), kPoisonV);
}

// Repeated: inner slots name blocks again (within and across sequences), never a block some sequence ends in, so
// each poisoned tail stays its own sequence's; the last slots are distinct, and the table stays inside the cache.
TEST(GateInputs, RepeatedTablesShareInnerBlocksAndKeepTailsApart) {
  AttentionProblem p;
  p.q_lens = {1, 1, 1, 1};
  p.kv_lens = {1000, 700, 1025, 64};
  p.heads = 2;
  p.kv_heads = 1;
  p.head_size = 64;
  p.block_size = 16;
  const HostInputs in = build_inputs(p, 5, BlockOrder::repeated);
  std::map<int32_t, int> uses;
  std::set<int32_t> lasts;
  for (int s = 0; s < 4; ++s) {
    const int nb = (p.kv_lens[s] + 15) / 16;
    const int32_t* row = &in.block_table[static_cast<std::size_t>(s) * in.block_table_stride];
    for (int b = 0; b < nb; ++b) {
      ASSERT_GE(row[b], 0);
      ASSERT_LT(row[b], in.sentinel_block);
      ++uses[row[b]];
    }
    EXPECT_TRUE(lasts.insert(row[nb - 1]).second) << "sequence " << s << " shares its last block";
    EXPECT_EQ(row[nb], in.sentinel_block);
  }
  for (int32_t l : lasts) EXPECT_EQ(uses[l], 1) << "block " << l << " ends a sequence and is read by another slot";
  int repeated = 0;
  for (const auto& [b, n] : uses) repeated += n > 1;
  EXPECT_GT(repeated, 10);
  EXPECT_EQ(build_inputs(p, 5, BlockOrder::repeated).block_table, in.block_table);  // seeded
  EXPECT_EQ(parse_block_order("repeated"), BlockOrder::repeated);
  EXPECT_STREQ(block_order_name(BlockOrder::repeated), "repeated");
}

}  // namespace
}  // namespace attnbench
