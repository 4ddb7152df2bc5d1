// The gated block's backward, written once over a backend's GatedBwdProvider: the declines, the GEMMs the need_*
// selection builds, the workspace, the stages and their params. A backend's make_*_gated_block_bwd() is this over
// its provider.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gated_bwd_provider.hpp"

namespace attnbench {
namespace {

std::size_t align_up(std::size_t v) { return (v + kGatedWorkspaceAlign - 1) / kGatedWorkspaceAlign * kGatedWorkspaceAlign; }

void check_support(const GatedBwdProvider& pv, const AttentionBwdKernel& sdpa, const GatedGeometry& g,
                   const GatedOptions& o, const GatedBwdOptions& b, const KnobValues& knobs) {
  validate_gated_bwd(g, o, b);
  pv.check_support(g, o, b, knobs);
  if (!b.needs_dproj(o)) return;  // dW_o alone runs no SDPA backward
  const Support s = sdpa.supports(gated_bwd_sdpa_problem(g, o), knobs);
  if (!s.ok) throw GatedDecline("sdpa", sdpa.name() + " declines: " + s.reason);
}

// The workspace's regions (bytes offsets), each only where a stage uses it: the SDPA's cu_seqlens, the recomputed
// pre-norm Q and K, dY, the gated O, dO, dQ, dK, dV (packed, the SDPA backward's), the projection gradient dP
// [T, N], the fp32 norm-weight sums, the SDPA's and the GEMMs' own workspace.
struct BwdLayout {
  std::size_t cu = 0, pre_q = 0, pre_k = 0, dy_attn = 0, y = 0, d_o = 0, dq = 0, dk = 0, dv = 0, dproj = 0, dw = 0;
  std::size_t sdpa = 0, gemm = 0, total = 0;
  int64_t pre_q_cols = 0;  // the recomputed Q rows' width: Q head h at h * q_head_stride
};

class OrchestratedBwd final : public GatedBlockBwd {
 public:
  OrchestratedBwd(std::shared_ptr<const GatedBwdProvider> pv, std::unique_ptr<AttentionBwdKernel> sdpa,
                  const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b, const KnobValues& knobs)
      : pv_(std::move(pv)), name_(pv_->name()), g_(g), o_(o), b_(b), cols_(gated_columns(g, o.q_gate_layout)),
        sdpa_(std::move(sdpa)), stages_(gated_bwd_stages(g, o, b)) {
    if (b_.needs_dproj(o_)) {
      prob_ = gated_bwd_sdpa_problem(g, o);
      plan_ = sdpa_->plan(prob_, knobs);
    }
    make_gemms();
    lay_out();
  }

  const GatedGeometry& geometry() const override { return g_; }
  const GatedOptions& options() const override { return o_; }
  const GatedBwdOptions& bwd_options() const override { return b_; }
  std::size_t workspace_size() const override { return l_.total; }

  void prepare_workspace(void* workspace, void* stream) override {
    if (!workspace) throw std::invalid_argument(name_ + ": prepare_workspace: workspace is null");
    if (plan_) pv_->fill_cu_seqlens(static_cast<int32_t*>(at(workspace, l_.cu)), g_.batch(), g_.seqlen(), stream);
    prepared_ = workspace;
  }

  void execute(const GatedBlockBwdParams& p, void* stream) const override {
    check(p);
    for (GatedBwdStage s : stages_) run_stage(s, p, stream);
  }

  std::vector<std::string> stage_names() const override {
    std::vector<std::string> out;
    for (GatedBwdStage s : stages_) out.emplace_back(gated_bwd_stage_name(s));
    return out;
  }

  void execute_stage(int stage, const GatedBlockBwdParams& p, void* stream) const override {
    if (stage < 0 || stage >= static_cast<int>(stages_.size()))
      throw std::invalid_argument(name_ + ": no stage " + std::to_string(stage));
    check(p);
    run_stage(stages_[stage], p, stream);
  }

  std::string summary() const override {
    std::string s = std::string(recompute_policy_name(b_.recompute)) + "; need";
    for (auto [on, what] : {std::pair{b_.need_dh, "dh"}, {b_.need_dw_qkvg, "dw_qkvg"}, {b_.need_dw_o, "dw_o"},
                            {b_.dw_norms(o_), "dw_norms"}})
      if (on) s += std::string(" ") + what;
    if (plan_) s += "; sdpa_bwd " + sdpa_->name() + " " + plan_->summary;
    const GatedBwdGemm* any = dh_ ? dh_.get() : dw_o_ ? dw_o_.get() : dy_.get();
    if (any) s += "; gemm " + any->summary();
    return s;
  }

 private:
  static void* at(void* ws, std::size_t off) { return static_cast<unsigned char*>(ws) + off; }
  template <class T = void>
  T* ws(const GatedBlockBwdParams& p, std::size_t off) const { return static_cast<T*>(at(p.workspace, off)); }

  bool has(GatedBwdStage s) const { return std::find(stages_.begin(), stages_.end(), s) != stages_.end(); }

  std::unique_ptr<GatedBwdGemm> gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t lda, int64_t ldb,
                                     int64_t ldc) const {
    GatedGemmShape s{g_.dtype(), m, n, k, ta, tb, lda, ldb, ldc};
    return pv_->make_gemm(s);
  }

  // dY = dy W_o; dW_o = dy^T Y; the pre-norm Q and K = h W_q^T, h W_k^T; dW_qkvg = dP^T h; dh = dP W_qkvg.
  void make_gemms() {
    const int64_t t = g_.tokens(), dm = g_.d_model(), aw = g_.attn_width(), n = g_.n_qkvg();
    const int64_t kw = static_cast<int64_t>(g_.h_kv()) * g_.d_head();
    pre_q_cols_ = static_cast<int64_t>(g_.h_q() - 1) * cols_.q_head_stride + g_.d_head();
    if (has(GatedBwdStage::qk_pre_proj)) {
      pre_q_ = gemm(t, pre_q_cols_, dm, false, true, dm, dm, pre_q_cols_);
      pre_k_ = gemm(t, kw, dm, false, true, dm, dm, kw);
    }
    if (has(GatedBwdStage::dy_proj)) dy_ = gemm(t, aw, dm, false, false, dm, aw, aw);
    if (b_.need_dw_o) dw_o_ = gemm(dm, aw, t, true, false, dm, aw, aw);
    if (b_.need_dw_qkvg) dw_qkvg_ = gemm(n, dm, t, true, false, n, dm, dm);
    if (b_.need_dh) dh_ = gemm(t, dm, n, false, false, n, dm, dm);
  }

  void lay_out() {
    const std::size_t t = static_cast<std::size_t>(g_.tokens()), eb = dtype_bytes(g_.dtype());
    const std::size_t aw = static_cast<std::size_t>(g_.attn_width()), n = static_cast<std::size_t>(g_.n_qkvg());
    const std::size_t kw = static_cast<std::size_t>(g_.h_kv()) * g_.d_head();
    std::size_t off = 0;
    auto take = [&](std::size_t bytes) {
      const std::size_t at_off = off;
      off = align_up(off + bytes);
      return at_off;
    };
    const bool dproj = b_.needs_dproj(o_);
    if (plan_) l_.cu = take(4 * (static_cast<std::size_t>(g_.batch()) + 1));
    if (pre_q_) {
      l_.pre_q = take(eb * t * static_cast<std::size_t>(pre_q_cols_));
      l_.pre_k = take(eb * t * kw);
    }
    if (dproj) l_.dy_attn = take(eb * t * aw);
    if (b_.need_dw_o) l_.y = take(eb * t * aw);
    if (dproj) {
      l_.d_o = take(eb * t * aw);
      l_.dq = take(eb * t * aw);
      l_.dk = take(eb * t * kw);
      l_.dv = take(eb * t * kw);
      l_.dproj = take(eb * t * n);
    }
    if (b_.dw_norms(o_)) l_.dw = take(4 * 2 * static_cast<std::size_t>(g_.d_head()));
    if (plan_) l_.sdpa = take(plan_->workspace_bytes);
    std::size_t gemm_bytes = 0;
    for (const auto* gm : {&pre_q_, &pre_k_, &dy_, &dw_o_, &dw_qkvg_, &dh_})
      if (*gm) gemm_bytes = std::max(gemm_bytes, (*gm)->workspace_bytes());
    l_.gemm = take(gemm_bytes);
    l_.total = off;
    gemm_bytes_ = gemm_bytes;
  }

  void check(const GatedBlockBwdParams& p) const {
    const GatedDims& d = g_.dims();
    if (p.batch != d.batch || p.seqlen != d.seqlen || p.d_model != d.d_model || p.h_q != d.h_q || p.h_kv != d.h_kv ||
        p.d_head != d.d_head || p.rope_dim != d.rope_dim || p.dtype != d.dtype)
      throw std::invalid_argument(name_ + ": params dims do not match the block's geometry");
    auto need = [&](bool wanted, const void* ptr, const char* what) {
      if (wanted != (ptr != nullptr))
        throw std::invalid_argument(name_ + ": params." + what + (wanted ? " is null" : " is set but not asked for"));
    };
    const bool dproj = b_.needs_dproj(o_), norms = b_.dw_norms(o_);
    need(true, p.dy, "dy");
    need(true, p.saved.gate, "saved.gate");
    need(true, p.saved.o, "saved.o");
    need(b_.need_dh, p.dh, "dh");
    need(b_.need_dw_qkvg, p.dw_qkvg, "dw_qkvg");
    need(b_.need_dw_o, p.dw_o, "dw_o");
    need(norms, p.dw_q_norm, "dw_q_norm");
    need(norms, p.dw_k_norm, "dw_k_norm");
    const bool pre = dproj && o_.qk_norm && b_.recompute == RecomputePolicy::save_all;
    need(pre, p.saved.q_pre, "saved.q_pre");
    need(pre, p.saved.k_pre, "saved.k_pre");
    if (dproj && (!p.w_o || !p.saved.q || !p.saved.k || !p.saved.v || !p.saved.lse))
      throw std::invalid_argument(name_ + ": params.w_o or a saved SDPA tensor (q, k, v, lse) is null");
    if (dproj && o_.qk_norm && (!p.q_norm_weight || !p.k_norm_weight || !p.saved.rstd_q || !p.saved.rstd_k))
      throw std::invalid_argument(name_ + ": a norm weight or saved rstd is null under qk_norm");
    if (dproj && g_.rope_dim() > 0 && (!p.cos || !p.sin)) throw std::invalid_argument(name_ + ": cos or sin is null");
    if ((b_.need_dw_qkvg || has(GatedBwdStage::qk_pre_proj)) && !p.h) throw std::invalid_argument(name_ + ": h is null");
    if ((b_.need_dh || has(GatedBwdStage::qk_pre_proj)) && !p.w_qkvg)
      throw std::invalid_argument(name_ + ": w_qkvg is null");
    if (!p.workspace || p.workspace != prepared_)
      throw std::invalid_argument(name_ + ": workspace not prepared (call prepare_workspace once, before the first "
                                          "execute and any graph capture)");
  }

  GatedGateBwdParams gate_params(const GatedBlockBwdParams& p) const {
    GatedGateBwdParams q;
    const int64_t aw = g_.attn_width();
    q.o = p.saved.o;
    q.gate = p.saved.gate;
    q.gate_stride_token = aw;
    q.gate_stride_head = g_.d_head();
    q.tokens = g_.tokens();
    q.heads = g_.h_q();
    q.d_head = g_.d_head();
    if (b_.need_dw_o) q.y = ws(p, l_.y);
    if (b_.needs_dproj(o_)) {
      q.dy = ws(p, l_.dy_attn);
      q.d_o = ws(p, l_.d_o);
      q.d_gate = static_cast<uint16_t*>(ws(p, l_.dproj)) + cols_.g0;
      q.d_gate_stride_token = g_.n_qkvg();
      q.d_gate_stride_head = cols_.g_head_stride;
    }
    return q;
  }

  AttentionBwdParams sdpa_params(const GatedBlockBwdParams& p) const {
    AttentionBwdParams a = make_attention_bwd_params(prob_);
    a.q = p.saved.q;
    a.k = p.saved.k;
    a.v = p.saved.v;
    a.o = p.saved.o;
    a.lse = p.saved.lse;
    a.d_o = ws(p, l_.d_o);
    a.dq = ws(p, l_.dq);
    a.dk = ws(p, l_.dk);
    a.dv = ws(p, l_.dv);
    a.cu_seqlens_q = a.cu_seqlens_k = ws<const int32_t>(p, l_.cu);
    a.workspace = plan_->workspace_bytes ? ws(p, l_.sdpa) : nullptr;
    return a;
  }

  GatedNormRopeBwdParams norm_rope_params(const GatedBlockBwdParams& p) const {
    GatedNormRopeBwdParams r;
    const int d = g_.d_head();
    const int64_t n = g_.n_qkvg(), kw = static_cast<int64_t>(g_.h_kv()) * d;
    auto* dproj = static_cast<uint16_t*>(ws(p, l_.dproj));
    const bool recompute = b_.recompute == RecomputePolicy::recompute_qk_pre;
    float* dw = b_.dw_norms(o_) ? ws<float>(p, l_.dw) : nullptr;
    r.q = {ws(p, l_.dq), recompute ? ws(p, l_.pre_q) : p.saved.q_pre, recompute ? pre_q_cols_ : g_.attn_width(),
           recompute ? cols_.q_head_stride : d, p.saved.rstd_q, p.q_norm_weight, dw, dproj + cols_.q0, n,
           cols_.q_head_stride, g_.h_q()};
    r.k = {ws(p, l_.dk), recompute ? ws(p, l_.pre_k) : p.saved.k_pre, kw, d, p.saved.rstd_k, p.k_norm_weight,
           dw ? dw + d : nullptr, dproj + cols_.k0, n, d, g_.h_kv()};
    r.dv = ws(p, l_.dv);
    r.dst_v = dproj + cols_.v0;
    r.dst_v_stride_token = n;
    r.dst_v_stride_head = d;
    r.tokens = g_.tokens();
    r.norm = o_.qk_norm;
    r.weight_offset = o_.norm_weight_offset;
    r.cos = p.cos;
    r.sin = p.sin;
    r.rope_dim = g_.rope_dim();
    return r;
  }

  void run_norm_rope(const GatedBlockBwdParams& p, void* stream) const {
    if (b_.dw_norms(o_)) pv_->zero(ws(p, l_.dw), 4 * 2 * static_cast<std::size_t>(g_.d_head()), stream);
    pv_->norm_rope_bwd(g_.dtype(), g_.d_head(), norm_rope_params(p), stream);
    if (!b_.dw_norms(o_)) return;
    pv_->cast(g_.dtype(), ws<float>(p, l_.dw), p.dw_q_norm, g_.d_head(), stream);
    pv_->cast(g_.dtype(), ws<float>(p, l_.dw) + g_.d_head(), p.dw_k_norm, g_.d_head(), stream);
  }

  void run_stage(GatedBwdStage s, const GatedBlockBwdParams& p, void* stream) const {
    void* gw = gemm_bytes_ ? ws(p, l_.gemm) : nullptr;
    const auto* w = static_cast<const uint16_t*>(p.w_qkvg);
    switch (s) {
      case GatedBwdStage::qk_pre_proj:
        pre_q_->run(p.h, w + cols_.q0 * g_.d_model(), ws(p, l_.pre_q), gw, stream);
        return pre_k_->run(p.h, w + cols_.k0 * g_.d_model(), ws(p, l_.pre_k), gw, stream);
      case GatedBwdStage::dy_proj: return dy_->run(p.dy, p.w_o, ws(p, l_.dy_attn), gw, stream);
      case GatedBwdStage::gate_bwd: return pv_->gate_bwd(g_.dtype(), gate_params(p), stream);
      case GatedBwdStage::dw_o: return dw_o_->run(p.dy, ws(p, l_.y), p.dw_o, gw, stream);
      case GatedBwdStage::sdpa_bwd: return sdpa_->run(*plan_, sdpa_params(p), stream);
      case GatedBwdStage::norm_rope_bwd: return run_norm_rope(p, stream);
      case GatedBwdStage::dw_qkvg: return dw_qkvg_->run(ws(p, l_.dproj), p.h, p.dw_qkvg, gw, stream);
      case GatedBwdStage::dh: return dh_->run(ws(p, l_.dproj), p.w_qkvg, p.dh, gw, stream);
    }
  }

  std::shared_ptr<const GatedBwdProvider> pv_;
  std::string name_;
  GatedGeometry g_;
  GatedOptions o_;
  GatedBwdOptions b_;
  GatedColumns cols_;
  std::unique_ptr<AttentionBwdKernel> sdpa_;
  std::vector<GatedBwdStage> stages_;
  AttentionProblem prob_;
  std::unique_ptr<AttentionBwdPlan> plan_;  // none when the selection needs no SDPA backward
  std::unique_ptr<GatedBwdGemm> pre_q_, pre_k_, dy_, dw_o_, dw_qkvg_, dh_;
  int64_t pre_q_cols_ = 0;
  std::size_t gemm_bytes_ = 0;
  BwdLayout l_;
  const void* prepared_ = nullptr;
};

class OrchestratedBwdKernel final : public GatedBlockBwdKernel {
 public:
  explicit OrchestratedBwdKernel(std::shared_ptr<const GatedBwdProvider> pv) : pv_(std::move(pv)) {
    if (!pv_) throw std::invalid_argument("make_gated_block_bwd_kernel: provider is null");
  }
  std::string name() const override { return pv_->name(); }
  Backend backend() const override { return pv_->backend(); }

  Support supports(const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b,
                   const KnobValues& knobs) const override {
    try {
      check_support(*pv_, *pv_->make_sdpa_bwd(), g, o, b, knobs);
    } catch (const GatedDecline& e) {
      return Support::no(e.what());
    }
    return Support::yes();
  }

  std::unique_ptr<GatedBlockBwd> create(const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b,
                                        const KnobValues& knobs) const override {
    std::unique_ptr<AttentionBwdKernel> sdpa = pv_->make_sdpa_bwd();
    check_support(*pv_, *sdpa, g, o, b, knobs);
    try {
      return std::make_unique<OrchestratedBwd>(pv_, std::move(sdpa), g, o, b, knobs);
    } catch (const GatedDecline&) {
      throw;
    } catch (const std::invalid_argument& e) {  // a GEMM the backend's library has no algorithm for
      throw GatedDecline("gemm", e.what());
    }
  }

 private:
  std::shared_ptr<const GatedBwdProvider> pv_;
};

}  // namespace

std::unique_ptr<GatedBlockBwdKernel> make_gated_block_bwd_kernel(std::shared_ptr<const GatedBwdProvider> provider) {
  return std::make_unique<OrchestratedBwdKernel>(std::move(provider));
}

}  // namespace attnbench
