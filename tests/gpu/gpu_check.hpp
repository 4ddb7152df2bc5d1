// The GPU tests' check of one case: sampled rows (sequence ends, tile boundaries, seeded random rows, a spread of
// heads) against the fp32 reference through the harness's gate, every output element written and finite, the
// padding between rows untouched.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "attnbench/reference.hpp"
#include "cases/gate.hpp"
#include "gpu_case.hpp"
#include "gpu_shape.hpp"

namespace attnbench::gputest {
// First/last rows of each sequence, rows around 64/128-row tile boundaries, and a few seeded random rows; for
// each, a spread of heads (all heads of one GQA group included).
inline std::vector<reference::RowId> sample_rows(const AttentionProblem& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<reference::RowId> rows;
  int64_t start = 0;
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int q = p.q_lens[s];
    std::set<int> toks = {0, q - 1, q / 2};
    for (int b : {63, 64, 127, 128, 191, 255, 256})
      if (b < q) toks.insert(b);
    for (int i = 0; i < 3; ++i) toks.insert(static_cast<int>(rng() % q));
    if (p.num_seqs() > 8 && s % 4 != 0 && s != p.num_seqs() - 1) toks = {static_cast<int>(rng() % q)};
    for (int t : toks) {
      std::set<int> heads = {0, p.heads - 1, static_cast<int>(rng() % p.heads)};
      for (int g = 0; g < std::min(p.group_size(), 8); ++g) heads.insert(g);
      for (int h : heads) rows.push_back({start + t, h});
    }
    start += q;
  }
  return rows;
}

struct Outcome {
  double max_abs = 0;
  double max_row_rel = 0;
  bool within = false;  // the harness's gate (both bounds) holds on the sampled rows
  int64_t nonfinite = 0;
  int64_t padding_written = 0;  // output elements outside (token, head, d < head_size) that lost their poison
  int64_t rows = 0;
  std::string worst;
};

// The reference applies the gate itself: ref * sigmoid(gate), gate read back from the case's host copy.
// ref_q: the reference reads these Q values instead of the inputs' (the Q prologue's, applied on the host).
// ref_problem: the reference computes this problem on the same inputs instead of the case's (a feature or the
// alignment changed: a test that it mattered).
inline Outcome check_output(const DeviceCase& c, uint64_t seed, const std::vector<uint16_t>* ref_q = nullptr,
                            const AttentionProblem* ref_problem = nullptr) {
  const AttentionProblem& p = c.host.problem;
  const DType dt = p.types.o;
  std::vector<uint16_t> out(c.out_elems());
  c.out.download(out.data(), out.size() * 2);
  Outcome o;
  std::vector<char> inside(out.size(), 0);
  for (int64_t t = 0; t < p.total_q(); ++t)
    for (int h = 0; h < p.heads; ++h)
      for (int d = 0; d < p.head_size; ++d) inside[c.out_index(t, h, d)] = 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (inside[i] && !std::isfinite(half_to_float(out[i], dt))) ++o.nonfinite;
    if (!inside[i] && out[i] != 0xFFFF) ++o.padding_written;
  }
  const auto rows = sample_rows(p, seed);
  std::vector<float> ref(rows.size() * p.head_size);
  HostInputs other;
  if (ref_problem) {
    other = c.host;
    other.problem = *ref_problem;
  }
  AttentionParams hp = ref_problem ? other.params() : c.host.params();
  if (ref_q) hp.q = ref_q->data();
  reference::paged_attention(hp, rows, ref.data());
  o.rows = static_cast<int64_t>(rows.size());
  std::vector<uint16_t> got_rows(ref.size());
  std::vector<int64_t> ids(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    ids[r] = static_cast<int64_t>(r);
    for (int d = 0; d < p.head_size; ++d) {
      got_rows[r * p.head_size + d] = out[c.out_index(rows[r].token, rows[r].head, d)];
      const float got = half_to_float(out[c.out_index(rows[r].token, rows[r].head, d)], dt);
      const float want = ref[r * p.head_size + d] * c.gate_factor(rows[r].token, rows[r].head, d);
      ref[r * p.head_size + d] = want;
      const double err = std::isfinite(got) ? std::abs(got - want) : INFINITY;
      if (!(err <= o.max_abs)) {
        o.max_abs = err;
        char buf[160];
        std::snprintf(buf, sizeof buf, "token %lld head %d dim %d: got %g want %g",
                      static_cast<long long>(rows[r].token), rows[r].head, d, got, want);
        o.worst = buf;
      }
    }
  }
  const GateResult g = gate_rows(got_rows.data(), static_cast<int64_t>(got_rows.size()), dt, p.head_size, ids,
                                 ref.data(), attention_tolerance(p.types, default_tolerance(dt)));
  o.max_row_rel = g.max_row_rel;
  o.within = g.passed && o.nonfinite == 0;
  if (!g.passed) o.worst += " | " + gate_failure_reason(g);
  return o;
}

inline Outcome run_and_check(const Shape& sh, DType dt, const std::map<std::string, std::string>& knobs, uint64_t seed,
                      CaseLayout lay = {}, BlockOrder order = BlockOrder::shuffled) {
  const AttentionProblem p = problem_of(sh, dt);
  DeviceCase c(p, knobs, seed, order, lay);
  cuda::Stream stream;
  c.poison();
  c.run(stream.get());
  stream.synchronize();
  return check_output(c, seed);
}

}  // namespace attnbench::gputest
