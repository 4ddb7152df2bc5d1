// The resolve steps of cuda.unified and cpu.unified: each decline and its text, the knobs' typed values, and the
// instance a plan builds from. Host code: cuda.unified's resolve runs here with a stand-in for the built-instance
// table. The spread and its golden file: test_resolve_spread.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include "cases/registry.hpp"
#include "resolve_spread.hpp"

namespace attnbench {
namespace {

using namespace resolve_test;

TEST(Resolve, DeclinesTheProblemWithTheReason) {
  auto reason = [](const AttentionProblem& p) { return resolve_all_built(p, knobs()).support.reason; };
  auto reason_with = [](const AttentionProblem& p, const UnifiedKnobs& k) { return resolve_all_built(p, k).support.reason; };
  EXPECT_EQ(reason(seqs({{64, 64}}, 4, 4, 96)), "head_size 96 not in {64, 128, 256}");
  AttentionProblem p = seqs({{64, 64}}, 4, 4, 64);
  p.block_size = 24;
  EXPECT_EQ(reason(p), "block_size 24 is not a multiple of 16");
  p.block_size = 0;
  EXPECT_EQ(reason(p), "block_size 0 is not a multiple of 16");
  EXPECT_EQ(reason(seqs({{64, 64}}, 6, 4, 64)), "heads not a multiple of kv_heads");
  EXPECT_EQ(reason(seqs(std::vector<std::pair<int, int>>(65536, {1, 16}), 4, 4, 64)),
            "more than 65535 sequences (grid.z limit)");
  for (DType d : {DType::e4m3, DType::e5m2}) {
    const AttentionProblem q = seqs({{1, 64}}, 2, 1, 64, d);
    EXPECT_EQ(reason(q), std::string("dtype ") + dtype_name(d) +
                             ": cuda.unified stores O in fp16 or bf16, Q in it or in 8-bit codes (e4m3, e5m2), "
                             "K/V in Q's dtype or in 8-bit codes");
    AttentionProblem kv8 = seqs({{1, 64}}, 2, 1, 64);  // 8-bit K/V: d128 only
    kv8.types.kv = d;
    EXPECT_EQ(reason(kv8), std::string("an 8-bit K/V cache (") + dtype_name(d) +
                               ") at head_size 64: cuda.unified has 8-bit K/V kernels at head_size 128 only "
                               "(and the FP8 SDPA, an 8-bit Q too, at 256)");
    kv8.head_size = 128;
    EXPECT_TRUE(resolve_all_built(kv8, knobs()).ok());
    // The FP8 SDPA (Q in the cache's codes): decode on the decode kernel at any block size, prefill on the wide
    // kernel at every length; declined by name where the narrow kernel is forced, in pages TMA cannot land, and
    // with Q and K in two formats.
    AttentionProblem dec8 = kv8;
    dec8.types.q = d;
    dec8.block_size = 16;
    const cuda::Resolution rd = resolve_all_built(dec8, knobs());
    ASSERT_TRUE(rd.ok()) << rd.support.reason;
    EXPECT_EQ(cuda::instance_name(rd.instance.key), std::string("decode/bf16-") + dtype_name(d) + "/d128/feat/q8");
    AttentionProblem q8 = seqs({{64, 64}}, 2, 1, 128);
    q8.types.q = q8.types.kv = d;
    const cuda::Resolution r = resolve_all_built(q8, knobs());
    ASSERT_TRUE(r.ok()) << r.support.reason;
    EXPECT_GT(r.instance.launch.wide_wgs, 0) << r.instance.launch.summary;
    EXPECT_EQ(cuda::instance_name(r.instance.key), std::string("wide/bf16-") + dtype_name(d) + "/d128/wgs2/feat/q8");
    UnifiedKnobs narrow = knobs();
    narrow.path = PathKnob::narrow;
    EXPECT_EQ(reason_with(q8, narrow), std::string("an 8-bit Q (") + dtype_name(d) +
                                           ") prefill runs on the wide 2D kernel only; ATTNBENCH_SM90_PATH=narrow asks for the "
                                           "narrow one");
    AttentionProblem bs32 = q8;
    bs32.block_size = 32;
    EXPECT_EQ(reason(bs32), std::string("an 8-bit Q (") + dtype_name(d) +
                                ") prefill runs on the wide 2D kernel only, which lands 8-bit codes by TMA in pages of a multiple "
                                "of 64 tokens (block_size 32)");
    AttentionProblem mixed = q8;
    mixed.types.q = d == DType::e4m3 ? DType::e5m2 : DType::e4m3;
    EXPECT_EQ(reason(mixed), "types " + mixed.types.name() +
                                 " (q-kv-o): the FP8 SDPA multiplies Q and K codes of one format (q_dtype = kv_dtype)");
  }
  // Features run on every kernel. An 8-bit cache runs wide under auto (narrow below the wide kernel's range, or in
  // pages the TMA cannot land) with at least 3 ring slots; forcing wide where TMA cannot land is declined by name.
  p = seqs({{2048, 2048}}, 4, 4, 128);
  p.features.softcap = 50.f;
  EXPECT_TRUE(resolve_all_built(p, knobs()).ok());
  EXPECT_TRUE(resolve_all_built(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}})).ok());
  p.features = {};
  p.types.kv = DType::e4m3;
  EXPECT_EQ(cuda::instance_name(resolve_all_built(p, knobs()).instance.key), "wide/bf16-e4m3/d128/wgs2/feat");
  p.q_lens = p.kv_lens = {4096};  // persistent: the plain kernel's default at d128 is 2 slots and Q loaded ahead
  const cuda::Resolution wide8 = resolve_all_built(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}}));
  ASSERT_TRUE(wide8.ok()) << wide8.support.reason;
  EXPECT_EQ(cuda::instance_name(wide8.instance.key), "wide/bf16-e4m3/d128/wgs2/feat");
  EXPECT_EQ(wide8.instance.launch.wide_stages, cuda::kWideMinStagesCodes);
  EXPECT_EQ(wide8.instance.launch.wide_q_bufs, 1);
  EXPECT_EQ(reason_with(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_STAGES", "2"}})),
            "ATTNBENCH_SM90_STAGES=2: an 8-bit cache's producer widens tile t - 1 after claiming tile t's slots, "
            "which needs at least 3 slots");
  p.block_size = 32;
  EXPECT_EQ(reason_with(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}})),
            "an 8-bit K/V cache (e4m3) at block_size 32: the wide 2D kernel lands codes by TMA, in pages of a "
            "multiple of 64 tokens; ATTNBENCH_SM90_PATH=auto or narrow runs the narrow kernel, which has it");
  const cuda::Resolution narrow8 = resolve_all_built(p, knobs());
  ASSERT_TRUE(narrow8.ok()) << narrow8.support.reason;
  EXPECT_EQ(cuda::instance_name(narrow8.instance.key), "narrow/bf16-e4m3/d128/w4r32/feat");
  // The first decline wins: an unsupported head size before its Q prologue.
  p = seqs({{64, 64}}, 4, 4, 96);
  p.fusion.q_norm = true;
  EXPECT_EQ(reason(p), "head_size 96 not in {64, 128, 256}");
  for (const AttentionProblem& q : {seqs({{64, 64}}, 4, 4, 96), p})
    EXPECT_EQ(resolve_all_built(q, knobs()).support.kind, DeclineKind::unsupported);
}

TEST(Resolve, DeclinesAQPrologueNoChosenKernelHas) {
  auto prologue = [](AttentionProblem p, int rope) {
    p.fusion.q_norm = true;
    p.fusion.q_rope_dim = rope;
    return p;
  };
  auto reason = [](const AttentionProblem& p, const UnifiedKnobs& k) { return resolve_all_built(p, k).support.reason; };
  const std::string in_wide = "the Q prologue (norm / RoPE of Q) is in the wide 2D kernel";
  const AttentionProblem d64 = prologue(seqs({{4096, 4096}}, 16, 2, 64), 64);
  EXPECT_TRUE(resolve_all_built(d64, knobs()).ok());
  EXPECT_EQ(reason(d64, knobs({{"ATTNBENCH_SM90_PATH", "narrow"}})),
            in_wide + "; ATTNBENCH_SM90_PATH=narrow runs the narrow kernel for this problem");
  EXPECT_EQ(reason(prologue(seqs({{100, 100}}, 4, 2, 64), 16), knobs()),
            in_wide + "; ATTNBENCH_SM90_PATH=auto runs the narrow kernel for this problem");
  EXPECT_EQ(reason(prologue(seqs({{1, 4096}}, 32, 8, 128), 64), knobs()),
            in_wide + "; this problem runs the 3D decode kernel");
  EXPECT_EQ(reason(prologue(seqs({{4096, 4096}}, 16, 2, 64), 24), knobs()),
            "q_rope_dim 24 is not a multiple of 16 (the Q prologue rotates 16-byte chunks)");
  // Under auto a knob the wide kernel cannot hold keeps the narrow one, which has no Q prologue: both reasons.
  EXPECT_EQ(reason(d64, knobs({{"ATTNBENCH_SM90_FLASH_WIDE", "3"}})),
            in_wide + ", which cannot run this problem: ATTNBENCH_SM90_FLASH_WIDE=3: the Q prologue (norm / RoPE of "
                      "Q) is in the kernels of at most 2 consumer warpgroups");
  // Forced wide, the same knob is the wide kernel's own decline.
  EXPECT_EQ(reason(d64, knobs({{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", "3"}})),
            "ATTNBENCH_SM90_FLASH_WIDE=3: the Q prologue (norm / RoPE of Q) is in the kernels of at most 2 consumer "
            "warpgroups");
}

TEST(Resolve, DeclinesForcedWideKnobsTheGeometryCannotHold) {
  const auto wide = [](std::map<std::string, std::string> o) {
    o["ATTNBENCH_SM90_PATH"] = "wide";
    return knobs(o);
  };
  auto reason = [](const AttentionProblem& p, const UnifiedKnobs& k) { return resolve_all_built(p, k).support.reason; };
  const AttentionProblem d128 = seqs({{4096, 4096}}, 16, 16, 128);
  EXPECT_EQ(reason(d128, wide({{"ATTNBENCH_SM90_FLASH_WIDE", "3"}})),
            "ATTNBENCH_SM90_FLASH_WIDE=3: head size 128 fits at most 2 consumer warpgroups in the register file");
  EXPECT_EQ(reason(d128, wide({{"ATTNBENCH_SM90_STAGES", "4"}})),
            "ATTNBENCH_SM90_STAGES=4: " + std::to_string(cuda::wide_smem_bytes(128, 2, 4)) +
                " bytes of shared memory at head size 128 with 2 consumer warpgroups (limit 232448)");
  EXPECT_EQ(reason(seqs({{700, 700}}, 28, 4, 128), wide({{"ATTNBENCH_SM90_GQA_PACK", "4"}})),
            "ATTNBENCH_SM90_GQA_PACK=4: a tile packs heads of one KV group, a divisor of the group size 7 up to 16");
  EXPECT_EQ(reason(seqs({{70, 70}}, 64, 2, 128), wide({{"ATTNBENCH_SM90_GQA_PACK", "32"}})),
            "ATTNBENCH_SM90_GQA_PACK=32: a tile packs heads of one KV group, a divisor of the group size 32 up to 16");
  // Q and O by TMA need a warpgroup's 64 rows to be one box: 128 / 3 = 42 tokens per head puts a head change inside.
  EXPECT_EQ(reason(seqs({{700, 700}}, 12, 4, 128),
                   wide({{"ATTNBENCH_SM90_GQA_PACK", "3"}, {"ATTNBENCH_SM90_QO", "tma"}})),
            "ATTNBENCH_SM90_QO=tma: a tile of 42 tokens per head (GQA pack 3) puts a head change inside a warpgroup's "
            "64 rows, which one TMA box cannot hold");
  AttentionProblem fp8 = d128;
  fp8.types = {DType::e4m3, DType::e4m3, DType::bf16};
  EXPECT_EQ(reason(fp8, wide({{"ATTNBENCH_SM90_QO", "tma"}})),
            "an 8-bit Q (e4m3) prefill runs on the wide 2D kernel only, which cannot run it: ATTNBENCH_SM90_QO=tma: an "
            "8-bit Q (e4m3) is copied by the threads");
  EXPECT_EQ(resolve_all_built(d128, wide({{"ATTNBENCH_SM90_FLASH_WIDE", "3"}})).support.kind,
            DeclineKind::unsupported);
  // Under auto the same knobs keep the narrow kernel; decode never reaches the wide kernel.
  const cuda::Resolution kept = resolve_all_built(d128, knobs({{"ATTNBENCH_SM90_FLASH_WIDE", "3"}}));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept.instance.key.variant, cuda::InstanceVariant::narrow);
  EXPECT_TRUE(resolve_all_built(seqs({{1, 4096}}, 16, 16, 128), wide({{"ATTNBENCH_SM90_FLASH_WIDE", "3"}})).ok());
}

TEST(Resolve, DeclinesMoreWideTilesThanAnInt32Index) {
  const AttentionProblem p = seqs({{1 << 20, 1 << 20}}, 1 << 18, 1 << 18, 128);  // 8192 q-tiles x 2^18 heads
  const cuda::Resolution r = resolve_all_built(p, knobs());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.support.reason, "2147483648 wide-kernel tiles (at most 2^31 - 1)");
  EXPECT_EQ(r.support.kind, DeclineKind::unsupported);
}

TEST(Resolve, AnInstanceTheBuildLacksIsANoInstanceDecline) {
  const AttentionProblem p = seqs({{4096, 4096}}, 16, 16, 128);
  const cuda::Resolution none = cuda::resolve(p, knobs(), DeviceInfo{}, [](const InstanceKey&) { return false; });
  EXPECT_FALSE(none.ok());
  EXPECT_EQ(none.support.kind, DeclineKind::no_instance);
  EXPECT_EQ(none.support.reason, "no instance for wide/bf16/d128/wgs2 in this build");
  EXPECT_EQ(cuda::instance_name(none.instance.key), "wide/bf16/d128/wgs2");
  // The predicate is asked for the chosen key only: no other instance stands in for it.
  std::vector<std::string> asked;
  const auto no_wide = [&](const InstanceKey& k) {
    asked.push_back(cuda::instance_name(k));
    return k.variant != cuda::InstanceVariant::wide;
  };
  EXPECT_EQ(cuda::resolve(p, knobs(), DeviceInfo{}, no_wide).support.kind, DeclineKind::no_instance);
  EXPECT_TRUE(cuda::resolve(p, knobs({{"ATTNBENCH_SM90_PATH", "narrow"}}), DeviceInfo{}, no_wide).ok());
  EXPECT_EQ(asked, (std::vector<std::string>{"wide/bf16/d128/wgs2", "narrow/bf16/d128/w4r32"}));
  // A problem declined before the instance never asks.
  asked.clear();
  EXPECT_FALSE(cuda::resolve(seqs({{64, 64}}, 4, 4, 96), knobs(), DeviceInfo{}, no_wide).ok());
  EXPECT_TRUE(asked.empty());
}

TEST(Resolve, TheInstanceCarriesWhatThePlanBuildsFrom) {
  AttentionProblem p = seqs({{4096, 4096}}, 16, 2, 64, DType::f16);
  p.fusion.q_norm = true;
  p.fusion.q_rope_dim = 32;
  p.fusion.output_gate = true;
  const cuda::Resolution r = cuda::resolve(p, knobs(), DeviceInfo{100, 90}, every_instance);
  ASSERT_TRUE(r.ok()) << r.support.reason;
  const cuda::UnifiedInstance& in = r.instance;
  EXPECT_EQ(in.backend, Backend::cuda);
  EXPECT_EQ(in.arch, 90);
  EXPECT_EQ(cuda::instance_name(in.key), "wide/fp16/d64/wgs2");
  EXPECT_TRUE(in.fusion.output_gate);
  EXPECT_TRUE(in.fusion.q_norm);
  EXPECT_EQ(in.fusion.q_rope_dim, 32);
  EXPECT_FALSE(in.graph_replay);  // 4096 queries: longer than 768
  EXPECT_EQ(in.summary, in.launch.summary + " +q-norm-rope +gate");
  EXPECT_EQ(in.launch.grid_x, 100);  // persistent: one CTA per SM of the device given
  EXPECT_NE(in.summary.find("persistent ctas=100"), std::string::npos) << in.summary;
  const cuda::Resolution decode = resolve_all_built(seqs({{1, 4096}}, 32, 8, 128), knobs());
  EXPECT_TRUE(decode.instance.graph_replay);
  EXPECT_EQ(decode.instance.summary, decode.instance.launch.summary);
  const UnifiedKnobs no3d = knobs({{"ATTNBENCH_3D_GRAPH", "0"}});
  EXPECT_FALSE(resolve_all_built(seqs({{1, 4096}}, 32, 8, 128), no3d).instance.graph_replay);
}

// Each knob's typed value; the defaults are the table's, and every cuda.unified knob of the table is read.
TEST(Resolve, KnobsParseToTypedValues) {
  const UnifiedKnobs d = knobs(), def;
  auto same = [](const UnifiedKnobs& a, const UnifiedKnobs& b) {
    return std::tie(a.path, a.narrow_warps, a.flash_wide, a.stages, a.persistent, a.gqa_pack, a.q_major_grid,
                    a.splits_3d, a.stages_3d, a.merge_3d, a.graph_2d, a.graph_3d, a.qo, a.walk, a.l2_section_kb) ==
           std::tie(b.path, b.narrow_warps, b.flash_wide, b.stages, b.persistent, b.gqa_pack, b.q_major_grid,
                    b.splits_3d, b.stages_3d, b.merge_3d, b.graph_2d, b.graph_3d, b.qo, b.walk, b.l2_section_kb);
  };
  EXPECT_TRUE(same(d, def));
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_PATH", "auto"}}).path, PathKnob::automatic);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_PATH", "narrow"}}).path, PathKnob::narrow);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_PATH", "wide"}}).path, PathKnob::wide);
  EXPECT_STREQ(cuda::path_knob_name(PathKnob::automatic), "auto");
  EXPECT_STREQ(cuda::path_knob_name(PathKnob::wide), "wide");
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_NARROW_WARPS", "4"}}).narrow_warps, cuda::NarrowWarps::w4);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_NARROW_WARPS", "8"}}).narrow_warps, cuda::NarrowWarps::w8);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_NARROW_WARPS", "4x32"}}).narrow_warps, cuda::NarrowWarps::w4x32);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_FLASH_WIDE", "3"}}).flash_wide, 3);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_STAGES", "2"}}).stages, 2);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_PERSISTENT", "auto"}}).persistent, cuda::PersistentKnob::automatic);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_PERSISTENT", "0"}}).persistent, cuda::PersistentKnob::off);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_PERSISTENT", "1"}}).persistent, cuda::PersistentKnob::on);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_GQA_PACK", "7"}}).gqa_pack, 7);
  EXPECT_TRUE(knobs({{"ATTNBENCH_Q_MAJOR_GRID", "1"}}).q_major_grid);
  EXPECT_EQ(knobs({{"ATTNBENCH_3D_SPLITS", "50"}}).splits_3d, 50);
  EXPECT_EQ(knobs({{"ATTNBENCH_3D_STAGES", "auto"}}).stages_3d, 0);
  EXPECT_EQ(knobs({{"ATTNBENCH_3D_STAGES", "3"}}).stages_3d, 3);
  EXPECT_EQ(knobs({{"ATTNBENCH_3D_STAGES", "6"}}).stages_3d, 6);
  EXPECT_EQ(knobs({{"ATTNBENCH_3D_MERGE", "auto"}}).merge_3d, cuda::MergeKnob::automatic);
  EXPECT_EQ(knobs({{"ATTNBENCH_3D_MERGE", "fused"}}).merge_3d, cuda::MergeKnob::fused);
  EXPECT_EQ(knobs({{"ATTNBENCH_3D_MERGE", "separate"}}).merge_3d, cuda::MergeKnob::separate);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_QO", "auto"}}).qo, cuda::QoKnob::automatic);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_QO", "tma"}}).qo, cuda::QoKnob::tma);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_QO", "threads"}}).qo, cuda::QoKnob::threads);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_WALK", "auto"}}).walk, cuda::WalkKnob::automatic);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_WALK", "rank"}}).walk, cuda::WalkKnob::rank);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_WALK", "l2"}}).walk, cuda::WalkKnob::l2);
  EXPECT_EQ(knobs({{"ATTNBENCH_SM90_L2_SECTION_KB", "4096"}}).l2_section_kb, 4096);
  EXPECT_FALSE(knobs({{"ATTNBENCH_2D_GRAPH", "0"}}).graph_2d);
  EXPECT_FALSE(knobs({{"ATTNBENCH_3D_GRAPH", "0"}}).graph_3d);
  EXPECT_EQ(cpu::CpuKnobs::parse(values()).max_gflop, cpu::CpuKnobs{}.max_gflop);
  EXPECT_EQ(cpu::CpuKnobs::parse(values({{"ATTNBENCH_CPU_MAX_GFLOP", "0"}})).max_gflop, 0);
  for (const KnobSpec& k : knob_table()) {
    if (!glob_list_match(k.kernels, "cuda.unified")) continue;
    const std::string other = k.values.empty() ? "5" : k.values.front() != k.default_value ? k.values.front()
                                                                                             : k.values.back();
    EXPECT_FALSE(same(knobs({{k.name, other}}), def)) << k.name << "=" << other << " has no typed value";
  }
  // The table still checks every value before anything parses it.
  EXPECT_THROW(values({{"ATTNBENCH_SM90_PATH", "fast"}}), std::invalid_argument);
  EXPECT_THROW(values({{"ATTNBENCH_SM90_GQA_PACK", "-1"}}), std::invalid_argument);
  EXPECT_THROW(values({{"ATTNBENCH_CPU_MAX_GFLOP", "x"}}), std::invalid_argument);
}

TEST(Resolve, CpuDeclinesWithTheReason) {
  auto reason = [](const AttentionProblem& p, int gflop = 64) {
    return cpu::resolve(p, cpu::CpuKnobs{gflop}, cpu::CpuDevice{}).support.reason;
  };
  EXPECT_EQ(reason(seqs({{8, 8}}, 2, 1, 12)), "head_size 12 is not a multiple of 8 in [8, 512]");
  EXPECT_EQ(reason(seqs({{8, 8}}, 2, 1, 520)), "head_size 520 is not a multiple of 8 in [8, 512]");
  const AttentionProblem e4m3 = seqs({{1, 64}}, 2, 1, 64, DType::e4m3);
  EXPECT_EQ(reason(e4m3), "dtype e4m3: cpu.unified stores O in fp16 or bf16, Q in it or in 8-bit codes (e4m3, "
                          "e5m2), K/V in Q's dtype or in 8-bit codes");
  AttentionProblem mixed = seqs({{1, 64}}, 2, 1, 64);
  mixed.types.o = DType::f16;  // the one rule the CUDA backend shares
  EXPECT_EQ(reason(mixed), "types bf16-bf16-fp16 (q-kv-o): cpu.unified stores O in fp16 or bf16, Q in it or in "
                           "8-bit codes (e4m3, e5m2), K/V in Q's dtype or in 8-bit codes");
  AttentionProblem p = seqs({{64, 64}}, 4, 4, 64);
  p.features.softcap = 50.f;
  EXPECT_EQ(reason(p), "") << "cpu.unified computes every attention feature";
  p.types.kv = DType::e5m2;
  EXPECT_EQ(reason(p), "") << "and 8-bit caches";
  const AttentionProblem big = seqs({{2048, 2048}}, 16, 16, 128);  // ~17.2 GFLOP
  EXPECT_EQ(reason(big, 1), "problem needs 17.2 GFLOP, above the CPU limit of 1 GFLOP (knob ATTNBENCH_CPU_MAX_GFLOP, "
                            "0 = no limit)");
  EXPECT_TRUE(cpu::resolve(big, cpu::CpuKnobs{0}, cpu::CpuDevice{}).ok());
  EXPECT_EQ(cpu::over_work_limit(17.2e9, cpu::CpuKnobs{1}),
            cpu::over_work_limit(17.2e9, values({{"ATTNBENCH_CPU_MAX_GFLOP", "1"}})));
  AttentionProblem bad = seqs({{8, 8}}, 2, 1, 64);
  bad.kv_lens = {4};  // fewer keys than queries
  EXPECT_FALSE(reason(bad).empty());
  std::string validate_reason;
  try {
    bad.validate();
  } catch (const std::invalid_argument& e) {
    validate_reason = e.what();
  }
  EXPECT_EQ(reason(bad), validate_reason);
}

}  // namespace
}  // namespace attnbench
