// cuda.unified against the fp32 reference on the GPU: shapes from every shipped group (scaled down where
// huge), every knob value, poisoned output (every element must be written), sampled rows compared.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "../../kernels/cpu/norm_rope.hpp"
#include "attnbench/reference.hpp"
#include "cases/gate.hpp"
#include "cuda/heuristics.hpp"
#include "gpu_case.hpp"
#include "gpu_check.hpp"
#include "gpu_shape.hpp"

namespace attnbench::gputest {
namespace {

// Scaled-down members of every shipped group (block sizes 64, 16, 48 and 128 among them).
std::vector<Shape> prefill_shapes() {
  return {
      // short_prefill
      {"short d128 h32kv8 b4 s256", uniform(4, 256, 256), 32, 8, 128},
      {"short d64 h16kv16 b8 s128", uniform(8, 128, 128), 16, 16, 64},
      {"short ragged d128 h32kv8", {{5, 18}, {129, 463}, {768, 768}}, 32, 8, 128},
      // short q over the heads of a group: auto packs them into one tile (wide_pack), idle and partial rows
      {"short gqa d128 h16kv2 (q5,kv18) (q40,kv40) (q3,kv300)", {{5, 18}, {40, 40}, {3, 300}}, 16, 2, 128},
      // long_prefill
      {"long d128 h8kv8 b1 s2048", uniform(1, 2048, 2048), 8, 8, 128},
      {"long d64 h4kv4 b2 s1500", uniform(2, 1500, 1500), 4, 4, 64},
      {"long d64 h8kv2 b2 s700 bs16", uniform(2, 700, 700), 8, 2, 64, true, 16},  // one d slab, a box per page
      {"long d256 h2kv2 b2 s1100", uniform(2, 1100, 1100), 2, 2, 256},
      // more q-tiles than multiprocessors at d64 and d256: persistent CTAs walk several units (Q loaded ahead)
      {"long d64 h16kv16 b8 s512", uniform(8, 512, 512), 16, 16, 64},
      {"gqa d256 h16kv2 b2 s1000", uniform(2, 1000, 1000), 16, 2, 256},
      {"long noncausal d128 h4kv4 s1000", uniform(1, 1000, 1000), 4, 4, 128, false},
      // gqa
      {"gqa d128 h28kv4 b2 s700", uniform(2, 700, 700), 28, 4, 128},
      {"gqa d128 h32kv1 b1 s512", uniform(1, 512, 512), 32, 1, 128},
      {"gqa d256 h32kv2 b1 s384 bs16", uniform(1, 384, 384), 32, 2, 256, true, 16},
      {"gqa chunked d128 h32kv8 4x(q300,kv1200) bs48", uniform(4, 300, 1200), 32, 8, 128, true, 48},
      {"gqa noncausal d64 h8kv2 (q100,kv900) bs128", {{100, 900}, {37, 37}}, 8, 2, 64, false, 128},
      // head size 128 shapes aimed at the wide kernel's 64-row warpgroups and 128-key tiles
      {"ragged noncausal d128 h8kv2 bs16", {{100, 900}, {37, 37}, {64, 200}, {1, 129}}, 8, 2, 128, false, 16},
      {"ragged causal d128 h16kv4 bs32", {{65, 65}, {130, 385}, {257, 300}, {2, 2}}, 16, 4, 128, true, 32},
      // wide TMA path with 128-token pages (two 64-token boxes per page), kv past q, tails and a 1-row sequence
      {"ragged causal d128 h8kv2 bs128 (q<kv)", {{200, 700}, {64, 64}, {333, 1000}, {1, 300}}, 8, 2, 128, true, 128},
  };
}

std::vector<Shape> decode_shapes() {
  return {
      {"decode d128 h32kv8 b1 kv4096", uniform(1, 1, 4096), 32, 8, 128},
      {"decode d128 h32kv8 b8 kv1000", uniform(8, 1, 1000), 32, 8, 128},
      {"decode d64 h32kv32 b4 kv2048", uniform(4, 1, 2048), 32, 32, 64},
      {"decode d256 h32kv2 b1 kv8192", uniform(1, 1, 8192), 32, 2, 256},
      {"decode d256 h32kv2 b3 kv700 bs16", uniform(3, 1, 700), 32, 2, 256, true, 16},
      {"decode ragged d128 h32kv8", {{1, 523}, {1, 37}, {1, 2011}, {1, 1328}}, 32, 8, 128},
      {"decode d128 h32kv1 b2 kv777 (group 32)", uniform(2, 1, 777), 32, 1, 128},
      {"decode d128 h28kv4 b2 kv3000 (group 7)", uniform(2, 1, 3000), 28, 4, 128},
      // short q over long KV (3D with causal rows), and non-causal
      {"spec d128 h32kv8 (q4,kv2000) (q3,kv999)", {{4, 2000}, {3, 999}}, 32, 8, 128},
      {"spec noncausal d64 h16kv4 (q5,kv1500) bs32", {{5, 1500}}, 16, 4, 64, false, 32},
      // page sizes below a 64-key tile, and one the multiply-high divides (not a power of two)
      {"decode d128 h32kv8 b2 kv3000 bs16", uniform(2, 1, 3000), 32, 8, 128, true, 16},
      {"decode d128 h32kv8 b2 kv2100 bs32", uniform(2, 1, 2100), 32, 8, 128, true, 32},
      {"decode d128 h32kv8 b2 kv1000 bs48", uniform(2, 1, 1000), 32, 8, 128, true, 48},
      {"spec d128 h32kv8 b2 (q8,kv3000) bs16", uniform(2, 8, 3000), 32, 8, 128, true, 16},
  };
}

class Prefill2D : public ::testing::TestWithParam<std::tuple<int, DType>> {};
class Decode3D : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(Prefill2D, MatchesReferenceForEveryKnob) {
  const auto [idx, dt] = GetParam();
  const Shape sh = prefill_shapes()[idx];
  for (const char* warps : {"4", "8", "4x32"}) {
    for (const char* qmajor : {"0", "1"}) {
      const auto o = run_and_check(sh, dt,
                                   {{"ATTNBENCH_SM90_NARROW_WARPS", warps},
                                    {"ATTNBENCH_Q_MAJOR_GRID", qmajor},
                                    {"ATTNBENCH_SM90_PATH", "narrow"}},  // auto is wide for most d128 shapes
                                   1234 + idx);
      std::printf("  %-46s %s warps=%s qmajor=%s rows=%lld max_abs=%.3g row_rel=%.3g\n", sh.name.c_str(), dtype_name(dt), warps,
                  qmajor, static_cast<long long>(o.rows), o.max_abs, o.max_row_rel);
      EXPECT_EQ(o.nonfinite, 0) << sh.name << " warps=" << warps << ": unwritten or non-finite outputs";
      EXPECT_EQ(o.padding_written, 0);
      EXPECT_TRUE(o.within) << sh.name << " warps=" << warps << " qmajor=" << qmajor << ": " << o.worst;
    }
  }
}

// The wide (wgmma) regime, forced by ATTNBENCH_SM90_PATH=wide, for every head size and every value of its knobs:
// each consumer-warpgroup count the head size allows (ATTNBENCH_SM90_FLASH_WIDE), one CTA per tile in both grid
// orders and persistent CTAs (ATTNBENCH_SM90_PERSISTENT) with one and, where it fits, two Q tiles (2 ring slots),
// every ring depth that fits (ATTNBENCH_SM90_STAGES), and GQA packing (ATTNBENCH_SM90_GQA_PACK) at the largest
// pack the group allows and at 2, one CTA per tile and persistent with Q ahead, for every warpgroup count; Q and O
// by the threads' copies (ATTNBENCH_SM90_QO=threads) beside the default TMA boxes, with one Q tile and Q ahead; the
// L2 walk (ATTNBENCH_SM90_WALK=l2) in sections of one kv head, with one Q tile and Q ahead, packed and not.
std::vector<std::map<std::string, std::string>> wide_settings(int head_size, int group) {
  std::vector<std::map<std::string, std::string>> out;
  int max_pack = 1;
  for (int pk = 2; pk <= std::min(group, cuda::kWidePackMax); ++pk)
    if (group % pk == 0) max_pack = pk;
  for (int pk : std::set<int>{2, max_pack}) {
    if (pk < 2 || group % pk != 0) continue;
    for (int wgs = 1; wgs <= cuda::wide_max_wgs(head_size); ++wgs) {
      const std::string w = std::to_string(wgs), g = std::to_string(pk);
      out.push_back({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", w}, {"ATTNBENCH_SM90_GQA_PACK", g},
                     {"ATTNBENCH_SM90_PERSISTENT", "0"}});
      out.push_back({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", w}, {"ATTNBENCH_SM90_GQA_PACK", g},
                     {"ATTNBENCH_SM90_PERSISTENT", "1"}, {"ATTNBENCH_SM90_STAGES", "2"}});
      out.push_back({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", w}, {"ATTNBENCH_SM90_GQA_PACK", g},
                     {"ATTNBENCH_SM90_PERSISTENT", "1"}, {"ATTNBENCH_SM90_WALK", "l2"},
                     {"ATTNBENCH_SM90_L2_SECTION_KB", "1"}});
    }
  }
  const int max_wgs = cuda::wide_max_wgs(head_size);
  for (int wgs = 1; wgs <= max_wgs; ++wgs) {
    const std::string w = std::to_string(wgs);
    out.push_back({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", w}});
    out.push_back({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", w}, {"ATTNBENCH_SM90_PERSISTENT", "1"}});
    out.push_back({{"ATTNBENCH_SM90_PATH", "wide"},
                   {"ATTNBENCH_SM90_FLASH_WIDE", w},
                   {"ATTNBENCH_SM90_PERSISTENT", "1"},
                   {"ATTNBENCH_SM90_STAGES", "2"}});
    out.push_back(
        {{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", w}, {"ATTNBENCH_SM90_QO", "threads"}});
    for (const char* st : {"2", "0"})
      out.push_back({{"ATTNBENCH_SM90_PATH", "wide"},
                     {"ATTNBENCH_SM90_FLASH_WIDE", w},
                     {"ATTNBENCH_SM90_PERSISTENT", "1"},
                     {"ATTNBENCH_SM90_STAGES", st},
                     {"ATTNBENCH_SM90_WALK", "l2"},
                     {"ATTNBENCH_SM90_L2_SECTION_KB", "1"}});
    out.push_back({{"ATTNBENCH_SM90_PATH", "wide"},
                   {"ATTNBENCH_SM90_FLASH_WIDE", w},
                   {"ATTNBENCH_SM90_PERSISTENT", "1"},
                   {"ATTNBENCH_SM90_STAGES", "2"},
                   {"ATTNBENCH_SM90_QO", "threads"}});
  }
  out.push_back({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_Q_MAJOR_GRID", "1"}});
  for (int st = 2; st <= cuda::kWideMaxStages; ++st) {
    if (cuda::wide_smem_bytes(head_size, 2, st) > cuda::kWideSmemLimit) continue;
    out.push_back({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_STAGES", std::to_string(st)},
                   {"ATTNBENCH_SM90_PERSISTENT", st % 2 ? "1" : "0"}});
  }
  return out;
}

std::string knob_text(const std::map<std::string, std::string>& k) {
  std::string t;
  for (const auto& [name, value] : k)
    if (name != "ATTNBENCH_SM90_PATH") t += " " + name.substr(std::string("ATTNBENCH_").size()) + "=" + value;
  return t;
}

TEST_P(Prefill2D, WideMatchesReferenceForEveryKnob) {
  const auto [idx, dt] = GetParam();
  const Shape sh = prefill_shapes()[idx];
  for (const auto& k : wide_settings(sh.head_size, sh.heads / sh.kv_heads)) {
    DeviceCase probe(problem_of(sh, dt), k, 1);
    ASSERT_NE(probe.plan->summary.find("wide"), std::string::npos) << probe.plan->summary;
    ASSERT_NE(probe.plan->summary.find(cuda::wide_kv_tma(sh.block_size, false) ? "kv=tma" : "kv=cp.async"),
              std::string::npos)
        << probe.plan->summary;
    // The plan's own record of what runs: persistent CTAs load Q ahead exactly where a second Q tile fits.
    const auto lp = cuda::make_unified_launch_plan(problem_of(sh, dt), KnobValues::resolve(k, false), 132);
    ASSERT_EQ(probe.plan->summary.find("q-ahead") != std::string::npos,
              cuda::wide_q_bufs(sh.head_size, lp.wide_wgs, lp.wide_stages, lp.persistent) == 2)
        << probe.plan->summary;
    ASSERT_EQ(probe.plan->summary.find("gqa-pack=") != std::string::npos, lp.wide_pack > 1) << probe.plan->summary;
    ASSERT_EQ(probe.plan->summary.find("walk=l2:1KiB") != std::string::npos, k.count("ATTNBENCH_SM90_WALK") == 1)
        << probe.plan->summary;
    ASSERT_EQ(probe.plan->summary.find("qo=tma") != std::string::npos,
              k.count("ATTNBENCH_SM90_QO") == 0 && cuda::wide_qo_boxes(lp.wide_tq))
        << probe.plan->summary;
    const auto o = run_and_check(sh, dt, k, 1234 + idx);
    std::printf("  %-46s %s wide%s rows=%lld max_abs=%.3g [%s]\n", sh.name.c_str(), dtype_name(dt),
                knob_text(k).c_str(), static_cast<long long>(o.rows), o.max_abs, probe.plan->summary.c_str());
    EXPECT_EQ(o.nonfinite, 0) << sh.name << " wide" << knob_text(k) << ": unwritten or non-finite outputs";
    EXPECT_EQ(o.padding_written, 0);
    EXPECT_TRUE(o.within) << sh.name << " wide" << knob_text(k) << ": " << o.worst;
  }
}

// Every split setting under both merges, in the 3-slot ring and, where it fits, the 6-slot one.
TEST_P(Decode3D, MatchesReferenceForEverySplitSetting) {
  const auto [idx, dt] = GetParam();
  const Shape sh = decode_shapes()[idx];
  for (const char* ring : {"3", "6"}) {
    if (std::string(ring) == "6" && !cuda::decode_ring_fits(sh.head_size, 2, cuda::kDecodeDeepStages)) continue;
    for (const char* merge : {"fused", "separate"})
      for (const char* splits : {"0", "1", "3", "9", "16", "64"}) {  // fused, 9 and up: merged in groups of 8
        const auto o = run_and_check(
            sh, dt, {{"ATTNBENCH_3D_SPLITS", splits}, {"ATTNBENCH_3D_MERGE", merge}, {"ATTNBENCH_3D_STAGES", ring}},
            777 + idx);
        const std::string what = " ring=" + std::string(ring) + " splits=" + splits + " merge=" + merge;
        std::printf("  %-46s %s%s rows=%lld max_abs=%.3g row_rel=%.3g\n", sh.name.c_str(), dtype_name(dt),
                    what.c_str(), static_cast<long long>(o.rows), o.max_abs, o.max_row_rel);
        EXPECT_EQ(o.nonfinite, 0) << sh.name << what << ": unwritten or non-finite";
        EXPECT_TRUE(o.within) << sh.name << what << ": " << o.worst;
      }
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<int, DType>>& info) {
  return "s" + std::to_string(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Groups, Prefill2D,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(prefill_shapes().size())),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Groups, Decode3D,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(decode_shapes().size())),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         case_name);

// Output gate and non-packed strides (the gated block's layout: Q/K/V read in place from one fused projection
// output, padded output rows), on both paths, every prefill variant and several split counts; gate alone and
// strides alone too.
class GateAndStrides : public ::testing::TestWithParam<std::tuple<int, DType>> {};

std::vector<Shape> gate_shapes() {
  return {
      {"prefill d128 h8kv2 (q300,kv300) (q77,kv77)", {{300, 300}, {77, 77}}, 8, 2, 128},
      {"prefill d64 h4kv4 s200 noncausal bs16", uniform(2, 200, 200), 4, 4, 64, false, 16},
      {"prefill d256 h4kv2 s150", uniform(1, 150, 150), 4, 2, 256},
      {"decode d128 h32kv8 b3 kv1500", uniform(3, 1, 1500), 32, 8, 128},
      {"decode d256 h16kv2 b2 kv900 bs16", uniform(2, 1, 900), 16, 2, 256, true, 16},
      {"spec d64 h16kv4 (q4,kv1000) (q2,kv300)", {{4, 1000}, {2, 300}}, 16, 4, 64},
  };
}

TEST_P(GateAndStrides, MatchReferenceTimesSigmoidGate) {
  const auto [idx, dt] = GetParam();
  const Shape sh = gate_shapes()[idx];
  const std::vector<std::map<std::string, std::string>> settings = {
      {{"ATTNBENCH_SM90_NARROW_WARPS", "4"}, {"ATTNBENCH_SM90_PATH", "narrow"}},
      {{"ATTNBENCH_SM90_NARROW_WARPS", "8"}, {"ATTNBENCH_SM90_PATH", "narrow"}},
      {{"ATTNBENCH_SM90_NARROW_WARPS", "4x32"}, {"ATTNBENCH_SM90_PATH", "narrow"}},
      {{"ATTNBENCH_SM90_PATH", "auto"}},        {{"ATTNBENCH_3D_SPLITS", "1"}},
      {{"ATTNBENCH_3D_SPLITS", "5"}},           {{"ATTNBENCH_3D_SPLITS", "0"}},
      {{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", "1"}},
      {{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", "2"}},
      {{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_PERSISTENT", "1"}}};
  for (const CaseLayout lay :
       {CaseLayout{true, true}, CaseLayout{false, true}, CaseLayout{true, false}, CaseLayout{false, true, true}}) {
    for (const auto& k : settings) {
      const auto o = run_and_check(sh, dt, k, 4321 + idx, lay);
      std::printf("  %-46s %s %s=%s%s fused=%d gate=%d pad=%d rows=%lld max_abs=%.3g row_rel=%.3g\n", sh.name.c_str(),
                  dtype_name(dt), k.begin()->first.c_str(), k.begin()->second.c_str(),
                  k.size() > 1 ? (" wgs=" + k.rbegin()->second).c_str() : "", lay.fused, lay.gate, lay.gate_pad,
                  static_cast<long long>(o.rows), o.max_abs, o.max_row_rel);
      EXPECT_EQ(o.nonfinite, 0) << sh.name << ": unwritten or non-finite outputs";
      EXPECT_EQ(o.padding_written, 0) << sh.name << ": wrote output padding";
      EXPECT_TRUE(o.within) << sh.name << " fused=" << lay.fused << " gate=" << lay.gate
                                     << " pad=" << lay.gate_pad << ": " << o.worst;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, GateAndStrides,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(gate_shapes().size())),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         [](const ::testing::TestParamInfo<std::tuple<int, DType>>& info) {
                           return "s" + std::to_string(std::get<0>(info.param)) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

// The Q prologue (the gated block's fused QK-RMSNorm + partial RoPE) against the reference on Q normalised,
// rotated and rounded on the host by the gated block's own row function: norm and RoPE together and alone, RoPE
// over part and all of the head, every head size, one and two consumer warpgroups, persistent with Q loaded
// ahead, GQA-packed rows, the cp.async gather, both dtypes.
TEST(CudaUnifiedQPrologue, MatchesTheReferenceOnTransformedQ) {
  struct Case {
    Shape sh;
    bool norm;
    int rope;
    std::map<std::string, std::string> knobs;
  };
  const std::vector<Case> cases = {
      {{"d128 h8kv2 (q300,kv300) (q77,kv77)", {{300, 300}, {77, 77}}, 8, 2, 128}, true, 32, {}},
      {{"d128 h8kv2 (q300,kv300) (q77,kv77)", {{300, 300}, {77, 77}}, 8, 2, 128}, true, 64,
       {{"ATTNBENCH_SM90_PERSISTENT", "1"}, {"ATTNBENCH_SM90_STAGES", "2"}}},
      {{"d256 h8kv1 s300", uniform(1, 300, 300), 8, 1, 256}, true, 64, {}},
      {{"d256 h8kv1 s300 bs16", uniform(1, 300, 300), 8, 1, 256, true, 16}, false, 64, {}},
      {{"d64 h4kv4 b2 s600", uniform(2, 600, 600), 4, 4, 64}, false, 64, {{"ATTNBENCH_SM90_FLASH_WIDE", "1"}}},
      {{"d64 h4kv4 b2 s600 noncausal", uniform(2, 600, 600), 4, 4, 64, false}, true, 0, {}},
      {{"d128 h16kv2 short (q5,kv18) (q40,kv40)", {{5, 18}, {40, 40}}, 16, 2, 128}, true, 16, {}},
      // more units than CTAs: persistent CTAs run the prologue on Q tiles loaded during the unit before
      {{"d128 h16kv2 b8 s512", uniform(8, 512, 512), 16, 2, 128}, true, 32,
       {{"ATTNBENCH_SM90_PERSISTENT", "1"}, {"ATTNBENCH_SM90_STAGES", "2"}}},
  };
  for (DType dt : {DType::bf16, DType::f16}) {
    for (std::size_t ci = 0; ci < cases.size(); ++ci) {
      const Case& cs = cases[ci];
      AttentionProblem p = problem_of(cs.sh, dt);
      p.fusion.q_norm = cs.norm;
      p.fusion.q_rope_dim = cs.rope;
      auto knobs = cs.knobs;
      knobs["ATTNBENCH_SM90_PATH"] = "wide";
      DeviceCase c(p, knobs, 900 + ci);
      ASSERT_NE(c.plan->summary.find("+q-norm-rope"), std::string::npos) << c.plan->summary;
      if (cs.sh.name.find("short") != std::string::npos) {
        ASSERT_NE(c.plan->summary.find("gqa-pack="), std::string::npos) << c.plan->summary;
      }
      if (cs.sh.name.find("b8 s512") != std::string::npos) {
        const auto lp = cuda::make_unified_launch_plan(p, KnobValues::resolve(knobs, false), 132);
        ASSERT_GT(lp.work_tiles, 2 * lp.grid_x);  // every CTA walks units loaded ahead
        ASSERT_NE(c.plan->summary.find("q-ahead"), std::string::npos) << c.plan->summary;
      }
      const int d = p.head_size, rd = cs.rope;
      const int64_t tq = p.total_q();
      std::mt19937_64 rng(77 + ci);
      std::uniform_real_distribution<float> uw(0.5f, 1.5f), uc(-1.f, 1.f);
      std::vector<uint16_t> w(d), cos_h(static_cast<std::size_t>(tq * rd)), sin_h(cos_h.size());
      for (auto& x : w) x = float_to_half(uw(rng), dt);
      for (auto& x : cos_h) x = float_to_half(uc(rng), dt);
      for (auto& x : sin_h) x = float_to_half(uc(rng), dt);
      cuda::DeviceBuffer wd(w.size() * 2), cd(std::max<std::size_t>(16, cos_h.size() * 2)),
          sd(std::max<std::size_t>(16, sin_h.size() * 2));
      wd.upload(w.data(), w.size() * 2);
      if (rd > 0) {
        cd.upload(cos_h.data(), cos_h.size() * 2);
        sd.upload(sin_h.data(), sin_h.size() * 2);
      }
      const float offset = 0.25f, eps = 1e-6f;
      if (cs.norm) {
        c.params.prologue.q_norm_weight = wd.data();
        c.params.prologue.q_norm_offset = offset;
        c.params.prologue.q_norm_eps = eps;
      }
      if (rd > 0) {
        c.params.prologue.rope_cos = cd.data();
        c.params.prologue.rope_sin = sd.data();
      }
      cuda::Stream stream;
      c.poison();
      c.run(stream.get());
      stream.synchronize();
      // The host's transformed Q: per (token, head) row, fp32, rounded once.
      std::vector<uint16_t> q(c.host.q.halves(), c.host.q.halves() + c.host.q.size());
      std::vector<float> wf(d), x(d), cf(rd), sf(rd);
      for (int i = 0; i < d; ++i) wf[i] = half_to_float(w[i], dt);
      for (int64_t t = 0; t < tq; ++t) {
        for (int i = 0; i < rd; ++i) {
          cf[i] = half_to_float(cos_h[t * rd + i], dt);
          sf[i] = half_to_float(sin_h[t * rd + i], dt);
        }
        for (int h = 0; h < p.heads; ++h) {
          uint16_t* row = q.data() + (t * p.heads + h) * d;
          for (int i = 0; i < d; ++i) x[i] = half_to_float(row[i], dt);
          cpu::norm_rope_row(x.data(), d, cs.norm, wf.data(), offset, eps, rd, cf.data(), sf.data());
          for (int i = 0; i < d; ++i) row[i] = float_to_half(x[i], dt);
        }
      }
      const Outcome o = check_output(c, 900 + ci, &q);
      // The same output read against the untransformed Q must fail: the prologue really ran.
      const Outcome raw = check_output(c, 900 + ci);
      std::printf("  q-prologue %-40s %s norm=%d rope=%d%s rows=%lld max_abs=%.3g (untransformed Q: %.3g) [%s]\n",
                  cs.sh.name.c_str(), dtype_name(dt), cs.norm, rd, knob_text(knobs).c_str(),
                  static_cast<long long>(o.rows), o.max_abs, raw.max_abs, c.plan->summary.c_str());
      EXPECT_EQ(o.nonfinite, 0) << cs.sh.name;
      EXPECT_EQ(o.padding_written, 0);
      EXPECT_TRUE(o.within) << cs.sh.name << ": " << o.worst;
      EXPECT_FALSE(raw.within) << cs.sh.name;
    }
  }
}

// The split merge's arrival counters live in the workspace and must be left zero by every call: many eager calls
// in a row on one workspace give the same bits (and a fresh plan on a dirty workspace zeroes them first).
TEST(CudaUnifiedDecode, RepeatedCallsKeepTheSplitCounters) {
  const Shape sh{"decode d128 h32kv8 b2 kv3000", uniform(2, 1, 3000), 32, 8, 128};
  DeviceCase c(problem_of(sh, DType::bf16), {{"ATTNBENCH_3D_SPLITS", "7"}}, 5);
  c.workspace.fill_byte(0x5A);  // garbage counters before the first call
  cuda::Stream stream;
  c.run(stream.get());
  stream.synchronize();
  std::vector<uint16_t> first(c.out_elems()), again(c.out_elems());
  c.out.download(first.data(), first.size() * 2);
  EXPECT_TRUE(check_output(c, 5).within);
  for (int i = 0; i < 5; ++i) {
    c.poison();
    c.run(stream.get());
    stream.synchronize();
    c.out.download(again.data(), again.size() * 2);
    EXPECT_EQ(first, again) << "call " << i + 2;
  }
}

// The two cuda.unified plans that keep state in their workspace, a fused-merge decode (seed 5) and an L2-walk
// prefill (seed 7), taking three turns on one buffer. Same pointer: garbage is written before each call (what the
// other plan left, as far as this one knows). Overlapping: the prefill's walk table starts on the decode's last
// merge counter and the decode zeroes its counters over the table's head, nothing else writing the buffer.
void plans_take_turns(bool overlapping) {
  const Shape dec{"decode d128 h32kv8 b2 kv3000", uniform(2, 1, 3000), 32, 8, 128};
  const Shape pre{"prefill d128 h8kv4 b3 s700", uniform(3, 700, 700), 8, 4, 128};
  DeviceCase a(problem_of(dec, DType::bf16), {{"ATTNBENCH_3D_SPLITS", "7"}, {"ATTNBENCH_3D_MERGE", "fused"}}, 5);
  DeviceCase b(problem_of(pre, DType::bf16),
               {{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_PERSISTENT", "1"}, {"ATTNBENCH_SM90_WALK", "l2"},
                {"ATTNBENCH_SM90_L2_SECTION_KB", "1"}},
               7);
  ASSERT_NE(a.plan->summary.find("+merge(last CTA"), std::string::npos) << a.plan->summary;
  ASSERT_NE(b.plan->summary.find("walk=l2:1KiB"), std::string::npos) << b.plan->summary;
  const std::size_t b_at = overlapping ? (a.plan->workspace_bytes - 4) / 16 * 16 : 0;
  cuda::DeviceBuffer shared(std::max(a.plan->workspace_bytes, b_at + b.plan->workspace_bytes));
  shared.fill_byte(0x5A);
  a.params.workspace = shared.data();
  b.params.workspace = static_cast<char*>(shared.data()) + b_at;
  cuda::Stream stream;
  for (int turn = 0; turn < 3; ++turn)
    for (DeviceCase* c : {&a, &b}) {
      if (!overlapping) shared.fill_byte(0x5A);
      c->poison();
      c->run(stream.get());
      stream.synchronize();
      const Outcome o = check_output(*c, c == &a ? 5 : 7);
      EXPECT_TRUE(o.within) << (c == &a ? "decode" : "prefill") << " turn " << turn << ": " << o.worst;
    }
}

// Each writes what it keeps there again when the other ran on it since, whatever the other left.
TEST(CudaUnifiedWorkspace, PlansTakeTurnsOnOneWorkspace) { plans_take_turns(false); }

// Each sees the other's call on any of its bytes (a record keyed by the exact pointer would trust its state).
TEST(CudaUnifiedWorkspace, PlansOnOverlappingBytesWriteTheirStateAgain) { plans_take_turns(true); }

// The plan is made once; run() must be capturable and give the same answer from a graph replay.
// Under each merge: the separate one is a second, programmatically dependent launch, captured with its edge.
TEST(CudaUnifiedGraph, ReplayMatchesEagerAndAllocatesNothing) {
  const Shape sh{"decode d128 h32kv8 b2 kv3000", uniform(2, 1, 3000), 32, 8, 128};
  const AttentionProblem p = problem_of(sh, DType::bf16);
  for (const char* merge : {"fused", "separate"}) {
    DeviceCase c(p, {{"ATTNBENCH_3D_SPLITS", "12"}, {"ATTNBENCH_3D_MERGE", merge}}, 99);
    ASSERT_TRUE(c.plan->graph_replay);
    ASSERT_NE(c.plan->summary.find(std::string(merge) == "fused" ? "+merge(last CTA" : "+merge(separate kernel)"),
              std::string::npos)
        << c.plan->summary;
    cuda::Stream stream;
    c.run(stream.get());
    stream.synchronize();
    std::vector<uint16_t> eager(c.out_elems()), replay(c.out_elems());
    c.out.download(eager.data(), eager.size() * 2);
    c.poison();
    cuda::Graph g(stream.get(), [&] { c.run(stream.get()); });
    for (int i = 0; i < 3; ++i) {
      g.replay(stream.get());
      stream.synchronize();
      c.out.download(replay.data(), replay.size() * 2);
      EXPECT_EQ(eager, replay) << merge << " replay " << i;
      c.poison();
    }
  }
}

// The L2 walk's table reaches the workspace on the first call there: eagerly, or inside the capture when that is
// the first call (the copy from page-locked memory is then a node of the graph, replayed with the kernel).
TEST(CudaUnifiedGraph, TheL2WalkReplaysLikeItRuns) {
  const Shape sh{"prefill d128 h8kv4 b3 s700", uniform(3, 700, 700), 8, 4, 128};
  const AttentionProblem p = problem_of(sh, DType::bf16);
  const std::map<std::string, std::string> k = {{"ATTNBENCH_SM90_PATH", "wide"},
                                                {"ATTNBENCH_SM90_PERSISTENT", "1"},
                                                {"ATTNBENCH_SM90_WALK", "l2"},
                                                {"ATTNBENCH_SM90_L2_SECTION_KB", "1"}};
  DeviceCase eager_case(p, k, 7);
  ASSERT_NE(eager_case.plan->summary.find("walk=l2:1KiB"), std::string::npos) << eager_case.plan->summary;
  ASSERT_GT(eager_case.plan->workspace_bytes, 0u);
  cuda::Stream stream;
  eager_case.poison();
  eager_case.run(stream.get());
  stream.synchronize();
  const Outcome o = check_output(eager_case, 7);
  EXPECT_TRUE(o.within) << o.worst;
  std::vector<uint16_t> eager(eager_case.out_elems()), replay(eager_case.out_elems());
  eager_case.out.download(eager.data(), eager.size() * 2);
  DeviceCase captured(p, k, 7);  // the same inputs, a fresh workspace
  cuda::Graph g(stream.get(), [&] { captured.run(stream.get()); });
  for (int i = 0; i < 2; ++i) {
    g.replay(stream.get());
    stream.synchronize();
    captured.out.download(replay.data(), replay.size() * 2);
    EXPECT_EQ(eager, replay) << "replay " << i;
    captured.poison();
  }
}

}  // namespace
}  // namespace attnbench::gputest
