// A backward kernel with planted bugs, for the gradient gate's matrix: per (sequence, kv head), blocks of 64 query
// rows of every head of the group, the whole key range of each at once (Eigen, fp32), P and dS rounded to the dtype
// before their products as a 16-bit kernel's matmuls take them. Each bug is one a backward kernel can have.
#pragma once
#define EIGEN_DONT_PARALLELIZE
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cases/bwd_inputs.hpp"

namespace attnbench::testing {

enum class BwdBug {
  none,
  d_omitted,            // dS = P o dP (no D)
  dq_unscaled,          // the softmax scale missing from dQ
  dk_unscaled,          // ... from dK
  gqa_first_head_only,  // dK/dV of a kv head from the group's first query head alone
  mask_off_by_one,      // causal: one key past the diagonal; full: the last key dropped
  dq_last_tile_dropped, // the last 64-key tile missing from dQ
  dv_p_unnormalised,    // dV from exp(S - rowmax), not exp(S - LSE)
  ds_sign_flipped,      // dS = P o (D - dP)
  sequence_skipped,     // the second sequence's gradients (the first's in a batch of one) left zero
};

inline std::vector<BwdBug> every_bwd_bug() {
  return {BwdBug::d_omitted,         BwdBug::dq_unscaled,          BwdBug::dk_unscaled,
          BwdBug::gqa_first_head_only, BwdBug::mask_off_by_one,    BwdBug::dq_last_tile_dropped,
          BwdBug::dv_p_unnormalised, BwdBug::ds_sign_flipped,      BwdBug::sequence_skipped};
}

inline const char* bwd_bug_name(BwdBug b) {
  switch (b) {
    case BwdBug::none: return "none";
    case BwdBug::d_omitted: return "d_omitted";
    case BwdBug::dq_unscaled: return "dq_unscaled";
    case BwdBug::dk_unscaled: return "dk_unscaled";
    case BwdBug::gqa_first_head_only: return "gqa_first_head_only";
    case BwdBug::mask_off_by_one: return "mask_off_by_one";
    case BwdBug::dq_last_tile_dropped: return "dq_last_tile_dropped";
    case BwdBug::dv_p_unnormalised: return "dv_p_unnormalised";
    case BwdBug::ds_sign_flipped: return "ds_sign_flipped";
    case BwdBug::sequence_skipped: return "sequence_skipped";
  }
  return "?";
}

struct BwdGrads {
  std::vector<uint16_t> dq, dk, dv;
};

namespace planted_detail {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

inline Mat rows_of(const HostTensor& t, int64_t r0, int n, int head, int heads, int d) {
  Mat m(n, d);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < d; ++c) m(r, c) = t.get(((r0 + r) * heads + head) * d + c);
  return m;
}

inline void store(std::vector<uint16_t>& dst, const Mat& m, int64_t r0, int head, int heads, DType dt) {
  const int d = static_cast<int>(m.cols());
  for (int r = 0; r < m.rows(); ++r)
    for (int c = 0; c < d; ++c) dst[((r0 + r) * heads + head) * d + c] = float_to_half(m(r, c), dt);
}

}  // namespace planted_detail

inline BwdGrads run_planted_bwd(const BwdInputs& in, BwdBug bug) {
  using planted_detail::Mat;
  const AttentionProblem& p = in.problem;
  const DType dt = p.types.o;
  const int d = p.head_size, group = p.group_size();
  const float scale = p.softmax_scale(), cap = p.features.softcap;
  const auto rnd = [dt](float x) { return half_to_float(float_to_half(x, dt), dt); };
  BwdGrads g;
  g.dq.assign(in.q.size(), 0);
  g.dk.assign(in.k.size(), 0);
  g.dv.assign(in.v.size(), 0);
  const int skipped = p.num_seqs() > 1 ? 1 : 0;
  for (int s = 0; s < p.num_seqs(); ++s) {
    if (bug == BwdBug::sequence_skipped && s == skipped) continue;
    const int64_t q0 = in.cu_seqlens_q[s], k0 = in.cu_seqlens_k[s];
    const int q_len = p.q_lens[s], kv_len = p.kv_lens[s], diag = p.top_left ? 0 : kv_len - q_len;
    const int last_tile = (kv_len - 1) / 64 * 64;
    const auto visible = [&](int i, int j) {
      const int pos = i + diag;
      int end = p.causal ? std::min(kv_len, pos + 1) : kv_len;
      if (p.features.window_right >= 0) end = std::min(end, pos + 1 + p.features.window_right);
      if (bug == BwdBug::mask_off_by_one) end = p.causal ? std::min(kv_len, end + 1) : end - 1;
      const int begin = p.features.window_left >= 0 ? std::max(0, pos - p.features.window_left) : 0;
      return j >= begin && j < end;
    };
    for (int kh = 0; kh < p.kv_heads; ++kh) {
      const Mat k = planted_detail::rows_of(in.k, k0, kv_len, kh, p.kv_heads, d);
      const Mat v = planted_detail::rows_of(in.v, k0, kv_len, kh, p.kv_heads, d);
      Mat dk = Mat::Zero(kv_len, d), dv = Mat::Zero(kv_len, d);
      const int blocks = (q_len + 63) / 64;
#pragma omp parallel
      {
        Mat dk_t = Mat::Zero(kv_len, d), dv_t = Mat::Zero(kv_len, d);
#pragma omp for schedule(dynamic, 1) nowait
        for (int item = 0; item < group * blocks; ++item) {
          const int h = kh * group + item / blocks, i0 = (item % blocks) * 64, n = std::min(64, q_len - i0);
          const Mat q = planted_detail::rows_of(in.q, q0 + i0, n, h, p.heads, d);
          const Mat dout = planted_detail::rows_of(in.d_o, q0 + i0, n, h, p.heads, d);
          const Mat o = planted_detail::rows_of(in.o, q0 + i0, n, h, p.heads, d);
          // keys from the first row's window start on (all when causal rows see key 0)
          const int lo = p.features.window_left >= 0 ? std::max(0, i0 + diag - p.features.window_left) : 0;
          const int w = kv_len - lo;
          const auto kb = k.bottomRows(w), vb = v.bottomRows(w);
          Mat pm = (q * kb.transpose()) * scale, pv(n, w), ds(n, w);
          const Mat dp = dout * vb.transpose();
          for (int r = 0; r < n; ++r) {
            const float lse = in.lse[(q0 + i0 + r) * p.heads + h];
            const float D = bug == BwdBug::d_omitted ? 0.f : o.row(r).dot(dout.row(r));
            float mx = -INFINITY;
            for (int j = 0; j < w; ++j) {
              float x = pm(r, j), capd = 1.f;
              if (cap > 0) {
                const float t = std::tanh(x / cap);
                x = cap * t;
                capd = 1.f - t * t;
              }
              const bool on = visible(i0 + r, lo + j);
              pm(r, j) = on ? x : -INFINITY;
              mx = std::max(mx, pm(r, j));
              const float pr = on ? rnd(std::exp(x - lse)) : 0.f;
              float dsv = pr * (dp(r, j) - D) * capd;
              if (bug == BwdBug::ds_sign_flipped) dsv = -dsv;
              ds(r, j) = rnd(dsv);
              pv(r, j) = pr;
            }
            if (bug == BwdBug::dv_p_unnormalised)
              for (int j = 0; j < w; ++j) pv(r, j) = pm(r, j) == -INFINITY ? 0.f : rnd(std::exp(pm(r, j) - mx));
          }
          Mat dsq = ds;
          if (bug == BwdBug::dq_last_tile_dropped) dsq.rightCols(std::min(w, kv_len - last_tile)).setZero();
          const float qs = bug == BwdBug::dq_unscaled ? 1.f : scale, ks = bug == BwdBug::dk_unscaled ? 1.f : scale;
          const Mat dq = (dsq * kb) * qs;
          planted_detail::store(g.dq, dq, q0 + i0, h, p.heads, dt);
          if (bug == BwdBug::gqa_first_head_only && h != kh * group) continue;
          dk_t.bottomRows(w).noalias() += (ds.transpose() * q) * ks;
          dv_t.bottomRows(w).noalias() += pv.transpose() * dout;
        }
#pragma omp critical
        {
          dk += dk_t;
          dv += dv_t;
        }
      }
      planted_detail::store(g.dk, dk, k0, kh, p.kv_heads, dt);
      planted_detail::store(g.dv, dv, k0, kh, p.kv_heads, dt);
    }
  }
  return g;
}

}  // namespace attnbench::testing
