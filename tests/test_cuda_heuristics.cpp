// cuda.unified host heuristics: split count, graph replay, dispatcher choice, launch geometry and workspace (the
// wide kernel's: test_cuda_wide_dispatch.cpp).
// Pure host code: runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "cuda_heuristics_helpers.hpp"

#ifdef ATTNBENCH_WITH_CUDA
#include "attnbench/backends.hpp"
#endif

namespace attnbench::cuda {
namespace {

using namespace heuristics_test;

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

// The features rows of the same sweep (kernels/NOTES.md, features v6; µs at auto before the refit / the best):
// a features kernel's CTA streams slower, so columns that fill the SMs once still gain a second CTA per SM.
TEST(CudaSplitModel, PicksTheFeatureSweepsFastestSplits) {
  AttentionProblem mistral = uniform(8, 1, 32768, 32, 8, 128);
  mistral.features.window_left = 4096;
  EXPECT_EQ(model_splits(mistral), 4);  // 2: 45.4, 4: 42.6
  AttentionProblem gptoss = uniform(16, 1, 8192, 64, 8, 64);
  gptoss.features.sinks.assign(64, 2.f);
  EXPECT_EQ(model_splits(gptoss), 2);  // 1: 89.2, 2: 68.5
  AttentionProblem gemma = uniform(8, 1, 8192, 16, 8, 256);
  gemma.features.softcap = 50.f, gemma.features.window_left = 4096;
  EXPECT_EQ(model_splits(gemma), 2);  // 72.7; 4: 83.5
  AttentionProblem fp8 = uniform(64, 1, 8192, 32, 8, 128);
  fp8.types.kv = DType::e4m3;
  EXPECT_EQ(model_splits(fp8), 1);  // 338.3; 2: 349.1
  fp8 = uniform(1, 1, 32768, 32, 8, 128);
  fp8.types.kv = DType::e4m3;
  const int fp8_b1 = model_splits(fp8);  // 16: 35.8, 32: 34.6, 64: 42.9
  EXPECT_GE(fp8_b1, 16);
  EXPECT_LE(fp8_b1, 32);
}

TEST(CudaSplitModel, TimeFollowsTheBusiestSm) {
  const DecodeSplitCost c = decode_split_cost(uniform(8, 1, 4096, 32, 8, 128), 132, kDecodeStages);
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
  const DecodeSplitCost one = decode_split_cost(uniform(1, 1, 640, 32, 8, 128), 132, kDecodeStages);
  EXPECT_DOUBLE_EQ(decode_split_time_us(one, 1), 10 * one.tile_bytes / one.cta_bytes_per_us + kDecodeCtaFixedUs);
}

// An 8-bit cache's tile holds twice the keys in the same bytes: the same ring, shared memory and CTAs per SM, half
// the tiles per column, and the launch plan names the kernel's tile.
TEST(CudaSplitModel, EightBitTilesHoldTwiceTheKeysInTheSameBytes) {
  EXPECT_EQ(decode_block_n(2), 64);
  EXPECT_EQ(decode_block_n(1), 128);
  EXPECT_EQ(decode_smem_bytes(128, 1), decode_smem_bytes(128, 2));
  AttentionProblem p = uniform(8, 1, 4096, 32, 8, 128);
  p.types.kv = DType::e4m3;
  const DecodeSplitCost c = decode_split_cost(p, 132, kDecodeStages);
  EXPECT_EQ(c.ctas_per_sm, 2);
  EXPECT_DOUBLE_EQ(c.tile_bytes, 2.0 * 128 * 128 * 1);
  EXPECT_EQ(c.n_tiles, 32);
  EXPECT_EQ(make_unified_launch_plan(p, knobs(), 132).block_n, 128);
  p.features.window_left = 1000;  // keys [3095, 4096) from tile 24 of 128 keys: 8 tiles
  EXPECT_EQ(decode_visible_tiles(p, 0), 8);
}

// ATTNBENCH_3D_STAGES: 3 slots unless the knob names 6, which fits d64 and d128 (one d128 CTA per SM) and is
// declined at d256; under 6 the split model counts one CTA per SM (at the measured 3-slot rate), so a batch whose
// 3-slot grid already held one CTA per SM keeps its splits and the ring alone changes.
TEST(CudaSplitModel, TheDeepRingIsAKnobTheModelCounts) {
  EXPECT_TRUE(decode_ring_fits(64, 2, kDecodeDeepStages));
  EXPECT_TRUE(decode_ring_fits(128, 2, kDecodeDeepStages));
  EXPECT_TRUE(decode_ring_fits(128, 1, kDecodeDeepStages));
  EXPECT_FALSE(decode_ring_fits(256, 2, kDecodeDeepStages));
  EXPECT_TRUE(decode_ring_fits(256, 2, kDecodeStages));
  EXPECT_EQ(decode_smem_bytes(128, 2, 6), 16 * 128 * 2 + 6 * 2 * 64 * 128 * 2);
  EXPECT_EQ(decode_ctas_per_sm(128, 2, 6), 1);
  EXPECT_EQ(decode_ctas_per_sm(64, 2, 6), 2);

  const AttentionProblem b8 = uniform(8, 1, 4096, 32, 8, 128);
  const UnifiedLaunchPlan plain = make_unified_launch_plan(b8, knobs(), 132);
  EXPECT_EQ(plain.decode_stages, kDecodeStages);
  EXPECT_EQ(plain.summary.find("ring="), std::string::npos) << plain.summary;
  EXPECT_EQ(make_unified_launch_plan(b8, knobs({{"ATTNBENCH_3D_STAGES", "3"}}), 132).summary, plain.summary);
  const UnifiedLaunchPlan deep = make_unified_launch_plan(b8, knobs({{"ATTNBENCH_3D_STAGES", "6"}}), 132);
  EXPECT_EQ(deep.decode_stages, kDecodeDeepStages);
  EXPECT_NE(deep.summary.find(" ring=6"), std::string::npos) << deep.summary;
  const DecodeSplitCost c = decode_split_cost(b8, 132, kDecodeDeepStages);
  EXPECT_EQ(c.ctas_per_sm, 1);
  EXPECT_EQ(deep.splits, decode_splits(c));
  EXPECT_EQ(deep.splits, plain.splits);
  EXPECT_LE(deep.grid_x * deep.grid_y * deep.grid_z, 132) << "a second wave of one-CTA SMs: " << deep.summary;

  AttentionProblem d256 = uniform(1, 1, 32768, 32, 2, 256);
  EXPECT_TRUE(resolve_all_built(d256, knobs({{"ATTNBENCH_3D_STAGES", "3"}})).ok());
  const Resolution r = resolve_all_built(d256, knobs({{"ATTNBENCH_3D_STAGES", "6"}}));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.support.reason.find("ATTNBENCH_3D_STAGES=6"), std::string::npos) << r.support.reason;
  EXPECT_NE(r.support.reason.find("head size 256"), std::string::npos) << r.support.reason;
  d256.q_lens = {512};  // a 2D prefill ignores the decode ring
  d256.kv_lens = {512};
  EXPECT_TRUE(resolve_all_built(d256, knobs({{"ATTNBENCH_3D_STAGES", "6"}})).ok());
}

// A split count whose last split of the longest column gets no tile is never chosen: 33 splits of 256 tiles (8
// each) would model faster than 32 through a fractional mean, and the kernel would launch an idle CTA per column.
TEST(CudaSplitModel, NoChosenSplitIsEmpty) {
  EXPECT_TRUE(decode_splits_leave_one_empty(256, 33));
  EXPECT_FALSE(decode_splits_leave_one_empty(256, 32));
  EXPECT_FALSE(decode_splits_leave_one_empty(256, 1));
  EXPECT_FALSE(decode_splits_leave_one_empty(7, 4));  // 2 + 2 + 2 + 1
  EXPECT_TRUE(decode_splits_leave_one_empty(6, 4));   // 2 + 2 + 2 + 0
  for (DType kv : {DType::bf16, DType::e4m3})
    for (int kv_len : {4096, 9000, 32768, 100000})
      for (int batch : {1, 2, 8}) {
        AttentionProblem p = uniform(batch, 1, kv_len, 32, 8, 128);
        p.types.kv = kv;
        const DecodeSplitCost c = decode_split_cost(p, 132, kDecodeStages);
        EXPECT_FALSE(decode_splits_leave_one_empty(c.n_tiles, decode_splits(c)))
            << "B" << batch << " kv" << kv_len << " " << dtype_name(kv) << ": " << decode_splits(c) << " splits";
      }
}

TEST(CudaSplitModel, RaggedBatchesSplitByTheirTotalWork) {
  AttentionProblem p = uniform(4, 1, 64, 32, 8, 128);
  p.kv_lens = {523, 37, 2011, 1328};  // the decode group's ragged shape: 9 + 1 + 32 + 21 tiles per kv head
  const DecodeSplitCost c = decode_split_cost(p, 132, kDecodeStages);
  EXPECT_EQ(c.n_tiles, 32);
  EXPECT_EQ(c.column_tiles, 8 * 63);
  // 4 splits give 128 CTAs, the longest 8 tiles; 8 give 256 CTAs over 2 slots per SM, ~2 tiles on average and 4
  // at most: faster (sweep: 12.53 against 13.37 us), though a uniform batch of the longest would not be.
  EXPECT_LT(decode_split_time_us(c, 8), decode_split_time_us(c, 4));
  EXPECT_EQ(decode_splits(c), 8);
}

TEST(CudaSplitModel, NeverMoreSplitsThanTilesOrCap) {
  auto cost = [](const AttentionProblem& p, int sms) { return decode_split_cost(p, sms, kDecodeStages); };
  EXPECT_EQ(decode_splits(cost(uniform(1, 1, 64, 32, 8, 128), 132)), 1);  // one tile
  EXPECT_LE(decode_splits(cost(uniform(1, 1, 448, 32, 8, 128), 132)), 7);
  EXPECT_LE(decode_splits(cost(uniform(1, 1, 1 << 22, 32, 1, 128), 132)), kMaxSplits);
  EXPECT_EQ(cost(uniform(1, 1, 64, 32, 8, 128), 0).sms, kDefaultSmCount);  // no device: the default
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

// The separate merge kernel's block: 256 threads, four columns each across the head, enough split threads that
// each loads at most kDecodeMergeLoads partials where the block has room, the rest of the block in packed rows.
TEST(CudaSplitModel, SeparateMergeBlockCoversTheRowWithEveryLoadInFlight) {
  for (int d : {64, 128, 256})
    for (int splits : {2, 3, 16, 17, 64, 128}) {
      const DecodeMergeBlock b = decode_merge_block(d, splits);
      EXPECT_EQ(d / 4 * b.split_threads * b.rows, kDecodeMergeThreads) << "d" << d << " splits " << splits;
      EXPECT_TRUE(b.split_threads * kDecodeMergeLoads >= splits || d / 4 * b.split_threads == kDecodeMergeThreads)
          << "d" << d << " splits " << splits;
      EXPECT_LE(b.rows, kDecodeRowsPerCta);
    }
  EXPECT_EQ(decode_merge_block(256, 64).split_threads, 4);  // d256 B1: 16 splits per thread, one row per block
  EXPECT_EQ(decode_merge_block(256, 64).rows, 1);
  EXPECT_EQ(decode_merge_block(128, 16).split_threads, 1);  // d128 B1: 8 rows of one split thread
  EXPECT_EQ(decode_merge_block(128, 16).rows, 8);
  EXPECT_EQ(decode_merge_block(64, 2).rows, kDecodeRowsPerCta);
}

// auto: the separate merge from 8 splits on (the merge sweep's crossing), whatever decided the split count.
TEST(CudaLaunchPlan, AutoMergeIsSeparateFromEightSplits) {
  EXPECT_EQ(decode_auto_merge(7), DecodeMerge::fused);
  EXPECT_EQ(decode_auto_merge(kDecodeSeparateMergeSplits), DecodeMerge::separate);
  const auto d256_b1 = make_unified_launch_plan(uniform(1, 1, 32768, 32, 2, 256), knobs(), 132);
  EXPECT_EQ(d256_b1.merge, DecodeMerge::separate);
  const auto b8 = make_unified_launch_plan(uniform(8, 1, 4096, 32, 8, 128), knobs(), 132);
  EXPECT_EQ(b8.splits, 2);
  EXPECT_EQ(b8.merge, DecodeMerge::fused);
  const auto forced =
      make_unified_launch_plan(uniform(8, 1, 4096, 32, 8, 128), knobs({{"ATTNBENCH_3D_SPLITS", "9"}}), 132);
  EXPECT_EQ(forced.merge, DecodeMerge::separate);
}

// ATTNBENCH_3D_MERGE: separate keeps no arrival counters and says so; one split merges nothing either way; the
// knob's other values and auto leave a plan whose workspace matches its merge.
TEST(CudaLaunchPlan, DecodeMergeKnobSetsTheMergeAndItsWorkspace) {
  const auto p = uniform(1, 1, 4096, 32, 8, 128);
  const auto sep = make_unified_launch_plan(p, knobs({{"ATTNBENCH_3D_MERGE", "separate"}}), 132);
  EXPECT_EQ(sep.merge, DecodeMerge::separate);
  EXPECT_GT(sep.splits, 1);
  EXPECT_EQ(decode_counter_count(p, sep.splits, sep.merge_group, sep.merge), 0);
  EXPECT_EQ(sep.workspace_bytes, static_cast<std::size_t>(sep.splits) * 32 * (128 + 1) * 4);
  EXPECT_NE(sep.summary.find("+merge(separate kernel)"), std::string::npos) << sep.summary;
  const auto fused = make_unified_launch_plan(p, knobs({{"ATTNBENCH_3D_MERGE", "fused"}}), 132);
  EXPECT_EQ(fused.merge, DecodeMerge::fused);
  EXPECT_EQ(fused.workspace_bytes, decode_workspace_bytes(p, fused.splits, fused.merge_group, DecodeMerge::fused));
  EXPECT_GT(decode_counter_count(p, fused.splits, fused.merge_group, fused.merge), 0);
  const auto one = make_unified_launch_plan(
      p, knobs({{"ATTNBENCH_3D_MERGE", "separate"}, {"ATTNBENCH_3D_SPLITS", "1"}}), 132);
  EXPECT_EQ(one.merge, DecodeMerge::fused);
  EXPECT_EQ(one.workspace_bytes, 0u);
  EXPECT_EQ(one.summary.find("+merge"), std::string::npos) << one.summary;
  for (const char* v : {"auto", "fused", "separate"}) {
    const auto lp = make_unified_launch_plan(p, knobs({{"ATTNBENCH_3D_MERGE", v}}), 132);
    EXPECT_EQ(lp.workspace_bytes, decode_workspace_bytes(p, lp.splits, lp.merge_group, lp.merge)) << v;
  }
  EXPECT_THROW(knobs({{"ATTNBENCH_3D_MERGE", "both"}}), std::invalid_argument);
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
  // Partials (LSE + O per split and row); 16 splits merge in the separate kernel, which counts no arrivals.
  EXPECT_EQ(lp.splits, 16);
  EXPECT_EQ(lp.merge, DecodeMerge::separate);
  EXPECT_EQ(lp.workspace_bytes, static_cast<std::size_t>(lp.splits) * 32 * (128 + 1) * 4);
  // Fused, the int32 arrival counters per (sequence, kv head, row tile) follow: 16 small partials merge in one
  // level, one counter.
  const auto fused = make_unified_launch_plan(p, knobs({{"ATTNBENCH_3D_MERGE", "fused"}}), 132);
  EXPECT_EQ(fused.merge_group, 16);
  EXPECT_EQ(decode_counter_count(p, 16, 16, DecodeMerge::fused), 8);
  EXPECT_EQ(decode_counter_count(p, 16, 8, DecodeMerge::fused), 8 * 3);  // 2 groups of 8, one each, one for both
  EXPECT_EQ(fused.workspace_bytes, static_cast<std::size_t>(lp.splits) * 32 * (128 + 1) * 4 + 8 * 4);
  const auto d256 =
      make_unified_launch_plan(uniform(1, 1, 32768, 32, 2, 256), knobs({{"ATTNBENCH_3D_MERGE", "fused"}}), 132);
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
  EXPECT_EQ(decode_counter_count(uniform(2, 1, 2048, 32, 1, 128), 1, 1, DecodeMerge::fused), 2 * 1 * 2);
  EXPECT_EQ(decode_workspace_bytes(uniform(2, 1, 2048, 32, 1, 128), 1, 1, DecodeMerge::fused), 0u);
}

// The partials after the LSEs take float4 stores: the LSE region is padded to 4 floats whatever the row count.
TEST(CudaHeuristics, DecodeWorkspaceKeepsThePartialsSixteenByteAligned) {
  EXPECT_EQ(decode_lse_floats(7, 42), 296);
  EXPECT_EQ(decode_lse_floats(2, 42), 84);
  auto p = uniform(3, 1, 3000, 14, 2, 128);  // 42 rows
  const std::size_t counters = static_cast<std::size_t>(decode_counter_count(p, 7, 7, DecodeMerge::fused)) * 4;
  EXPECT_EQ(decode_workspace_bytes(p, 7, 7, DecodeMerge::fused), (296 + 7 * 42 * 128) * 4 + counters);
  EXPECT_EQ((decode_workspace_bytes(p, 7, 7, DecodeMerge::fused) - counters) % 16, 0u);
}

TEST(CudaSupports, AcceptsTheOutputGateOnBothPaths) {
  auto p = uniform(1, 1, 4096, 32, 8, 128);
  p.fusion.output_gate = true;
  EXPECT_TRUE(unified_supports(p).ok);
  p = uniform(1, 512, 512, 8, 8, 64);
  p.fusion.output_gate = true;
  EXPECT_TRUE(unified_supports(p).ok);
}

#ifdef ATTNBENCH_WITH_CUDA
// Q and O by TMA span the problem's tokens: params with another total_q, or unaligned Q / O, are refused before any
// launch (so without a device too).
TEST(CudaUnifiedKernel, QoByTmaChecksTheTokenCountAndAlignment) {
  auto k = make_cuda_unified();
  const auto p = uniform(2, 512, 512, 8, 8, 128);
  auto plan = k->plan(p, values());
  ASSERT_NE(plan->summary.find("qo=tma"), std::string::npos) << plan->summary;
  AttentionParams a = make_attention_params(p);
  alignas(16) static unsigned char buf[64];
  a.q = a.k_cache = a.v_cache = buf;
  a.out = buf;
  a.total_q = 1023;
  try {
    k->run(*plan, a, nullptr);
    ADD_FAILURE() << "a wrong total_q ran";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("params.total_q 1023 is not the problem's 1024"), std::string::npos)
        << e.what();
  }
  a.total_q = 1024;
  a.out = buf + 2;
  try {
    k->run(*plan, a, nullptr);
    ADD_FAILURE() << "an unaligned out ran";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "cuda.unified: q and out must be 16-byte aligned");
  }
}

TEST(CudaUnifiedKernel, PlanCarriesWorkspaceGraphAndSummary) {
  auto k = make_cuda_unified();
  EXPECT_EQ(k->name(), "cuda.unified");
  const auto p = uniform(1, 1, 4096, 32, 8, 128);
  auto plan = k->plan(p, values({{"ATTNBENCH_3D_SPLITS", "4"}}));
  EXPECT_EQ(plan->workspace_bytes, decode_workspace_bytes(p, 4, 4, DecodeMerge::fused));
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
                ->summary.find("2d wide wgmma consumer-wgs=2 tile=128x64 kv=tma qo=tma stages=2"),
            std::string::npos);
}
#endif

}  // namespace
}  // namespace attnbench::cuda
