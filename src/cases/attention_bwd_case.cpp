// The attention backward op in the runner: packed varlen inputs with O and LSE from the fp32 reference, the
// reference's gradients over every row, a bound kernel's dQ, dK, dV gated tensor by tensor.
#include "attnbench/attention_bwd.hpp"
#include "cases/bwd_inputs.hpp"
#include "cases/op_case.hpp"

namespace attnbench {

namespace {

class AttentionBwdBound final : public BoundKernel {
 public:
  AttentionBwdBound(const AttentionBwdKernel& k, Device& dev, const BwdInputs& in, const BwdReference& ref,
                    const KnobValues& knobs)
      : kern_(k), dev_(dev), in_(in), ref_(ref), plan_(k.plan(in.problem, knobs)), q_(dev, in.q.bytes()),
        k_(dev, in.k.bytes()), v_(dev, in.v.bytes()), o_(dev, in.o.bytes()), do_(dev, in.d_o.bytes()),
        lse_(dev, in.lse.size() * 4), cq_(dev, in.cu_seqlens_q.size() * 4), ck_(dev, in.cu_seqlens_k.size() * 4),
        dq_(dev, in.q.bytes()), dk_(dev, in.k.bytes()), dv_(dev, in.v.bytes()), ws_(dev, plan_->workspace_bytes) {
    for (auto [buf, src] : {std::pair{&q_, in.q.data()}, {&k_, in.k.data()}, {&v_, in.v.data()}, {&o_, in.o.data()},
                            {&do_, in.d_o.data()}})
      dev.upload(buf->data(), src, buf->bytes());
    dev.upload(lse_.data(), in.lse.data(), lse_.bytes());
    dev.upload(cq_.data(), in.cu_seqlens_q.data(), cq_.bytes());
    dev.upload(ck_.data(), in.cu_seqlens_k.data(), ck_.bytes());
    for (const Buffer* b : {&dq_, &dk_, &dv_, &ws_})
      if (b->bytes()) dev.poison(b->data(), b->bytes());  // NaN: every gradient must be written
    prm_ = in.params();
    prm_.q = q_.data();
    prm_.k = k_.data();
    prm_.v = v_.data();
    prm_.o = o_.data();
    prm_.d_o = do_.data();
    prm_.lse = static_cast<const float*>(lse_.data());
    prm_.cu_seqlens_q = static_cast<const int32_t*>(cq_.data());
    prm_.cu_seqlens_k = static_cast<const int32_t*>(ck_.data());
    prm_.dq = dq_.data();
    prm_.dk = dk_.data();
    prm_.dv = dv_.data();
    prm_.workspace = ws_.data();
    plan_summary = plan_->summary;
    if (is_gpu(k.backend())) graph_recommended = plan_->graph_replay;
  }

  void call() override { kern_.run(*plan_, prm_, dev_.stream()); }

  GateResult gate(const Tolerance& given) override {
    dev_.synchronize();
    const DType dt = in_.problem.types.o;
    HostTensor dq(dt, in_.q.size()), dk(dt, in_.k.size()), dv(dt, in_.v.size());
    for (auto [host, buf] : {std::pair{&dq, &dq_}, {&dk, &dk_}, {&dv, &dv_}}) dev_.download(host->data(), buf->data(), buf->bytes());
    return gate_gradients(in_.problem, dq.halves(), dk.halves(), dv.halves(), ref_, given);
  }

 private:
  const AttentionBwdKernel& kern_;
  Device& dev_;
  const BwdInputs& in_;
  const BwdReference& ref_;
  std::unique_ptr<AttentionBwdPlan> plan_;
  Buffer q_, k_, v_, o_, do_, lse_, cq_, ck_, dq_, dk_, dv_, ws_;
  AttentionBwdParams prm_;
};

class AttentionBwdCase final : public OpCase {
 public:
  explicit AttentionBwdCase(const ShapeCase& c) : p_(c.attention), spread_(c.input_spread) {}

  WorkModel work() const override { return attention_bwd_work(p_); }

  nlohmann::json dims() const override {
    nlohmann::json d = attention_problem_dims(p_, spread_);
    d["total_q"] = p_.total_q();
    d["total_k"] = total_k(p_);
    return d;
  }

  Support supports(const KernelEntry& k, const KnobValues& knobs) const override {
    if (!k.attention_bwd) return Support::no("kernel " + k.name + " does not implement op attention_backward");
    return k.attention_bwd->supports(p_, knobs);
  }

  MemoryNeed memory_need(const KernelEntry& /*k*/, const CaseSettings& /*s*/) const override {
    const double b = dtype_bytes(p_.types.o), hd = p_.head_size;
    const double nq = static_cast<double>(p_.total_q()) * p_.heads * hd, nk = static_cast<double>(total_k(p_)) * p_.kv_heads * hd;
    const double lse = 4.0 * p_.total_q() * p_.heads;
    const double inputs = b * (3 * nq + 2 * nk) + lse, grads = b * (nq + 2 * nk);
    MemoryNeed n;
    // Inputs, the reference's fp32 O (while it rounds) and gradients, then one gradient downloaded at a time.
    if (!inputs_) n.host_bytes += inputs + 4 * (2 * nq + 2 * nk);
    n.host_bytes += b * std::max(nq, nk);
    n.device_bytes = inputs + grads + attention_bwd_workspace_bound(p_);
    return n;
  }

  // The reference runs whether or not the gate is on: O and the LSE are inputs of every backward. Every row, on
  // `gpu` where the runner gives one, else on the CPU.
  void prepare(const CaseSettings& s, Device* gpu) override {
    if (!inputs_) inputs_ = std::make_unique<BwdInputs>(build_bwd_inputs(p_, s.seed, ref_, spread_, gpu));
  }

  std::unique_ptr<BoundKernel> bind(const KernelEntry& k, Device& dev, const KnobValues& knobs) override {
    return std::make_unique<AttentionBwdBound>(*k.attention_bwd, dev, *inputs_, ref_, knobs);
  }

 private:
  AttentionProblem p_;
  InputSpread spread_;
  std::unique_ptr<BwdInputs> inputs_;
  BwdReference ref_;
};

}  // namespace

std::unique_ptr<OpCase> make_attention_bwd_case(const ShapeCase& c) { return std::make_unique<AttentionBwdCase>(c); }

}  // namespace attnbench
