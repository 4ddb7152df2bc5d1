// The score features of one query row, the one statement for every kernel (the Eigen reference keeps its own):
// on a scaled score s of key j, softcap c tanh(s / c), then ALiBi slope (j - i'), then the qq-bias among the
// sequence's new tokens (j >= kv_len - q_len) at (i, j - (kv_len - q_len)); then the mask. A sink joins the
// softmax denominator only (sink_weight). README, "Attention features".
#pragma once

#include <math.h>

#include "host_device.hpp"

namespace attnbench::device {

struct ScoreMods {
  float softcap = 0.f;            // 0: none
  float slope = 0.f;              // the row's head's ALiBi slope (0: none)
  const float* qq_row = nullptr;  // the row's qq-bias row (null: none)
  int pos = 0;                    // i' = i + diag (the Visibility's: kv_len - q_len bottom-right, 0 top-left)
  int new_from = 0;               // kv_len - q_len: the first of the sequence's new tokens

  ATTNBENCH_HD_INLINE float apply(float s, int j) const {
    if (softcap > 0.f) s = softcap * tanhf(s / softcap);
    s += slope * static_cast<float>(j - pos);
    if (qq_row != nullptr && j >= new_from) s += qq_row[j - new_from];
    return s;
  }
};

// The mods of query row i (of q_len, over kv_len keys, at key position i + diag) and query head h from the feature
// params' pointers.
ATTNBENCH_HD_INLINE ScoreMods score_mods(float softcap, const float* alibi_slopes, const float* qq_bias,
                                         int qq_bias_len, int i, int q_len, int kv_len, int diag, int h) {
  ScoreMods m;
  m.softcap = softcap;
  m.slope = alibi_slopes != nullptr ? alibi_slopes[h] : 0.f;
  m.qq_row = qq_bias != nullptr ? qq_bias + static_cast<long long>(i) * qq_bias_len : nullptr;
  m.new_from = kv_len - q_len;
  m.pos = i + diag;
  return m;
}

// A sink's share of a softmax denominator whose scores' running max is m: e^(sink - m), 0 without a sink (the
// row's output is acc / (l + sink_weight)); e^(sink - m) is inf for a row that saw no key (m = -inf): output 0.
ATTNBENCH_HD_INLINE float sink_weight(const float* sinks, int h, float m) {
  return sinks != nullptr ? expf(sinks[h] - m) : 0.f;
}

// The same for a row whose softmax is known by its base-2 log-sum-exp lse2 = log2(sum_j e^(s_j)) (a split
// kernel's merged rows): the share of the denominator that is the keys', 1 / (1 + e^sink / e^(lse)); 1 without a
// sink, 0 for a row that saw no key (lse2 = -inf).
ATTNBENCH_HD_INLINE float sink_share(const float* sinks, int h, float lse2) {
  return sinks != nullptr ? 1.f / (1.f + exp2f(sinks[h] * 1.4426950408889634f - lse2)) : 1.f;
}

// What AttentionParams::lse receives for a row whose keys' base-2 log-sum-exp is lse2: the natural log of the whole
// softmax denominator, the sink's e^sink included (-inf for no key and no sink; a NaN stays NaN).
ATTNBENCH_HD_INLINE float row_lse(const float* sinks, int h, float lse2) {
  const float a = lse2 * 0.6931471805599453f;
  if (sinks == nullptr || a != a) return a;
  const float s = sinks[h];
  if (a == -INFINITY) return s;
  return fmaxf(a, s) + log1pf(expf(-fabsf(a - s)));
}

// Where row i (of the sequence starting at packed token q_start) of head h puts its LSE: AttentionParams::lse.
ATTNBENCH_HD_INLINE long long lse_offset(long long stride_start, long long stride_row, long long stride_head,
                                          long long q_start, int i, int h) {
  return q_start * stride_start + static_cast<long long>(i) * stride_row + static_cast<long long>(h) * stride_head;
}

}  // namespace attnbench::device
