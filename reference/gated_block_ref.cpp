// fp32 Eigen reference of the gated block. Per batch element, the keys the requested rows can see are projected
// (K, V), normed and rotated once; the requested rows get their Q and GATE projections, per-(row, kv head)
// attention over the GQA group (scores, fp32 softmax, PV), the sigmoid gate and the output projection.
// OpenMP over token chunks and (row, kv head) pairs; Eigen single-threaded inside.
#define EIGEN_DONT_PARALLELIZE
#include "attnbench/gated_block_ref.hpp"
#include "attnbench/mx_ref.hpp"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace attnbench::reference {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
constexpr int kChunk = 64;  // tokens per projection task

float to_f(uint16_t v, DType dt) { return half_to_float(v, dt); }

// rows x cols halves (row-major, leading dimension ld) -> fp32 matrix.
RowMat convert(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld, DType dt) {
  RowMat m(rows, cols);
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) m(r, c) = to_f(src[r * ld + c], dt);
  return m;
}

// RMSNorm (weight offset + w) then rotate-half RoPE on [0, rope_dim), in fp32, one head row.
void norm_rope(float* x, int d, bool norm, const std::vector<float>& w, float offset, int rope_dim,
               const uint16_t* cos, const uint16_t* sin, DType dt) {
  if (norm) {
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / d + kGatedNormEps));
    for (int i = 0; i < d; ++i) x[i] = x[i] * inv * (offset + w[i]);
  }
  const int h = rope_dim / 2;
  for (int i = 0; i < h; ++i) {
    const float x1 = x[i], x2 = x[i + h];
    x[i] = x1 * to_f(cos[i], dt) - x2 * to_f(sin[i], dt);
    x[i + h] = x2 * to_f(cos[i + h], dt) + x1 * to_f(sin[i + h], dt);
  }
}

// Under the MX modes, each row of m replaced by what its quantisation to f (after pre_scale) stands for.
void mx_rows(const GatedOptions& o, RowMat& m, mx::MxFormat f, float pre_scale) {
  if (!o.mx) return;
  for (Eigen::Index r = 0; r < m.rows(); ++r) mx_fake_quantize(f, m.row(r).data(), m.cols(), pre_scale);
}

// Every element of m (a matrix or a block of one) replaced by what its e4m3 code after `scale` stands for (the
// reference's own rounding, dtype.hpp's): code = e4m3(x * scale), value = code / scale.
template <class M>
void fp8_round(M&& m, float scale) {
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c)
      m(r, c) = fp8_to_float(float_to_fp8(m(r, c) * scale, DType::e4m3), DType::e4m3) / scale;
}

}  // namespace

std::pair<int, int> gated_visible_keys(const GatedGeometry& g, const GatedOptions& o, const int32_t* seq_lens,
                                       int64_t row) {
  const int S = g.seqlen(), s = static_cast<int>(row % S);
  const int kv_len = seq_lens ? seq_lens[row / S] : S;
  const int pos = o.causal_bottom_right ? s + kv_len - S : s;
  int end = o.is_causal ? pos + 1 : kv_len;
  if (o.window_right >= 0) end = std::min(end, pos + 1 + o.window_right);
  const int first = o.window_left >= 0 ? std::max(0, pos - o.window_left) : 0;
  return {first, std::clamp(end, 0, kv_len)};
}

double gated_block_ref_flops(const GatedGeometry& g, const GatedOptions& o, const int32_t* seq_lens,
                             const std::vector<int64_t>& rows) {
  std::vector<int> keys(g.batch(), 0);
  double per_row = 0;
  const double dm = g.d_model(), aw = static_cast<double>(g.attn_width());
  for (int64_t r : rows) {
    const int b = static_cast<int>(r / g.seqlen());
    const auto [first, end] = gated_visible_keys(g, o, seq_lens, r);
    keys[b] = std::max(keys[b], end);
    per_row += 2.0 * dm * 2.0 * aw + 4.0 * std::max(0, end - first) * aw + 2.0 * aw * dm;
  }
  double kv = 0;
  for (int k : keys) kv += 2.0 * k * dm * 2.0 * g.h_kv() * g.d_head();
  return kv + per_row;
}

void gated_block(const GatedGeometry& g, const GatedOptions& o, const GatedRefInputs& in,
                 const std::vector<int64_t>& rows, float* out, float* lse) {
  if (rows.empty()) return;
  if (!in.h || !in.wq || !in.wgate || !in.wk || !in.wv || !in.w_o || (o.qk_norm && (!in.q_norm_weight || !in.k_norm_weight)) ||
      (g.rope_dim() > 0 && (!in.cos || !in.sin)))
    throw std::invalid_argument("reference::gated_block: a needed input pointer is null");
  if (const std::string why = gated_seq_lens_conflict(g, in.seq_lens); !why.empty())
    throw std::invalid_argument("reference::gated_block: " + why);
  const DType dt = g.dtype();
  const int S = g.seqlen(), dm = g.d_model(), hq = g.h_q(), hkv = g.h_kv(), d = g.d_head(), rd = g.rope_dim();
  const int group = hq / hkv;
  const int64_t aw = g.attn_width(), kvw = static_cast<int64_t>(hkv) * d;
  for (int64_t r : rows)
    if (r < 0 || r >= g.tokens())
      throw std::out_of_range("reference::gated_block: row " + std::to_string(r) + " outside [0, " +
                              std::to_string(g.tokens()) + ")");
  const float scale = o.softmax_scale(d);

  const RowMat wq = convert(in.wq, aw, dm, dm, dt), wg = convert(in.wgate, aw, dm, dm, dt);
  const RowMat wk = convert(in.wk, kvw, dm, dm, dt), wv = convert(in.wv, kvw, dm, dm, dt);
  const RowMat wo = convert(in.w_o, dm, aw, aw, dt);
  std::vector<float> qn(d, 0.f), kn(d, 0.f);
  if (o.qk_norm)
    for (int i = 0; i < d; ++i) {
      qn[i] = to_f(in.q_norm_weight[i], dt);
      kn[i] = to_f(in.k_norm_weight[i], dt);
    }
  auto rope_ptrs = [&](int64_t token) {
    return std::make_pair(rd > 0 ? in.cos + token * rd : nullptr, rd > 0 ? in.sin + token * rd : nullptr);
  };

  // K, V of the keys each batch element's rows see: [keys, h_kv * d], K normed and rotated.
  std::vector<int> keys(g.batch(), 0);
  for (int64_t r : rows) keys[r / S] = std::max(keys[r / S], gated_visible_keys(g, o, in.seq_lens, r).second);
  std::vector<RowMat> K(g.batch()), V(g.batch());
  std::vector<std::pair<int, int>> chunks;  // (batch, first token)
  for (int b = 0; b < g.batch(); ++b) {
    K[b].resize(keys[b], kvw);
    V[b].resize(keys[b], kvw);
    for (int t = 0; t < keys[b]; t += kChunk) chunks.emplace_back(b, t);
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t c = 0; c < static_cast<int64_t>(chunks.size()); ++c) {
    const auto [b, t0] = chunks[c];
    const int n = std::min(kChunk, keys[b] - t0);
    const int64_t tok0 = static_cast<int64_t>(b) * S + t0;
    RowMat hc = convert(in.h + tok0 * dm, n, dm, dm, dt);
    mx_rows(o, hc, mx_h_format(), 1.f);
    K[b].middleRows(t0, n).noalias() = hc * wk.transpose();
    V[b].middleRows(t0, n).noalias() = hc * wv.transpose();
    for (int i = 0; i < n; ++i) {
      const auto [cp, sp] = rope_ptrs(tok0 + i);
      for (int h = 0; h < hkv; ++h) norm_rope(&K[b](t0 + i, h * d), d, o.qk_norm, kn, o.norm_weight_offset, rd, cp, sp, dt);
    }
    if (o.fp8) {  // the FP8 SDPA's K and V codes
      fp8_round(K[b].middleRows(t0, n), o.fp8->scale_k);
      fp8_round(V[b].middleRows(t0, n), o.fp8->scale_v);
    }
  }

  // Q and GATE of the requested rows; Q normed and rotated.
  const int64_t R = static_cast<int64_t>(rows.size());
  RowMat q(R, aw), gate(R, aw);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t r0 = 0; r0 < R; r0 += 16) {
    const int64_t n = std::min<int64_t>(16, R - r0);
    RowMat hr(n, dm);
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < dm; ++k) hr(i, k) = to_f(in.h[rows[r0 + i] * dm + k], dt);
    mx_rows(o, hr, mx_h_format(), 1.f);
    q.middleRows(r0, n).noalias() = hr * wq.transpose();
    gate.middleRows(r0, n).noalias() = hr * wg.transpose();
    for (int64_t i = 0; i < n; ++i) {
      const auto [cp, sp] = rope_ptrs(rows[r0 + i]);
      for (int h = 0; h < hq; ++h) norm_rope(&q(r0 + i, h * d), d, o.qk_norm, qn, o.norm_weight_offset, rd, cp, sp, dt);
    }
    if (o.fp8) fp8_round(q.middleRows(r0, n), o.fp8->scale_q);
  }

  // Attention per (row, kv head) over the group's query heads, then the gate.
  RowMat og(R, aw);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t task = 0; task < R * hkv; ++task) {
    const int64_t r = task / hkv;
    const int kvh = static_cast<int>(task % hkv);
    const int b = static_cast<int>(rows[r] / S);
    const auto [first_key, end] = gated_visible_keys(g, o, in.seq_lens, rows[r]);
    const int n = end - first_key;
    if (n <= 0) {  // a row that sees no key outputs 0 (and its cache may hold no rows at all)
      for (int j = 0; j < group; ++j) {
        if (lse) lse[r * hq + kvh * group + j] = -INFINITY;
        og.block(r, static_cast<int64_t>(kvh * group + j) * d, 1, d).setZero();
      }
      continue;
    }
    const int first = first_key;
    RowMat qg(group, d);
    for (int j = 0; j < group; ++j) qg.row(j) = q.block(r, static_cast<int64_t>(kvh * group + j) * d, 1, d);
    RowMat s = qg * K[b].block(first, static_cast<int64_t>(kvh) * d, n, d).transpose();
    for (int j = 0; j < group; ++j) {
      float m = -std::numeric_limits<float>::infinity();
      for (int k = 0; k < n; ++k) m = std::max(m, s(j, k) * scale);
      double sum = 0;
      for (int k = 0; k < n; ++k) {
        s(j, k) = std::exp(s(j, k) * scale - m);
        sum += s(j, k);
      }
      if (lse) lse[r * hq + kvh * group + j] = m + static_cast<float>(std::log(sum));
      s.row(j) /= static_cast<float>(sum);
    }
    const RowMat oh = s * V[b].block(first, static_cast<int64_t>(kvh) * d, n, d);
    for (int j = 0; j < group; ++j) {
      const int64_t c0 = static_cast<int64_t>(kvh * group + j) * d;
      for (int i = 0; i < d; ++i) og(r, c0 + i) = oh(j, i) / (1.f + std::exp(-gate(r, c0 + i)));
    }
  }

  // Output projection (under MX: the gated O quantised, W_o's per-tensor descale).
  if (o.mx) mx_rows(o, og, mx_o_format(*o.mx), o.mx->scale_o);
  if (o.fp8) fp8_round(og, o.fp8->scale_o);
  const float out_factor = o.mx ? o.mx->descale_w_o : 1.f;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t r0 = 0; r0 < R; r0 += 16) {
    const int64_t n = std::min<int64_t>(16, R - r0);
    Eigen::Map<RowMat> dst(out + r0 * dm, n, dm);
    dst.noalias() = og.middleRows(r0, n) * wo.transpose();
    dst *= out_factor;
  }
}

}  // namespace attnbench::reference
