// A GPU test's attention shape, (q_len, kv_len) per sequence, and the problem it stands for.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "attnbench/attention.hpp"

namespace attnbench::gputest {

struct Shape {
  std::string name;
  std::vector<std::pair<int, int>> seqs;  // (q_len, kv_len)
  int heads, kv_heads, head_size;
  bool causal = true;
  int block_size = 64;
  bool required = false;  // for kernels that may decline: a decline of this shape fails the test
};

// b sequences of (q, kv).
inline std::vector<std::pair<int, int>> uniform(int b, int q, int kv) {
  return std::vector<std::pair<int, int>>(b, {q, kv});
}

inline AttentionProblem problem_of(const Shape& s, DType dt) {
  AttentionProblem p;
  for (auto [q, kv] : s.seqs) {
    p.q_lens.push_back(q);
    p.kv_lens.push_back(kv);
  }
  p.heads = s.heads;
  p.kv_heads = s.kv_heads;
  p.head_size = s.head_size;
  p.causal = s.causal;
  p.block_size = s.block_size;
  p.types = AttentionTypes::all(dt);
  return p;
}

}  // namespace attnbench::gputest
