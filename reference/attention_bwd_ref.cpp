// fp32 Eigen reference of the attention backward. Work is one (sequence, kv head) unit at a time: its K and V
// gathered to fp32, then blocks of query rows of every head of the group in parallel, each recomputing its scores
// whole (rows complete: the forward's O and LSE come out of the same pass), then dP, D, dS and the three gradient
// products, over the keys the block's rows can see. dK/dV accumulate per thread and are summed once per unit (in
// the threads' arrival order: runs may differ in the last bits).
#define EIGEN_DONT_PARALLELIZE  // parallelism is ours (OpenMP over query blocks)
#include "attnbench/reference_bwd.hpp"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "attnbench/dtype.hpp"

namespace attnbench::reference {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
constexpr int kBlockRows = 64;

float to_float(const uint16_t h, DType dt) { return half_to_float(h, dt); }

// rows [r0, r0 + n) of a packed tensor's head `head` into fp32 (n x head_size).
RowMat gather(const void* base, DType dt, int64_t r0, int n, int head, int64_t st_tok, int64_t st_head, int d) {
  RowMat m(n, d);
  const uint16_t* src = static_cast<const uint16_t*>(base);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < d; ++c) m(r, c) = to_float(src[(r0 + r) * st_tok + head * st_head + c], dt);
  return m;
}

// Query rows [i0, i0 + n) of head h of one sequence against its keys: the forward and the gradients; dk/dv added.
struct Unit {
  const AttentionBwdParams& p;
  int64_t q0, k0;  // the sequence's first query and key tokens
  int q_len, kv_len;
  const RowMat &k, &v;

  int pos(int i) const { return p.top_left ? i : i + kv_len - q_len; }
  bool visible(int i, int j) const {
    if (p.causal && j > pos(i)) return false;
    if (p.window_left >= 0 && j < pos(i) - p.window_left) return false;
    if (p.window_right >= 0 && j > pos(i) + p.window_right) return false;
    return j >= 0 && j < kv_len;
  }
  // The keys [lo, hi) rows [i0, i0 + n) may see (both ends of a row's range grow with i).
  std::pair<int, int> key_range(int i0, int n) const {
    int hi = kv_len, lo = 0;
    if (p.causal) hi = std::min(hi, pos(i0 + n - 1) + 1);
    if (p.window_right >= 0) hi = std::min(hi, pos(i0 + n - 1) + p.window_right + 1);
    if (p.window_left >= 0) lo = std::max(0, pos(i0) - p.window_left);
    return {lo, std::max(lo, hi)};
  }

  void block(int h, int i0, int n, float* o, float* lse, float* dq, RowMat& dk, RowMat& dv) const {
    const int d = p.head_size;
    const RowMat q = gather(p.q, p.dtype, q0 + i0, n, h, p.q_stride_token, p.q_stride_head, d);
    const RowMat dout = gather(p.d_o, p.dtype, q0 + i0, n, h, p.q_stride_token, p.q_stride_head, d);
    const auto [lo, hi] = key_range(i0, n);
    const int w = hi - lo;
    const auto kb = k.middleRows(lo, w), vb = v.middleRows(lo, w);
    RowMat s = (q * kb.transpose()) * p.scale;
    RowMat capd;  // 1 - tanh^2 of the capped scores (softcap only)
    if (p.softcap > 0) capd.resize(n, w);
    for (int r = 0; r < n; ++r) {
      float m = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < w; ++j) {
        float x = s(r, j);
        if (p.softcap > 0) {
          const float t = std::tanh(x / p.softcap);
          capd(r, j) = 1.f - t * t;
          x = p.softcap * t;
        }
        x = visible(i0 + r, lo + j) ? x : -std::numeric_limits<float>::infinity();
        s(r, j) = x;
        m = std::max(m, x);
      }
      double sum = 0;
      for (int j = 0; j < w; ++j) sum += m == -INFINITY ? 0.0 : std::exp(static_cast<double>(s(r, j) - m));
      const float l = sum > 0 ? m + static_cast<float>(std::log(sum)) : -std::numeric_limits<float>::infinity();
      for (int j = 0; j < w; ++j) s(r, j) = sum > 0 ? std::exp(s(r, j) - l) : 0.f;  // P
      lse[(q0 + i0 + r) * p.heads + h] = l;
    }
    const RowMat out = s * vb;
    const RowMat dp = dout * vb.transpose();
    RowMat ds(n, w);
    for (int r = 0; r < n; ++r) {
      float D = 0;  // over O as the kernels read it: rounded to the dtype
      for (int c = 0; c < d; ++c) D += half_to_float(float_to_half(out(r, c), p.dtype), p.dtype) * dout(r, c);
      for (int j = 0; j < w; ++j) ds(r, j) = s(r, j) * (dp(r, j) - D) * (p.softcap > 0 ? capd(r, j) : 1.f);
    }
    const RowMat g = (ds * kb) * p.scale;
    dk.middleRows(lo, w).noalias() += (ds.transpose() * q) * p.scale;
    dv.middleRows(lo, w).noalias() += s.transpose() * dout;
    for (int r = 0; r < n; ++r) {
      const int64_t row = ((q0 + i0 + r) * p.heads + h) * d;
      for (int c = 0; c < d; ++c) {
        o[row + c] = out(r, c);
        dq[row + c] = g(r, c);
      }
    }
  }
};

}  // namespace

void attention_backward(const AttentionBwdParams& p, float* o, float* lse, float* dq, float* dk, float* dv) {
  std::vector<int32_t> cq(p.num_seqs + 1), ck(p.num_seqs + 1);
  std::copy(p.cu_seqlens_q, p.cu_seqlens_q + p.num_seqs + 1, cq.begin());
  std::copy(p.cu_seqlens_k, p.cu_seqlens_k + p.num_seqs + 1, ck.begin());
  const int d = p.head_size, group = p.heads / p.kv_heads;
  for (int s = 0; s < p.num_seqs; ++s) {
    const int q_len = cq[s + 1] - cq[s], kv_len = ck[s + 1] - ck[s];
    const int blocks = (q_len + kBlockRows - 1) / kBlockRows;
    for (int g = 0; g < p.kv_heads; ++g) {
      const RowMat k = gather(p.k, p.dtype, ck[s], kv_len, g, p.k_stride_token, p.k_stride_head, d);
      const RowMat v = gather(p.v, p.dtype, ck[s], kv_len, g, p.k_stride_token, p.k_stride_head, d);
      const Unit u{p, cq[s], ck[s], q_len, kv_len, k, v};
      RowMat dk_sum = RowMat::Zero(kv_len, d), dv_sum = RowMat::Zero(kv_len, d);
#pragma omp parallel
      {
        RowMat dk_t = RowMat::Zero(kv_len, d), dv_t = RowMat::Zero(kv_len, d);
#pragma omp for schedule(dynamic, 1) nowait
        for (int item = 0; item < group * blocks; ++item) {
          const int h = g * group + item / blocks, i0 = (item % blocks) * kBlockRows;
          u.block(h, i0, std::min(kBlockRows, q_len - i0), o, lse, dq, dk_t, dv_t);
        }
#pragma omp critical
        {
          dk_sum += dk_t;
          dv_sum += dv_t;
        }
      }
      for (int j = 0; j < kv_len; ++j)
        for (int c = 0; c < d; ++c) {
          dk[((ck[s] + j) * p.kv_heads + g) * d + c] = dk_sum(j, c);
          dv[((ck[s] + j) * p.kv_heads + g) * d + c] = dv_sum(j, c);
        }
    }
  }
}

}  // namespace attnbench::reference
