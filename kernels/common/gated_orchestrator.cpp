#include "gated_orchestrator.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace attnbench {
namespace {

// The block's SDPA problem: under save_for_backward with the LSE too. Not in gated_sdpa_problem, which the
// backward builds its own from (with the forward's options: its SDPA reads the LSE and declines writing one).
AttentionProblem block_problem(const GatedGeometry& g, const GatedOptions& o, int block_size) {
  AttentionProblem p = gated_sdpa_problem(g, o, block_size);
  p.return_lse = o.return_lse || o.save_for_backward;
  return p;
}

// What the block declines, without touching the device: the common rules, the provider's, then the SDPA's.
void check_support(const GatedProvider& pv, const AttentionKernel& sdpa, const GatedGeometry& g,
                   const GatedOptions& o, const KnobValues& knobs) {
  validate_gated_options(o);
  validate_gated_save(g, o);
  if (o.save_for_backward)
    if (const std::string why = pv.save_conflict(); !why.empty()) throw GatedDecline("save_for_backward", why);
  validate_gated_mx(g, o);
  validate_gated_fp8(g, o);
  if (o.mx)
    if (const std::string why = pv.mx_conflict(); !why.empty()) throw GatedDecline("mx", why);
  if (o.fp8)
    if (const std::string why = pv.fp8_conflict(); !why.empty()) throw GatedDecline("fp8", why);
  const int bs = gated_block_size(g);
  if (bs == 0)
    throw GatedDecline("seqlen", "batch > 1 needs seqlen a multiple of 16 (each sequence starts a cache block of "
                                 "the projection view), got " + std::to_string(g.seqlen()));
  pv.check_support(g, o, knobs);
  const Support s = sdpa.supports(block_problem(g, o, bs), knobs);
  if (s.ok) return;
  // A fusion (or the save set's LSE) the SDPA kernel cannot take is declined under that option's own field.
  const std::string who = sdpa.name();
  GatedOptions plain = o;
  plain.save_for_backward = false;
  if (o.save_for_backward && sdpa.supports(block_problem(g, plain, bs), knobs).ok)
    throw GatedDecline("save_for_backward", "the SDPA kernel cannot write the save set's LSE (" + who + ": " +
                                                s.reason + ")");
  plain.fuse_gate = plain.fuse_norm_rope = false;
  if (sdpa.supports(block_problem(g, plain, bs), knobs).ok) {
    plain.fuse_gate = o.fuse_gate;
    if (o.fuse_gate && !sdpa.supports(block_problem(g, plain, bs), knobs).ok)
      throw GatedDecline("fuse_gate", "the SDPA kernel has no gate epilogue (" + who + ": " + s.reason + ")");
    throw GatedDecline("fuse_norm_rope", "the SDPA kernel has no Q prologue here (" + who + ": " + s.reason + ")");
  }
  throw GatedDecline("sdpa", who + " declines: " + s.reason);
}

// Why a call's save set does not fit the block ("" when it does), naming the params field: under
// save_for_backward every tensor but the optional q_pre / k_pre pair (rstd only under qk_norm) and no seq_lens;
// without it no save pointer.
std::string gated_save_conflict(const GatedOptions& o, const GatedBlockParams& p) {
  enum Need { always, norm, optional };
  const GatedSaveOut& s = p.save;
  const struct {
    const char* name;
    const void* ptr;
    Need need;
  } fields[] = {{"q", s.q, always},          {"k", s.k, always},          {"v", s.v, always},
                {"gate", s.gate, always},    {"o", s.o, always},          {"lse", s.lse, always},
                {"rstd_q", s.rstd_q, norm},  {"rstd_k", s.rstd_k, norm},  {"q_pre", s.q_pre, optional},
                {"k_pre", s.k_pre, optional}};
  for (const auto& f : fields) {
    const bool allowed = o.save_for_backward && (f.need != norm || o.qk_norm);
    const std::string field = std::string("params.save.") + f.name;
    if (!allowed && f.ptr)
      return field + " is set for a block without " + (o.save_for_backward ? "qk_norm" : "save_for_backward");
    if (allowed && !f.ptr && f.need != optional) return field + " is null (the block has save_for_backward)";
  }
  if ((s.q_pre != nullptr) != (s.k_pre != nullptr))
    return "params.save.q_pre and k_pre are set together (save_all) or not at all";
  if (o.save_for_backward && p.seq_lens)
    return "params.seq_lens is set: save_for_backward takes packed sequences (the backward has no seq_lens)";
  return "";
}

// The options the provider's block runs: a provider that does not fuse gets the fusion fields cleared.
GatedOptions block_options(const GatedProvider& pv, GatedOptions o) {
  if (!pv.fuses()) o.fuse_gate = o.fuse_norm_rope = false;
  return o;
}

// The SDPA kernel of one block, told the strides the block's SDPA params will have.
std::unique_ptr<AttentionKernel> block_sdpa(const GatedProvider& pv, const GatedGeometry& g, const GatedOptions& o) {
  return pv.make_sdpa(gated_sdpa_strides(g, o, block_problem(g, o, gated_block_size(g))));
}

class OrchestratedBlock final : public GatedBlock {
 public:
  OrchestratedBlock(std::shared_ptr<const GatedProvider> pv, std::unique_ptr<AttentionKernel> sdpa,
                    const GatedGeometry& g, const GatedOptions& o, const KnobValues& knobs)
      : pv_(std::move(pv)), name_(pv_->name()), g_(g), o_(o),
        cols_(gated_columns(g, o.q_gate_layout)), sdpa_(std::move(sdpa)) {
    const int bs = gated_block_size(g);
    prob_ = block_problem(g, o, bs);
    plan_ = sdpa_->plan(prob_, knobs);
    std::size_t gemm_bytes = 0;
    if (o.mx) {
      make_mx_gemms(*o.mx);
      gemm_bytes = std::max(mx_proj_->workspace_bytes(), mx_outp_->workspace_bytes());
    } else {
      if (o.fp8) {  // the descales in the epilogues' alpha
        const Fp8QuantSpec& f = *o.fp8;
        proj_ = pv_->make_fp8_gemm(g.dtype(), g.tokens(), g.n_qkvg(), g.d_model(), f.descale_h * f.descale_w_qkvg);
        outp_ = pv_->make_fp8_gemm(g.dtype(), g.tokens(), g.d_model(), g.attn_width(), f.descale_w_o / f.scale_o);
        if (!proj_ || !outp_) throw std::logic_error(name_ + ": the provider has no FP8 GEMM for an FP8 block");
      } else {
        proj_ = pv_->make_gemm(g.dtype(), g.tokens(), g.n_qkvg(), g.d_model());
        outp_ = pv_->make_gemm(g.dtype(), g.tokens(), g.d_model(), g.attn_width());
      }
      gemm_bytes = std::max(proj_->workspace_bytes(), outp_->workspace_bytes());
    }
    stages_ = gated_stages(g, o);
    const bool gate_pass = std::find(stages_.begin(), stages_.end(), GatedStage::gate) != stages_.end();
    layout_ = gated_workspace_layout(g, bs, plan_->workspace_bytes, gemm_bytes, o.fp8.has_value(), gate_pass,
                                     o.save_for_backward);
    gated_o_ = gate_pass ? layout_.gated : layout_.attn;
  }

  const GatedGeometry& geometry() const override { return g_; }
  const GatedOptions& options() const override { return o_; }
  std::size_t workspace_size() const override { return layout_.total; }

  void prepare_workspace(void* workspace, void* stream) override {
    if (!workspace) throw std::invalid_argument(name_ + ": prepare_workspace: workspace is null");
    GatedTablesParams t;
    t.cu_seqlens_q = static_cast<int32_t*>(at(workspace, layout_.cu_seqlens_q));
    t.seqused_k = static_cast<int32_t*>(at(workspace, layout_.seqused_k));
    t.block_table = static_cast<int32_t*>(at(workspace, layout_.block_table));
    t.batch = g_.batch();
    t.seqlen = g_.seqlen();
    t.block_size = layout_.block_size;
    t.blocks_per_seq = layout_.blocks_per_seq;
    pv_->fill_tables(t, stream);
    prepared_ = workspace;
  }

  void execute(const GatedBlockParams& p, void* stream) const override {
    check(p);
    for (GatedStage s : stages_) run_stage(s, p, stream);
  }

  std::vector<std::string> stage_names() const override {
    std::vector<std::string> out;
    for (GatedStage s : stages_) out.push_back(gated_stage_name(s, g_, o_));
    return out;
  }

  void execute_stage(int stage, const GatedBlockParams& p, void* stream) const override {
    if (stage < 0 || stage >= static_cast<int>(stages_.size()))
      throw std::invalid_argument(name_ + ": no stage " + std::to_string(stage));
    check(p);
    run_stage(stages_[stage], p, stream);
  }

  std::string summary() const override {
    const std::string norm_rope = gated_fuses_norm_rope(g_, o_) ? "K pass, Q in the SDPA"
                                  : gated_fuses_quantize(g_, o_) ? "one pass with Q, K, V's quantisation"
                                  : o_.fp8 ? "separate, then Q, K, V quantised" : "separate";
    return std::string(pv_->fuses() ? "" : "unfused chain, fusion options ignored; ") + "qkvg " +
           q_gate_layout_name(o_.q_gate_layout) + " " + gemm_summary(proj_, mx_proj_) + "; sdpa " + sdpa_->name() + " " +
           plan_->summary + " block_size=" + std::to_string(layout_.block_size) + "; norm+rope " + norm_rope +
           "; gate " + (!o_.fuse_gate ? "separate" : o_.fp8 ? "in the O quantisation" : "fused") + "; out " +
           gemm_summary(outp_, mx_outp_) + (o_.save_for_backward ? "; save_for_backward" : "");
  }

 private:
  static void* at(void* workspace, std::size_t off) { return static_cast<unsigned char*>(workspace) + off; }

  static std::string gemm_summary(const std::unique_ptr<GatedGemm>& g, const std::unique_ptr<GatedMxGemm>& mx) {
    return g ? g->summary() : mx->summary();
  }

  // The MX modes' projections: h as MXFP8 times W_qkvg's codes; the gated O in the spec's format times W_o's.
  void make_mx_gemms(const MxQuantSpec& s) {
    GatedMxGemmDesc d;
    d.dt = g_.dtype();
    d.m = g_.tokens();
    d.n = g_.n_qkvg();
    d.k = g_.d_model();
    d.a_format = mx_h_format();
    d.b_format = mx_format_of(s.w_qkvg);
    mx_proj_ = pv_->make_mx_gemm(d);
    d.n = g_.d_model();
    d.k = g_.attn_width();
    d.a_format = mx_o_format(s);
    d.b_format = mx_format_of(s.w_o);
    d.a_scale = s.scale_o;
    d.b_descale = s.descale_w_o;
    mx_outp_ = pv_->make_mx_gemm(d);
    if (!mx_proj_ || !mx_outp_) throw std::logic_error(name_ + ": the provider has no MX GEMM for an MX block");
  }

  void check(const GatedBlockParams& p) const {
    const GatedDims& d = g_.dims();
    if (p.batch != d.batch || p.seqlen != d.seqlen || p.d_model != d.d_model || p.h_q != d.h_q || p.h_kv != d.h_kv ||
        p.d_head != d.d_head || p.rope_dim != d.rope_dim || p.dtype != d.dtype)
      throw std::invalid_argument(name_ + ": params dims do not match the block's geometry");
    if (!p.h || !p.w_qkvg || !p.w_o || !p.out || !p.workspace ||
        (o_.qk_norm && (!p.q_norm_weight || !p.k_norm_weight)) || (g_.rope_dim() > 0 && (!p.cos || !p.sin)))
      throw std::invalid_argument(name_ + ": a params pointer is null");
    if (o_.mx ? !(p.w_qkvg_scales && p.w_o_scales) : (p.w_qkvg_scales || p.w_o_scales))
      throw std::invalid_argument(name_ + (o_.mx ? ": an MX block needs params.w_qkvg_scales and w_o_scales"
                                                 : ": params' MX scales are set for a block without mx"));
    if ((p.lse != nullptr) != o_.return_lse)
      throw std::invalid_argument(name_ + (o_.return_lse ? ": the block has return_lse, params.lse is null"
                                                         : ": params.lse is set for a block without return_lse"));
    if (const std::string why = gated_save_conflict(o_, p); !why.empty())
      throw std::invalid_argument(name_ + ": " + why);
    if (const std::string why = pv_->params_conflict(g_, o_, p); !why.empty())
      throw std::invalid_argument(name_ + ": " + why);
    if (p.workspace != prepared_)
      throw std::invalid_argument(name_ + ": workspace not prepared (call prepare_workspace once, before the first "
                                          "execute and any graph capture)");
  }

  GatedNormRopeParams norm_rope_params(const GatedBlockParams& p) const {
    GatedNormRopeParams n;
    n.proj = at(p.workspace, layout_.proj);
    n.row_stride = g_.n_qkvg();
    n.tokens = g_.tokens();
    n.h_kv = g_.h_kv();
    n.h_q = gated_fuses_norm_rope(g_, o_) ? 0 : g_.h_q();  // fused: Q's norm + RoPE run in the SDPA's Q load
    n.q0 = cols_.q0;
    n.q_head_stride = cols_.q_head_stride;
    n.k0 = cols_.k0;
    n.q_weight = p.q_norm_weight;
    n.k_weight = p.k_norm_weight;
    n.weight_offset = o_.norm_weight_offset;
    n.eps = kGatedNormEps;
    n.norm = o_.qk_norm;
    n.cos = p.cos;
    n.sin = p.sin;
    n.rope_dim = g_.rope_dim();
    if (o_.save_for_backward) {
      const GatedSaveOut& s = p.save;
      n.v0 = cols_.v0;
      n.save = {s.q, s.k, s.v, s.rstd_q, s.rstd_k, s.q_pre, s.k_pre};
    }
    if (gated_fuses_quantize(g_, o_)) {
      const GatedCodesColumns cc = gated_codes_columns(g_);
      n.codes = static_cast<uint8_t*>(at(p.workspace, layout_.qkv_codes));
      n.codes_stride = layout_.codes_stride;
      n.codes_k0 = cc.k0;
      n.codes_v0 = cc.v0;
      n.v0 = cols_.v0;
      n.scale_q = o_.fp8->scale_q;
      n.scale_k = o_.fp8->scale_k;
      n.scale_v = o_.fp8->scale_v;
    }
    return n;
  }

  // Q, K, V from the projection to their codes (unfused), or the gated O to its codes (o = true).
  GatedQuantizeParams quantize_params(const GatedBlockParams& p, bool o) const {
    GatedQuantizeParams q;
    q.rows = g_.tokens();
    q.d_head = g_.d_head();
    const int d = g_.d_head();
    if (o) {
      q.src = at(p.workspace, gated_o_);  // O as the SDPA wrote it when the gate is in this pass
      q.src_stride = g_.attn_width();
      q.dst = static_cast<uint8_t*>(at(p.workspace, layout_.o_codes));
      q.dst_stride = g_.attn_width();
      q.parts[0] = {0, d, 0, g_.h_q(), o_.fp8->scale_o};
      q.n_parts = 1;
      if (o_.fuse_gate) {  // the gate in this pass (gated_gate_in_sdpa)
        const GatedSigmoidParams sg = sigmoid_params(p);
        q.gate = sg.gate;
        q.gate_stride_token = sg.gate_stride_token;
        q.gate_stride_head = sg.gate_stride_head;
      }
      return q;
    }
    const GatedCodesColumns cc = gated_codes_columns(g_);
    q.src = at(p.workspace, layout_.proj);
    q.src_stride = g_.n_qkvg();
    q.dst = static_cast<uint8_t*>(at(p.workspace, layout_.qkv_codes));
    q.dst_stride = layout_.codes_stride;
    q.parts[0] = {cols_.q0, cols_.q_head_stride, 0, g_.h_q(), o_.fp8->scale_q};
    q.parts[1] = {cols_.k0, d, cc.k0, g_.h_kv(), o_.fp8->scale_k};
    q.parts[2] = {cols_.v0, d, cc.v0, g_.h_kv(), o_.fp8->scale_v};
    q.n_parts = 3;
    return q;
  }

  GatedSigmoidParams sigmoid_params(const GatedBlockParams& p) const {
    GatedSigmoidParams sg;
    sg.o = o_.save_for_backward ? p.save.o : at(p.workspace, layout_.attn);
    sg.out = at(p.workspace, layout_.gated);
    sg.o_stride_token = g_.attn_width();
    sg.gate = static_cast<const uint16_t*>(at(p.workspace, layout_.proj)) + cols_.g0;
    sg.gate_stride_token = g_.n_qkvg();
    sg.gate_stride_head = cols_.g_head_stride;
    sg.tokens = g_.tokens();
    sg.heads = g_.h_q();
    sg.d_head = g_.d_head();
    sg.gate_save = p.save.gate;
    return sg;
  }

  // The projection and its pad rows, zeroed: every page of the SDPA's view holds finite values.
  void run_proj(const GatedBlockParams& p, void* gemm_ws, void* stream) const {
    if (mx_proj_) mx_proj_->run(p.h, static_cast<const uint8_t*>(p.w_qkvg), p.w_qkvg_scales,
                                at(p.workspace, layout_.proj), gemm_ws, stream);
    else proj_->run(p.h, p.w_qkvg, at(p.workspace, layout_.proj), gemm_ws, stream);
    if (const std::size_t pad = layout_.pad_bytes(g_)) {
      pv_->zero(at(p.workspace, layout_.pad_offset(g_)), pad, stream);
      if (o_.fp8) {  // the quantisation passes write the tokens' rows only
        const std::size_t first = static_cast<std::size_t>(g_.tokens() * layout_.codes_stride);
        pv_->zero(at(p.workspace, layout_.qkv_codes + first),
                  static_cast<std::size_t>((layout_.proj_rows - g_.tokens()) * layout_.codes_stride), stream);
      }
    }
  }

  void run_stage(GatedStage s, const GatedBlockParams& p, void* stream) const {
    void* gemm_ws = layout_.gemm_bytes ? at(p.workspace, layout_.gemm) : nullptr;
    switch (s) {
      case GatedStage::proj: return run_proj(p, gemm_ws, stream);
      case GatedStage::norm_rope: return pv_->norm_rope(g_.dtype(), g_.d_head(), norm_rope_params(p), stream);
      case GatedStage::quantize_qkv: return pv_->quantize(g_.dtype(), quantize_params(p, false), stream);
      case GatedStage::quantize_o: return pv_->quantize(g_.dtype(), quantize_params(p, true), stream);
      case GatedStage::sdpa: return sdpa_->run(*plan_, gated_sdpa_params(g_, o_, prob_, layout_, p), stream);
      case GatedStage::lse_reorder:
        return pv_->lse_reorder({p.save.lse, p.lse, g_.batch(), g_.seqlen(), g_.h_q()}, stream);
      case GatedStage::gate: return pv_->sigmoid_gate(g_.dtype(), sigmoid_params(p), stream);
      case GatedStage::out_proj:
        if (mx_outp_)
          return mx_outp_->run(at(p.workspace, gated_o_), static_cast<const uint8_t*>(p.w_o), p.w_o_scales, p.out,
                               gemm_ws, stream);
        return outp_->run(at(p.workspace, o_.fp8 ? layout_.o_codes : gated_o_), p.w_o, p.out, gemm_ws, stream);
    }
  }

  std::shared_ptr<const GatedProvider> pv_;  // first: outlives the GEMMs and the SDPA it made
  std::string name_;
  GatedGeometry g_;
  GatedOptions o_;
  GatedColumns cols_;
  std::unique_ptr<AttentionKernel> sdpa_;
  AttentionProblem prob_;
  std::unique_ptr<AttentionPlan> plan_;
  std::unique_ptr<GatedGemm> proj_, outp_;         // none under mx; FP8 GEMMs under fp8
  std::unique_ptr<GatedMxGemm> mx_proj_, mx_outp_;  // under mx only
  GatedWorkspaceLayout layout_;
  std::size_t gated_o_ = 0;  // where the gated O is: the gate pass's output, else the SDPA's (gate fused or none)
  std::vector<GatedStage> stages_;
  const void* prepared_ = nullptr;
};

class OrchestratedKernel final : public GatedBlockKernel {
 public:
  explicit OrchestratedKernel(std::shared_ptr<const GatedProvider> pv) : pv_(std::move(pv)) {
    if (!pv_) throw std::invalid_argument("make_gated_block_kernel: provider is null");
  }

  std::string name() const override { return pv_->name(); }
  Backend backend() const override { return pv_->backend(); }

  Support supports(const GatedGeometry& g, const GatedOptions& asked, const KnobValues& knobs) const override {
    const GatedOptions o = block_options(*pv_, asked);
    try {
      check_support(*pv_, *block_sdpa(*pv_, g, o), g, o, knobs);
    } catch (const GatedDecline& e) {
      return Support::no(e.what());
    }
    return Support::yes();
  }

  std::unique_ptr<GatedBlock> create(const GatedGeometry& g, const GatedOptions& asked,
                                     const KnobValues& knobs) const override {
    const GatedOptions o = block_options(*pv_, asked);
    std::unique_ptr<AttentionKernel> sdpa = block_sdpa(*pv_, g, o);
    check_support(*pv_, *sdpa, g, o, knobs);
    return std::make_unique<OrchestratedBlock>(pv_, std::move(sdpa), g, o, knobs);
  }

 private:
  std::shared_ptr<const GatedProvider> pv_;
};

}  // namespace

std::unique_ptr<GatedBlockKernel> make_gated_block_kernel(std::shared_ptr<const GatedProvider> provider) {
  return std::make_unique<OrchestratedKernel>(std::move(provider));
}

}  // namespace attnbench
