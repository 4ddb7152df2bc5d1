// The reference's attention features against a naive double-precision loop that states each rule as the README
// does: sliding window, softcap, ALiBi, sinks, qq-bias and an 8-bit K/V cache with its scales, alone and combined,
// causal and not, in both 16-bit dtypes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "attnbench/attention.hpp"
#include "attnbench/reference.hpp"
#include "cases/inputs.hpp"

namespace attnbench {
namespace {

// Row i of a sequence sits at key position pos = i + kv_len - q_len (i aligned top-left); key j is visible iff j < kv_len, j <= pos when
// causal, and pos - window_left <= j <= pos + window_right (-1: unbounded).
// lse (optional): each row's ln(sum of e^score + e^sink), [total_q, heads].
std::vector<double> naive_features(const HostInputs& in, std::vector<double>* lse = nullptr) {
  const AttentionProblem& pr = in.problem;
  const AttentionParams p = in.params();
  const AttentionFeatures& f = pr.features;
  const int d = p.head_size, group = p.heads / p.kv_heads;
  std::vector<double> out(static_cast<std::size_t>(p.total_q) * p.heads * d, 0.0);
  if (lse) lse->assign(static_cast<std::size_t>(p.total_q) * p.heads, 0.0);
  auto at = [&](int s, int j, int kvh) {
    const int64_t phys = p.block_table[static_cast<int64_t>(s) * p.block_table_stride + j / p.block_size];
    return static_cast<std::size_t>(phys * p.kv_stride_block + (j % p.block_size) * p.kv_stride_token +
                                    kvh * p.kv_stride_head);
  };
  for (int s = 0; s < p.num_seqs; ++s) {
    const int q_len = pr.q_lens[s], kv_len = pr.kv_lens[s], new_from = kv_len - q_len;
    for (int i = 0; i < q_len; ++i) {
      const int pos = pr.top_left ? i : i + new_from;
      const int64_t t = p.cu_seqlens_q[s] + i;
      for (int h = 0; h < p.heads; ++h) {
        std::vector<double> w(kv_len, 0.0);
        std::vector<char> vis(kv_len, 0);
        double m = f.sinks.empty() ? -1e300 : f.sinks[h];
        for (int j = 0; j < kv_len; ++j) {
          vis[j] = (!p.causal || j <= pos) && (f.window_left < 0 || j >= pos - f.window_left) &&
                   (f.window_right < 0 || j <= pos + f.window_right);
          if (!vis[j]) continue;
          double dot = 0;
          for (int c = 0; c < d; ++c)
            dot += static_cast<double>(in.q.get(t * p.q_stride_token + h * p.q_stride_head + c)) *
                   in.k_cache.get(at(s, j, h / group) + c) * f.k_scale;
          double sc = dot * p.scale;
          if (f.softcap > 0) sc = f.softcap * std::tanh(sc / f.softcap);
          if (!f.alibi_slopes.empty()) sc += f.alibi_slopes[h] * static_cast<double>(j - pos);
          if (!f.qq_bias.empty() && j >= new_from) sc += f.qq_bias[static_cast<std::size_t>(i) * f.qq_bias_len + j - new_from];
          w[j] = sc;
          m = std::max(m, sc);
        }
        double den = f.sinks.empty() ? 0.0 : std::exp(f.sinks[h] - m);
        for (int j = 0; j < kv_len; ++j)
          if (vis[j]) den += (w[j] = std::exp(w[j] - m));
        if (lse) (*lse)[t * p.heads + h] = den > 0 ? m + std::log(den) : -INFINITY;
        for (int c = 0; c < d; ++c) {
          double acc = 0;
          for (int j = 0; j < kv_len; ++j)
            if (vis[j]) acc += w[j] * in.v_cache.get(at(s, j, h / group) + c) * f.v_scale;
          out[(t * p.heads + h) * d + c] = den > 0 ? acc / den : 0.0;
        }
      }
    }
  }
  return out;
}

struct FeatureCase {
  std::string name;
  bool causal;
  DType kv;  // the cache's storage; Q and O are bf16 or fp16 (the parameter)
  AttentionFeatures f;
  bool top_left = false;
};

std::vector<float> seeded(std::size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

std::vector<FeatureCase> feature_cases() {
  constexpr int heads = 8, qmax = 9;
  AttentionFeatures window, window_r, softcap, alibi, sinks, qq, fp8, gemma, gptoss, window_alibi;
  window.window_left = 37;
  window_r.window_left = 20, window_r.window_right = 11;
  softcap.softcap = 2.5f;  // small, so that tanh bends the scores
  alibi.alibi_slopes = seeded(heads, 0.01f, 0.3f, 1);
  sinks.sinks = seeded(heads, -1.f, 4.f, 2);
  qq.qq_bias_len = qmax;
  qq.qq_bias = seeded(static_cast<std::size_t>(qmax) * qmax, -2.f, 2.f, 3);
  fp8.k_scale = 0.07f, fp8.v_scale = 0.3f;
  gemma = softcap, gemma.window_left = 40;
  gptoss = sinks, gptoss.window_left = 16;
  window_alibi = alibi, window_alibi.window_left = 30;
  return {{"window", true, DType::bf16, window},      {"window_noncausal", false, DType::bf16, window_r},
          {"softcap", true, DType::bf16, softcap},     {"alibi", true, DType::bf16, alibi},
          {"alibi_noncausal", false, DType::bf16, alibi}, {"sinks", true, DType::bf16, sinks},
          {"qq_bias", true, DType::bf16, qq},          {"e4m3_kv", true, DType::e4m3, fp8},
          {"e5m2_kv", false, DType::e5m2, fp8},        {"softcap_window", true, DType::bf16, gemma},
          {"sinks_window", true, DType::e4m3, gptoss},  {"top_left", true, DType::bf16, {}, true},
          {"top_left_window_alibi", true, DType::bf16, window_alibi, true},
          {"top_left_window_noncausal", false, DType::bf16, window_r, true}};
}

class ReferenceFeatures : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(ReferenceFeatures, MatchesNaiveLoop) {
  const auto [idx, dt] = GetParam();
  const FeatureCase fc = feature_cases()[idx];
  AttentionProblem p;
  p.q_lens = {9, 1, 4};  // speculative, decode and short prefill rows over long KV
  p.kv_lens = {130, 77, 9};
  p.heads = 8;
  p.kv_heads = 2;
  p.head_size = 32;
  p.block_size = 16;
  p.causal = fc.causal;
  p.types = AttentionTypes::all(dt);
  p.types.kv = is_16bit(fc.kv) ? dt : fc.kv;
  p.features = fc.f;
  p.top_left = fc.top_left;
  const HostInputs in = build_inputs(p, 77, BlockOrder::shuffled);
  const AttentionParams a = in.params();
  std::vector<float> got(static_cast<std::size_t>(a.total_q) * a.heads * a.head_size, std::nanf(""));
  std::vector<float> got_lse(static_cast<std::size_t>(a.total_q) * a.heads, std::nanf(""));
  reference::paged_attention_all(a, got.data(), got_lse.data());
  std::vector<double> want_lse;
  const std::vector<double> want = naive_features(in, &want_lse);
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= 2e-4 * (1.0 + std::abs(want[i]))) && ++bad <= 5)
      ADD_FAILURE() << fc.name << " element " << i << ": got " << got[i] << ", want " << want[i];
  EXPECT_EQ(bad, 0);
  for (std::size_t i = 0; i < got_lse.size(); ++i)
    if (!(std::abs(got_lse[i] - want_lse[i]) <= 2e-5 * (1.0 + std::abs(want_lse[i]))) && ++bad <= 5)
      ADD_FAILURE() << fc.name << " row " << i << ": lse " << got_lse[i] << ", want " << want_lse[i];
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(Features, ReferenceFeatures,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(feature_cases().size())),
                                            ::testing::Values(DType::bf16, DType::f16)),
                         [](const auto& info) {
                           return feature_cases()[std::get<0>(info.param)].name + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

// Each feature changes the answer (a reference that ignored one would pass plain attention's output).
TEST(ReferenceFeatures, EveryFeatureChangesTheOutput) {
  AttentionProblem p;
  p.q_lens = {9, 1};
  p.kv_lens = {130, 77};
  p.heads = 8;
  p.kv_heads = 2;
  p.head_size = 32;
  p.block_size = 16;
  p.types = AttentionTypes::all(DType::bf16);
  auto run = [](const AttentionProblem& pr) {
    const HostInputs in = build_inputs(pr, 5);
    std::vector<float> o(static_cast<std::size_t>(pr.total_q()) * pr.heads * pr.head_size);
    reference::paged_attention_all(in.params(), o.data());
    return o;
  };
  const std::vector<float> plain = run(p);
  for (const FeatureCase& fc : feature_cases()) {
    if (!fc.causal || !is_16bit(fc.kv)) continue;  // the 8-bit cache's inputs differ by construction
    AttentionProblem q = p;
    q.features = fc.f;
    q.top_left = fc.top_left;
    const std::vector<float> o = run(q);
    double diff = 0;
    for (std::size_t i = 0; i < o.size(); ++i) diff = std::max(diff, static_cast<double>(std::abs(o[i] - plain[i])));
    EXPECT_GT(diff, 1e-2) << fc.name;
  }
}

}  // namespace
}  // namespace attnbench
