#include "inputs.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

namespace attnbench {

BlockOrder parse_block_order(const std::string& s) {
  if (s == "contiguous") return BlockOrder::contiguous;
  if (s == "shuffled") return BlockOrder::shuffled;
  throw std::invalid_argument("--block-order: '" + s + "' is not contiguous|shuffled");
}

const char* block_order_name(BlockOrder o) { return o == BlockOrder::contiguous ? "contiguous" : "shuffled"; }

namespace {
// Fills with N(0, 1) rounded to the dtype; a value that rounds to exactly 0 is nudged so no element is zero.
void fill_normal(std::vector<uint16_t>& v, std::size_t n, DType dt, std::mt19937_64& rng) {
  v.resize(n);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (auto& x : v) {
    float f = dist(rng);
    if (f == 0.f) f = 1e-3f;
    x = float_to_half(f, dt);
    if ((x & 0x7fff) == 0) x = float_to_half(1e-3f, dt);
  }
}
}  // namespace

HostInputs build_inputs(const AttentionProblem& p, uint64_t seed, BlockOrder order) {
  p.validate();
  HostInputs in;
  in.problem = p;
  const int n = p.num_seqs();
  in.cu_seqlens_q.resize(n + 1, 0);
  in.seqused_k.resize(n);
  for (int s = 0; s < n; ++s) {
    in.cu_seqlens_q[s + 1] = in.cu_seqlens_q[s] + p.q_lens[s];
    in.seqused_k[s] = p.kv_lens[s];
  }
  const int mbps = p.max_blocks_per_seq();
  in.num_blocks = p.num_blocks();
  std::vector<int32_t> physical(in.num_blocks);
  std::iota(physical.begin(), physical.end(), 0);
  std::mt19937_64 rng(seed);
  if (order == BlockOrder::shuffled) std::shuffle(physical.begin(), physical.end(), rng);
  in.block_table.assign(static_cast<std::size_t>(n) * mbps, 0);
  int64_t next = 0;
  for (int s = 0; s < n; ++s) {
    const int nb = (p.kv_lens[s] + p.block_size - 1) / p.block_size;
    for (int b = 0; b < nb; ++b) in.block_table[static_cast<std::size_t>(s) * mbps + b] = physical[next++];
  }
  const std::size_t hs = static_cast<std::size_t>(p.head_size);
  fill_normal(in.q, static_cast<std::size_t>(p.total_q()) * p.heads * hs, p.dtype, rng);
  const std::size_t cache = static_cast<std::size_t>(in.num_blocks) * p.block_size * p.kv_heads * hs;
  fill_normal(in.k_cache, cache, p.dtype, rng);
  fill_normal(in.v_cache, cache, p.dtype, rng);
  return in;
}

AttentionParams HostInputs::params() const {
  AttentionParams a = make_attention_params(problem);
  a.q = q.data();
  a.k_cache = k_cache.data();
  a.v_cache = v_cache.data();
  a.cu_seqlens_q = cu_seqlens_q.data();
  a.seqused_k = seqused_k.data();
  a.block_table = block_table.data();
  return a;
}

}  // namespace attnbench
