// The backward's fp32 reference against a naive double-precision loop, and that loop against central finite
// differences of the forward: the gradients are of the function the forward computes, masks and features included.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "attnbench/reference_bwd.hpp"
#include "cases/bwd_inputs.hpp"

namespace attnbench {
namespace {

// Dense double copies of the packed inputs, and the naive forward and backward over them.
struct Naive {
  AttentionProblem p;
  std::vector<int32_t> cq, ck;
  std::vector<double> q, k, v, d_o;

  explicit Naive(const BwdInputs& in) : p(in.problem), cq(in.cu_seqlens_q), ck(in.cu_seqlens_k) {
    for (auto [dst, src] : {std::pair{&q, &in.q}, {&k, &in.k}, {&v, &in.v}, {&d_o, &in.d_o}})
      for (std::size_t i = 0; i < src->size(); ++i) dst->push_back(src->get(i));
  }
  int d() const { return p.head_size; }
  double& at(std::vector<double>& t, int64_t tok, int head, int heads, int c) const {
    return t[(tok * heads + head) * d() + c];
  }
  bool visible(int s, int i, int j) const {
    const int pos = p.top_left ? i : i + p.kv_lens[s] - p.q_lens[s];
    const AttentionFeatures& f = p.features;
    return (!p.causal || j <= pos) && (f.window_left < 0 || j >= pos - f.window_left) &&
           (f.window_right < 0 || j <= pos + f.window_right);
  }
  // The final score of (row i of head h, key j) of sequence s and its derivative by the raw scaled score.
  std::pair<double, double> score(int s, int h, int i, int j) {
    const int g = h / p.group_size();
    double x = 0;
    for (int c = 0; c < d(); ++c) x += at(q, cq[s] + i, h, p.heads, c) * at(k, ck[s] + j, g, p.kv_heads, c);
    x *= p.softmax_scale();
    if (p.features.softcap <= 0) return {x, 1.0};
    const double t = std::tanh(x / p.features.softcap);
    return {p.features.softcap * t, 1 - t * t};
  }
  std::vector<double> probs(int s, int h, int i) {
    std::vector<double> pr(p.kv_lens[s], 0.0);
    double m = -INFINITY, sum = 0;
    for (int j = 0; j < p.kv_lens[s]; ++j)
      if (visible(s, i, j)) m = std::max(m, score(s, h, i, j).first);
    for (int j = 0; j < p.kv_lens[s]; ++j)
      if (visible(s, i, j)) sum += pr[j] = std::exp(score(s, h, i, j).first - m);
    for (double& x : pr) x = sum > 0 ? x / sum : 0.0;
    return pr;
  }
  std::vector<double> forward() {
    std::vector<double> o(q.size(), 0.0);
    for (int s = 0; s < p.num_seqs(); ++s)
      for (int h = 0; h < p.heads; ++h)
        for (int i = 0; i < p.q_lens[s]; ++i) {
          const std::vector<double> pr = probs(s, h, i);
          for (int j = 0; j < p.kv_lens[s]; ++j)
            for (int c = 0; c < d(); ++c)
              at(o, cq[s] + i, h, p.heads, c) += pr[j] * at(v, ck[s] + j, h / p.group_size(), p.kv_heads, c);
        }
    return o;
  }
  double loss() {  // sum(dO o O): its gradients are the backward's
    const std::vector<double> o = forward();
    double l = 0;
    for (std::size_t i = 0; i < o.size(); ++i) l += o[i] * d_o[i];
    return l;
  }
  // dq, dk, dv with D from o_for_d (the exact O, or the rounded one the kernels read).
  void backward(const std::vector<double>& o_for_d, std::vector<double>& dq, std::vector<double>& dk,
                std::vector<double>& dv) {
    dq.assign(q.size(), 0.0);
    dk.assign(k.size(), 0.0);
    dv.assign(v.size(), 0.0);
    std::vector<double> od = o_for_d;
    for (int s = 0; s < p.num_seqs(); ++s)
      for (int h = 0; h < p.heads; ++h)
        for (int i = 0; i < p.q_lens[s]; ++i) {
          const int g = h / p.group_size();
          const std::vector<double> pr = probs(s, h, i);
          double D = 0;
          for (int c = 0; c < d(); ++c) D += at(od, cq[s] + i, h, p.heads, c) * at(d_o, cq[s] + i, h, p.heads, c);
          for (int j = 0; j < p.kv_lens[s]; ++j) {
            if (pr[j] == 0) continue;
            double dp = 0;
            for (int c = 0; c < d(); ++c) dp += at(d_o, cq[s] + i, h, p.heads, c) * at(v, ck[s] + j, g, p.kv_heads, c);
            const double ds = pr[j] * (dp - D) * score(s, h, i, j).second * p.softmax_scale();
            for (int c = 0; c < d(); ++c) {
              at(dq, cq[s] + i, h, p.heads, c) += ds * at(k, ck[s] + j, g, p.kv_heads, c);
              at(dk, ck[s] + j, g, p.kv_heads, c) += ds * at(q, cq[s] + i, h, p.heads, c);
              at(dv, ck[s] + j, g, p.kv_heads, c) += pr[j] * at(d_o, cq[s] + i, h, p.heads, c);
            }
          }
        }
  }
};

AttentionProblem small(std::vector<std::pair<int, int>> seqlens, int heads, int kv_heads, int d, bool causal) {
  AttentionProblem p;
  for (auto [q, kv] : seqlens) {
    p.q_lens.push_back(q);
    p.kv_lens.push_back(kv);
  }
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.head_size = d;
  p.causal = causal;
  p.types = AttentionTypes::all(DType::bf16);
  return p;
}

std::vector<AttentionProblem> cases() {
  std::vector<AttentionProblem> c = {small({{5, 5}, {3, 9}}, 4, 2, 8, true), small({{7, 7}}, 2, 1, 16, false),
                                     small({{4, 11}}, 3, 3, 8, true)};
  c.push_back(small({{9, 9}}, 2, 1, 8, true));
  c.back().features.window_left = 2;
  c.back().features.softcap = 1.5f;
  c.push_back(small({{6, 10}}, 2, 2, 8, true));
  c.back().top_left = true;
  c.back().features.window_right = 1;
  return c;
}

double max_rel(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    num = std::max(num, std::fabs(got[i] - want[i]));
    den = std::max(den, std::fabs(want[i]));
  }
  return den > 0 ? num / den : num;
}

TEST(ReferenceBackward, NaiveLoopMatchesFiniteDifferences) {
  for (const AttentionProblem& p : cases()) {
    BwdReference ref;
    Naive n(build_bwd_inputs(p, 5, ref));
    std::vector<double> dq, dk, dv;
    n.backward(n.forward(), dq, dk, dv);
    for (auto [t, grad] : {std::pair{&n.q, &dq}, {&n.k, &dk}, {&n.v, &dv}}) {
      std::vector<double> fd(t->size());
      for (std::size_t i = 0; i < t->size(); ++i) {
        const double x = (*t)[i], h = 1e-5;
        (*t)[i] = x + h;
        const double up = n.loss();
        (*t)[i] = x - h;
        const double down = n.loss();
        (*t)[i] = x;
        fd[i] = (up - down) / (2 * h);
      }
      EXPECT_LT(max_rel(*grad, fd), 1e-6);
    }
  }
}

TEST(ReferenceBackward, MatchesTheNaiveLoop) {
  std::vector<AttentionProblem> all = cases();
  all.push_back(small({{70, 70}, {130, 200}}, 4, 2, 32, true));  // past one 64-row block of the reference
  for (const AttentionProblem& p : all) {
    BwdReference ref;
    const BwdInputs in = build_bwd_inputs(p, 7, ref);
    Naive n(in);
    std::vector<double> o_read(in.o.size()), dq, dk, dv;
    for (std::size_t i = 0; i < o_read.size(); ++i) o_read[i] = in.o.get(i);
    n.backward(o_read, dq, dk, dv);
    const auto as_double = [](const std::vector<float>& f) { return std::vector<double>(f.begin(), f.end()); };
    EXPECT_LT(max_rel(as_double(ref.dq), dq), 2e-5);
    EXPECT_LT(max_rel(as_double(ref.dk), dk), 2e-5);
    EXPECT_LT(max_rel(as_double(ref.dv), dv), 2e-5);
    // the forward of the same pass: O (rounded) and the LSE against the naive forward
    const std::vector<double> o = n.forward();
    double err = 0;
    for (std::size_t i = 0; i < o.size(); ++i) err = std::max(err, std::fabs(in.o.get(i) - o[i]));
    EXPECT_LT(err, 2e-2);
  }
}

// Keys no row sees get zero gradients.
TEST(ReferenceBackward, UnseenKeysHaveZeroGradients) {
  AttentionProblem p = small({{4, 12}}, 2, 1, 8, true);
  p.top_left = true;  // rows 0..3 see keys 0..3; keys 4..11 are seen by none
  BwdReference ref;
  const BwdInputs in = build_bwd_inputs(p, 9, ref);
  for (int j = 4; j < 12; ++j)
    for (int c = 0; c < 8; ++c) {
      EXPECT_EQ(ref.dk[j * 8 + c], 0.f);
      EXPECT_EQ(ref.dv[j * 8 + c], 0.f);
    }
  EXPECT_NE(ref.dv[0], 0.f);
}

}  // namespace
}  // namespace attnbench
