// The resolve steps of cuda.unified and cpu.unified: each decline and its text, the knobs' typed values, supports()
// and plan() against resolve(), and the outcomes of a spread of problems x knob settings against a golden file.
// Host code: cuda.unified's resolve runs here with a stand-in for the built-instance table.
#include <gtest/gtest.h>
#include <omp.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../kernels/cpu/unified.hpp"
#include "../kernels/cuda/resolve.hpp"
#include "attnbench/backends.hpp"
#include "gate_matrix_shapes.hpp"

#ifdef ATTNBENCH_WITH_CUDA
#include "../kernels/cuda/launch.hpp"
#include "attnbench/gpu_runtime.hpp"
#endif

namespace attnbench {
namespace {

// The spread: problems x knob settings, and the golden text of their outcomes (one block per problem: each
// distinct outcome, then the knob codes that give it).
struct SpreadShape {
  std::string name;
  AttentionProblem p;
};

AttentionProblem seqs(std::vector<std::pair<int, int>> qkv, int heads, int kv_heads, int d, DType dt = DType::bf16) {
  AttentionProblem p;
  for (const auto& [q, kv] : qkv) {
    p.q_lens.push_back(q);
    p.kv_lens.push_back(kv);
  }
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.head_size = d;
  p.types = AttentionTypes::all(dt);
  return p;
}

AttentionProblem with(AttentionProblem p, const std::function<void(AttentionProblem&)>& f) {
  f(p);
  return p;
}

std::vector<SpreadShape> spread_shapes() {
  std::vector<SpreadShape> out;
  for (const MatrixShape& m : matrix_shapes()) out.push_back({m.name, problem_of(m, DType::bf16)});
  const std::vector<std::pair<int, int>> s2048(4, {2048, 2048}), s512(8, {512, 512});
  out.push_back({"long_d128_mha_s8192", seqs({{8192, 8192}}, 32, 32, 128)});
  out.push_back({"long_d64_b2_s4096", seqs({{4096, 4096}, {4096, 4096}}, 16, 16, 64)});
  out.push_back({"mid_d128_g4_b4_s2048_fp16", seqs(s2048, 32, 8, 128, DType::f16)});
  out.push_back({"gated_d256_g16_s2048", seqs({{2048, 2048}}, 32, 2, 256)});
  out.push_back({"ragged_d128_g4_short_fp16", seqs({{5, 18}, {129, 463}, {768, 768}}, 32, 8, 128, DType::f16)});
  out.push_back({"g7_d128_b2_s700", seqs({{700, 700}, {700, 700}}, 28, 4, 128)});
  auto block = [](int bs) { return [=](AttentionProblem& p) { p.block_size = bs; }; };
  out.push_back({"bs32_d128_s2048", with(seqs({{2048, 2048}}, 8, 8, 128), block(32))});
  out.push_back({"bs16_d256_s1024", with(seqs({{1024, 1024}}, 16, 16, 256), block(16))});
  out.push_back({"full_d64_b8_s512", with(seqs(s512, 16, 16, 64), [](AttentionProblem& p) { p.causal = false; })});
  const auto gate = [](AttentionProblem& p) { p.fusion.output_gate = true; };
  out.push_back({"gate_decode_d128_b4", with(seqs(std::vector<std::pair<int, int>>(4, {1, 4096}), 32, 8, 128), gate)});
  out.push_back({"gate_d64_s1024", with(seqs({{1024, 1024}}, 8, 8, 64), gate)});
  auto prologue = [](int rope, bool norm) {
    return [=](AttentionProblem& p) {
      p.fusion.q_norm = norm;
      p.fusion.q_rope_dim = rope;
    };
  };
  out.push_back({"prologue_d64_g8_s4096", with(seqs({{4096, 4096}}, 16, 2, 64), prologue(64, true))});
  out.push_back({"prologue_d128_g4_b8_s512", with(seqs(s512, 32, 8, 128), prologue(64, true))});
  out.push_back({"prologue_d128_s100", with(seqs({{100, 100}}, 8, 8, 128), prologue(32, true))});
  out.push_back({"prologue_rope24_d64_s4096", with(seqs({{4096, 4096}}, 16, 2, 64), prologue(24, true))});
  out.push_back({"prologue_decode_d128", with(seqs({{1, 4096}}, 32, 8, 128), prologue(0, true))});
  out.push_back({"rope_only_d128_s1024", with(seqs({{1024, 1024}}, 8, 8, 128), prologue(32, false))});
  out.push_back({"head96", seqs({{64, 64}}, 4, 4, 96)});
  out.push_back({"block24_d64", with(seqs({{64, 64}}, 4, 4, 64), block(24))});
  out.push_back({"heads6_kv4", seqs({{64, 64}}, 6, 4, 64)});
  out.push_back({"e4m3_d128", seqs({{1, 4096}}, 8, 2, 128, DType::e4m3)});
  const auto softcap = [](AttentionProblem& p) { p.features.softcap = 50.f; };
  out.push_back({"softcap_d128", with(seqs({{512, 512}}, 8, 8, 128), softcap)});
  return out;
}

// A knob setting and its code: path (a|n|w), FLASH_WIDE, STAGES, GQA_PACK, 3D_SPLITS, PERSISTENT (a|0|1),
// NARROW_WARPS (4|8|x = 4x32), Q_MAJOR_GRID, 2D_GRAPH, 3D_GRAPH.
struct KnobCase {
  std::string code;
  std::map<std::string, std::string> values;
};

KnobCase knob_case(const std::string& path, int wide, int stages, int pack, int splits, const std::string& persistent,
                   const std::string& warps, int q_major, int graph2d, int graph3d) {
  KnobCase c;
  c.code = path.substr(0, 1) + std::to_string(wide) + std::to_string(stages) + std::to_string(pack) +
           std::to_string(splits) + persistent.substr(0, 1) + (warps == "4x32" ? "x" : warps) +
           std::to_string(q_major) + std::to_string(graph2d) + std::to_string(graph3d);
  c.values = {{"ATTNBENCH_SM90_PATH", path},          {"ATTNBENCH_SM90_FLASH_WIDE", std::to_string(wide)},
              {"ATTNBENCH_SM90_STAGES", std::to_string(stages)}, {"ATTNBENCH_SM90_GQA_PACK", std::to_string(pack)},
              {"ATTNBENCH_3D_SPLITS", std::to_string(splits)},  {"ATTNBENCH_SM90_PERSISTENT", persistent},
              {"ATTNBENCH_SM90_NARROW_WARPS", warps},           {"ATTNBENCH_Q_MAJOR_GRID", std::to_string(q_major)},
              {"ATTNBENCH_2D_GRAPH", std::to_string(graph2d)},  {"ATTNBENCH_3D_GRAPH", std::to_string(graph3d)}};
  return c;
}

// The geometry knobs' product at the other knobs' defaults, then the other knobs' product under auto and wide.
std::vector<KnobCase> knob_spread() {
  std::vector<KnobCase> out;
  for (const std::string path : {"auto", "narrow", "wide"})
    for (int wide = 0; wide <= 3; ++wide)
      for (int stages : {0, 2, 3, 4})
        for (int pack = 0; pack <= 3; ++pack)
          for (int splits : {0, 3}) out.push_back(knob_case(path, wide, stages, pack, splits, "auto", "4x32", 0, 1, 1));
  for (const std::string path : {"auto", "wide"})
    for (const std::string persistent : {"auto", "0", "1"})
      for (const std::string warps : {"4", "8", "4x32"})
        for (int q_major = 0; q_major <= 1; ++q_major)
          for (int g2 = 0; g2 <= 1; ++g2)
            for (int g3 = 0; g3 <= 1; ++g3)
              if (persistent != "auto" || warps != "4x32" || q_major || !g2 || !g3)
                out.push_back(knob_case(path, 0, 0, 0, 0, persistent, warps, q_major, g2, g3));
  return out;
}

// One block per name: each distinct outcome in order of first appearance, then the codes that give it (or "all").
std::string golden_block(const std::string& header,
                         const std::vector<std::pair<std::string, std::string>>& code_outcome) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> codes;
  for (const auto& [code, outcome] : code_outcome) {
    if (!codes.count(outcome)) order.push_back(outcome);
    codes[outcome].push_back(code);
  }
  std::string text = header + "\n";
  for (const std::string& o : order) {
    text += "  " + o + "\n";
    if (order.size() == 1) {
      text += "    all\n";
      continue;
    }
    std::string line = "   ";
    for (const std::string& c : codes[o]) {
      if (line.size() + 1 + c.size() > 116) text += line + "\n", line = "   ";
      line += " " + c;
    }
    text += line + "\n";
  }
  return text;
}

// CPU settings: ATTNBENCH_CPU_MAX_GFLOP x the kernel's options (none, 3 splits, q_tile 16, split path), 4 threads.
struct CpuCase {
  std::string code;
  int max_gflop;
  CpuUnifiedOptions opts;
};

std::vector<CpuCase> cpu_spread() {
  std::vector<CpuCase> out;
  for (int g : {0, 1, 64}) {
    const std::string gs = "g" + std::to_string(g);
    out.push_back({gs + "/-", g, {}});
    out.push_back({gs + "/s3", g, {3, 0, false}});
    out.push_back({gs + "/q16", g, {0, 16, false}});
    out.push_back({gs + "/split", g, {0, 0, true}});
  }
  return out;
}

constexpr int kCpuThreads = 4;

std::string golden_text(const std::function<std::string(const AttentionProblem&, const KnobCase&)>& cuda_outcome,
                        const std::function<std::string(const AttentionProblem&, const CpuCase&)>& cpu_outcome) {
  std::string text;
  const std::vector<KnobCase> knobs = knob_spread();
  for (const SpreadShape& s : spread_shapes()) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const KnobCase& k : knobs) rows.push_back({k.code, cuda_outcome(s.p, k)});
    text += golden_block("cuda.unified " + s.name, rows);
  }
  for (const SpreadShape& s : spread_shapes()) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const CpuCase& c : cpu_spread()) rows.push_back({c.code, cpu_outcome(s.p, c)});
    text += golden_block("cpu.unified " + s.name, rows);
  }
  return text;
}

using cuda::DeviceInfo;
using cuda::InstanceKey;
using cuda::PathKnob;
using cuda::UnifiedKnobs;

KnobValues values(std::map<std::string, std::string> o = {}) { return KnobValues::resolve(o, /*read_env=*/false); }
UnifiedKnobs knobs(std::map<std::string, std::string> o = {}) { return UnifiedKnobs::parse(values(std::move(o))); }
bool every_instance(const InstanceKey&) { return true; }
cuda::Resolution resolve_all_built(const AttentionProblem& p, const UnifiedKnobs& k) {
  return cuda::resolve(p, k, DeviceInfo{}, every_instance);
}

std::string cuda_outcome(const AttentionProblem& p, const KnobCase& k) {
  const cuda::Resolution r = resolve_all_built(p, UnifiedKnobs::parse(values(k.values)));
  if (!r.ok()) return "no: " + r.support.reason;
  const cuda::UnifiedLaunchPlan& lp = r.instance.launch;
  return r.instance.summary + " | m=" + std::to_string(lp.m_tiles) + " wt=" + std::to_string(lp.work_tiles) +
         " grid=" + std::to_string(lp.grid_x) + "," + std::to_string(lp.grid_y) + "," + std::to_string(lp.grid_z) +
         " ws=" + std::to_string(lp.workspace_bytes) + " qbufs=" + std::to_string(lp.wide_q_bufs) +
         " graph=" + std::to_string(r.instance.graph_replay) + " key=" + cuda::instance_name(r.instance.key);
}

std::string cpu_outcome(const AttentionProblem& p, const CpuCase& c) {
  const cpu::Resolution r = cpu::resolve(p, cpu::CpuKnobs{c.max_gflop}, cpu::CpuDevice{kCpuThreads}, c.opts);
  if (!r.ok()) return "no: " + r.support.reason;
  return r.instance.summary + " | ws=" + std::to_string(r.instance.workspace_bytes);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("#", 0) != 0) out.push_back(line);
  return out;
}

// Path, geometry, splits, workspace, graph replay, instance and summary of every problem and knob setting of the
// spread, and every decline's text (tests/data). A deliberate change of the plans rewrites the file with
// ATTNBENCH_WRITE_GOLDEN=1 (the test then fails, to be run again); the diff is the review.
TEST(Resolve, SpreadMatchesTheGoldenOutcomes) {
  const char* path = ATTNBENCH_SOURCE_DIR "/tests/data/resolve_golden.txt";
  if (const char* w = std::getenv("ATTNBENCH_WRITE_GOLDEN"); w != nullptr && std::string(w) == "1") {
    std::ifstream old(path);
    std::string header, line;
    while (std::getline(old, line) && line.rfind("#", 0) == 0) header += line + "\n";
    std::ofstream(path) << header << golden_text(cuda_outcome, cpu_outcome);
    FAIL() << "rewrote " << path << ": review its diff, then run the test again";
  }
  std::ifstream f(path);
  ASSERT_TRUE(f) << "tests/data/resolve_golden.txt";
  std::stringstream golden;
  golden << f.rdbuf();
  const std::vector<std::string> want = lines_of(golden.str()), got = lines_of(golden_text(cuda_outcome, cpu_outcome));
  std::string block;
  for (std::size_t i = 0; i < std::min(want.size(), got.size()); ++i) {
    if (want[i].rfind("  ", 0) != 0) block = want[i];
    ASSERT_EQ(got[i], want[i]) << block << ", line " << i + 1;
  }
  EXPECT_EQ(got.size(), want.size());
}

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
                             ": cuda.unified stores Q and O in one 16-bit dtype, K/V in it or in 8-bit codes (e4m3, "
                             "e5m2)");
    AttentionProblem kv8 = seqs({{1, 64}}, 2, 1, 64);  // 8-bit K/V: d128 only
    kv8.types.kv = d;
    EXPECT_EQ(reason(kv8), std::string("an 8-bit K/V cache (") + dtype_name(d) +
                               ") at head_size 64: cuda.unified has 8-bit K/V kernels at head_size 128 only");
    kv8.head_size = 128;
    EXPECT_TRUE(resolve_all_built(kv8, knobs()).ok());
  }
  // Features run on every kernel; an 8-bit cache on the narrow and decode ones: forcing the wide kernel on it is
  // declined by name.
  p = seqs({{2048, 2048}}, 4, 4, 128);
  p.features.softcap = 50.f;
  EXPECT_TRUE(resolve_all_built(p, knobs()).ok());
  EXPECT_TRUE(resolve_all_built(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}})).ok());
  p.features = {};
  p.types.kv = DType::e4m3;
  EXPECT_EQ(reason_with(p, knobs({{"ATTNBENCH_SM90_PATH", "wide"}})),
            "an 8-bit K/V cache (e4m3): not in the wide 2D kernel; ATTNBENCH_SM90_PATH=auto or narrow runs the "
            "narrow kernel, which has it");
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
                    a.splits_3d, a.graph_2d, a.graph_3d) ==
           std::tie(b.path, b.narrow_warps, b.flash_wide, b.stages, b.persistent, b.gqa_pack, b.q_major_grid,
                    b.splits_3d, b.graph_2d, b.graph_3d);
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
  EXPECT_FALSE(knobs({{"ATTNBENCH_2D_GRAPH", "0"}}).graph_2d);
  EXPECT_FALSE(knobs({{"ATTNBENCH_3D_GRAPH", "0"}}).graph_3d);
  EXPECT_EQ(cpu::CpuKnobs::parse(values()).max_gflop, cpu::CpuKnobs{}.max_gflop);
  EXPECT_EQ(cpu::CpuKnobs::parse(values({{"ATTNBENCH_CPU_MAX_GFLOP", "0"}})).max_gflop, 0);
  for (const KnobSpec& k : knob_table()) {
    if (k.meaning.rfind("cuda.unified", 0) != 0) continue;
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
  EXPECT_EQ(reason(e4m3), "types e4m3 (q-kv-o): cpu.unified stores Q and O in one 16-bit dtype, K/V in it or in an "
                          "8-bit one");
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

// supports() is resolve()'s support and plan() builds resolve()'s instance, over the spread.
TEST(Resolve, CpuSupportsAndPlanFollowResolve) {
  const cpu::CpuDevice device{omp_get_max_threads()};
  for (const SpreadShape& s : spread_shapes())
    for (const CpuCase& c : cpu_spread()) {
      const KnobValues kv = values({{"ATTNBENCH_CPU_MAX_GFLOP", std::to_string(c.max_gflop)}});
      const auto kernel = make_cpu_unified(c.opts);
      const cpu::Resolution r = cpu::resolve(s.p, cpu::CpuKnobs::parse(kv), device, c.opts);
      const Support sup = kernel->supports(s.p, kv);
      EXPECT_EQ(sup.ok, r.ok()) << s.name << " " << c.code;
      EXPECT_EQ(sup.reason, r.support.reason) << s.name << " " << c.code;
      if (!r.ok()) {
        EXPECT_THROW(kernel->plan(s.p, kv), std::invalid_argument) << s.name << " " << c.code;
        continue;
      }
      const auto plan = kernel->plan(s.p, kv);
      EXPECT_EQ(plan->summary, r.instance.summary) << s.name << " " << c.code;
      EXPECT_EQ(plan->workspace_bytes, r.instance.workspace_bytes) << s.name << " " << c.code;
    }
}

#ifdef ATTNBENCH_WITH_CUDA
TEST(Resolve, CudaSupportsAndPlanFollowResolve) {
  DeviceInfo device;
  if (gpu::device_count() > 0) {
    const auto props = gpu::device_props(0);
    device = DeviceInfo{props.sm_count, props.cc_major * 10 + props.cc_minor};
  }
  const cuda::InstanceTable t = cuda::built_instances();
  const auto built = [&](const InstanceKey& k) { return cuda::find_instance(t.begin, t.end, k) != nullptr; };
  const auto kernel = make_cuda_unified();
  const std::vector<KnobCase> spread = knob_spread();
  for (const SpreadShape& s : spread_shapes())
    for (std::size_t i = 0; i < spread.size(); i += 7) {  // every 7th setting: a spread of each knob
      const KnobValues kv = values(spread[i].values);
      const cuda::Resolution r = cuda::resolve(s.p, UnifiedKnobs::parse(kv), device, built);
      const Support sup = kernel->supports(s.p, kv);
      EXPECT_EQ(sup.ok, r.ok()) << s.name << " " << spread[i].code;
      EXPECT_EQ(sup.reason, r.support.reason) << s.name << " " << spread[i].code;
      EXPECT_EQ(sup.kind, r.support.kind) << s.name << " " << spread[i].code;
      if (!r.ok()) {
        try {
          kernel->plan(s.p, kv);
          ADD_FAILURE() << s.name << " " << spread[i].code << ": plan() of a decline";
        } catch (const std::invalid_argument& e) {
          EXPECT_EQ(std::string(e.what()), "cuda.unified: " + r.support.reason);
        }
        continue;
      }
      const auto plan = kernel->plan(s.p, kv);
      EXPECT_EQ(plan->summary, r.instance.summary) << s.name << " " << spread[i].code;
      EXPECT_EQ(plan->workspace_bytes, r.instance.launch.workspace_bytes) << s.name << " " << spread[i].code;
      EXPECT_EQ(plan->graph_replay, r.instance.graph_replay) << s.name << " " << spread[i].code;
    }
}
#endif

}  // namespace
}  // namespace attnbench
