// The persistent wide kernel's L2 walk (wide_walk.hpp): when auto takes it, its sections, and the table the host
// builds: every unit once, each CTA's list in the order given, the modelled work even across CTAs. Host code only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

#include "../kernels/cuda/wide_walk.hpp"
#include "cuda_heuristics_helpers.hpp"

namespace attnbench::cuda {
namespace {

using namespace heuristics_test;

UnifiedLaunchPlan wide_plan(const AttentionProblem& p, std::map<std::string, std::string> o = {}) {
  o.emplace("ATTNBENCH_SM90_PATH", "wide");
  return make_unified_launch_plan(p, knobs(o), 132);
}

// Per CTA, its modelled cost and its units, read back from the table.
struct Lists {
  std::vector<int64_t> cost;
  std::vector<std::vector<int32_t>> units;
};
Lists read_table(const AttentionProblem& p, const UnifiedLaunchPlan& lp) {
  const std::vector<int32_t> t = wide_walk_table(p, lp);
  EXPECT_EQ(t.size(), wide_walk_table_entries(lp));
  std::vector<int> cost_of(static_cast<std::size_t>(lp.work_tiles), -1);
  for (const WalkUnit& u : wide_walk_order(p, lp, lp.wide_walk_section_bytes))
    cost_of[static_cast<std::size_t>(u.index)] = u.cost;
  Lists l;
  for (int b = 0; b < lp.grid_x; ++b) {
    EXPECT_LE(t[b], t[b + 1]);
    l.units.emplace_back(t.begin() + lp.grid_x + 1 + t[b], t.begin() + lp.grid_x + 1 + t[b + 1]);
    int64_t c = 0;
    for (int32_t idx : l.units.back()) c += cost_of[static_cast<std::size_t>(idx)];
    l.cost.push_back(c);
  }
  return l;
}

TEST(WideWalk, AutoTakesTheL2WalkWhereTheKvExceedOneSection) {
  // d128 H32 S8192: 32 heads x 4 MiB of K/V; the walk's table goes into the workspace.
  const auto s8192 = uniform(1, 8192, 8192, 32, 32, 128);
  auto lp = wide_plan(s8192);
  ASSERT_TRUE(lp.persistent);
  EXPECT_EQ(lp.wide_walk_section_bytes, kWideL2SectionBytes);
  EXPECT_EQ(lp.workspace_bytes, (132 + 1 + 64 * 32) * sizeof(int32_t));
  EXPECT_NE(lp.summary.find("walk=l2:16384KiB"), std::string::npos) << lp.summary;
  // 4 kv heads x 4 MiB fit one section: the snake, no workspace.
  lp = wide_plan(uniform(1, 8192, 8192, 64, 4, 128));
  EXPECT_EQ(lp.wide_walk_section_bytes, 0);
  EXPECT_EQ(lp.workspace_bytes, 0u);
  EXPECT_EQ(lp.summary.find("walk="), std::string::npos) << lp.summary;
  EXPECT_EQ(wide_plan(uniform(8, 512, 512, 32, 8, 128)).wide_walk_section_bytes, 0);  // short prompts: 16 MiB
  // The knobs: the snake, the walk forced, a section size, and nothing without persistent CTAs.
  EXPECT_EQ(wide_plan(s8192, {{"ATTNBENCH_SM90_WALK", "rank"}}).wide_walk_section_bytes, 0);
  EXPECT_EQ(wide_plan(uniform(16, 256, 256, 32, 8, 128), {{"ATTNBENCH_SM90_WALK", "l2"}}).wide_walk_section_bytes,
            kWideL2SectionBytes);
  EXPECT_EQ(wide_plan(s8192, {{"ATTNBENCH_SM90_L2_SECTION_KB", "1024"}}).wide_walk_section_bytes, 1 << 20);
  lp = wide_plan(s8192, {{"ATTNBENCH_SM90_PERSISTENT", "0"}, {"ATTNBENCH_SM90_WALK", "l2"}});
  EXPECT_EQ(lp.wide_walk_section_bytes, 0);
  EXPECT_EQ(lp.workspace_bytes, 0u);
  EXPECT_THROW(knobs({{"ATTNBENCH_SM90_WALK", "snake"}}), std::invalid_argument);
  EXPECT_THROW(knobs({{"ATTNBENCH_SM90_L2_SECTION_KB", "-1"}}), std::invalid_argument);
}

TEST(WideWalk, SectionsHoldWholeKvHeadsHeaviestQTilesFirst) {
  // H32/KV8 S8192 with 4 MiB sections: a section is one kv head, the 4 query heads that read it.
  const auto p = uniform(1, 8192, 8192, 32, 8, 128);
  const auto lp = wide_plan(p, {{"ATTNBENCH_SM90_WALK", "l2"}, {"ATTNBENCH_SM90_L2_SECTION_KB", "4096"}});
  ASSERT_EQ(lp.wide_pack, 1);
  const std::vector<WalkUnit> order = wide_walk_order(p, lp, lp.wide_walk_section_bytes);
  ASSERT_EQ(order.size(), 64u * 32);
  const int pairs = 32;
  const std::size_t tail = order.size() - 2 * 132;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const int rank = order[i].index / pairs, head = order[i].index % pairs;
    EXPECT_EQ(order[i].cost, 64 - rank + kWideUnitOverheadTiles);
    if (i >= tail) {  // the last two rounds: heaviest first
      if (i > tail) {
        EXPECT_LE(order[i].cost, order[i - 1].cost);
      }
      continue;
    }
    EXPECT_EQ(head / 4, static_cast<int>(i / (64 * 4)));  // section i / 256 holds kv head i / 256
    EXPECT_EQ(rank, static_cast<int>(i % 256) / 4);      // ranks ascending within it: the heaviest first
  }
  // Sections even in bytes and within the budget: 9 kv heads' K/V (36 MiB) take three 16 MiB sections, of 3 kv heads
  // each (not 4, 4, 1).
  const auto nine = uniform(1, 8192, 8192, 36, 9, 128);
  const auto lp9 = wide_plan(nine, {{"ATTNBENCH_SM90_WALK", "l2"}});
  ASSERT_EQ(lp9.wide_pack, 1);
  const std::vector<WalkUnit> o9 = wide_walk_order(nine, lp9, lp9.wide_walk_section_bytes);
  ASSERT_EQ(o9.size(), 64u * 36);
  std::set<int> first_section;
  for (std::size_t i = 0; i < 64 * 12; ++i) first_section.insert(o9[i].index % 36 / 4);
  EXPECT_EQ(first_section, (std::set<int>{0, 1, 2}));
  // Unequal kv lengths (4 kv heads of 0.5, 8, 6 and 2 MiB per sequence): every section within 16 MiB, none empty.
  auto mixed = uniform(4, 1024, 1024, 4, 4, 128);
  mixed.kv_lens = {1024, 16384, 12288, 4096};
  const auto lpm = wide_plan(mixed, {{"ATTNBENCH_SM90_WALK", "l2"}});
  const std::vector<int> sec = wide_walk_sections(mixed, lpm, lpm.wide_walk_section_bytes);
  ASSERT_EQ(sec.size(), 16u);
  std::vector<int64_t> bytes(static_cast<std::size_t>(sec.back() + 1), 0);
  for (int pr = 0; pr < 16; ++pr) {
    if (pr > 0) {
      EXPECT_LE(sec[pr] - sec[pr - 1], 1);  // in order, none skipped
      EXPECT_GE(sec[pr], sec[pr - 1]);
    }
    bytes[static_cast<std::size_t>(sec[pr])] += wide_kv_head_bytes(mixed, pr / 4);
  }
  for (int64_t b : bytes) EXPECT_LE(b, kWideL2SectionBytes);
  EXPECT_GE(bytes.size(), 5u);  // 66 MiB
}

TEST(WideWalk, TheTableHandsOutEveryUnitOnceWithEvenWork) {
  struct Case {
    AttentionProblem p;
    double max_over_mean;
  };
  auto ragged = uniform(2, 8192, 8192, 32, 32, 128);
  ragged.q_lens = {8192, 300};
  ragged.kv_lens = {8192, 300};
  for (const Case& c : {Case{uniform(1, 8192, 8192, 32, 32, 128), 1.01},
                        Case{uniform(2, 4096, 4096, 32, 32, 128), 1.02},
                        Case{uniform(1, 16384, 16384, 16, 16, 128, false), 1.04}, Case{ragged, 1.02},
                        Case{uniform(2, 1536, 1536, 32, 32, 128), 1.03}}) {
    const auto lp = wide_plan(c.p, {{"ATTNBENCH_SM90_PERSISTENT", "1"}});
    ASSERT_GT(lp.wide_walk_section_bytes, 0);
    const Lists l = read_table(c.p, lp);
    // Every unit exactly once, those a sequence lacks too (the short one's ranks from 3: the kernel skips them), so
    // the table serves any lengths up to the longest.
    std::vector<int32_t> seen;
    for (const auto& u : l.units) seen.insert(seen.end(), u.begin(), u.end());
    std::sort(seen.begin(), seen.end());
    std::vector<int32_t> every(static_cast<std::size_t>(lp.work_tiles));
    std::iota(every.begin(), every.end(), 0);
    EXPECT_EQ(seen, every);
    const double mean = std::accumulate(l.cost.begin(), l.cost.end(), 0.0) / static_cast<double>(l.cost.size());
    EXPECT_LE(*std::max_element(l.cost.begin(), l.cost.end()), c.max_over_mean * mean);
    // The first round hands out the walk's first units, one per CTA in CTA order (all start with no work).
    const std::vector<WalkUnit> order = wide_walk_order(c.p, lp, lp.wide_walk_section_bytes);
    for (int b = 0; b < lp.grid_x; ++b) EXPECT_EQ(l.units[static_cast<std::size_t>(b)].front(), order[b].index);
  }
}

}  // namespace
}  // namespace attnbench::cuda
