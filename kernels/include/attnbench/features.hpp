// Attention features of real models, declared on the problem and in the params block. The semantics (one
// definition for the reference and every kernel) are in the README, "Attention features"; kernels that do not
// implement a feature decline it by name (feature_conflict), so no problem is ever computed without it.
#pragma once
#include <string>
#include <vector>

namespace attnbench {

struct AttentionFeatures {
  int window_left = -1, window_right = -1;  // sliding window around i' = i + kv_len - q_len; -1 = unbounded
  float softcap = 0.f;                       // s <- c tanh(s / c) when > 0
  std::vector<float> alibi_slopes;           // [heads] or empty: s <- s + slope_h (j - i')
  std::vector<float> sinks;                  // [heads] or empty: exp(sink_h - m) joins the softmax denominator
  std::vector<float> qq_bias;                // [qq_bias_len, qq_bias_len] or empty: bias among the new tokens
  int qq_bias_len = 0;
  float k_scale = 1.f, v_scale = 1.f;        // K/V dequantisation scales (an 8-bit KV cache): value = code * scale
  float q_scale = 1.f;                       // Q's dequantisation scale (an 8-bit Q, the FP8 SDPA)

  // The first feature that differs from plain attention ("" when none), by its shape-file field name.
  std::string first_set() const;
  bool any() const { return !first_set().empty(); }
  // Throws std::invalid_argument "field 'F': why" for values no model has (negative window, softcap <= 0 when
  // given, lists of the wrong length, non-finite numbers). heads and max_seqlen_q size the lists.
  void validate(int heads, int max_seqlen_q) const;
};

// What a kernel's params carry of the features: pointers into the backend's memory (fp32), the scalars as is.
struct AttentionFeatureParams {
  int window_left = -1, window_right = -1;
  float softcap = 0.f;
  const float* alibi_slopes = nullptr;  // [heads]
  const float* sinks = nullptr;         // [heads]
  const float* qq_bias = nullptr;       // [qq_bias_len, qq_bias_len]
  int qq_bias_len = 0;
  float k_scale = 1.f, v_scale = 1.f;
  float q_scale = 1.f;
};

// "feature 'F': not implemented by KERNEL" for the first feature set, "" for plain attention: the one decline
// today's kernels give every feature.
std::string feature_conflict(const AttentionFeatures& f, const std::string& kernel);

}  // namespace attnbench
