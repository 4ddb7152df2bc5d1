// The gated block's backward in the runner (op gated_block_backward): seeded inputs and dy, the save set and every
// gradient from the fp32 reference over every token, a bound kernel's gradients gated tensor by tensor.
#include <chrono>
#include <cmath>

#include "attnbench/gated_block_bwd.hpp"
#include "attnbench/reference_gpu.hpp"
#include "cases/gated_bwd_data.hpp"
#include "cases/op_case.hpp"

namespace attnbench {

namespace {

// The host reference builds the save set and every gradient of every token: above this it would run for many
// minutes (16 cores take ~8 TFLOP in about a minute), so such a case needs the GPU reference.
constexpr double kHostReferenceMaxGflop = 8000;

class GatedBwdBound final : public BoundKernel {
 public:
  GatedBwdBound(std::unique_ptr<GatedBlockBwd> block, Device& dev, const GatedBwdHost& host)
      : block_(std::move(block)), dev_(dev), host_(host), g_(block_->geometry()), b_(block_->bwd_options()) {
    const GatedOptions& o = block_->options();
    const GatedHostInputs& in = host.in;
    w_qkvg_ = build_w_qkvg(g_, o.q_gate_layout, in.wq.data(), in.wgate.data(), in.wk.data(), in.wv.data());
    prm_ = make_gated_bwd_params(g_);
    prm_.h = up(in.h);
    prm_.w_qkvg = up(w_qkvg_);
    prm_.q_norm_weight = up(in.q_norm_weight);
    prm_.k_norm_weight = up(in.k_norm_weight);
    prm_.cos = in.cos.empty() ? nullptr : up(in.cos);
    prm_.sin = in.sin.empty() ? nullptr : up(in.sin);
    prm_.w_o = up(in.w_o);
    prm_.dy = up(host.dy);
    GatedSaved& s = prm_.saved;
    s.q = up(host.q);
    s.k = up(host.k);
    s.v = up(host.v);
    s.gate = up(host.gate);
    s.o = up(host.o);
    s.lse = static_cast<const float*>(up(host.ref.lse));
    s.rstd_q = static_cast<const float*>(up(host.ref.rstd_q));
    s.rstd_k = static_cast<const float*>(up(host.ref.rstd_k));
    if (b_.recompute == RecomputePolicy::save_all && o.qk_norm && b_.needs_dproj(o)) {
      s.q_pre = up(host.q_pre);
      s.k_pre = up(host.k_pre);
    }
    const std::size_t t = static_cast<std::size_t>(g_.tokens()), dm = g_.d_model(), d = g_.d_head();
    prm_.dh = out(b_.need_dh, t * dm, dh_);
    prm_.dw_qkvg = out(b_.need_dw_qkvg, static_cast<std::size_t>(g_.n_qkvg()) * dm, dw_qkvg_);
    prm_.dw_o = out(b_.need_dw_o, dm * static_cast<std::size_t>(g_.attn_width()), dw_o_);
    prm_.dw_q_norm = out(b_.dw_norms(o), d, dw_q_norm_);
    prm_.dw_k_norm = out(b_.dw_norms(o), d, dw_k_norm_);
    ws_ = std::make_unique<Buffer>(dev, block_->workspace_size());
    if (ws_->bytes()) dev.poison(ws_->data(), ws_->bytes());  // every intermediate must be written before it is read
    prm_.workspace = ws_->data();
    block_->prepare_workspace(prm_.workspace, dev.stream());
    dev.synchronize();
    plan_summary = block_->summary();
    if (is_gpu(dev.backend())) graph_recommended = true;  // a fixed launch sequence, nothing on the host
  }

  void call() override { block_->execute(prm_, dev_.stream()); }

  GateResult gate(const Tolerance& tol) override {
    dev_.synchronize();
    std::vector<std::vector<uint16_t>> host(5);
    const uint16_t* got[5] = {};
    const std::unique_ptr<Buffer>* bufs[5] = {&dh_, &dw_qkvg_, &dw_o_, &dw_q_norm_, &dw_k_norm_};
    for (int i = 0; i < 5; ++i) {
      if (!*bufs[i]) continue;
      host[i].resize((*bufs[i])->bytes() / 2);
      dev_.download(host[i].data(), (*bufs[i])->data(), (*bufs[i])->bytes());
      got[i] = host[i].data();
    }
    return gate_gated_gradients(g_, block_->options(), b_, {got[0], got[1], got[2], got[3], got[4]}, host_, tol);
  }

  std::vector<std::pair<std::string, std::function<void()>>> stages() override {
    std::vector<std::pair<std::string, std::function<void()>>> out;
    const auto names = block_->stage_names();
    for (int i = 0; i < static_cast<int>(names.size()); ++i)
      out.emplace_back(names[i], [this, i] { block_->execute_stage(i, prm_, dev_.stream()); });
    return out;
  }

 private:
  template <class T>
  void* up(const std::vector<T>& v) {
    inputs_.push_back(std::make_unique<Buffer>(dev_, v.size() * sizeof(T)));
    if (!v.empty()) dev_.upload(inputs_.back()->data(), v.data(), inputs_.back()->bytes());
    return inputs_.back()->data();
  }
  // A gradient asked for, poisoned (NaN: every element must be written); null otherwise.
  void* out(bool wanted, std::size_t n, std::unique_ptr<Buffer>& buf) {
    if (!wanted) return nullptr;
    buf = std::make_unique<Buffer>(dev_, n * 2);
    dev_.poison(buf->data(), buf->bytes());
    return buf->data();
  }

  std::unique_ptr<GatedBlockBwd> block_;
  Device& dev_;
  const GatedBwdHost& host_;
  const GatedGeometry& g_;
  GatedBwdOptions b_;
  std::vector<uint16_t> w_qkvg_;
  std::vector<std::unique_ptr<Buffer>> inputs_;
  std::unique_ptr<Buffer> dh_, dw_qkvg_, dw_o_, dw_q_norm_, dw_k_norm_, ws_;
  GatedBlockBwdParams prm_;
};

class GatedBwdCase final : public OpCase {
 public:
  explicit GatedBwdCase(const ShapeCase& c) : shape_(c.gated), dtype_(c.dtype) {
    try {
      geom_ = std::make_unique<GatedGeometry>(gated_geometry(shape_, dtype_));
    } catch (const GatedDecline& e) {
      geom_error_ = e.what();
    }
  }

  WorkModel work() const override {
    if (!geom_) return {};
    try {
      return gated_block_bwd_work(*geom_, options(), shape_.bwd);
    } catch (const std::invalid_argument&) {  // a declined selection still lists, without work
      return {};
    }
  }

  nlohmann::json dims() const override {
    nlohmann::json d = {{"batch", shape_.batch},       {"seqlen", shape_.seqlen},   {"d_model", shape_.d_model},
                        {"h_q", shape_.h_q},           {"h_kv", shape_.h_kv},       {"d_head", shape_.d_head},
                        {"rope_dim", shape_.rope_dim}, {"qk_norm", shape_.qk_norm}, {"causal", shape_.causal},
                        {"recompute", recompute_policy_name(shape_.bwd.recompute)}};
    nlohmann::json need = nlohmann::json::array();
    const GatedBwdOptions& b = shape_.bwd;
    for (auto [on, what] : {std::pair{b.need_dh, "dh"}, {b.need_dw_qkvg, "dw_qkvg"}, {b.need_dw_o, "dw_o"},
                            {b.need_dw_norms.value_or(shape_.qk_norm), "dw_norms"}})
      if (on) need.push_back(what);
    d["need"] = need;
    if (shape_.window_left >= 0) d["window_left"] = shape_.window_left;
    if (shape_.window_right >= 0) d["window_right"] = shape_.window_right;
    if (geom_) {
      d["n_qkvg"] = geom_->n_qkvg();
      d["scale"] = options().softmax_scale(shape_.d_head);
    }
    return d;
  }

  Support supports(const KernelEntry& k, const KnobValues& knobs) const override {
    if (!k.gated_bwd) return Support::no("kernel " + k.name + " does not implement op gated_block_backward");
    if (!geom_) return Support::no(geom_error_);
    if (!shape_.seq_lens.empty())
      return Support::no("field 'seq_lens': the backward takes packed sequences of seqlen tokens each");
    const Support s = k.gated_bwd->supports(*geom_, options(knobs), shape_.bwd, knobs);
    if (!s.ok) return s;
    if (const std::string why = host_reference_too_big(); !why.empty() && !reference::gpu_reference_built())
      return Support::no(why + " and this build has no GPU reference");
    return s;
  }

  MemoryNeed memory_need(const KernelEntry& /*k*/, const CaseSettings& /*s*/) const override {
    if (!geom_) return {};
    const GatedGeometry& g = *geom_;
    const double eb = static_cast<double>(dtype_bytes(g.dtype())), t = static_cast<double>(g.tokens());
    const double dm = g.d_model(), aw = static_cast<double>(g.attn_width()), n = static_cast<double>(g.n_qkvg());
    const double kw = static_cast<double>(g.h_kv()) * g.d_head();
    const double inputs = eb * (2 * t * dm + n * dm + dm * aw + 2 * t * g.rope_dim() + 2 * g.d_head());
    const double saved = eb * t * (4 * aw + 3 * kw) + 4 * t * (2 * g.h_q() + g.h_kv());
    const double grads = eb * (t * dm + n * dm + dm * aw);
    const double ws = eb * t * (6 * aw + 3 * kw + n) + attention_bwd_workspace_bound(gated_bwd_sdpa_problem(g, options())) +
                      32.0 * (1 << 20);
    MemoryNeed need;
    // The reference's fp32 tensors (inputs, save set, gradients and its temporaries: about four times the inputs').
    if (!host_) need.host_bytes += inputs + saved + 4 * (inputs + saved + grads) / eb * 2;
    need.host_bytes += grads;  // downloaded for the gate
    need.device_bytes = inputs + saved + grads + ws;
    return need;
  }

  // The reference runs in bind(), once, on `gpu` where the runner gives one (every token there too).
  void prepare(const CaseSettings& s, Device* gpu) override {
    settings_ = s;
    gpu_ = gpu;
  }

  std::unique_ptr<BoundKernel> bind(const KernelEntry& k, Device& dev, const KnobValues& knobs) override {
    std::unique_ptr<GatedBlockBwd> block = k.gated_bwd->create(*geom_, options(knobs), shape_.bwd, knobs);
    if (!host_) {
      if (const std::string why = host_reference_too_big(); !why.empty() && !gpu_)
        throw std::invalid_argument(why + " and no CUDA device runs the GPU reference");
      host_ = std::make_unique<GatedBwdHost>(build_gated_bwd_host(*geom_, options(knobs), settings_.seed, gpu_));
    }
    return std::make_unique<GatedBwdBound>(std::move(block), dev, *host_);
  }

 private:
  // The shape's mask, window and norm, the layout the knobs choose; the forward's fusions and return_lse cleared
  // (the backward has neither), fp8 and mx kept so that the backward declines them by name.
  GatedOptions options(const KnobValues& knobs) const {
    GatedOptions o = gated_options(shape_, knobs);
    o.fuse_gate = o.fuse_norm_rope = o.return_lse = false;
    return o;
  }
  // Why the host reference is too slow for this case ("" when it is not): ~twice the full backward's FLOPs.
  std::string host_reference_too_big() const {
    const double gflop = 2 * gated_block_bwd_work(*geom_, options(), GatedBwdOptions{}).flops / 1e9;
    if (gflop <= kHostReferenceMaxGflop) return "";
    return "the host reference of every token would take ~" + std::to_string(static_cast<long>(gflop)) +
           " GFLOP (over " + std::to_string(static_cast<long>(kHostReferenceMaxGflop)) + ")";
  }
  // Without a run's knobs (work, dims, memory): the defaults'.
  GatedOptions options() const { return options(KnobValues::resolve({}, false)); }

  GatedShape shape_;
  DType dtype_;
  std::unique_ptr<GatedGeometry> geom_;
  std::string geom_error_;
  CaseSettings settings_;
  Device* gpu_ = nullptr;
  std::unique_ptr<GatedBwdHost> host_;
};

}  // namespace

std::unique_ptr<OpCase> make_gated_bwd_case(const ShapeCase& c) { return std::make_unique<GatedBwdCase>(c); }

}  // namespace attnbench
