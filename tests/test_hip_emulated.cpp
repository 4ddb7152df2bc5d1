// hip.unified's kernels run on the CPU emulator (kernels/hip/emulator): every instance's per-wave tile algorithm
// (the flash regime's S^T accumulator reused as the P V operand, the narrow regime's P through LDS, the row max and
// sum reductions across lanes, the decode kernel's wave merge and split combine) on emulated 64-lane waves, gated
// against the fp32 reference on small ragged, causal, GQA shapes; and the same kernels compiled with a wrong lane
// layout (a transposed accumulator map, a doubled K-step) fail the gate. No AMD GPU is involved.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "hip_emulation.hpp"

namespace attnbench::testing {
namespace {

using hip::Coord;

void expect_passes(const AttentionProblem& p, const std::map<std::string, std::string>& knobs, const std::string& key,
                   BlockOrder order = BlockOrder::contiguous) {
  const EmulatedRun r = emulate_hip(p, knobs, 7, order);
  ASSERT_TRUE(r.resolution.ok()) << r.resolution.support.reason;
  EXPECT_EQ(hip::instance_name(r.resolution.instance.key), key);
  ASSERT_EQ(r.error, "");
  EXPECT_TRUE(r.gate.passed) << key << " " << r.resolution.instance.launch.summary << ": " << gate_failure_reason(r.gate)
                             << " " << r.gate.detail;
  EXPECT_EQ(r.gate.rows_checked, p.total_q() * p.heads);
  if (std::getenv("ATTNBENCH_TEST_VERBOSE"))
    std::printf("  %s: max_abs %.2e max_row_rel %.2e\n", r.resolution.instance.launch.summary.c_str(), r.gate.max_abs,
                r.gate.max_row_rel);
}

// Ragged sequences (a prompt shorter than its KV, one past a tile boundary), causal, GQA group 2.
AttentionProblem ragged(DType dt, int d, bool causal = true, int block_size = 16) {
  return hip_problem(dt, d, 4, 2, {{40, 100}, {77, 77}, {3, 130}}, causal, block_size);
}

TEST(HipEmulated, FlashGeometries) {
  for (int d : {64, 128})
    for (const auto& [wide, name] : {std::pair{"1", "wide4"}, std::pair{"0", "l4"}, std::pair{"2", "wide2"}})
      expect_passes(ragged(DType::f16, d), {{"HIPDNN_GFX942_FLASH_WIDE", wide}},
                    "flash/fp16/d" + std::to_string(d) + "/" + name);
}

TEST(HipEmulated, FlashNonCausalShuffledPagesQMajor) {
  expect_passes(ragged(DType::f16, 128, /*causal=*/false, 64), {}, "flash/fp16/d128/wide4", BlockOrder::shuffled);
  expect_passes(ragged(DType::f16, 64, true, 32), {{"ATTNBENCH_Q_MAJOR_GRID", "1"}, {"HIPDNN_GFX942_FLASH_WIDE", "2"}},
                "flash/fp16/d64/wide2", BlockOrder::shuffled);
  // Group 8 (one kv head): a workgroup's 128 packed rows are 16 tokens x 8 heads.
  expect_passes(hip_problem(DType::f16, 64, 8, 1, {{33, 200}}), {}, "flash/fp16/d64/wide4");
}

TEST(HipEmulated, NarrowBothDtypes) {
  expect_passes(ragged(DType::bf16, 64), {}, "narrow/bf16/d64/w4");
  expect_passes(ragged(DType::bf16, 128), {}, "narrow/bf16/d128/w2");
  expect_passes(ragged(DType::f16, 64), {{"ATTNBENCH_GFX942_PATH", "narrow"}}, "narrow/fp16/d64/w4");
  expect_passes(ragged(DType::f16, 128, false, 64), {{"ATTNBENCH_GFX942_PATH", "narrow"}}, "narrow/fp16/d128/w2",
                BlockOrder::shuffled);
  expect_passes(ragged(DType::bf16, 64, true, 48), {{"ATTNBENCH_Q_MAJOR_GRID", "1"}}, "narrow/bf16/d64/w4");
}

TEST(HipEmulated, DecodeSplitsAndCombine) {
  const AttentionProblem decode = hip_problem(DType::bf16, 128, 8, 2, {{1, 700}, {1, 77}, {1, 300}});
  expect_passes(decode, {{"ATTNBENCH_3D_SPLITS", "1"}}, "decode/bf16/d128");  // one split writes O itself
  expect_passes(decode, {}, "decode/bf16/d128");                            // the heuristic's splits + combine
  // Forced splits past some sequences' tiles: those splits see nothing and the combine must ignore them.
  expect_passes(hip_problem(DType::f16, 64, 4, 4, {{1, 520}, {1, 33}}), {{"ATTNBENCH_3D_SPLITS", "7"}},
                "decode/fp16/d64", BlockOrder::shuffled);
  // A few query tokens over a long KV (chunked decode): 3 tokens x group 4 = 12 packed rows, causal per token.
  expect_passes(hip_problem(DType::f16, 128, 8, 2, {{3, 600}, {2, 530}}), {{"ATTNBENCH_3D_SPLITS", "3"}},
                "decode/fp16/d128");
  EXPECT_GT(hip_resolution(decode, {}).instance.launch.splits, 1);
}

// Rows aligned top-left with their keys (q_len < kv_len, so the alignments differ) on the flash, narrow and decode
// kernels; the same output fails against the reference aligned bottom-right.
TEST(HipEmulated, TopLeftAlignment) {
  auto top_left = [](AttentionProblem p) {
    p.top_left = true;
    return p;
  };
  expect_passes(top_left(ragged(DType::f16, 128)), {}, "flash/fp16/d128/wide4");
  expect_passes(top_left(ragged(DType::bf16, 64)), {}, "narrow/bf16/d64/w4");
  const AttentionProblem decode = top_left(hip_problem(DType::f16, 128, 8, 2, {{3, 600}, {1, 530}}));
  expect_passes(decode, {{"ATTNBENCH_3D_SPLITS", "3"}}, "decode/fp16/d128");
  AttentionProblem bottom_right = decode;
  bottom_right.top_left = false;
  const EmulatedRun r = emulate_hip(decode, {{"ATTNBENCH_3D_SPLITS", "3"}}, 7, BlockOrder::contiguous, &bottom_right);
  ASSERT_EQ(r.error, "");
  EXPECT_FALSE(r.gate.passed) << "a top-left output passes the bottom-right gate";
}

// Wrong lane layouts, as a kernel written against a misread of the ISA would use them; the emulated hardware keeps
// the real ones.
struct TransposedAcc32 : hip::Mfma32x32x8 {
  static constexpr Coord acc(int lane, int r) { return {Mfma32x32x8::acc(lane, r).col, Mfma32x32x8::acc(lane, r).row}; }
};
struct DoubleKStep32 : hip::Mfma32x32x8 {
  static constexpr int K = 16;
};
struct TransposedAcc16 : hip::Mfma16x16x16 {
  static constexpr Coord acc(int lane, int r) {
    return {Mfma16x16x16::acc(lane, r).col, Mfma16x16x16::acc(lane, r).row};
  }
};
struct DoubleKStep16 : hip::Mfma16x16x16 {
  static constexpr int K = 32;
};
template <class WideAtom, class NarrowAtom>
struct Planted {
  using Wide = WideAtom;
  using Narrow = NarrowAtom;
};

template <class L>
void expect_fails(const AttentionProblem& p, const std::map<std::string, std::string>& knobs, const char* what) {
  const EmulatedRun r = emulate_hip<L>(p, knobs);
  ASSERT_TRUE(r.resolution.ok()) << r.resolution.support.reason;
  ASSERT_EQ(r.error, "") << what;
  EXPECT_FALSE(r.gate.passed) << what << " passed the gate (max_abs " << r.gate.max_abs << ")";
}

TEST(HipEmulated, PlantedLayoutBugsFail) {
  using HwWide = hip::Mfma32x32x8;
  using HwNarrow = hip::Mfma16x16x16;
  const AttentionProblem flash = ragged(DType::f16, 64), narrow = ragged(DType::bf16, 64);
  const AttentionProblem decode = hip_problem(DType::bf16, 64, 4, 2, {{1, 300}, {1, 90}});
  const std::map<std::string, std::string> split = {{"ATTNBENCH_3D_SPLITS", "3"}};
  expect_fails<Planted<TransposedAcc32, HwNarrow>>(flash, {}, "flash, transposed 32x32 accumulator map");
  expect_fails<Planted<DoubleKStep32, HwNarrow>>(flash, {}, "flash, K-step 16 for the 32x32x8 atom");
  expect_fails<Planted<HwWide, TransposedAcc16>>(narrow, {}, "narrow, transposed 16x16 accumulator map");
  expect_fails<Planted<HwWide, DoubleKStep16>>(narrow, {}, "narrow, K-step 32 for the 16x16x16 atom");
  expect_fails<Planted<HwWide, TransposedAcc16>>(decode, split, "decode, transposed 16x16 accumulator map");
  expect_fails<Planted<HwWide, DoubleKStep16>>(decode, split, "decode, K-step 32 for the 16x16x16 atom");
  // The hardware layouts through the same template pass: the failures above are the layouts'.
  const EmulatedRun hw = emulate_hip<Planted<HwWide, HwNarrow>>(flash, {});
  EXPECT_TRUE(hw.gate.passed) << gate_failure_reason(hw.gate);
}

}  // namespace
}  // namespace attnbench::testing
