// fp32 Eigen reference of the gated block's backward over every token: the forward's projections and norm + RoPE
// (keeping the save set), the SDPA's forward and backward through attention_backward, then the chain back to h
// and the weights. GEMMs split by rows over OpenMP threads; Eigen single-threaded inside.
#define EIGEN_DONT_PARALLELIZE
#include "attnbench/gated_block_bwd_ref.hpp"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "attnbench/gated_block_bwd.hpp"
#include "attnbench/reference_bwd.hpp"

namespace attnbench::reference {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapMat = Eigen::Map<RowMat>;

RowMat convert(const uint16_t* src, int64_t rows, int64_t cols, DType dt) {
  RowMat m(rows, cols);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) m(r, c) = half_to_float(src[r * cols + c], dt);
  return m;
}

// C = A B, rows of C in parallel chunks.
RowMat product(const RowMat& a, const RowMat& b) {
  RowMat c(a.rows(), b.cols());
  const int64_t chunk = 64, n = a.rows();
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t m = std::min(chunk, n - r0);
    c.middleRows(r0, m).noalias() = a.middleRows(r0, m) * b;
  }
  return c;
}

std::vector<float> to_vector(const RowMat& m) { return std::vector<float>(m.data(), m.data() + m.size()); }

std::vector<uint16_t> rounded(const RowMat& m, DType dt) {
  std::vector<uint16_t> out(static_cast<std::size_t>(m.size()));
  for (Eigen::Index i = 0; i < m.size(); ++i) out[i] = float_to_half(m.data()[i], dt);
  return out;
}

// The norm + RoPE of every head row of x (in place, [T, heads d]); the norm's rstd [T, heads].
struct NormRope {
  const GatedGeometry& g;
  const GatedOptions& o;
  const GatedRefInputs& in;
  float cs(const uint16_t* p, int64_t t, int i) const { return half_to_float(p[t * g.rope_dim() + i], g.dtype()); }

  void forward(RowMat& x, int heads, const uint16_t* weight, std::vector<float>& rstd) const {
    const int d = g.d_head(), hh = g.rope_dim() / 2;
    rstd.assign(static_cast<std::size_t>(x.rows()) * heads, 1.f);
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < x.rows(); ++t)
      for (int h = 0; h < heads; ++h) {
        float* v = &x(t, static_cast<int64_t>(h) * d);
        if (o.qk_norm) {
          double ss = 0;
          for (int i = 0; i < d; ++i) ss += static_cast<double>(v[i]) * v[i];
          const float r = static_cast<float>(1.0 / std::sqrt(ss / d + kGatedNormEps));
          rstd[t * heads + h] = r;
          for (int i = 0; i < d; ++i) v[i] *= r * (o.norm_weight_offset + half_to_float(weight[i], g.dtype()));
        }
        for (int i = 0; i < hh; ++i) {
          const float x1 = v[i], x2 = v[i + hh];
          v[i] = x1 * cs(in.cos, t, i) - x2 * cs(in.sin, t, i);
          v[i + hh] = x2 * cs(in.cos, t, i + hh) + x1 * cs(in.sin, t, i + hh);
        }
      }
  }

  // dx (in place over dg [T, heads d]) from the pre-norm x and rstd; dw [d] summed (when the block norms).
  void backward(RowMat& dg, const RowMat& x, int heads, const uint16_t* weight, const std::vector<float>& rstd,
                std::vector<float>& dw) const {
    const int d = g.d_head(), hh = g.rope_dim() / 2;
    std::vector<double> acc(o.qk_norm ? d : 0, 0.0);
#pragma omp parallel
    {
      std::vector<double> mine(acc.size(), 0.0);
#pragma omp for schedule(static)
      for (int64_t t = 0; t < dg.rows(); ++t)
        for (int h = 0; h < heads; ++h) {
          float* v = &dg(t, static_cast<int64_t>(h) * d);
          for (int i = 0; i < hh; ++i) {  // R^T: the rotation by -angle
            const float g1 = v[i], g2 = v[i + hh];
            v[i] = g1 * cs(in.cos, t, i) + g2 * cs(in.sin, t, i + hh);
            v[i + hh] = g2 * cs(in.cos, t, i + hh) - g1 * cs(in.sin, t, i);
          }
          if (!o.qk_norm) continue;
          const float r = rstd[t * heads + h];
          double dot = 0;
          for (int i = 0; i < d; ++i) {
            const float n = x(t, static_cast<int64_t>(h) * d + i) * r;
            mine[i] += static_cast<double>(v[i]) * n;
            v[i] *= o.norm_weight_offset + half_to_float(weight[i], g.dtype());  // dn
            dot += static_cast<double>(v[i]) * n;
          }
          const float mean = static_cast<float>(dot / d);
          for (int i = 0; i < d; ++i) v[i] = r * (v[i] - x(t, static_cast<int64_t>(h) * d + i) * r * mean);
        }
#pragma omp critical(attnbench_ref_norm_dw)
      for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += mine[i];
    }
    dw.assign(acc.begin(), acc.end());
  }
};

}  // namespace

GatedBwdRef gated_block_backward(const GatedGeometry& g, const GatedOptions& o, const GatedRefInputs& in,
                                 const uint16_t* dy) {
  GatedBwdOptions all;
  validate_gated_bwd(g, o, all);
  if (in.seq_lens) throw std::invalid_argument("reference::gated_block_backward: seq_lens are declined");
  if (!in.h || !in.wq || !in.wgate || !in.wk || !in.wv || !in.w_o || !dy ||
      (o.qk_norm && (!in.q_norm_weight || !in.k_norm_weight)) || (g.rope_dim() > 0 && (!in.cos || !in.sin)))
    throw std::invalid_argument("reference::gated_block_backward: a needed input pointer is null");
  const DType dt = g.dtype();
  const int64_t T = g.tokens(), dm = g.d_model(), aw = g.attn_width(), kw = static_cast<int64_t>(g.h_kv()) * g.d_head();
  const RowMat h = convert(in.h, T, dm, dt), wq = convert(in.wq, aw, dm, dt), wg = convert(in.wgate, aw, dm, dt);
  const RowMat wk = convert(in.wk, kw, dm, dt), wv = convert(in.wv, kw, dm, dt), wo = convert(in.w_o, dm, aw, dt);
  const RowMat dyo = convert(dy, T, dm, dt);
  GatedBwdRef r;

  // Forward: the projections, norm + RoPE, and the save set.
  RowMat q = product(h, wq.transpose()), k = product(h, wk.transpose());
  const RowMat gate = product(h, wg.transpose()), v = product(h, wv.transpose());
  const RowMat q_pre = q, k_pre = k;
  const NormRope nr{g, o, in};
  nr.forward(q, g.h_q(), in.q_norm_weight, r.rstd_q);
  nr.forward(k, g.h_kv(), in.k_norm_weight, r.rstd_k);

  // dY, the gate's dO; the SDPA's forward and backward over the rounded q, k, v and dO.
  const RowMat dya = product(dyo, wo);
  const RowMat sig = (1.f + (-gate.array()).exp()).inverse().matrix();
  const RowMat d_o = (dya.array() * sig.array()).matrix();
  const std::vector<uint16_t> qh = rounded(q, dt), kh = rounded(k, dt), vh = rounded(v, dt), doh = rounded(d_o, dt);
  AttentionBwdParams a = make_attention_bwd_params(gated_bwd_sdpa_problem(g, o));
  a.q = qh.data();
  a.k = kh.data();
  a.v = vh.data();
  a.d_o = doh.data();
  std::vector<int32_t> cu(g.batch() + 1);
  for (int b = 0; b <= g.batch(); ++b) cu[b] = b * g.seqlen();
  a.cu_seqlens_q = a.cu_seqlens_k = cu.data();
  RowMat O(T, aw), dq(T, aw), dk(T, kw), dv(T, kw);
  r.lse.resize(static_cast<std::size_t>(T) * g.h_q());
  attention_backward(a, O.data(), r.lse.data(), dq.data(), dk.data(), dv.data());

  // The gate's and the output projection's gradients.
  const RowMat y = (O.array() * sig.array()).matrix();
  r.dw_o = to_vector(product(dyo.transpose(), y));
  const RowMat dgate = (dya.array() * O.array() * sig.array() * (1.f - sig.array())).matrix();

  // Back through RoPE and the norm, then to the weights and h.
  nr.backward(dq, q_pre, g.h_q(), in.q_norm_weight, r.rstd_q, r.dw_q_norm);
  nr.backward(dk, k_pre, g.h_kv(), in.k_norm_weight, r.rstd_k, r.dw_k_norm);
  r.dwq = to_vector(product(dq.transpose(), h));
  r.dwgate = to_vector(product(dgate.transpose(), h));
  r.dwk = to_vector(product(dk.transpose(), h));
  r.dwv = to_vector(product(dv.transpose(), h));
  r.dh = to_vector(product(dq, wq) + product(dgate, wg) + product(dk, wk) + product(dv, wv));

  r.q_pre = to_vector(q_pre);
  r.k_pre = to_vector(k_pre);
  r.q = to_vector(q);
  r.k = to_vector(k);
  r.v = to_vector(v);
  r.gate = to_vector(gate);
  r.o = to_vector(O);
  return r;
}

}  // namespace attnbench::reference
