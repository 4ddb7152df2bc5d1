// hip.unified's host logic: the knobs (HIPDNN_GFX942_FLASH_WIDE and the graph knobs under their gfx942 names), the
// regime and geometry a problem gets, splits, graph replay, the LDS budget model, the declines and the instance
// keys, checked against kernels/hip/instances.cmake. Pure host code: runs in every build.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "hip/resolve.hpp"

namespace attnbench::hip {
namespace {

HipKnobs knobs(std::map<std::string, std::string> o = {}) {
  return HipKnobs::parse(KnobValues::resolve(o, /*read_env=*/false));
}

AttentionProblem problem(DType dt, int d, int q, int kv, int heads = 8, int kv_heads = 8, int batch = 1) {
  AttentionProblem p;
  for (int b = 0; b < batch; ++b) p.q_lens.push_back(q), p.kv_lens.push_back(kv);
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.head_size = d;
  p.types = AttentionTypes::all(dt);
  return p;
}

Resolution resolved(const AttentionProblem& p, const HipKnobs& k = knobs(), const DeviceInfo& dev = {}) {
  return resolve(p, k, dev, [](const InstanceKey&) { return true; });
}

std::string key_of(const AttentionProblem& p, const HipKnobs& k = knobs()) {
  const Resolution r = resolved(p, k);
  return r.ok() ? instance_name(r.instance.key) : "declined: " + r.support.reason;
}

TEST(HipHeuristics, FlashWideKnobPicksTheGeometries) {
  EXPECT_EQ(knobs().flash, FlashGeometry::wide4);  // unset
  EXPECT_EQ(knobs({{"HIPDNN_GFX942_FLASH_WIDE", "1"}}).flash, FlashGeometry::wide4);
  EXPECT_EQ(knobs({{"HIPDNN_GFX942_FLASH_WIDE", "0"}}).flash, FlashGeometry::l4);
  EXPECT_EQ(knobs({{"HIPDNN_GFX942_FLASH_WIDE", "2"}}).flash, FlashGeometry::wide2);
  EXPECT_THROW(knobs({{"HIPDNN_GFX942_FLASH_WIDE", "3"}}), std::invalid_argument);
  const AttentionProblem p = problem(DType::f16, 128, 1024, 1024);
  for (const auto& [value, waves, threads, name] :
       {std::tuple{"1", 4, 256, "wide4"}, std::tuple{"0", 1, 64, "l4"}, std::tuple{"2", 2, 128, "wide2"}}) {
    const LaunchPlan lp = make_launch_plan(p, knobs({{"HIPDNN_GFX942_FLASH_WIDE", value}}), kDefaultCuCount);
    EXPECT_EQ(lp.regime, Regime::flash) << value;
    EXPECT_EQ(lp.waves, waves) << value;
    EXPECT_EQ(lp.threads, threads) << value;
    EXPECT_EQ(lp.block_m, 32 * waves) << value;
    EXPECT_NE(lp.summary.find(name), std::string::npos) << lp.summary;
  }
}

TEST(HipHeuristics, RegimePerDtypeAndPathKnob) {
  EXPECT_EQ(key_of(problem(DType::f16, 64, 512, 512)), "flash/fp16/d64/wide4");
  EXPECT_EQ(key_of(problem(DType::f16, 128, 512, 512)), "flash/fp16/d128/wide4");
  EXPECT_EQ(key_of(problem(DType::bf16, 64, 512, 512)), "narrow/bf16/d64/w4");  // the flash path is fp16 only
  EXPECT_EQ(key_of(problem(DType::bf16, 128, 512, 512)), "narrow/bf16/d128/w2");
  const HipKnobs narrow = knobs({{"ATTNBENCH_GFX942_PATH", "narrow"}});
  EXPECT_EQ(key_of(problem(DType::f16, 64, 512, 512), narrow), "narrow/fp16/d64/w4");
  EXPECT_EQ(key_of(problem(DType::f16, 128, 512, 512), narrow), "narrow/fp16/d128/w2");
  const Resolution forced = resolved(problem(DType::bf16, 128, 512, 512), knobs({{"ATTNBENCH_GFX942_PATH", "flash"}}));
  ASSERT_FALSE(forced.ok());
  EXPECT_EQ(forced.support.reason, "ATTNBENCH_GFX942_PATH=flash: the flash regime is fp16 only (bf16 runs the narrow kernel)");
  EXPECT_EQ(forced.support.kind, DeclineKind::unsupported);
}

TEST(HipHeuristics, DecodePathAndSplits) {
  // Decode, and few packed rows over a long KV (4 tokens x group 4 = 16 rows), take the 3D kernel.
  EXPECT_EQ(key_of(problem(DType::bf16, 128, 1, 4096, 32, 8)), "decode/bf16/d128");
  EXPECT_EQ(key_of(problem(DType::f16, 64, 4, 4096, 32, 8)), "decode/fp16/d64");
  EXPECT_EQ(key_of(problem(DType::f16, 64, 4, 256, 32, 8)), "flash/fp16/d64/wide4");  // KV too short to split
  // B1 kv4096 H32/KV8: 8 workgroups unsplit, 304 CUs: splits fill the CUs, at least 4 tiles each (64 tiles -> 16).
  const AttentionProblem p = problem(DType::bf16, 128, 1, 4096, 32, 8);
  EXPECT_EQ(decode_splits(p, knobs(), kDefaultCuCount), 16);
  EXPECT_EQ(decode_splits(p, knobs(), 64), 8);
  // 128 sequences x 8 kv heads fill the CUs alone.
  EXPECT_EQ(decode_splits(problem(DType::bf16, 128, 1, 4096, 32, 8, 128), knobs(), kDefaultCuCount), 1);
  // Forced splits: capped at the tiles and at kMaxSplits.
  EXPECT_EQ(decode_splits(p, knobs({{"ATTNBENCH_3D_SPLITS", "5"}}), kDefaultCuCount), 5);
  EXPECT_EQ(decode_splits(problem(DType::bf16, 128, 1, 100, 32, 8), knobs({{"ATTNBENCH_3D_SPLITS", "9"}}), 304), 2);
  EXPECT_EQ(decode_splits(problem(DType::bf16, 128, 1, 65536, 32, 8), knobs({{"ATTNBENCH_3D_SPLITS", "500"}}), 304),
            kMaxSplits);
  const LaunchPlan lp = make_launch_plan(p, knobs(), kDefaultCuCount);
  EXPECT_EQ(lp.regime, Regime::decode);
  EXPECT_EQ(lp.grid_x, 16);
  EXPECT_EQ(lp.grid_y, 8);  // 8 kv heads x 1 row tile (1 token x group 4 = 4 packed rows)
  EXPECT_EQ(lp.grid_z, 1);
  const int64_t rows = 32;  // 1 token x 32 heads
  EXPECT_EQ(lp.workspace_bytes, static_cast<std::size_t>((decode_lse_floats(16, rows) + 16 * rows * 128) * 4));
  EXPECT_EQ(lp.combine_blocks, 2);  // 32 rows, 16 per combine workgroup at d128
  EXPECT_EQ(make_launch_plan(p, knobs({{"ATTNBENCH_3D_SPLITS", "1"}}), 304).workspace_bytes, 0u);
}

TEST(HipHeuristics, GraphReplayKnobsAndExclusions) {
  const AttentionProblem decode = problem(DType::bf16, 128, 1, 4096, 32, 8);
  const AttentionProblem short_prefill = problem(DType::f16, 128, 768, 768);
  const AttentionProblem long_prefill = problem(DType::f16, 128, 769, 769);
  EXPECT_TRUE(recommend_graph_replay(decode, knobs(), false));
  EXPECT_TRUE(recommend_graph_replay(short_prefill, knobs(), false));
  EXPECT_FALSE(recommend_graph_replay(long_prefill, knobs(), false));
  EXPECT_FALSE(recommend_graph_replay(decode, knobs({{"HIPDNN_GFX942_3D_GRAPH", "0"}}), false));
  EXPECT_TRUE(recommend_graph_replay(short_prefill, knobs({{"HIPDNN_GFX942_3D_GRAPH", "0"}}), false));
  EXPECT_FALSE(recommend_graph_replay(short_prefill, knobs({{"HIPDNN_GFX942_2D_GRAPH", "0"}}), false));
  EXPECT_TRUE(recommend_graph_replay(decode, knobs({{"HIPDNN_GFX942_2D_GRAPH", "0"}}), false));
  // Never while the caller captures, never for a feature-flagged problem.
  EXPECT_FALSE(recommend_graph_replay(decode, knobs(), true));
  AttentionProblem windowed = decode;
  windowed.features.window_left = 128;
  EXPECT_FALSE(recommend_graph_replay(windowed, knobs(), false));
  EXPECT_TRUE(resolved(decode).instance.graph_replay);
  EXPECT_FALSE(resolved(long_prefill).instance.graph_replay);
}

TEST(HipHeuristics, GridIsKvHeadsByQBlocksOrTransposed) {
  const AttentionProblem p = problem(DType::f16, 64, 1000, 1000, 32, 8, 3);  // group 4: 4000 packed rows
  const LaunchPlan head_major = make_launch_plan(p, knobs(), kDefaultCuCount);
  EXPECT_EQ(head_major.q_blocks, 32);  // ceil(4000 / 128)
  EXPECT_EQ(head_major.grid_x, 8);
  EXPECT_EQ(head_major.grid_y, 32);
  EXPECT_EQ(head_major.grid_z, 3);
  const LaunchPlan q_major = make_launch_plan(p, knobs({{"ATTNBENCH_Q_MAJOR_GRID", "1"}}), kDefaultCuCount);
  EXPECT_EQ(q_major.grid_x, 32);
  EXPECT_EQ(q_major.grid_y, 8);
  EXPECT_TRUE(q_major.q_major);
  EXPECT_NE(q_major.summary.find("q-major"), std::string::npos);
}

TEST(HipHeuristics, LdsBudgetModel) {
  // Flash: K double-buffered only at wide4 (its 128 rows outnumber the 64-key tile).
  EXPECT_EQ(flash_k_buffers(4), 2);
  EXPECT_EQ(flash_k_buffers(2), 1);
  EXPECT_EQ(flash_k_buffers(1), 1);
  // wide4 d128: K 2 x 64 x 136 x 2 + V^T 128 x 72 x 2 = 53248; the O staging (128 x 136 x 2) aliases it.
  EXPECT_EQ(flash_lds_bytes(128, 4), 53248);
  EXPECT_EQ(flash_lds_bytes(64, 4), 27648);
  EXPECT_EQ(flash_lds_bytes(128, 2), 35840);
  EXPECT_EQ(flash_lds_bytes(64, 1), 18432);
  // The generic model (every tile added, none aliased) over-counts: it would not even fit wide4 d128 in 64 KB.
  EXPECT_EQ(generic_lds_bytes(128, 128, 2), 120832);
  EXPECT_GT(generic_lds_bytes(128, 128, 2), kLdsLimit);
  EXPECT_EQ(narrow_lds_bytes(64, 4), 36864);
  EXPECT_EQ(narrow_lds_bytes(128, 2), 45056);
  EXPECT_EQ(decode_lds_bytes(128), 38912);
  EXPECT_EQ(decode_lds_bytes(64), 21504);
  for (int d : {64, 128}) {
    for (int w : {1, 2, 4}) EXPECT_LE(flash_lds_bytes(d, w), kLdsLimit);
    EXPECT_LE(narrow_lds_bytes(d, narrow_waves(d)), kLdsLimit);
    EXPECT_LE(decode_lds_bytes(d), kLdsLimit);
    EXPECT_LE(decode_merge_bytes(d), decode_lds_bytes(d));
  }
  EXPECT_EQ(make_launch_plan(problem(DType::f16, 128, 512, 512), knobs(), 304).lds_bytes, 53248);
}

TEST(HipHeuristics, Declines) {
  const auto reason = [](const AttentionProblem& p, const DeviceInfo& dev = {}) {
    return resolved(p, knobs(), dev).support.reason;
  };
  EXPECT_EQ(reason(problem(DType::bf16, 256, 64, 64)), "head_size 256 not in {64, 128} (hip.unified)");
  AttentionProblem fp8 = problem(DType::bf16, 128, 64, 64);
  fp8.types.kv = DType::e4m3;
  EXPECT_EQ(reason(fp8), sixteen_bit_storage_conflict(fp8));
  EXPECT_FALSE(reason(fp8).empty());
  AttentionProblem capped = problem(DType::bf16, 128, 64, 64);
  capped.features.softcap = 30.f;
  EXPECT_EQ(reason(capped), "feature 'softcap': not implemented by hip.unified");
  AttentionProblem lse = problem(DType::bf16, 128, 64, 64);
  lse.return_lse = true;
  EXPECT_EQ(reason(lse), "return_lse: not written by hip.unified");
  AttentionProblem gated = problem(DType::bf16, 128, 64, 64);
  gated.fusion.output_gate = true;
  EXPECT_EQ(reason(gated), "the output gate (the gated block's fuse_gate) is not in hip.unified's epilogue");
  AttentionProblem rope = problem(DType::bf16, 128, 64, 64);
  rope.fusion.q_rope_dim = 64;
  EXPECT_EQ(reason(rope), "the Q prologue (norm / RoPE of Q) is not in hip.unified");
  EXPECT_EQ(reason(problem(DType::bf16, 128, 64, 64), DeviceInfo{304, "gfx1100"}),
            "device gfx1100: hip.unified is built for gfx942 and gfx90a");
  EXPECT_TRUE(resolved(problem(DType::bf16, 128, 64, 64), knobs(), DeviceInfo{110, "gfx90a"}).ok());
  // A key the build has no instance of is its own kind of decline.
  const Resolution none = resolve(problem(DType::f16, 64, 512, 512), knobs(), DeviceInfo{},
                                  [](const InstanceKey&) { return false; });
  EXPECT_EQ(none.support.kind, DeclineKind::no_instance);
  EXPECT_EQ(none.support.reason, "no instance for flash/fp16/d64/wide4 in this build");
}

// Every key a plan can ask for, reached through the knobs.
std::set<std::string> reachable_keys() {
  std::set<std::string> keys;
  for (DType dt : {DType::bf16, DType::f16})
    for (int d : {64, 128}) {
      for (const char* path : {"auto", "narrow", "flash"})
        for (const char* wide : {"0", "1", "2"}) {
          const Resolution r = resolved(problem(dt, d, 512, 512),
                                        knobs({{"ATTNBENCH_GFX942_PATH", path}, {"HIPDNN_GFX942_FLASH_WIDE", wide}}));
          if (r.ok()) keys.insert(instance_name(r.instance.key));
        }
      keys.insert(key_of(problem(dt, d, 1, 4096)));
    }
  return keys;
}

// The keys kernels/hip/instances.cmake lists.
std::set<std::string> table_keys() {
  std::ifstream f(ATTNBENCH_SOURCE_DIR "/kernels/hip/instances.cmake");
  std::stringstream text;
  text << f.rdbuf();
  const std::string s = text.str();
  const std::size_t begin = s.find("set(ATTNBENCH_HIP_INSTANCE_TABLE");
  const std::size_t end = s.find(')', begin);
  const std::string table = s.substr(begin, end - begin);
  std::set<std::string> keys;
  const std::regex key(R"((flash|narrow|decode)/[a-z0-9]+/d[0-9]+(/[a-z0-9]+)?)");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), key); it != std::sregex_iterator(); ++it)
    keys.insert(it->str());
  return keys;
}

TEST(HipHeuristics, InstanceTableIsWhatPlansAskFor) {
  const std::set<std::string> reachable = reachable_keys();
  EXPECT_EQ(reachable.size(), 14u);  // flash 2 x 3, narrow 2 x 2, decode 2 x 2
  EXPECT_EQ(table_keys(), reachable);
}

}  // namespace
}  // namespace attnbench::hip
