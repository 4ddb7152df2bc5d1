// cuda.unified host heuristics: split count, graph replay, dispatcher choice, launch geometry and workspace.
// Pure host code: runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "../kernels/cuda/heuristics.hpp"
#include "../kernels/cuda/resolve.hpp"

#ifdef ATTNBENCH_WITH_CUDA
#include "attnbench/backends.hpp"
#endif

namespace attnbench::cuda {
namespace {

AttentionProblem uniform(int batch, int q, int kv, int heads, int kv_heads, int d, bool causal = true) {
  AttentionProblem p;
  p.q_lens.assign(batch, q);
  p.kv_lens.assign(batch, kv);
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.head_size = d;
  p.causal = causal;
  return p;
}

KnobValues values(std::map<std::string, std::string> o = {}) { return KnobValues::resolve(o, /*read_env=*/false); }
UnifiedKnobs knobs(std::map<std::string, std::string> o = {}) { return UnifiedKnobs::parse(values(std::move(o))); }
Resolution resolve_all_built(const AttentionProblem& p, const UnifiedKnobs& k) {
  return resolve(p, k, DeviceInfo{}, [](const InstanceKey&) { return true; });
}

// The split model against the split sweep it was fitted to (kernels/NOTES.md, decode v2): the fastest measured
// split count of each decode shape, or one within its noise.
int model_splits(const AttentionProblem& p) {
  const auto lp = make_unified_launch_plan(p, knobs(), 132);
  return lp.splits;
}

TEST(CudaSplitModel, PicksTheSweepsFastestSplits) {
  EXPECT_EQ(model_splits(uniform(32, 1, 8192, 32, 8, 128)), 1);   // 256 CTAs already fill 264 slots
  EXPECT_EQ(model_splits(uniform(128, 1, 4096, 32, 8, 128)), 1);  // 1024 CTAs
  EXPECT_EQ(model_splits(uniform(16, 1, 2048, 32, 32, 64)), 1);   // d64: 512 CTAs
  EXPECT_EQ(model_splits(uniform(8, 1, 4096, 32, 8, 128)), 2);    // 64 columns: one CTA per SM, not 2 x 2
  EXPECT_EQ(model_splits(uniform(8, 1, 32768, 32, 8, 128)), 2);
  EXPECT_EQ(model_splits(uniform(32, 1, 8192, 32, 2, 256)), 2);   // d256: one CTA per SM
  EXPECT_EQ(model_splits(uniform(1, 1, 4096, 32, 8, 128)), 16);   // B1: 4 tiles per split on 128 SMs
  EXPECT_EQ(model_splits(uniform(8, 8, 8192, 32, 8, 128)), 2);    // q8: 2 row tiles share K/V through L2
  const int d256_b1 = model_splits(uniform(1, 1, 32768, 32, 2, 256));  // 2 columns of 512 tiles: a wave of SMs
  EXPECT_GE(d256_b1, 48);
  EXPECT_LE(2 * d256_b1, 132);
}

TEST(CudaSplitModel, TimeFollowsTheBusiestSm) {
  const DecodeSplitCost c = decode_split_cost(uniform(8, 1, 4096, 32, 8, 128), 132);
  EXPECT_EQ(c.ctas_per_sm, 2);
  EXPECT_DOUBLE_EQ(c.tile_bytes, 2.0 * 64 * 128 * 2);
  EXPECT_DOUBLE_EQ(c.partial_bytes, 4.0 * 4 * 128);  // 4 packed rows (group 4, one token)
  EXPECT_EQ(c.ctas_unsplit, 64);
  EXPECT_EQ(c.n_tiles, 64);
  EXPECT_EQ(c.column_tiles, 64 * 64);
  // 3 splits leave 60 SMs with two CTAs of 22 tiles: slower than 2 splits' one CTA of 32 tiles per SM.
  EXPECT_GT(decode_split_time_us(c, 3), decode_split_time_us(c, 2));
  // Past the resident slots a second wave costs its fixed time.
  EXPECT_GT(decode_split_time_us(c, 8), decode_split_time_us(c, 4));
  // One split has no merge: its time is the stream of a column on its own SM and one wave.
  const DecodeSplitCost one = decode_split_cost(uniform(1, 1, 640, 32, 8, 128), 132);
  EXPECT_DOUBLE_EQ(decode_split_time_us(one, 1), 10 * one.tile_bytes / one.cta_bytes_per_us + kDecodeCtaFixedUs);
}

TEST(CudaSplitModel, RaggedBatchesSplitByTheirTotalWork) {
  AttentionProblem p = uniform(4, 1, 64, 32, 8, 128);
  p.kv_lens = {523, 37, 2011, 1328};  // the decode group's ragged shape: 9 + 1 + 32 + 21 tiles per kv head
  const DecodeSplitCost c = decode_split_cost(p, 132);
  EXPECT_EQ(c.n_tiles, 32);
  EXPECT_EQ(c.column_tiles, 8 * 63);
  // 4 splits give 128 CTAs, the longest 8 tiles; 8 give 256 CTAs over 2 slots per SM, ~2 tiles on average and 4
  // at most: faster (sweep: 12.53 against 13.37 us), though a uniform batch of the longest would not be.
  EXPECT_LT(decode_split_time_us(c, 8), decode_split_time_us(c, 4));
  EXPECT_EQ(decode_splits(c), 8);
}

TEST(CudaSplitModel, NeverMoreSplitsThanTilesOrCap) {
  EXPECT_EQ(decode_splits(decode_split_cost(uniform(1, 1, 64, 32, 8, 128), 132)), 1);  // one tile
  EXPECT_LE(decode_splits(decode_split_cost(uniform(1, 1, 448, 32, 8, 128), 132)), 7);
  EXPECT_LE(decode_splits(decode_split_cost(uniform(1, 1, 1 << 22, 32, 1, 128), 132)), kMaxSplits);
  EXPECT_EQ(decode_split_cost(uniform(1, 1, 64, 32, 8, 128), 0).sms, kDefaultSmCount);  // no device: the default
}

TEST(CudaSplitModel, MergeInOneLevelWhereThePartialsAreSmall) {
  EXPECT_EQ(decode_merge_groups(1, 1), 1);
  EXPECT_EQ(decode_merge_counters(8, 8), 1);
  EXPECT_EQ(decode_merge_groups(9, 8), 2);
  EXPECT_EQ(decode_merge_counters(9, 8), 3);
  EXPECT_EQ(decode_merge_counters(16, 16), 1);
  EXPECT_EQ(decode_merge_counters(kMaxSplits, kDecodeMergeGroup), kMaxSplits / kDecodeMergeGroup + 1);
  // d128 B1: 16 partials of 4 rows x 128 (2 KB): one level; d256 B1: 64 of 16 x 256 (16 KB): groups of 8.
  EXPECT_EQ(decode_merge_group(16, 4.0 * 4 * 128), 16);
  EXPECT_EQ(decode_merge_group(64, 4.0 * 16 * 256), kDecodeMergeGroup);
  EXPECT_EQ(decode_merge_group(5, 4.0 * 16 * 256), 5);  // within one group
  EXPECT_LT(decode_merge_us(64, 8, 4.0 * 16 * 256), decode_merge_us(64, 64, 4.0 * 16 * 256));
  EXPECT_EQ(decode_merge_us(1, 1, 1e6), 0.0);
}

TEST(CudaDispatcher, DecodeGoes3DAndPrefill2D) {
  EXPECT_EQ(choose_path(uniform(1, 1, 4096, 32, 8, 128)), UnifiedPath::decode_3d);
  EXPECT_EQ(choose_path(uniform(1, 1, 16, 32, 32, 64)), UnifiedPath::decode_3d);
  EXPECT_EQ(choose_path(uniform(1, 8192, 8192, 32, 32, 128)), UnifiedPath::prefill_2d);
  EXPECT_EQ(choose_path(uniform(16, 256, 256, 32, 8, 128)), UnifiedPath::prefill_2d);
  // Short q over a long KV (speculative decode): packed rows 4 x 4 = 16 go 3D; 512 x 4 do not.
  EXPECT_EQ(choose_path(uniform(4, 4, 8192, 32, 8, 128)), UnifiedPath::decode_3d);
  EXPECT_EQ(choose_path(uniform(8, 512, 4096, 32, 8, 128)), UnifiedPath::prefill_2d);
  EXPECT_EQ(choose_path(uniform(4, 4, 64, 32, 8, 128)), UnifiedPath::prefill_2d);  // short KV
}

TEST(CudaGraphHeuristic, FollowsTheDesignRule) {
  const auto k = knobs();
  EXPECT_TRUE(recommend_graph_replay(uniform(8, 1, 4096, 32, 8, 128), k, false));
  EXPECT_TRUE(recommend_graph_replay(uniform(4, 768, 768, 32, 8, 128), k, false));
  EXPECT_FALSE(recommend_graph_replay(uniform(4, 769, 769, 32, 8, 128), k, false));
  AttentionProblem windowed = uniform(8, 1, 4096, 32, 8, 128);
  windowed.features.window_left = 1024;
  EXPECT_FALSE(recommend_graph_replay(windowed, k, false)) << "feature-flagged problems are excluded";
  EXPECT_FALSE(recommend_graph_replay(uniform(1, 8192, 8192, 32, 32, 128), k, false));
  // Never while the caller captures.
  EXPECT_FALSE(recommend_graph_replay(uniform(8, 1, 4096, 32, 8, 128), k, true));
  EXPECT_FALSE(recommend_graph_replay(uniform(4, 256, 256, 32, 8, 128), k, true));
}

TEST(CudaGraphHeuristic, KnobsToggleEachPath) {
  const auto decode = uniform(8, 1, 4096, 32, 8, 128);
  const auto prefill = uniform(4, 256, 256, 32, 8, 128);
  const auto no3d = knobs({{"ATTNBENCH_3D_GRAPH", "0"}});
  EXPECT_FALSE(recommend_graph_replay(decode, no3d, false));
  EXPECT_TRUE(recommend_graph_replay(prefill, no3d, false));
  const auto no2d = knobs({{"ATTNBENCH_2D_GRAPH", "0"}});
  EXPECT_TRUE(recommend_graph_replay(decode, no2d, false));
  EXPECT_FALSE(recommend_graph_replay(prefill, no2d, false));
}

TEST(CudaSupports, DeclinesWithAReason) {
  EXPECT_TRUE(unified_supports(uniform(1, 8, 8, 4, 4, 128)).ok);
  auto p = uniform(1, 8, 8, 4, 4, 96);
  EXPECT_FALSE(unified_supports(p).ok);
  EXPECT_NE(unified_supports(p).reason.find("head_size"), std::string::npos);
  p = uniform(1, 8, 8, 4, 4, 64);
  p.block_size = 24;
  EXPECT_FALSE(unified_supports(p).ok);
  EXPECT_NE(unified_supports(p).reason.find("block_size"), std::string::npos);
  p.block_size = 48;
  EXPECT_TRUE(unified_supports(p).ok);
  p.head_size = 80;
  EXPECT_EQ(resolve_all_built(p, knobs()).support.reason, "head_size 80 not in {64, 128, 256}");
}

TEST(CudaLaunchPlan, PrefillGridFollowsTheKnobs) {
  const auto p = uniform(2, 1000, 1000, 16, 4, 128);
  const std::pair<const std::string, std::string> narrow = {"ATTNBENCH_SM90_PATH", "narrow"};  // auto is wide here
  auto lp = make_unified_launch_plan(p, knobs({narrow}), 132);  // default 4x32: 4 warps x 32 rows
  EXPECT_EQ(lp.path, UnifiedPath::prefill_2d);
  EXPECT_EQ(lp.warps, 4);
  EXPECT_EQ(lp.rows_per_warp, 32);
  EXPECT_EQ(lp.block_m, 128);
  EXPECT_EQ(lp.m_tiles, 8);
  EXPECT_EQ(lp.grid_x, 16);  // heads first by default
  EXPECT_EQ(lp.grid_y, 8);
  EXPECT_EQ(lp.grid_z, 2);
  EXPECT_EQ(lp.workspace_bytes, 0u);
  lp = make_unified_launch_plan(p, knobs({narrow, {"ATTNBENCH_SM90_NARROW_WARPS", "8"}}), 132);
  EXPECT_EQ(lp.warps, 8);
  EXPECT_EQ(lp.rows_per_warp, 16);
  EXPECT_EQ(lp.block_m, 128);
  lp = make_unified_launch_plan(
      p, knobs({narrow, {"ATTNBENCH_SM90_NARROW_WARPS", "4"}, {"ATTNBENCH_Q_MAJOR_GRID", "1"}}), 132);
  EXPECT_EQ(lp.warps, 4);
  EXPECT_EQ(lp.block_m, 64);
  EXPECT_EQ(lp.m_tiles, 16);
  EXPECT_EQ(lp.grid_x, 16);  // q-tiles on x
  EXPECT_EQ(lp.grid_y, 16);
  EXPECT_TRUE(lp.q_major);
  EXPECT_EQ(make_unified_launch_plan(uniform(1, 300, 300, 8, 8, 256), knobs({narrow}), 132).block_n, 32);
  EXPECT_EQ(make_unified_launch_plan(uniform(1, 300, 300, 8, 8, 256), knobs(), 132).block_n, 64);  // wide
}

TEST(CudaLaunchPlan, ThirtyTwoRowsPerWarpVariant) {
  const auto w4x32 = knobs({{"ATTNBENCH_SM90_NARROW_WARPS", "4x32"}, {"ATTNBENCH_SM90_PATH", "narrow"}});
  auto lp = make_unified_launch_plan(uniform(1, 1000, 1000, 8, 8, 128), w4x32, 132);
  EXPECT_EQ(lp.warps, 4);
  EXPECT_EQ(lp.rows_per_warp, 32);
  EXPECT_EQ(lp.block_m, 128);
  EXPECT_EQ(lp.m_tiles, 8);
  EXPECT_NE(lp.summary.find("rows/warp=32"), std::string::npos);
  EXPECT_EQ(make_unified_launch_plan(uniform(1, 100, 100, 8, 8, 64), w4x32, 132).rows_per_warp, 32);
  // d256 has no 32-row kernel: the same 128-row tile from 8 warps x 16 rows.
  lp = make_unified_launch_plan(uniform(1, 1000, 1000, 8, 8, 256), w4x32, 132);
  EXPECT_EQ(lp.warps, 8);
  EXPECT_EQ(lp.rows_per_warp, 16);
  EXPECT_EQ(lp.block_m, 128);
  EXPECT_THROW(knobs({{"ATTNBENCH_SM90_NARROW_WARPS", "8x32"}}), std::invalid_argument);
}

TEST(CudaLaunchPlan, DecodeWorkspaceMatchesSplits) {
  const auto p = uniform(1, 1, 4096, 32, 8, 128);
  auto lp = make_unified_launch_plan(p, knobs(), 132);
  EXPECT_EQ(lp.path, UnifiedPath::decode_3d);
  EXPECT_GT(lp.splits, 1);
  EXPECT_EQ(lp.grid_x, lp.splits);
  EXPECT_EQ(lp.grid_y, 8);  // kv heads x one row tile (group 4 <= 16 rows)
  // Partials (LSE + O per split and row), then the merge's int32 arrival counters per (sequence, kv head, row
  // tile): 16 small partials merge in one level, one counter.
  EXPECT_EQ(lp.splits, 16);
  EXPECT_EQ(lp.merge_group, 16);
  EXPECT_EQ(decode_counter_count(p, 16, 16), 8);
  EXPECT_EQ(decode_counter_count(p, 16, 8), 8 * 3);  // 2 groups of 8, a counter each and one for the groups
  EXPECT_EQ(lp.workspace_bytes, static_cast<std::size_t>(lp.splits) * 32 * (128 + 1) * 4 + 8 * 4);
  const auto d256 = make_unified_launch_plan(uniform(1, 1, 32768, 32, 2, 256), knobs(), 132);
  EXPECT_EQ(d256.merge_group, kDecodeMergeGroup);
  EXPECT_NE(d256.summary.find("groups of 8"), std::string::npos) << d256.summary;
  // Forced splits, capped by the KV tiles.
  lp = make_unified_launch_plan(p, knobs({{"ATTNBENCH_3D_SPLITS", "3"}}), 132);
  EXPECT_EQ(lp.splits, 3);
  EXPECT_EQ(lp.workspace_bytes, 3u * 32 * 129 * 4 + 8 * 4);
  EXPECT_NE(lp.summary.find("+merge"), std::string::npos);
  lp = make_unified_launch_plan(uniform(1, 1, 100, 32, 8, 128), knobs({{"ATTNBENCH_3D_SPLITS", "50"}}), 132);
  EXPECT_EQ(lp.splits, 2);  // 100 keys = 2 tiles of 64
  // One split: the kernel writes the output directly, no workspace.
  lp = make_unified_launch_plan(uniform(128, 1, 4096, 32, 8, 128), knobs(), 132);
  EXPECT_EQ(lp.splits, 1);
  EXPECT_EQ(lp.workspace_bytes, 0u);
  // Group of 32 packs into two 16-row tiles.
  lp = make_unified_launch_plan(uniform(2, 1, 2048, 32, 1, 128), knobs(), 132);
  EXPECT_EQ(lp.m_tiles, 2);
  EXPECT_EQ(lp.grid_y, 2);
  EXPECT_EQ(decode_counter_count(uniform(2, 1, 2048, 32, 1, 128), 1, 1), 2 * 1 * 2);
  EXPECT_EQ(decode_workspace_bytes(uniform(2, 1, 2048, 32, 1, 128), 1, 1), 0u);
}

// The partials after the LSEs take float4 stores: the LSE region is padded to 4 floats whatever the row count.
TEST(CudaHeuristics, DecodeWorkspaceKeepsThePartialsSixteenByteAligned) {
  EXPECT_EQ(decode_lse_floats(7, 42), 296);
  EXPECT_EQ(decode_lse_floats(2, 42), 84);
  auto p = uniform(3, 1, 3000, 14, 2, 128);  // 42 rows
  const std::size_t counters = static_cast<std::size_t>(decode_counter_count(p, 7, 7)) * 4;
  EXPECT_EQ(decode_workspace_bytes(p, 7, 7), (296 + 7 * 42 * 128) * 4 + counters);
  EXPECT_EQ((decode_workspace_bytes(p, 7, 7) - counters) % 16, 0u);
}

TEST(CudaSupports, AcceptsTheOutputGateOnBothPaths) {
  auto p = uniform(1, 1, 4096, 32, 8, 128);
  p.fusion.output_gate = true;
  EXPECT_TRUE(unified_supports(p).ok);
  p = uniform(1, 512, 512, 8, 8, 64);
  p.fusion.output_gate = true;
  EXPECT_TRUE(unified_supports(p).ok);
}

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
  // auto: persistent for equal-length batches from max_seqlen_q 4096, one CTA per tile otherwise.
  EXPECT_TRUE(make_unified_launch_plan(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}}), 132).persistent);
  EXPECT_TRUE(wide_persistent(uniform(2, 4096, 4096, 32, 32, 128), knobs()));
  EXPECT_FALSE(wide_persistent(uniform(4, 2048, 2048, 32, 32, 128), knobs()));
  EXPECT_FALSE(wide_persistent(uniform(8, 1024, 1024, 32, 8, 128), knobs()));
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
  // auto (kernels/NOTES.md, wide v3/v4): wide with TMA K/V (block_size % 64 == 0) from max_seqlen_q 128 at d128 and
  // d256 and from 512 at d64, where it measured faster than the narrow kernel; narrow elsewhere (cp.async K/V at
  // block_size 32 measured slower; shorter queries measured slower at d64 and not measured at d128/d256).
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
  for (int bs : {16, 32, 48, 80}) {  // the cp.async gather: narrow under auto, still wide when forced
    p.block_size = bs;
    EXPECT_FALSE(wide_auto(p)) << bs;
    EXPECT_FALSE(choose_wide(p, k)) << bs;
    EXPECT_TRUE(choose_wide(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}}))) << bs;
    lp = make_unified_launch_plan(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}}), 132);
    EXPECT_FALSE(lp.wide_kv_tma);
    EXPECT_NE(lp.summary.find("kv=cp.async"), std::string::npos);
  }
  EXPECT_FALSE(choose_wide(uniform(16, 127, 127, 32, 8, 128), k));  // below the measured range
  // d64: wide from S512 (lost at B32 S128), with 3 consumer warpgroups; d256: wide from S128.
  EXPECT_TRUE(choose_wide(uniform(1, 4096, 4096, 16, 16, 64), k));
  EXPECT_TRUE(choose_wide(uniform(8, 512, 512, 16, 16, 64), k));
  EXPECT_FALSE(choose_wide(uniform(32, 128, 128, 16, 16, 64), k));
  EXPECT_FALSE(choose_wide(uniform(8, 511, 511, 16, 16, 64), k));
  EXPECT_EQ(make_unified_launch_plan(uniform(2, 8192, 8192, 32, 32, 64), k, 132).wide_wgs, 3);
  EXPECT_TRUE(choose_wide(uniform(1, 4096, 4096, 16, 16, 256), k));
  EXPECT_TRUE(choose_wide(uniform(1, 2048, 2048, 32, 2, 256), k));  // the gated block's SDPA at S2048
  auto p256 = uniform(1, 4096, 4096, 16, 16, 256);
  p256.block_size = 16;  // cp.async gather: narrow
  EXPECT_FALSE(choose_wide(p256, k));
  const auto narrow = knobs({{"ATTNBENCH_SM90_PATH", "narrow"}});
  EXPECT_FALSE(choose_wide(uniform(1, 8192, 8192, 32, 32, 128), narrow));
  EXPECT_EQ(make_unified_launch_plan(uniform(1, 8192, 8192, 32, 32, 128), narrow, 132).wide_wgs, 0);
  // Decode stays 3D under auto.
  EXPECT_EQ(make_unified_launch_plan(uniform(4, 1, 4096, 32, 8, 128), k, 132).path, UnifiedPath::decode_3d);
}

#ifdef ATTNBENCH_WITH_CUDA
TEST(CudaUnifiedKernel, PlanCarriesWorkspaceGraphAndSummary) {
  auto k = make_cuda_unified();
  EXPECT_EQ(k->name(), "cuda.unified");
  const auto p = uniform(1, 1, 4096, 32, 8, 128);
  auto plan = k->plan(p, values({{"ATTNBENCH_3D_SPLITS", "4"}}));
  EXPECT_EQ(plan->workspace_bytes, decode_workspace_bytes(p, 4, 4));
  EXPECT_TRUE(plan->graph_replay);
  EXPECT_NE(plan->summary.find("3d splits=4"), std::string::npos);
  auto plan2 = k->plan(uniform(1, 2048, 2048, 8, 8, 64),
                       values({{"ATTNBENCH_SM90_NARROW_WARPS", "8"}, {"ATTNBENCH_SM90_PATH", "narrow"}}));
  EXPECT_EQ(plan2->workspace_bytes, 0u);
  EXPECT_FALSE(plan2->graph_replay);
  EXPECT_NE(plan2->summary.find("2d warps=8"), std::string::npos);
  EXPECT_NE(k->plan(uniform(1, 2048, 2048, 8, 8, 128), values({{"ATTNBENCH_SM90_PATH", "narrow"}}))
                ->summary.find("2d warps=4 rows/warp=32"),
            std::string::npos);
  EXPECT_NE(k->plan(uniform(1, 2048, 2048, 8, 8, 128), values())->summary.find("2d wide wgmma consumer-wgs=2"),
            std::string::npos);
  auto gp = uniform(1, 2048, 2048, 8, 8, 64);
  gp.fusion.output_gate = true;
  EXPECT_TRUE(k->supports(gp, values()).ok);
  EXPECT_NE(k->plan(gp, values())->summary.find("+gate"), std::string::npos);
  EXPECT_FALSE(k->supports(uniform(1, 8, 8, 4, 4, 96), values()).ok);
  const Support three = k->supports(uniform(1, 2048, 2048, 8, 8, 128),
                                    values({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", "3"}}));
  EXPECT_FALSE(three.ok);
  EXPECT_NE(three.reason.find("ATTNBENCH_SM90_FLASH_WIDE=3"), std::string::npos) << three.reason;
  EXPECT_NE(k->plan(uniform(1, 2048, 2048, 8, 8, 256), values({{"ATTNBENCH_SM90_PATH", "wide"}}))
                ->summary.find("2d wide wgmma consumer-wgs=2 tile=128x64 kv=tma stages=2"),
            std::string::npos);
}
#endif

}  // namespace
}  // namespace attnbench::cuda
