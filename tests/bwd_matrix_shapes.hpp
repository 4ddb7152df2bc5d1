// The gradient gate's matrix shapes, shared by the CPU planted-bug matrix and the GPU tests that gate
// cuda.unified_bwd and the GPU reference on them: rows over 16k keys, d256 with a GQA group of 16, a ragged batch,
// a non-causal batch, a window with softcap, queries shorter than their keys (every group >= 2, so that a GQA bug
// can show).
#pragma once
#include <utility>
#include <vector>

#include "attnbench/attention.hpp"

namespace attnbench {

struct BwdShape {
  const char* name;
  int head_size, heads, kv_heads;
  std::vector<std::pair<int, int>> seqlens;
  bool causal;
  int window_left = -1;
  float softcap = 0.f;
};

inline std::vector<BwdShape> bwd_matrix() {
  return {
      {"q1k_kv16k_d64_g2", 64, 2, 1, {{1024, 16384}}, true},
      {"s512_d256_g16", 256, 16, 1, {{512, 512}}, true},
      {"ragged_d128_g4", 128, 8, 2, {{300, 300}, {1000, 1000}, {77, 77}, {640, 640}}, true},
      {"full_d128_g2_b2", 128, 4, 2, {{700, 700}, {700, 700}}, false},
      {"window_softcap_d64_g2", 64, 4, 2, {{1500, 1500}}, true, 256, 30.f},
      {"q_short_d64_g4", 64, 8, 2, {{200, 900}, {64, 64}}, true},
  };
}

inline AttentionProblem problem_of(const BwdShape& m, DType dt) {
  AttentionProblem p;
  for (const auto& [q, kv] : m.seqlens) {
    p.q_lens.push_back(q);
    p.kv_lens.push_back(kv);
  }
  p.heads = m.heads;
  p.kv_heads = m.kv_heads;
  p.head_size = m.head_size;
  p.causal = m.causal;
  p.features.window_left = m.window_left;
  p.features.softcap = m.softcap;
  p.types = AttentionTypes::all(dt);
  return p;
}

}  // namespace attnbench
