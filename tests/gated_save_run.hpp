// A CPU gated block's forward with save_for_backward on host buffers for the host tests: the save set poisoned
// (0xFF: NaN in the dtype and in fp32), one execute(), the tensors read back; the backward on that save set; and the
// saved tensors' distance to the reference's save set.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_bwd.hpp"
#include "attnbench/reference.hpp"
#include "cases/gated_bwd_data.hpp"
#include "cases/gated_case.hpp"

namespace attnbench::gatedtest {

// The save set's host buffers (GatedSaveOut's layouts); rstd only under qk_norm, q_pre / k_pre only when asked.
struct SaveBufs {
  std::vector<uint16_t> q, k, v, gate, o, q_pre, k_pre;
  std::vector<float> lse, rstd_q, rstd_k;

  SaveBufs(const GatedGeometry& g, const GatedOptions& o, bool pre) {
    const std::size_t t = static_cast<std::size_t>(g.tokens()), d = g.d_head(), hq = g.h_q(), hk = g.h_kv();
    q = gate = this->o = std::vector<uint16_t>(t * hq * d, 0xFFFF);
    k = v = std::vector<uint16_t>(t * hk * d, 0xFFFF);
    lse.assign(t * hq, NAN);
    if (o.qk_norm) {
      rstd_q.assign(t * hq, NAN);
      rstd_k.assign(t * hk, NAN);
    }
    if (pre) {
      q_pre = q;
      k_pre = k;
    }
  }
  GatedSaveOut out() {
    auto p = [](auto& v) { return v.empty() ? nullptr : v.data(); };
    return {p(q), p(k), p(v), p(gate), p(o), p(lse), p(rstd_q), p(rstd_k), p(q_pre), p(k_pre)};
  }
  // What the backward reads (GatedSaved), this forward's tensors.
  GatedSaved saved() const {
    auto p = [](const auto& v) { return v.empty() ? nullptr : v.data(); };
    return {p(q), p(k), p(v), p(gate), p(o), p(lse), p(rstd_q), p(rstd_k), p(q_pre), p(k_pre)};
  }
};

struct SaveRun {
  std::vector<uint16_t> w_qkvg, out;
  std::vector<float> lse;  // [B, h_q, S] with return_lse
  std::vector<unsigned char> ws;
  SaveBufs save;
  GatedBlockParams prm;
};

// One forward of `block` over `in` (the 16-bit inputs; no seq_lens), the save set asked for when the block has
// save_for_backward (q_pre / k_pre with pre).
inline SaveRun run_save(GatedBlock& block, const GatedHostInputs& in, bool pre) {
  const GatedGeometry& g = block.geometry();
  const GatedOptions& o = block.options();
  SaveRun r{{}, {}, {}, {}, SaveBufs(g, o, pre), make_gated_params(g)};
  r.w_qkvg = build_w_qkvg(g, o.q_gate_layout, in.wq.data(), in.wgate.data(), in.wk.data(), in.wv.data());
  r.out.assign(static_cast<std::size_t>(g.tokens()) * g.d_model(), 0xFFFF);
  r.ws.assign(block.workspace_size(), 0xFF);
  GatedBlockParams& p = r.prm;
  p.h = in.h.data();
  p.w_qkvg = r.w_qkvg.data();
  p.q_norm_weight = in.q_norm_weight.data();
  p.k_norm_weight = in.k_norm_weight.data();
  p.cos = in.cos.empty() ? nullptr : in.cos.data();
  p.sin = in.sin.empty() ? nullptr : in.sin.data();
  p.w_o = in.w_o.data();
  p.out = r.out.data();
  p.workspace = r.ws.data();
  if (o.return_lse) {
    r.lse.assign(static_cast<std::size_t>(g.tokens()) * g.h_q(), NAN);
    p.lse = r.lse.data();
  }
  if (o.save_for_backward) p.save = r.save.out();
  block.prepare_workspace(p.workspace, nullptr);
  block.execute(p, nullptr);
  return r;
}

// The largest relative L2 error over rows of row_len of a saved 16-bit tensor against the reference's fp32 one.
inline double max_row_rel_l2(const std::vector<uint16_t>& got, const std::vector<float>& want, int row_len, DType dt) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t r0 = 0; r0 + row_len <= std::min(got.size(), want.size()); r0 += row_len) {
    double err = 0, ref = 0;
    for (int i = 0; i < row_len; ++i) {
      const double x = half_to_float(got[r0 + i], dt), y = want[r0 + i];
      err += (x - y) * (x - y);
      ref += y * y;
    }
    worst = std::max(worst, std::sqrt(err / std::max(ref, 1e-30)));
  }
  return std::isnan(worst) ? INFINITY : worst;
}

// The largest error of fp32 values against the reference's: relative with rel, else absolute (NaN: infinite).
inline double max_err(const std::vector<float>& got, const std::vector<float>& want, bool rel) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double e = std::abs(static_cast<double>(got[i]) - want[i]) / (rel ? std::abs(want[i]) : 1.0);
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

// The LSE error as the gate measures it (gate_lse): |got - want| / max(1, |want|), the largest (NaN: infinite).
inline double max_lse_err(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i] == -INFINITY && want[i] == -INFINITY) continue;
    const double e = std::abs(static_cast<double>(got[i]) - want[i]) / std::max(1.0, std::abs(double{want[i]}));
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

// The fp32 SDPA over a save set's own q, k, v (the block's mask, window and scale), every row: o [T, h_q d] and lse
// [T, h_q], what the saved o and lse must be (the backward recomputes P from q, k and the LSE).
struct SdpaOverSave {
  std::vector<float> o, lse;
};
inline SdpaOverSave sdpa_over_save(const GatedGeometry& g, const GatedOptions& opt, const SaveBufs& s) {
  const int bs = gated_block_size(g);
  const AttentionProblem prob = gated_sdpa_problem(g, opt, bs);
  AttentionParams a = gated_sdpa_strides(g, opt, prob);  // save_for_backward: the save set's packed strides
  const int nb = (g.seqlen() + bs - 1) / bs;
  std::vector<int32_t> cu(g.batch() + 1), used(g.batch(), g.seqlen()), table(static_cast<std::size_t>(g.batch()) * nb);
  for (int b = 0; b <= g.batch(); ++b) cu[b] = b * g.seqlen();
  for (int b = 0; b < g.batch(); ++b)
    for (int j = 0; j < nb; ++j) table[b * nb + j] = b * g.seqlen() / bs + j;
  std::vector<uint16_t> unused(s.o.size());
  a.q = s.q.data();
  a.k_cache = s.k.data();
  a.v_cache = s.v.data();
  a.out = unused.data();
  a.cu_seqlens_q = cu.data();
  a.seqused_k = used.data();
  a.block_table = table.data();
  a.block_table_stride = nb;
  SdpaOverSave r{std::vector<float>(s.o.size()), std::vector<float>(s.lse.size())};
  reference::paged_attention_all(a, r.o.data(), r.lse.data());
  return r;
}

// Every saved tensor of a forward against the reference's save set, per head row: v, gate, q_pre and k_pre (rounded
// projections) within a tenth of the gate's rtol; q and k within a quarter (the block rounds the projection before
// the norm and RoPE, the reference does not); o within the attention gate's rtol and lse within 1e-4 (as the gate
// measures it) of the fp32 SDPA over the saved q, k, v, and within half the rtol and the LSE gate's quarter of the
// reference's; rstd as the block's formula over the saved pre-norm rows (1e-5) and within the dtype's rounding of
// the reference's.
inline void expect_save_matches(const char* name, const GatedGeometry& g, const GatedOptions& o, const SaveBufs& s,
                                const reference::GatedBwdRef& ref) {
  const DType dt = g.dtype();
  const double rtol = default_rtol(dt) * kGatedRtolFactor;
  const int d = g.d_head();
  auto rows = [&](const char* what, const std::vector<uint16_t>& got, const std::vector<float>& want, double f) {
    EXPECT_LT(max_row_rel_l2(got, want, d, dt), f * rtol) << name << " " << what;
  };
  rows("v", s.v, ref.v, 0.1);
  rows("gate", s.gate, ref.gate, 0.1);
  rows("q", s.q, ref.q, 0.25);
  rows("k", s.k, ref.k, 0.25);
  rows("o", s.o, ref.o, 0.5);
  if (!s.q_pre.empty()) {
    rows("q_pre", s.q_pre, ref.q_pre, 0.1);
    rows("k_pre", s.k_pre, ref.k_pre, 0.1);
  }
  const SdpaOverSave own = sdpa_over_save(g, o, s);
  rows("o/own", s.o, own.o, 1 / kGatedRtolFactor);  // the attention gate's rtol
  EXPECT_LT(max_lse_err(s.lse, own.lse), 1e-4) << name;
  EXPECT_LT(max_lse_err(s.lse, ref.lse), rtol / 4) << name;
  if (!o.qk_norm) return;
  // The pre-norm rows rounded to the dtype move mean(x^2) by at most 2u, so rstd by u (the unit roundoff).
  const double rstd_bound = 1.1 * (dt == DType::bf16 ? 0x1p-9 : 0x1p-12);
  EXPECT_LT(max_err(s.rstd_q, ref.rstd_q, true), rstd_bound) << name;
  EXPECT_LT(max_err(s.rstd_k, ref.rstd_k, true), rstd_bound) << name;
  if (s.q_pre.empty()) return;
  for (const auto& [x, rs] : {std::pair{&s.q_pre, &s.rstd_q}, {&s.k_pre, &s.rstd_k}}) {
    std::vector<float> want(rs->size());
    for (std::size_t row = 0; row < want.size(); ++row) {
      double ss = 0;
      for (int i = 0; i < d; ++i) ss += std::pow(half_to_float((*x)[row * d + i], dt), 2);
      want[row] = static_cast<float>(1.0 / std::sqrt(ss / d + kGatedNormEps));
    }
    EXPECT_LT(max_err(*rs, want, true), 1e-5) << name;
  }
}

// The backward `bwd` over a forward's save set: every gradient asked for, the gradient gate against host's reference.
inline GateResult run_bwd_on_save(GatedBlockBwd& bwd, const GatedBwdHost& host, const SaveRun& fwd) {
  const GatedGeometry& g = bwd.geometry();
  const GatedOptions& o = bwd.options();
  const GatedBwdOptions& b = bwd.bwd_options();
  const std::size_t t = static_cast<std::size_t>(g.tokens()), dm = g.d_model(), d = g.d_head();
  std::vector<uint16_t> dh(t * dm, 0xFFFF), dwq(static_cast<std::size_t>(g.n_qkvg()) * dm, 0xFFFF);
  std::vector<uint16_t> dwo(dm * static_cast<std::size_t>(g.attn_width()), 0xFFFF), dqn(d, 0xFFFF), dkn(d, 0xFFFF);
  std::vector<unsigned char> ws(bwd.workspace_size(), 0xFF);
  GatedBlockBwdParams p = make_gated_bwd_params(g);
  p.h = fwd.prm.h;
  p.w_qkvg = fwd.prm.w_qkvg;
  p.q_norm_weight = fwd.prm.q_norm_weight;
  p.k_norm_weight = fwd.prm.k_norm_weight;
  p.cos = fwd.prm.cos;
  p.sin = fwd.prm.sin;
  p.w_o = fwd.prm.w_o;
  p.dy = host.dy.data();
  p.saved = fwd.save.saved();
  if (!(b.recompute == RecomputePolicy::save_all && o.qk_norm)) p.saved.q_pre = p.saved.k_pre = nullptr;
  p.dh = dh.data();
  p.dw_qkvg = dwq.data();
  p.dw_o = dwo.data();
  p.dw_q_norm = o.qk_norm ? dqn.data() : nullptr;
  p.dw_k_norm = o.qk_norm ? dkn.data() : nullptr;
  p.workspace = ws.data();
  bwd.prepare_workspace(p.workspace, nullptr);
  bwd.execute(p, nullptr);
  const GatedBwdGrads got{dh.data(), dwq.data(), dwo.data(), p.dw_q_norm ? dqn.data() : nullptr,
                          p.dw_k_norm ? dkn.data() : nullptr};
  return gate_gated_gradients(g, o, b, got, host, default_tolerance(g.dtype()));
}

}  // namespace attnbench::gatedtest
