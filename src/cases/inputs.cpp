#include "cases/inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>

namespace attnbench {

BlockOrder parse_block_order(const std::string& s) {
  if (s == "contiguous") return BlockOrder::contiguous;
  if (s == "shuffled") return BlockOrder::shuffled;
  if (s == "repeated") return BlockOrder::repeated;
  throw std::invalid_argument("--block-order: '" + s + "' is not contiguous|shuffled|repeated");
}

const char* block_order_name(BlockOrder o) {
  switch (o) {
    case BlockOrder::contiguous: return "contiguous";
    case BlockOrder::shuffled: return "shuffled";
    case BlockOrder::repeated: return "repeated";
  }
  return "?";
}

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
  const bool codes = !is_16bit(p.types.kv);  // poison in dequantised values
  const float pk = codes ? kPoisonK / p.features.k_scale : kPoisonK, pv = codes ? kPoisonV / p.features.v_scale : kPoisonV;
  auto fill = [&](int64_t block, int from_token) {
    const std::size_t begin = (static_cast<std::size_t>(block) * p.block_size + from_token) * token;
    const std::size_t end = static_cast<std::size_t>(block + 1) * p.block_size * token;
    for (std::size_t i = begin; i < end; ++i) {
      in.k_cache.set(i, pk);
      in.v_cache.set(i, pv);
    }
  };
  fill(in.sentinel_block, 0);
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int tail = p.kv_lens[s] % p.block_size;
    const int last = (p.kv_lens[s] - 1) / p.block_size;
    if (tail) fill(in.block_table[static_cast<std::size_t>(s) * in.block_table_stride + last], tail);
  }
}

// Every table slot but a sequence's last names a seeded random block among those no sequence ends in: blocks
// repeat across and within sequences (shared prefixes), and the poisoned tails stay each in its own sequence.
void repeat_inner_blocks(HostInputs& in, std::mt19937_64& rng) {
  const AttentionProblem& p = in.problem;
  std::vector<char> is_last(in.sentinel_block, 0);
  auto slot = [&](int s, int b) -> int32_t& {
    return in.block_table[static_cast<std::size_t>(s) * in.block_table_stride + b];
  };
  for (int s = 0; s < p.num_seqs(); ++s) is_last[slot(s, (p.kv_lens[s] - 1) / p.block_size)] = 1;
  std::vector<int32_t> inner;
  for (int32_t b = 0; b < static_cast<int32_t>(in.sentinel_block); ++b)
    if (!is_last[b]) inner.push_back(b);
  if (inner.empty()) return;
  std::uniform_int_distribution<std::size_t> pick(0, inner.size() - 1);
  for (int s = 0; s < p.num_seqs(); ++s)
    for (int b = 0; b < (p.kv_lens[s] - 1) / p.block_size; ++b) slot(s, b) = inner[pick(rng)];
}

// n seeded normal values, handed to store(index, value) in parallel.
template <class Store>
void normal_values(std::size_t n, uint64_t seed, uint64_t stream, float mean, float std, Store store) {
  const uint64_t key = splitmix64(seed ^ splitmix64(stream));
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
      store(idx, mean + std * z[k]);
    }
  }
}

}  // namespace

std::vector<uint16_t> random_normal(std::size_t n, DType dt, uint64_t seed, uint64_t stream, float mean, float std) {
  if (!is_16bit(dt)) throw std::logic_error("random_normal: 16-bit dtypes only (random_tensor takes any)");
  std::vector<uint16_t> v(n);
  const uint16_t nonzero = float_to_half(1e-3f, dt);
  normal_values(n, seed, stream, mean, std, [&](std::size_t i, float f) {
    const uint16_t x = float_to_half(f, dt);
    v[i] = (x & 0x7fff) == 0 ? nonzero : x;
  });
  return v;
}

HostTensor random_tensor(std::size_t n, DType dt, uint64_t seed, uint64_t stream, float mean, float std) {
  HostTensor t(dt, n);
  if (is_16bit(dt)) {
    const std::vector<uint16_t> v = random_normal(n, dt, seed, stream, mean, std);
    std::memcpy(t.data(), v.data(), t.bytes());
    return t;
  }
  auto* codes = static_cast<uint8_t*>(t.data());
  const uint8_t nonzero = float_to_fp8(1e-2f, dt);
  normal_values(n, seed, stream, mean, std, [&](std::size_t i, float f) {
    const uint8_t c = float_to_fp8(f, dt);
    codes[i] = (c & 0x7f) == 0 ? nonzero : c;
  });
  return t;
}

const uint16_t* HostTensor::halves() const {
  if (!is_16bit(dt_)) throw std::logic_error(std::string("HostTensor: ") + dtype_name(dt_) + " has no 16-bit halves");
  return reinterpret_cast<const uint16_t*>(bytes_.data());
}
uint16_t* HostTensor::halves() { return const_cast<uint16_t*>(static_cast<const HostTensor*>(this)->halves()); }

float HostTensor::get(std::size_t i) const {
  return is_16bit(dt_) ? half_to_float(halves()[i], dt_) : fp8_to_float(bytes_[i], dt_);
}

void HostTensor::set(std::size_t i, float v) {
  if (is_16bit(dt_)) halves()[i] = float_to_half(v, dt_);
  else bytes_[i] = float_to_fp8(v, dt_);
}

InputSpread wide_scores(const AttentionProblem& p) {
  return {std::sqrt(kWideScoreStd / (p.softmax_scale() * std::sqrt(static_cast<float>(p.head_size))))};
}

HostInputs build_inputs(const AttentionProblem& p, uint64_t seed, BlockOrder order, const InputSpread& spread) {
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
  if (order != BlockOrder::contiguous) std::shuffle(physical.begin(), physical.end(), rng);
  in.block_table.assign(static_cast<std::size_t>(n) * stride, static_cast<int32_t>(in.sentinel_block));
  int64_t next = 0;
  for (int s = 0; s < n; ++s) {
    const int nb = (p.kv_lens[s] + p.block_size - 1) / p.block_size;
    for (int b = 0; b < nb; ++b) in.block_table[static_cast<std::size_t>(s) * stride + b] = physical[next++];
  }
  if (order == BlockOrder::repeated) repeat_inner_blocks(in, rng);
  const std::size_t hs = static_cast<std::size_t>(p.head_size);
  // An 8-bit Q holds codes whose dequantised values (code * q_scale) are N(0, 1), as K's do.
  const float qs = is_16bit(p.types.q) ? 1.f : p.features.q_scale;
  in.q = random_tensor(static_cast<std::size_t>(p.total_q()) * p.heads * hs, p.types.q, seed, 1, 0.f,
                       spread.qk_std / qs);
  const std::size_t cache = static_cast<std::size_t>(in.num_blocks) * p.block_size * p.kv_heads * hs;
  // An 8-bit cache holds codes whose dequantised values (code * scale) are N(0, 1), as a quantised cache does.
  const float ks = is_16bit(p.types.kv) ? 1.f : p.features.k_scale, vs = is_16bit(p.types.kv) ? 1.f : p.features.v_scale;
  in.k_cache = random_tensor(cache, p.types.kv, seed, 2, 0.f, spread.qk_std / ks);
  in.v_cache = random_tensor(cache, p.types.kv, seed, 3, 0.f, 1.f / vs);
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
  const AttentionFeatures& f = problem.features;
  a.features.alibi_slopes = f.alibi_slopes.empty() ? nullptr : f.alibi_slopes.data();
  a.features.sinks = f.sinks.empty() ? nullptr : f.sinks.data();
  a.features.qq_bias = f.qq_bias.empty() ? nullptr : f.qq_bias.data();
  return a;
}

}  // namespace attnbench
