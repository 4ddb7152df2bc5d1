#include "inputs.hpp"

#include <algorithm>
#include <cmath>
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
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Fills the cache slots no sequence owns with the poison values (inputs.hpp).
void poison_unowned_slots(HostInputs& in) {
  const AttentionProblem& p = in.problem;
  const std::size_t token = static_cast<std::size_t>(p.kv_heads) * p.head_size;
  const uint16_t pk = float_to_half(kPoisonK, p.dtype), pv = float_to_half(kPoisonV, p.dtype);
  auto fill = [&](int64_t block, int from_token) {
    const std::size_t begin = (static_cast<std::size_t>(block) * p.block_size + from_token) * token;
    const std::size_t end = static_cast<std::size_t>(block + 1) * p.block_size * token;
    std::fill(in.k_cache.begin() + begin, in.k_cache.begin() + end, pk);
    std::fill(in.v_cache.begin() + begin, in.v_cache.begin() + end, pv);
  };
  fill(in.sentinel_block, 0);
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int tail = p.kv_lens[s] % p.block_size;
    const int last = (p.kv_lens[s] - 1) / p.block_size;
    if (tail) fill(in.block_table[static_cast<std::size_t>(s) * in.block_table_stride + last], tail);
  }
}

}  // namespace

std::vector<uint16_t> random_normal(std::size_t n, DType dt, uint64_t seed, uint64_t stream, float mean, float std) {
  std::vector<uint16_t> v(n);
  const uint64_t key = splitmix64(seed ^ splitmix64(stream));
  const uint16_t nonzero = float_to_half(1e-3f, dt);
  const int64_t pairs = static_cast<int64_t>((n + 1) / 2);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < pairs; ++i) {
    const uint64_t h = splitmix64(key + static_cast<uint64_t>(i));
    const float u1 = (static_cast<float>(h >> 40) + 0.5f) * (1.0f / 16777216.0f);  // (0, 1)
    const float u2 = static_cast<float>((h >> 16) & 0xffffffu) * (1.0f / 16777216.0f);
    const float r = std::sqrt(-2.0f * std::log(u1));
    const float a = 6.2831853f * u2;
    const float z[2] = {r * std::cos(a), r * std::sin(a)};
    for (int k = 0; k < 2; ++k) {
      const std::size_t idx = static_cast<std::size_t>(2 * i + k);
      if (idx >= n) break;
      const uint16_t x = float_to_half(mean + std * z[k], dt);
      v[idx] = (x & 0x7fff) == 0 ? nonzero : x;
    }
  }
  return v;
}

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
  const int stride = p.max_blocks_per_seq() + 1;
  in.block_table_stride = stride;
  in.sentinel_block = p.num_blocks();
  in.num_blocks = in.sentinel_block + 1;
  std::vector<int32_t> physical(in.sentinel_block);
  std::iota(physical.begin(), physical.end(), 0);
  std::mt19937_64 rng(seed);
  if (order == BlockOrder::shuffled) std::shuffle(physical.begin(), physical.end(), rng);
  in.block_table.assign(static_cast<std::size_t>(n) * stride, static_cast<int32_t>(in.sentinel_block));
  int64_t next = 0;
  for (int s = 0; s < n; ++s) {
    const int nb = (p.kv_lens[s] + p.block_size - 1) / p.block_size;
    for (int b = 0; b < nb; ++b) in.block_table[static_cast<std::size_t>(s) * stride + b] = physical[next++];
  }
  const std::size_t hs = static_cast<std::size_t>(p.head_size);
  in.q = random_normal(static_cast<std::size_t>(p.total_q()) * p.heads * hs, p.dtype, seed, 1);
  const std::size_t cache = static_cast<std::size_t>(in.num_blocks) * p.block_size * p.kv_heads * hs;
  in.k_cache = random_normal(cache, p.dtype, seed, 2);
  in.v_cache = random_normal(cache, p.dtype, seed, 3);
  poison_unowned_slots(in);
  return in;
}

AttentionParams HostInputs::params() const {
  AttentionParams a = make_attention_params(problem);
  a.block_table_stride = block_table_stride;
  a.q = q.data();
  a.k_cache = k_cache.data();
  a.v_cache = v_cache.data();
  a.cu_seqlens_q = cu_seqlens_q.data();
  a.seqused_k = seqused_k.data();
  a.block_table = block_table.data();
  return a;
}

}  // namespace attnbench
