// cuda.unified's 2D regime choice and the wide kernel's host geometry: the knobs that force each regime, tiles and
// rings per head size, the declines of what the geometry cannot hold, the persistent walk, GQA packing, the Q
// prologue, and the auto rule. Pure host code: runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "cuda_heuristics_helpers.hpp"

#ifdef ATTNBENCH_WITH_CUDA
#include "attnbench/backends.hpp"
#endif

namespace attnbench::cuda {
namespace {

using namespace heuristics_test;

TEST(CudaWideDispatch, KnobForcesEachRegime) {
  const auto p = uniform(1, 8192, 8192, 32, 32, 128);
  const auto wide2 = knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_PERSISTENT", "0"}});
  EXPECT_TRUE(choose_wide(p, wide2));
  EXPECT_FALSE(choose_wide(p, knobs({{"ATTNBENCH_SM90_PATH", "narrow"}})));
  auto lp = make_unified_launch_plan(p, wide2, 132);
  EXPECT_EQ(lp.wide_wgs, 2);  // ATTNBENCH_SM90_FLASH_WIDE default
  EXPECT_EQ(lp.block_m, 128);
  EXPECT_EQ(lp.block_n, 128);
  EXPECT_EQ(lp.warps, 12);  // producer warpgroup + 2 consumer warpgroups
  EXPECT_EQ(lp.m_tiles, 64);
  EXPECT_EQ(lp.grid_x, 32);
  EXPECT_EQ(lp.grid_y, 64);
  EXPECT_NE(lp.summary.find("wide"), std::string::npos);
  lp = make_unified_launch_plan(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", "1"}}), 132);
  EXPECT_EQ(lp.wide_wgs, 1);
  EXPECT_EQ(lp.block_m, 64);
  EXPECT_EQ(lp.m_tiles, 128);
  EXPECT_EQ(lp.warps, 8);
  lp = make_unified_launch_plan(p, knobs({{"ATTNBENCH_SM90_PATH", "narrow"}}), 132);
  EXPECT_EQ(lp.wide_wgs, 0);
  EXPECT_EQ(lp.summary.find("wide"), std::string::npos);
  EXPECT_THROW(knobs({{"ATTNBENCH_SM90_PATH", "fast"}}), std::invalid_argument);
  EXPECT_THROW(knobs({{"ATTNBENCH_SM90_FLASH_WIDE", "4"}}), std::invalid_argument);
  EXPECT_THROW(knobs({{"ATTNBENCH_SM90_STAGES", "5"}}), std::invalid_argument);
  EXPECT_THROW(knobs({{"ATTNBENCH_SM90_PERSISTENT", "2"}}), std::invalid_argument);
}

TEST(CudaWideDispatch, EveryHeadSizeHasATileAndARing) {
  const auto wide = knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_PERSISTENT", "0"}});
  const auto wide_persistent = knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_PERSISTENT", "1"}});
  struct Want {
    int d, block_n, max_wgs, stages, persistent_stages, persistent_q_bufs;
  };
  for (const Want w : {Want{64, 128, 3, 4, 4, 2}, Want{128, 128, 2, 3, 2, 2}, Want{256, 64, 2, 2, 2, 1}}) {
    const auto p = uniform(1, 4096, 4096, 16, 16, w.d);
    EXPECT_TRUE(wide_supports(p));
    EXPECT_TRUE(choose_wide(p, wide));
    const auto lp = make_unified_launch_plan(p, wide, 132);
    EXPECT_EQ(lp.wide_wgs, w.max_wgs) << w.d;  // ATTNBENCH_SM90_FLASH_WIDE=0: as many as fit
    EXPECT_EQ(lp.block_m, 64 * w.max_wgs) << w.d;
    EXPECT_EQ(lp.block_n, w.block_n) << w.d;
    EXPECT_EQ(lp.wide_stages, w.stages) << w.d;
    EXPECT_EQ(lp.wide_q_bufs, 1) << w.d;
    EXPECT_EQ(wide_max_wgs(w.d), w.max_wgs);
    EXPECT_NE(lp.summary.find("stages=" + std::to_string(w.stages)), std::string::npos) << lp.summary;
    // Every default fits; one slot more than the default does not at d128 / d256 with 2 consumer warpgroups.
    EXPECT_LE(wide_smem_bytes(w.d, 2, w.stages), kWideSmemLimit);
    if (w.d >= 128) { EXPECT_GT(wide_smem_bytes(w.d, 2, w.stages + 1), kWideSmemLimit) << w.d; }
    // Persistent CTAs keep room for the next unit's Q where a 2-slot ring allows it.
    const auto pl = make_unified_launch_plan(p, wide_persistent, 132);
    EXPECT_EQ(pl.wide_stages, w.persistent_stages) << w.d;
    EXPECT_EQ(pl.wide_q_bufs, w.persistent_q_bufs) << w.d;
    EXPECT_LE(wide_smem_bytes(w.d, pl.wide_wgs, pl.wide_stages, pl.wide_q_bufs), kWideSmemLimit) << w.d;
    const auto two = make_unified_launch_plan(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", "2"}}), 132);
    EXPECT_EQ(two.wide_wgs, 2) << w.d;
  }
  EXPECT_FALSE(wide_supports(uniform(1, 64, 64, 4, 4, 96)));
}

TEST(CudaWideDispatch, KnobsTheGeometryCannotHoldAreDeclinedWithTheReason) {
  const auto d128 = uniform(1, 4096, 4096, 16, 16, 128);
  const auto three = knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", "3"}});
  EXPECT_NE(wide_knob_conflict(d128, three).find("at most 2 consumer warpgroups"), std::string::npos);
  EXPECT_EQ(resolve_all_built(d128, three).support.reason, wide_knob_conflict(d128, three));
  EXPECT_TRUE(wide_knob_conflict(uniform(1, 4096, 4096, 16, 16, 64), three).empty());
  EXPECT_EQ(make_unified_launch_plan(uniform(1, 4096, 4096, 16, 16, 64), three, 132).block_m, 192);
  const auto four = knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_STAGES", "4"}});
  EXPECT_NE(wide_knob_conflict(d128, four).find("bytes of shared memory"), std::string::npos);
  EXPECT_NE(wide_knob_conflict(uniform(1, 4096, 4096, 16, 16, 256), knobs({{"ATTNBENCH_SM90_STAGES", "3"}}))
                .find("ATTNBENCH_SM90_STAGES=3"),
            std::string::npos);
  EXPECT_TRUE(wide_knob_conflict(uniform(1, 4096, 4096, 16, 16, 64), four).empty());
  // Under auto a conflicting knob keeps the narrow kernel instead of declining.
  EXPECT_FALSE(choose_wide(d128, knobs({{"ATTNBENCH_SM90_FLASH_WIDE", "3"}})));
}

TEST(CudaWideDispatch, PersistentCtasWalkEveryTileOnceHeaviestFirst) {
  const auto p = uniform(1, 8192, 8192, 32, 32, 128);
  const auto lp = make_unified_launch_plan(
      p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_PERSISTENT", "1"}}), 132);
  EXPECT_TRUE(lp.persistent);
  // auto: persistent for equal-length batches, one CTA per tile for ragged ones.
  EXPECT_TRUE(make_unified_launch_plan(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}}), 132).persistent);
  EXPECT_TRUE(wide_persistent(uniform(2, 4096, 4096, 32, 32, 128), knobs()));
  EXPECT_TRUE(wide_persistent(uniform(4, 2048, 2048, 32, 32, 128), knobs()));
  EXPECT_TRUE(wide_persistent(uniform(8, 1024, 1024, 32, 8, 128), knobs()));
  EXPECT_TRUE(wide_persistent(uniform(4, 768, 768, 32, 8, 128), knobs()));  // short: Q loaded ahead pays
  EXPECT_TRUE(wide_persistent(uniform(16, 256, 256, 32, 8, 128), knobs()));
  auto ragged = uniform(2, 8192, 8192, 32, 8, 128);
  ragged.q_lens = {8192, 300};
  ragged.kv_lens = {8192, 300};
  EXPECT_FALSE(wide_persistent(ragged, knobs()));
  EXPECT_TRUE(wide_persistent(ragged, knobs({{"ATTNBENCH_SM90_PERSISTENT", "1"}})));
  EXPECT_FALSE(wide_persistent(p, knobs({{"ATTNBENCH_SM90_PERSISTENT", "0"}})));
  EXPECT_EQ(lp.work_tiles, 64 * 32);
  EXPECT_EQ(lp.grid_x, 132);
  EXPECT_EQ(lp.grid_y, 1);
  EXPECT_EQ(lp.grid_z, 1);
  EXPECT_NE(lp.summary.find("persistent ctas=132"), std::string::npos) << lp.summary;
  EXPECT_EQ(wide_persistent_ctas(10, 132), 10);  // never more CTAs than tiles
  EXPECT_EQ(wide_persistent_ctas(0, 132), 1);
  EXPECT_EQ(wide_persistent_ctas(1000, 0), kDefaultSmCount);
}

TEST(CudaWideDispatch, GqaPackRowDivisionIsExactForEveryTileRow) {
  // The kernel finds a row's head as (r * wide_pack_magic(tq)) >> 16: exact for every row of every tile height.
  for (int tq = 1; tq < 256; ++tq)
    for (int r = 0; r < 256; ++r)
      ASSERT_EQ(static_cast<int>((static_cast<uint32_t>(r) * wide_pack_magic(tq)) >> 16), r / tq) << r << " / " << tq;
}

TEST(CudaWideDispatch, GqaPackFillsShortTilesWithTheHeadsOfOneGroup) {
  const auto wide = knobs({{"ATTNBENCH_SM90_PATH", "wide"}});
  // Long and mid-length q: packing saves nothing (same KV-tile steps, same units), the auto rule keeps 1.
  EXPECT_EQ(wide_pack(uniform(1, 8192, 8192, 32, 8, 128), 128, wide), 1);
  EXPECT_EQ(wide_pack(uniform(16, 256, 256, 32, 8, 128), 128, wide), 1);
  EXPECT_EQ(wide_pack(uniform(8, 512, 4096, 32, 8, 128), 128, wide), 1);  // chunked prefill
  // Short q: 5 tokens of each of 4 heads in one tile instead of 4 tiles of 5 rows.
  EXPECT_EQ(wide_pack(uniform(4, 5, 18, 32, 8, 128), 128, wide), 4);
  EXPECT_EQ(wide_pack_cost(uniform(4, 5, 18, 32, 8, 128), 128, 4) * 4,
            wide_pack_cost(uniform(4, 5, 18, 32, 8, 128), 128, 1));
  // q 40 at group 8: 3 tiles of 16 tokens x 8 heads (48 steps + units) beat 2 of 32 x 4 (64) and 8 of 128 x 1;
  // q 8 at group 16: 16 heads of 8 tokens.
  EXPECT_EQ(wide_pack(uniform(2, 40, 40, 32, 4, 128), 128, wide), 8);
  EXPECT_EQ(wide_pack_cost(uniform(2, 40, 40, 32, 4, 128), 128, 8), 48);
  EXPECT_EQ(wide_pack_cost(uniform(2, 40, 40, 32, 4, 128), 128, 4), 64);
  EXPECT_EQ(wide_pack(uniform(2, 8, 600, 32, 2, 128), 128, wide), 16);
  // Group 7: pack 7 (18 tokens each, rows 126 and 127 idle); no divisor above the group size.
  EXPECT_EQ(wide_pack(uniform(2, 10, 10, 28, 4, 128), 128, wide), 7);
  EXPECT_EQ(wide_pack(uniform(2, 10, 10, 8, 8, 128), 128, wide), 1);  // MHA: nothing to pack
  // The plan: head tiles on the grid, tokens per head, the pack in the summary.
  auto ragged = uniform(3, 1, 1, 32, 8, 128);  // the short_prefill group's ragged batch
  ragged.q_lens = {5, 129, 768};
  ragged.kv_lens = {18, 463, 768};
  const auto lp = make_unified_launch_plan(ragged, knobs(), 132);
  EXPECT_EQ(lp.wide_pack, 4);
  EXPECT_EQ(lp.wide_tq, 32);
  EXPECT_EQ(lp.m_tiles, 24);
  EXPECT_EQ(lp.grid_x, 8);  // head tiles (head-major grid)
  EXPECT_EQ(lp.grid_y, 24);
  EXPECT_NE(lp.summary.find("gqa-pack=4x32"), std::string::npos) << lp.summary;
  // Forced: any divisor of the group up to 16; others are a wide-knob conflict naming the group size.
  const auto two = make_unified_launch_plan(
      uniform(2, 700, 700, 28, 4, 128), knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_GQA_PACK", "7"}, {"ATTNBENCH_SM90_PERSISTENT", "0"}}),
      132);
  EXPECT_EQ(two.wide_pack, 7);
  EXPECT_EQ(two.wide_tq, 18);
  EXPECT_EQ(two.m_tiles, (700 + 17) / 18);
  EXPECT_EQ(two.work_tiles, static_cast<int64_t>(two.m_tiles) * 2 * 4);  // 4 head tiles of 7 heads, 2 sequences
  EXPECT_EQ(static_cast<int64_t>(two.grid_x) * two.grid_y * two.grid_z, two.work_tiles);
  const std::string bad =
      wide_knob_conflict(uniform(2, 700, 700, 28, 4, 128), knobs({{"ATTNBENCH_SM90_GQA_PACK", "4"}}));
  EXPECT_NE(bad.find("ATTNBENCH_SM90_GQA_PACK=4"), std::string::npos) << bad;
  EXPECT_NE(bad.find("group size 7"), std::string::npos) << bad;
  EXPECT_FALSE(wide_knob_conflict(uniform(2, 70, 70, 64, 2, 128), knobs({{"ATTNBENCH_SM90_GQA_PACK", "32"}})).empty());
#ifdef ATTNBENCH_WITH_CUDA
  const AttentionProblem d = uniform(2, 700, 700, 28, 4, 128);
  const auto s =
      make_cuda_unified()->supports(d, values({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_GQA_PACK", "4"}}));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("GQA_PACK"), std::string::npos) << s.reason;
#endif
}

TEST(CudaWideDispatch, TheQPrologueRunsInTheWideKernelOnly) {
  auto with_prologue = [](AttentionProblem p, int rope) {
    p.fusion.q_norm = true;
    p.fusion.q_rope_dim = rope;
    return p;
  };
  const auto d64 = with_prologue(uniform(1, 4096, 4096, 16, 2, 64), 64);
  EXPECT_TRUE(q_prologue_conflict(d64, knobs()).empty());
  EXPECT_TRUE(q_prologue_conflict(uniform(1, 4096, 4096, 16, 2, 64), knobs({{"ATTNBENCH_SM90_PATH", "narrow"}})).empty());
  // d64 defaults to 3 consumer warpgroups; with a Q prologue to 2 (the kernels that have it), 3 is a conflict.
  EXPECT_EQ(make_unified_launch_plan(uniform(1, 4096, 4096, 16, 2, 64), knobs(), 132).wide_wgs, 3);
  EXPECT_EQ(make_unified_launch_plan(d64, knobs(), 132).wide_wgs, kWideMaxWgsQPrologue);
  const std::string three = q_prologue_conflict(d64, knobs({{"ATTNBENCH_SM90_FLASH_WIDE", "3"}}));
  EXPECT_NE(three.find("at most 2 consumer warpgroups"), std::string::npos) << three;
  EXPECT_NE(q_prologue_conflict(d64, knobs({{"ATTNBENCH_SM90_PATH", "narrow"}})).find("narrow kernel"),
            std::string::npos);
  EXPECT_NE(q_prologue_conflict(with_prologue(uniform(1, 4096, 4096, 16, 2, 64), 24), knobs()).find("multiple of 16"),
            std::string::npos);
  EXPECT_NE(q_prologue_conflict(with_prologue(uniform(4, 1, 4096, 32, 8, 128), 64), knobs()).find("3D decode"),
            std::string::npos);
  AttentionProblem rope_only = uniform(1, 1024, 1024, 8, 8, 128);
  rope_only.fusion.q_rope_dim = 32;
  EXPECT_TRUE(rope_only.fusion.has_q_prologue());
  EXPECT_TRUE(q_prologue_conflict(rope_only, knobs()).empty());
#ifdef ATTNBENCH_WITH_CUDA
  const auto s = make_cuda_unified()->supports(with_prologue(uniform(1, 100, 100, 4, 2, 64), 16), values());
  EXPECT_FALSE(s.ok);  // auto keeps 100 d64 queries on the narrow kernel
  EXPECT_NE(s.reason.find("Q prologue"), std::string::npos) << s.reason;
  EXPECT_NE(make_cuda_unified()->plan(d64, values())->summary.find("+q-norm-rope"), std::string::npos);
  // plan() refuses it too, so a caller that skips supports() cannot lose the prologue.
  EXPECT_THROW(make_cuda_unified()->plan(d64, values({{"ATTNBENCH_SM90_PATH", "narrow"}})), std::invalid_argument);
#endif
}

// The FP8 SDPA's K slots hold the codes its wgmma reads: half a 16-bit tile, so its ring runs deeper (or keeps a
// second Q tile) in the same shared memory, and the plan says so.
TEST(CudaWideDispatch, Fp8SdpaRingSlotsAreSizedByTheCodes) {
  EXPECT_EQ(wide_k_slot_bytes(128, true), 16 * 1024);
  EXPECT_EQ(wide_k_slot_bytes(256, true), 16 * 1024);
  EXPECT_EQ(wide_k_slot_bytes(256, false), 32 * 1024);
  EXPECT_EQ(wide_smem_bytes(256, 2, 3, 1, true) - wide_smem_bytes(256, 2, 3, 1, false), -3 * 16 * 1024);
  EXPECT_GT(wide_smem_bytes(256, 2, 3), kWideSmemLimit);          // 64 KB of Q + 3 x 64 KB
  EXPECT_LE(wide_smem_bytes(256, 2, 3, 1, true), kWideSmemLimit);  // 64 KB + 3 x 48 KB
  EXPECT_EQ(wide_q_bufs(256, 2, 2, true, true), 2);                // 128 KB + 2 x 48 KB
  EXPECT_EQ(wide_q_bufs(128, 2, 3, true, true), 2);                // 64 KB + 3 x 48 KB
  auto fp8 = [](AttentionProblem p) {
    p.types.q = p.types.kv = DType::e4m3;
    return p;
  };
  // d256 persistent: 3 slots (one Q tile) by default; 2 slots leave room for Q ahead.
  const auto d256 = fp8(uniform(1, 8192, 8192, 32, 2, 256));
  const auto deep = make_unified_launch_plan(d256, knobs({{"ATTNBENCH_SM90_PERSISTENT", "1"}}), 132);
  EXPECT_EQ(deep.wide_stages, 3) << deep.summary;
  EXPECT_EQ(deep.wide_q_bufs, 1) << deep.summary;
  const auto ahead =
      make_unified_launch_plan(d256, knobs({{"ATTNBENCH_SM90_PERSISTENT", "1"}, {"ATTNBENCH_SM90_STAGES", "2"}}), 132);
  EXPECT_EQ(ahead.wide_q_bufs, 2) << ahead.summary;
  const auto d128 = make_unified_launch_plan(fp8(uniform(1, 8192, 8192, 32, 32, 128)),
                                             knobs({{"ATTNBENCH_SM90_PERSISTENT", "1"}}), 132);
  EXPECT_EQ(d128.wide_stages, 3) << d128.summary;
  EXPECT_EQ(d128.wide_q_bufs, 2) << d128.summary;
  // 4 slots of 48 KB fit beside d128's one Q tile; the knob check counts the sized slots.
  EXPECT_EQ(wide_knob_conflict(fp8(uniform(1, 8192, 8192, 32, 32, 128)), knobs({{"ATTNBENCH_SM90_STAGES", "4"}})), "");
  EXPECT_NE(wide_knob_conflict(uniform(1, 8192, 8192, 32, 32, 128), knobs({{"ATTNBENCH_SM90_STAGES", "4"}})), "");
}

// Q and O by TMA: a warpgroup's 64 rows are one box when its tokens per head divide 64 or are a multiple of it.
TEST(CudaWideDispatch, QoByTmaWhereAWarpgroupsRowsAreOneBox) {
  for (int tq : {1, 2, 4, 8, 16, 32, 64, 128, 192}) EXPECT_TRUE(wide_qo_boxes(tq)) << tq;
  for (int tq : {0, 3, 21, 42, 96}) EXPECT_FALSE(wide_qo_boxes(tq)) << tq;
  const auto plan = [](const AttentionProblem& p, std::map<std::string, std::string> o) {
    o["ATTNBENCH_SM90_PATH"] = "wide";
    return make_unified_launch_plan(p, knobs(o), 132);
  };
  const AttentionProblem gqa = uniform(1, 4096, 4096, 12, 4, 128);  // group 3, long: no packing
  EXPECT_TRUE(plan(gqa, {}).wide_qo_tma);
  EXPECT_FALSE(plan(gqa, {{"ATTNBENCH_SM90_QO", "threads"}}).wide_qo_tma);
  const auto three = plan(gqa, {{"ATTNBENCH_SM90_GQA_PACK", "3"}});  // 42 tokens per head
  EXPECT_FALSE(three.wide_qo_tma) << three.summary;
  EXPECT_NE(three.summary.find("qo=threads"), std::string::npos) << three.summary;
  const auto d64 = plan(uniform(1, 700, 700, 16, 8, 64), {{"ATTNBENCH_SM90_GQA_PACK", "2"}});  // 192 / 2 = 96
  EXPECT_EQ(d64.wide_tq, 96);
  EXPECT_FALSE(d64.wide_qo_tma) << d64.summary;
  AttentionProblem fp8 = uniform(1, 4096, 4096, 16, 16, 128);
  fp8.types.q = fp8.types.kv = DType::e4m3;
  EXPECT_FALSE(plan(fp8, {}).wide_qo_tma);
  // The plan counts a barrier per Q tile (2 tiles x kWideMaxWgs) beside the rings' five per slot, and the bytes did
  // not move a default depth or Q-ahead choice.
  EXPECT_EQ(wide_smem_bytes(128, 2, 3) - 2 * 64 * 128 * 2 - 3 * 2 * 128 * 128 * 2,
            (5 * kWideMaxStages + 2 * kWideMaxWgs) * 8 + kWideScratchBytes + 1024);
  EXPECT_EQ(wide_default_stages(128, 2), 3);
  EXPECT_EQ(wide_default_stages(128, 2, true), 2);
  EXPECT_EQ(wide_default_stages(64, 3, true), 4);
  EXPECT_EQ(wide_q_bufs(128, 2, 2, true), 2);
}

TEST(CudaWideDispatch, PersistentCtasLoadTheNextQAheadWhereASecondTileFits) {
  // Two Q tiles where they fit beside the ring, and only for persistent CTAs (one unit per CTA has no next Q).
  EXPECT_EQ(wide_q_bufs(128, 2, 2, true), 2);   // 64 KB of Q + 128 KB of ring
  EXPECT_EQ(wide_q_bufs(128, 2, 3, true), 1);   // 64 KB + 192 KB does not fit
  EXPECT_EQ(wide_q_bufs(128, 2, 2, false), 1);
  EXPECT_EQ(wide_q_bufs(64, 3, 4, true), 2);    // 48 KB + 128 KB
  EXPECT_EQ(wide_q_bufs(256, 2, 2, true), 1);   // 128 KB + 128 KB does not fit
  EXPECT_EQ(wide_q_bufs(256, 1, 2, true), 2);
  for (int d : {64, 128, 256})
    for (int wgs = 1; wgs <= wide_max_wgs(d); ++wgs)
      for (int st = 2; st <= kWideMaxStages; ++st)
        if (wide_q_bufs(d, wgs, st, true) == 2) { EXPECT_LE(wide_smem_bytes(d, wgs, st, 2), kWideSmemLimit); }
  const auto p = uniform(1, 8192, 8192, 32, 32, 128);
  const auto ahead = make_unified_launch_plan(
      p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_PERSISTENT", "1"}, {"ATTNBENCH_SM90_STAGES", "2"}}),
      132);
  EXPECT_EQ(ahead.wide_q_bufs, 2);
  EXPECT_NE(ahead.summary.find("q-ahead"), std::string::npos) << ahead.summary;
  const auto one = make_unified_launch_plan(
      p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_PERSISTENT", "0"}, {"ATTNBENCH_SM90_STAGES", "2"}}),
      132);
  EXPECT_EQ(one.wide_q_bufs, 1);
  EXPECT_EQ(one.summary.find("q-ahead"), std::string::npos) << one.summary;
}

TEST(CudaWideDispatch, DecodeStays3D) {
  const auto wide = knobs({{"ATTNBENCH_SM90_PATH", "wide"}});
  // Decode and short-q / long-KV problems stay 3D whatever the 2D regime.
  const auto lp = make_unified_launch_plan(uniform(4, 1, 4096, 32, 8, 128), wide, 132);
  EXPECT_EQ(lp.path, UnifiedPath::decode_3d);
  EXPECT_EQ(lp.wide_wgs, 0);
}

TEST(CudaWideDispatch, AutoFollowsTheMeasurement) {
  // auto (kernels/NOTES.md, wide v3/v4 and session 24): wide with TMA K/V (block_size % 64 == 0, or 16 or 32 for a
  // 16-bit cache) from max_seqlen_q 128 at d128 and d256 and from 256 at d64, where it measured faster than the narrow
  // kernel; narrow elsewhere (cp.async K/V measured slower; shorter queries measured slower at d64 and not measured at
  // d128/d256).
  const auto k = knobs();
  EXPECT_EQ(k.path, PathKnob::automatic);
  for (const auto& p : {uniform(1, 8192, 8192, 32, 32, 128), uniform(1, 16384, 16384, 16, 16, 128, false),
                        uniform(1, 8192, 8192, 64, 8, 128), uniform(16, 256, 256, 32, 8, 128),
                        uniform(16, 128, 128, 32, 8, 128),
                        uniform(4, 300, 1200, 32, 8, 128)}) {
    EXPECT_TRUE(wide_auto(p));
    EXPECT_TRUE(choose_wide(p, k));
  }
  auto lp = make_unified_launch_plan(uniform(1, 8192, 8192, 32, 32, 128), k, 132);
  EXPECT_EQ(lp.wide_wgs, 2);
  EXPECT_TRUE(lp.wide_kv_tma);
  EXPECT_NE(lp.summary.find("kv=tma"), std::string::npos);
  auto p = uniform(1, 8192, 8192, 32, 32, 128);
  p.block_size = 128;
  EXPECT_TRUE(choose_wide(p, k));
  // Pages of other sizes: a 16-bit cache's pages of 16 or 32 tokens land by TMA (a box per page) and take the wide
  // kernel under auto (measured faster than narrow on every small_pages row); 48 and 80 take the cp.async gather,
  // narrow under auto, wide only when forced.
  for (int bs : {16, 32, 48, 80}) {
    p.block_size = bs;
    const bool tma = bs <= 32;
    EXPECT_EQ(wide_auto(p), tma) << bs;
    EXPECT_EQ(choose_wide(p, k), tma) << bs;
    EXPECT_TRUE(choose_wide(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}}))) << bs;
    lp = make_unified_launch_plan(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}}), 132);
    EXPECT_EQ(lp.wide_kv_tma, tma) << bs;
    EXPECT_NE(lp.summary.find(tma ? "kv=tma" : "kv=cp.async"), std::string::npos) << bs;
  }
  EXPECT_EQ(wide_kv_box_tokens(16), 16);
  EXPECT_EQ(wide_kv_box_tokens(32), 32);
  EXPECT_EQ(wide_kv_box_tokens(64), 64);
  EXPECT_EQ(wide_kv_box_tokens(192), 64);
  EXPECT_FALSE(wide_kv_tma(16, true)) << "8-bit codes land in 64-token boxes only";
  EXPECT_FALSE(wide_kv_tma(32, true));
  EXPECT_TRUE(wide_kv_tma(128, true));
  EXPECT_FALSE(choose_wide(uniform(16, 127, 127, 32, 8, 128), k));  // below the measured range
  // d64: wide from S256 (lost at B32 S128), with 3 consumer warpgroups, 2 up to S256; d256: wide from S128.
  EXPECT_TRUE(choose_wide(uniform(1, 4096, 4096, 16, 16, 64), k));
  EXPECT_TRUE(choose_wide(uniform(16, 256, 256, 16, 16, 64), k));
  EXPECT_FALSE(choose_wide(uniform(32, 128, 128, 16, 16, 64), k));
  EXPECT_FALSE(choose_wide(uniform(8, 255, 255, 16, 16, 64), k));
  EXPECT_EQ(make_unified_launch_plan(uniform(2, 8192, 8192, 32, 32, 64), k, 132).wide_wgs, 3);
  EXPECT_EQ(make_unified_launch_plan(uniform(8, 257, 257, 32, 32, 64), k, 132).wide_wgs, 3);
  EXPECT_EQ(make_unified_launch_plan(uniform(16, 256, 256, 16, 16, 64), k, 132).wide_wgs, 2);
  EXPECT_TRUE(choose_wide(uniform(1, 4096, 4096, 16, 16, 256), k));
  EXPECT_TRUE(choose_wide(uniform(1, 2048, 2048, 32, 2, 256), k));  // the gated block's SDPA at S2048
  auto p256 = uniform(1, 4096, 4096, 16, 16, 256);
  p256.block_size = 16;  // a box per page: wide (1.85x the narrow kernel's speed measured at S4096)
  EXPECT_TRUE(choose_wide(p256, k));
  p256.block_size = 48;  // cp.async gather: narrow
  EXPECT_FALSE(choose_wide(p256, k));
  const auto narrow = knobs({{"ATTNBENCH_SM90_PATH", "narrow"}});
  EXPECT_FALSE(choose_wide(uniform(1, 8192, 8192, 32, 32, 128), narrow));
  EXPECT_EQ(make_unified_launch_plan(uniform(1, 8192, 8192, 32, 32, 128), narrow, 132).wide_wgs, 0);
  // Decode stays 3D under auto.
  EXPECT_EQ(make_unified_launch_plan(uniform(4, 1, 4096, 32, 8, 128), k, 132).path, UnifiedPath::decode_3d);
}

}  // namespace
}  // namespace attnbench::cuda
