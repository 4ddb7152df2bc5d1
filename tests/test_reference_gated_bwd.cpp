// The gated block backward's fp32 reference against central finite differences of a naive double forward of the
// block (L = sum dy o out): each gradient is of the function the forward computes, norm, RoPE, gate, GQA and mask
// included. f16 inputs: the reference rounds the SDPA's inputs to the dtype, 2^-11 here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "attnbench/gated_block_bwd.hpp"
#include "attnbench/gated_block_bwd_ref.hpp"
#include "cases/gated_case.hpp"

namespace attnbench {
namespace {

// The block's inputs as doubles and its forward, written directly from the README's math.
struct NaiveBlock {
  GatedGeometry g;
  GatedOptions o;
  std::vector<double> h, wq, wg, wk, wv, wo, qn, kn, cos, sin;

  static std::vector<double> of(const std::vector<uint16_t>& v, DType dt) {
    std::vector<double> out;
    for (uint16_t x : v) out.push_back(half_to_float(x, dt));
    return out;
  }
  NaiveBlock(const GatedGeometry& geo, const GatedOptions& opt, const GatedHostInputs& in) : g(geo), o(opt) {
    const DType dt = g.dtype();
    h = of(in.h, dt), wq = of(in.wq, dt), wg = of(in.wgate, dt), wk = of(in.wk, dt), wv = of(in.wv, dt);
    wo = of(in.w_o, dt), qn = of(in.q_norm_weight, dt), kn = of(in.k_norm_weight, dt), cos = of(in.cos, dt);
    sin = of(in.sin, dt);
  }

  std::vector<double> project(const std::vector<double>& w, int64_t rows) const {
    const int64_t T = g.tokens(), dm = g.d_model();
    std::vector<double> out(T * rows, 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < dm; ++c) out[t * rows + r] += h[t * dm + c] * w[r * dm + c];
    return out;
  }
  void norm_rope(std::vector<double>& x, int heads, const std::vector<double>& w) const {
    const int d = g.d_head(), hh = g.rope_dim() / 2, rd = g.rope_dim();
    for (int64_t t = 0; t < g.tokens(); ++t)
      for (int hd = 0; hd < heads; ++hd) {
        double* v = &x[(t * heads + hd) * d];
        if (o.qk_norm) {
          double ss = 0;
          for (int i = 0; i < d; ++i) ss += v[i] * v[i];
          const double r = 1.0 / std::sqrt(ss / d + kGatedNormEps);
          for (int i = 0; i < d; ++i) v[i] *= r * (o.norm_weight_offset + w[i]);
        }
        for (int i = 0; i < hh; ++i) {
          const double x1 = v[i], x2 = v[i + hh];
          v[i] = x1 * cos[t * rd + i] - x2 * sin[t * rd + i];
          v[i + hh] = x2 * cos[t * rd + i + hh] + x1 * sin[t * rd + i + hh];
        }
      }
  }
  // sum over out of dy o out.
  double loss(const std::vector<double>& dy) const {
    const int d = g.d_head(), hq = g.h_q(), hkv = g.h_kv(), S = g.seqlen();
    const int64_t aw = g.attn_width(), dm = g.d_model(), kw = static_cast<int64_t>(hkv) * d;
    std::vector<double> q = project(wq, aw), gate = project(wg, aw), k = project(wk, kw), v = project(wv, kw);
    norm_rope(q, hq, qn);
    norm_rope(k, hkv, kn);
    std::vector<double> y(g.tokens() * aw, 0.0);
    const double scale = o.softmax_scale(d);
    for (int64_t t = 0; t < g.tokens(); ++t)
      for (int hd = 0; hd < hq; ++hd) {
        const int s = static_cast<int>(t % S);  // the mask stated again: causal and the left window, no seq_lens
        const int end = o.is_causal ? s + 1 : S, first = o.window_left >= 0 ? std::max(0, s - o.window_left) : 0;
        const int64_t b0 = t / S * S, kvh = hd / (hq / hkv);
        std::vector<double> p;
        double m = -INFINITY, sum = 0;
        for (int j = first; j < end; ++j) {
          double s = 0;
          for (int i = 0; i < d; ++i) s += q[t * aw + hd * d + i] * k[(b0 + j) * kw + kvh * d + i];
          p.push_back(s * scale);
          m = std::max(m, s * scale);
        }
        for (double& x : p) sum += x = std::exp(x - m);
        for (int i = 0; i < d; ++i) {
          double acc = 0;
          for (int j = first; j < end; ++j) acc += p[j - first] / sum * v[(b0 + j) * kw + kvh * d + i];
          y[t * aw + hd * d + i] = acc / (1 + std::exp(-gate[t * aw + hd * d + i]));
        }
      }
    double l = 0;
    for (int64_t t = 0; t < g.tokens(); ++t)
      for (int64_t c = 0; c < dm; ++c) {
        double out = 0;
        for (int64_t a = 0; a < aw; ++a) out += y[t * aw + a] * wo[c * aw + a];
        l += dy[t * dm + c] * out;
      }
    return l;
  }
};

struct FdCase {
  std::string name;
  GatedDims dims;
  bool causal, qk_norm;
  float offset;
  int window_left;
};

class GatedBwdFiniteDifferences : public ::testing::TestWithParam<FdCase> {};

TEST_P(GatedBwdFiniteDifferences, ReferenceGradientsMatch) {
  const FdCase& c = GetParam();
  const GatedGeometry g(c.dims);
  GatedOptions o;
  o.fuse_gate = false;
  o.is_causal = c.causal;
  o.qk_norm = c.qk_norm;
  o.norm_weight_offset = c.offset;
  o.window_left = c.window_left;
  GatedHostInputs in = build_gated_inputs(g, 7);
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> dy(g.tokens() * g.d_model());
  for (auto& x : dy) x = float_to_half(nd(rng), g.dtype());
  const reference::GatedBwdRef r = reference::gated_block_backward(g, o, in.ref(), dy.data());

  NaiveBlock nb(g, o, in);
  const std::vector<double> dyd = NaiveBlock::of(dy, g.dtype());
  // Each tensor: a few seeded entries, central differences at step eps against the reference's gradient.
  auto check = [&](const char* what, std::vector<double>& x, const std::vector<float>& grad) {
    ASSERT_EQ(x.size(), grad.size()) << what;
    double gmax = 0;
    std::size_t top = 0;
    for (std::size_t i = 0; i < grad.size(); ++i)
      if (std::fabs(static_cast<double>(grad[i])) > gmax) gmax = std::fabs(static_cast<double>(grad[top = i]));
    std::uniform_int_distribution<std::size_t> pick(0, x.size() - 1);
    for (int n = 0; n < 12; ++n) {
      const std::size_t i = n == 0 ? top : pick(rng);  // the largest entry, then seeded ones
      const double keep = x[i], eps = 1e-4 * std::max(1.0, std::fabs(keep));
      x[i] = keep + eps;
      const double up = nb.loss(dyd);
      x[i] = keep - eps;
      const double down = nb.loss(dyd);
      x[i] = keep;
      const double fd = (up - down) / (2 * eps);
      // each entry against its own size: a wrong factor on a small entry fails too
      EXPECT_NEAR(grad[i], fd, 2e-2 * std::fabs(fd) + 2e-3 * gmax + 1e-7) << what << "[" << i << "]";
    }
  };
  check("dh", nb.h, r.dh);
  check("dwq", nb.wq, r.dwq);
  check("dwgate", nb.wg, r.dwgate);
  check("dwk", nb.wk, r.dwk);
  check("dwv", nb.wv, r.dwv);
  check("dw_o", nb.wo, r.dw_o);
  if (c.qk_norm) {
    check("dw_q_norm", nb.qn, r.dw_q_norm);
    check("dw_k_norm", nb.kn, r.dw_k_norm);
  } else {
    EXPECT_TRUE(r.dw_q_norm.empty());
  }
}

GatedDims fd_dims(int batch, int seqlen, int h_q, int h_kv, int rope_dim) {
  GatedDims d;
  d.batch = batch;
  d.seqlen = seqlen;
  d.d_model = 32;
  d.h_q = h_q;
  d.h_kv = h_kv;
  d.d_head = 64;
  d.rope_dim = rope_dim;
  d.dtype = DType::f16;
  return d;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GatedBwdFiniteDifferences,
    ::testing::Values(FdCase{"causal_gqa2_rope16", fd_dims(2, 12, 2, 1, 16), true, true, 0.f, -1},
                      FdCase{"full_gemma_offset", fd_dims(1, 16, 2, 2, 64), false, true, 1.f, -1},
                      FdCase{"no_norm_window", fd_dims(1, 16, 4, 2, 32), true, false, 0.f, 5}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace attnbench
