// The resolve tests' spread: problems x knob settings (cuda.unified) and x CPU settings (cpu.unified), their
// outcomes as text, and the knob and resolve helpers the resolve tests share (test_resolve.cpp, the declines;
// test_resolve_spread.cpp, the golden file and supports()/plan() against resolve()).
#pragma once

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

namespace attnbench::resolve_test {

// The spread: problems x knob settings, and the golden text of their outcomes (one block per problem: each
// distinct outcome, then the knob codes that give it).
struct SpreadShape {
  std::string name;
  AttentionProblem p;
};

inline AttentionProblem seqs(std::vector<std::pair<int, int>> qkv, int heads, int kv_heads, int d, DType dt = DType::bf16) {
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

inline AttentionProblem with(AttentionProblem p, const std::function<void(AttentionProblem&)>& f) {
  f(p);
  return p;
}

inline std::vector<SpreadShape> spread_shapes() {
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

inline KnobCase knob_case(const std::string& path, int wide, int stages, int pack, int splits, const std::string& persistent,
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
inline std::vector<KnobCase> knob_spread() {
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
inline std::string golden_block(const std::string& header,
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

inline std::vector<CpuCase> cpu_spread() {
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

inline std::string golden_text(const std::function<std::string(const AttentionProblem&, const KnobCase&)>& cuda_outcome,
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

inline KnobValues values(std::map<std::string, std::string> o = {}) { return KnobValues::resolve(o, /*read_env=*/false); }
inline UnifiedKnobs knobs(std::map<std::string, std::string> o = {}) { return UnifiedKnobs::parse(values(std::move(o))); }
inline bool every_instance(const InstanceKey&) { return true; }
inline cuda::Resolution resolve_all_built(const AttentionProblem& p, const UnifiedKnobs& k) {
  return cuda::resolve(p, k, DeviceInfo{}, every_instance);
}

inline std::string cuda_outcome(const AttentionProblem& p, const KnobCase& k) {
  const cuda::Resolution r = resolve_all_built(p, UnifiedKnobs::parse(values(k.values)));
  if (!r.ok()) return "no: " + r.support.reason;
  const cuda::UnifiedLaunchPlan& lp = r.instance.launch;
  return r.instance.summary + " | m=" + std::to_string(lp.m_tiles) + " wt=" + std::to_string(lp.work_tiles) +
         " grid=" + std::to_string(lp.grid_x) + "," + std::to_string(lp.grid_y) + "," + std::to_string(lp.grid_z) +
         " ws=" + std::to_string(lp.workspace_bytes) + " qbufs=" + std::to_string(lp.wide_q_bufs) +
         " graph=" + std::to_string(r.instance.graph_replay) + " key=" + cuda::instance_name(r.instance.key);
}

inline std::string cpu_outcome(const AttentionProblem& p, const CpuCase& c) {
  const cpu::Resolution r = cpu::resolve(p, cpu::CpuKnobs{c.max_gflop}, cpu::CpuDevice{kCpuThreads}, c.opts);
  if (!r.ok()) return "no: " + r.support.reason;
  return r.instance.summary + " | ws=" + std::to_string(r.instance.workspace_bytes);
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("#", 0) != 0) out.push_back(line);
  return out;
}


}  // namespace attnbench::resolve_test
