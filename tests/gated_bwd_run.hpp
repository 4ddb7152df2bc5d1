// One call of a CPU gated block backward on host buffers for the host tests: the save set from the reference
// (GatedBwdHost), the gradients asked for and the workspace poisoned (0xFF: NaN in fp16 and bf16), one execute(),
// and the gradient gate over every row.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "attnbench/gated_block_bwd.hpp"
#include "cases/gated_bwd_data.hpp"

namespace attnbench::gatedtest {

struct BwdRun {
  std::vector<uint16_t> w_qkvg, dh, dw_qkvg, dw_o, dw_q_norm, dw_k_norm;
  std::vector<unsigned char> ws;
  GatedBlockBwdParams prm;
  GateResult gate;
};

inline std::vector<uint16_t> nan_halves(bool wanted, std::size_t n) {
  return wanted ? std::vector<uint16_t>(n, 0xFFFF) : std::vector<uint16_t>{};
}

inline BwdRun run_bwd(GatedBlockBwd& block, const GatedBwdHost& host) {
  const GatedGeometry& g = block.geometry();
  const GatedOptions& o = block.options();
  const GatedBwdOptions& b = block.bwd_options();
  BwdRun r;
  const GatedHostInputs& in = host.in;
  r.w_qkvg = build_w_qkvg(g, o.q_gate_layout, in.wq.data(), in.wgate.data(), in.wk.data(), in.wv.data());
  const std::size_t t = static_cast<std::size_t>(g.tokens()), dm = g.d_model(), d = g.d_head();
  r.dh = nan_halves(b.need_dh, t * dm);
  r.dw_qkvg = nan_halves(b.need_dw_qkvg, static_cast<std::size_t>(g.n_qkvg()) * dm);
  r.dw_o = nan_halves(b.need_dw_o, dm * static_cast<std::size_t>(g.attn_width()));
  r.dw_q_norm = nan_halves(b.dw_norms(o), d);
  r.dw_k_norm = nan_halves(b.dw_norms(o), d);
  r.ws.assign(block.workspace_size(), 0xFF);
  GatedBlockBwdParams& p = r.prm;
  p = make_gated_bwd_params(g);
  p.h = in.h.data();
  p.w_qkvg = r.w_qkvg.data();
  p.q_norm_weight = in.q_norm_weight.data();
  p.k_norm_weight = in.k_norm_weight.data();
  p.cos = in.cos.empty() ? nullptr : in.cos.data();
  p.sin = in.sin.empty() ? nullptr : in.sin.data();
  p.w_o = in.w_o.data();
  p.dy = host.dy.data();
  GatedSaved& s = p.saved;
  s.q = host.q.data();
  s.k = host.k.data();
  s.v = host.v.data();
  s.gate = host.gate.data();
  s.o = host.o.data();
  s.lse = host.ref.lse.data();
  s.rstd_q = host.ref.rstd_q.data();
  s.rstd_k = host.ref.rstd_k.data();
  if (b.recompute == RecomputePolicy::save_all && o.qk_norm && b.needs_dproj(o)) {
    s.q_pre = host.q_pre.data();
    s.k_pre = host.k_pre.data();
  }
  auto ptr = [](std::vector<uint16_t>& v) { return v.empty() ? nullptr : v.data(); };
  p.dh = ptr(r.dh);
  p.dw_qkvg = ptr(r.dw_qkvg);
  p.dw_o = ptr(r.dw_o);
  p.dw_q_norm = ptr(r.dw_q_norm);
  p.dw_k_norm = ptr(r.dw_k_norm);
  p.workspace = r.ws.data();
  block.prepare_workspace(p.workspace, nullptr);
  block.execute(p, nullptr);
  GatedBwdGrads got{ptr(r.dh), ptr(r.dw_qkvg), ptr(r.dw_o), ptr(r.dw_q_norm), ptr(r.dw_k_norm)};
  r.gate = gate_gated_gradients(g, o, b, got, host, default_tolerance(g.dtype()));
  return r;
}

}  // namespace attnbench::gatedtest
