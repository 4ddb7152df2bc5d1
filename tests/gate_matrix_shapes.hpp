// The planted-bug matrix's shapes, shared by the CPU matrix test and the GPU test that gates cuda.unified on them:
// long-KV decode (kv 32768 and 131072), short KV, chunked and speculative prefill, head sizes 64/128/256 and GQA
// groups 1/4/7/16 (kv_heads >= 2 wherever a head-map bug must be able to show).
#pragma once
#include <utility>
#include <vector>

#include "attnbench/attention.hpp"

namespace attnbench {

struct MatrixShape {
  const char* name;
  int head_size, heads, kv_heads;
  std::vector<std::pair<int, int>> seqlens;  // (q, kv) per sequence
  bool causal;
};

inline std::vector<MatrixShape> matrix_shapes() {
  return {
      {"decode_d128_g4_kv32768", 128, 8, 2, {{1, 32768}}, true},
      {"decode_d64_g2_kv131072", 64, 4, 2, {{1, 131072}}, true},
      {"decode_d256_g16_b2_kv8192", 256, 32, 2, {{1, 8192}, {1, 8192}}, true},
      {"decode_d128_g4_ragged", 128, 8, 2, {{1, 523}, {1, 37}, {1, 2011}, {1, 1328}}, true},
      {"short_d128_g1_b2_s200", 128, 4, 4, {{200, 200}, {200, 200}}, true},
      {"short_d64_g1_ragged", 64, 4, 4, {{5, 18}, {129, 463}}, true},
      {"chunk_d128_g7_q16_kv1000", 128, 14, 2, {{16, 1000}, {16, 777}}, true},
      {"spec_d128_g4_q4_kv8192", 128, 8, 2, {{4, 8192}}, true},
      // 3 tokens x 14 heads: a row count that leaves split-KV buffers off a 16-byte multiple
      {"spec_d128_g7_ragged", 128, 14, 2, {{1, 700}, {2, 3000}}, true},
      {"full_d64_g4_s300", 64, 8, 2, {{300, 300}}, false},
  };
}

inline AttentionProblem problem_of(const MatrixShape& m, DType dt) {
  AttentionProblem p;
  for (const auto& [q, kv] : m.seqlens) {
    p.q_lens.push_back(q);
    p.kv_lens.push_back(kv);
  }
  p.heads = m.heads;
  p.kv_heads = m.kv_heads;
  p.head_size = m.head_size;
  p.causal = m.causal;
  p.types = AttentionTypes::all(dt);
  return p;
}

}  // namespace attnbench
