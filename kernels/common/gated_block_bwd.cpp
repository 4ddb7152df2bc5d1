// The gated block backward's rules: policy names, declines, the SDPA backward's problem, the stages the selection
// runs and the declared work.
#include "attnbench/gated_block_bwd.hpp"

#include <stdexcept>
#include <string>

#include "attnbench/attention_bwd.hpp"

namespace attnbench {

const char* recompute_policy_name(RecomputePolicy r) {
  return r == RecomputePolicy::save_all ? "save_all" : "recompute_qk_pre";
}

RecomputePolicy parse_recompute_policy(const std::string& s) {
  if (s == "recompute_qk_pre") return RecomputePolicy::recompute_qk_pre;
  if (s == "save_all") return RecomputePolicy::save_all;
  throw GatedDecline("recompute", "'" + s + "' is not a policy (recompute_qk_pre or save_all)");
}

GatedBlockBwdParams make_gated_bwd_params(const GatedGeometry& g) {
  GatedBlockBwdParams p;
  const GatedDims& d = g.dims();
  p.batch = d.batch;
  p.seqlen = d.seqlen;
  p.d_model = d.d_model;
  p.h_q = d.h_q;
  p.h_kv = d.h_kv;
  p.d_head = d.d_head;
  p.rope_dim = d.rope_dim;
  p.dtype = d.dtype;
  return p;
}

void validate_gated_bwd(const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b) {
  validate_gated_options(o);
  if (g.dtype() != DType::bf16 && g.dtype() != DType::f16)
    throw GatedDecline("dtype", std::string("the backward is bf16/fp16 only, got ") + dtype_name(g.dtype()));
  if (o.fp8) throw GatedDecline("fp8", "the FP8 pipeline is inference only: no backward");
  if (o.mx) throw GatedDecline("mx", "the MX modes are inference only: no backward");
  if (gated_gate_in_sdpa(o)) throw GatedDecline("fuse_gate", "a fused gate keeps no pre-gate O for the backward");
  if (gated_fuses_norm_rope(g, o))
    throw GatedDecline("fuse_norm_rope", "a fused norm + RoPE keeps no pre-norm Q/K for the backward");
  if (b.need_dw_norms.value_or(false) && !o.qk_norm)
    throw GatedDecline("need_dw_norms", "norm-weight gradients asked for a block without qk_norm");
  if (!b.need_dh && !b.need_dw_qkvg && !b.need_dw_o && !b.dw_norms(o))
    throw GatedDecline("need", "no gradient asked for (need_dh, need_dw_qkvg, need_dw_o, need_dw_norms all off)");
}

AttentionProblem gated_bwd_sdpa_problem(const GatedGeometry& g, const GatedOptions& o) {
  GatedOptions plain = o;  // the forward's SDPA without what the backward declines or has no use for
  plain.fuse_gate = plain.fuse_norm_rope = plain.return_lse = plain.save_for_backward = false;
  plain.fp8.reset();
  return gated_sdpa_problem(g, plain, 64);  // packed here: the block size names no layout
}

std::vector<GatedBwdStage> gated_bwd_stages(const GatedGeometry&, const GatedOptions& o, const GatedBwdOptions& b) {
  std::vector<GatedBwdStage> st;
  const bool dproj = b.needs_dproj(o);
  // Only the norm's backward reads the pre-norm rows (RoPE's is linear).
  if (dproj && b.recompute == RecomputePolicy::recompute_qk_pre && o.qk_norm)
    st.push_back(GatedBwdStage::qk_pre_proj);
  if (dproj) st.push_back(GatedBwdStage::dy_proj);
  st.push_back(GatedBwdStage::gate_bwd);
  if (b.need_dw_o) st.push_back(GatedBwdStage::dw_o);
  if (dproj) {
    st.push_back(GatedBwdStage::sdpa_bwd);
    st.push_back(GatedBwdStage::norm_rope_bwd);
  }
  if (b.need_dw_qkvg) st.push_back(GatedBwdStage::dw_qkvg);
  if (b.need_dh) st.push_back(GatedBwdStage::dh);
  return st;
}

const char* gated_bwd_stage_name(GatedBwdStage s) {
  switch (s) {
    case GatedBwdStage::qk_pre_proj: return "qk_pre_proj";
    case GatedBwdStage::dy_proj: return "dy_proj";
    case GatedBwdStage::gate_bwd: return "gate_bwd";
    case GatedBwdStage::dw_o: return "dw_o";
    case GatedBwdStage::sdpa_bwd: return "sdpa_bwd";
    case GatedBwdStage::norm_rope_bwd: return "norm_rope_bwd";
    case GatedBwdStage::dw_qkvg: return "dw_qkvg";
    case GatedBwdStage::dh: return "dh";
  }
  return "?";
}

WorkModel gated_block_bwd_work(const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b) {
  const double t = static_cast<double>(g.tokens()), dm = g.d_model(), d = g.d_head();
  const double n = static_cast<double>(g.n_qkvg()), aw = static_cast<double>(g.attn_width());
  const double kw = static_cast<double>(g.h_kv()) * d, eb = static_cast<double>(dtype_bytes(g.dtype()));
  WorkModel w;
  w.bytes = eb * t * dm + eb * 2 * t * aw;  // dy; the saved gate and O
  if (b.need_dw_o) {
    w.flops += 2 * t * dm * aw;
    w.bytes += eb * dm * aw;  // dW_o
  }
  for (const GatedBwdStage s : gated_bwd_stages(g, o, b)) {
    switch (s) {
      case GatedBwdStage::qk_pre_proj: {  // the Q rows as laid out (interleaved: GATE's rows between Q's) and K's
        const GatedColumns c = gated_columns(g, o.q_gate_layout);
        const double q_rows = static_cast<double>((g.h_q() - 1) * c.q_head_stride) + d;
        w.flops += 2 * t * dm * (q_rows + kw);
        break;
      }
      case GatedBwdStage::dy_proj: w.flops += 2 * t * dm * aw; break;
      case GatedBwdStage::sdpa_bwd: {
        const WorkModel a = attention_bwd_work(gated_bwd_sdpa_problem(g, o));
        w.flops += a.flops;
        w.bytes += eb * t * (aw + 2 * kw) + 4 * t * g.h_q();  // saved Q, K, V and the LSE
        if (o.qk_norm) w.bytes += 4 * t * (g.h_q() + g.h_kv());  // rstd
        break;
      }
      case GatedBwdStage::dw_qkvg: w.flops += 2 * t * n * dm; w.bytes += eb * n * dm; break;
      case GatedBwdStage::dh: w.flops += 2 * t * n * dm; w.bytes += eb * t * dm; break;
      default: break;
    }
  }
  if (b.needs_dproj(o)) {
    w.bytes += eb * (dm * aw + n * dm + t * dm + 2 * t * g.rope_dim());  // W_o, W_qkvg, h, cos and sin
    if (b.recompute == RecomputePolicy::save_all && o.qk_norm) w.bytes += eb * t * (aw + kw);  // q_pre, k_pre
  }
  if (b.dw_norms(o)) w.bytes += eb * 2 * d;
  return w;
}

}  // namespace attnbench
