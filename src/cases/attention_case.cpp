// The attention op in the runner: paged inputs, the reference (every row on the GPU, or Eigen's on the checked
// rows), device binding.
#include <chrono>

#include "attnbench/reference.hpp"
#include "attnbench/reference_gpu.hpp"
#include "cases/check_rows.hpp"
#include "cases/gpu_reference.hpp"
#include "cases/memory_check.hpp"
#include "cases/op_case.hpp"
#include "cases/shape_features.hpp"

namespace attnbench {

namespace {

// The reference of one case, shared by every kernel bound to it.
struct AttentionReference {
  std::vector<int64_t> rows;    // checked flat rows (token * heads + head): also the LSE's index
  std::vector<float> out, lse;  // rows.size() * head_size, and rows.size() with return_lse
  std::string where;            // "gpu" or "cpu"
  double ms = 0;
  RowCoverage coverage;
};

class AttentionBound final : public BoundKernel {
 public:
  AttentionBound(const AttentionKernel& k, Device& dev, const HostInputs& in, const AttentionReference* ref,
                 const KnobValues& knobs)
      : kern_(k), dev_(dev), in_(in), ref_(ref), plan_(k.plan(in.problem, knobs)),
        q_(dev, in.q.bytes()), k_(dev, in.k_cache.bytes()), v_(dev, in.v_cache.bytes()),
        out_(dev, in.q.size() * dtype_bytes(in.problem.types.o)), cu_(dev, in.cu_seqlens_q.size() * 4), su_(dev, in.seqused_k.size() * 4),
        bt_(dev, in.block_table.size() * 4), ws_(dev, plan_->workspace_bytes),
        alibi_(dev, in.problem.features.alibi_slopes.size() * 4), sinks_(dev, in.problem.features.sinks.size() * 4),
        qq_(dev, in.problem.features.qq_bias.size() * 4),
        lse_(dev, in.problem.return_lse ? static_cast<std::size_t>(in.problem.total_q()) * in.problem.heads * 4 : 0) {
    dev.upload(q_.data(), in.q.data(), q_.bytes());
    dev.upload(k_.data(), in.k_cache.data(), k_.bytes());
    dev.upload(v_.data(), in.v_cache.data(), v_.bytes());
    dev.upload(cu_.data(), in.cu_seqlens_q.data(), cu_.bytes());
    dev.upload(su_.data(), in.seqused_k.data(), su_.bytes());
    dev.upload(bt_.data(), in.block_table.data(), bt_.bytes());
    const AttentionFeatures& f = in.problem.features;
    for (auto [buf, src] : {std::pair{&alibi_, f.alibi_slopes.data()}, {&sinks_, f.sinks.data()}, {&qq_, f.qq_bias.data()}})
      if (buf->bytes() > 0) dev.upload(buf->data(), src, buf->bytes());
    dev.poison(out_.data(), out_.bytes());
    if (lse_.bytes()) dev.poison(lse_.data(), lse_.bytes());  // NaN: every row's LSE must be written
    if (ws_.bytes()) dev.poison(ws_.data(), ws_.bytes());  // a plan writes what it keeps there before using it
    prm_ = in.params();
    prm_.q = q_.data();
    prm_.k_cache = k_.data();
    prm_.v_cache = v_.data();
    prm_.out = out_.data();
    prm_.cu_seqlens_q = static_cast<const int32_t*>(cu_.data());
    prm_.seqused_k = static_cast<const int32_t*>(su_.data());
    prm_.block_table = static_cast<const int32_t*>(bt_.data());
    prm_.workspace = ws_.data();
    prm_.lse = static_cast<float*>(lse_.data());  // [total_q, heads], make_attention_params' strides
    // The feature lists in the device's memory (null where the problem has none, as in.params() set them).
    if (prm_.features.alibi_slopes) prm_.features.alibi_slopes = static_cast<const float*>(alibi_.data());
    if (prm_.features.sinks) prm_.features.sinks = static_cast<const float*>(sinks_.data());
    if (prm_.features.qq_bias) prm_.features.qq_bias = static_cast<const float*>(qq_.data());
    plan_summary = plan_->summary;
    if (is_gpu(k.backend())) graph_recommended = plan_->graph_replay;
  }

  void call() override { kern_.run(*plan_, prm_, dev_.stream()); }

  GateResult gate(const Tolerance& given) override {
    const Tolerance tol = attention_tolerance(in_.problem.types, given);
    dev_.synchronize();
    HostTensor host(in_.problem.types.o, in_.q.size());
    dev_.download(host.data(), out_.data(), out_.bytes());
    GateResult g = gate_rows(host.halves(), static_cast<int64_t>(host.size()), host.dtype(), in_.problem.head_size,
                             ref_->rows, ref_->out.data(), tol);
    if (lse_.bytes()) {
      std::vector<float> lse(lse_.bytes() / 4);
      dev_.download(lse.data(), lse_.data(), lse_.bytes());
      gate_lse(g, lse.data(), static_cast<int64_t>(lse.size()), ref_->rows, ref_->lse.data(), tol.rtol);
    }
    g.reference = ref_->where;
    g.reference_ms = ref_->ms;
    g.coverage = ref_->coverage;
    return g;
  }

 private:
  const AttentionKernel& kern_;
  Device& dev_;
  const HostInputs& in_;
  const AttentionReference* ref_;
  std::unique_ptr<AttentionPlan> plan_;
  Buffer q_, k_, v_, out_, cu_, su_, bt_, ws_, alibi_, sinks_, qq_, lse_;
  AttentionParams prm_;
};

class AttentionCase final : public OpCase {
 public:
  explicit AttentionCase(const ShapeCase& c) : p_(c.attention), input_spread_(c.input_spread) {}

  WorkModel work() const override { return attention_work(p_); }

  nlohmann::json dims() const override {
    nlohmann::json d = attention_problem_dims(p_, input_spread_);
    d["block_size"] = p_.block_size;
    if (p_.return_lse) d["return_lse"] = true;
    return d;
  }

  Support supports(const KernelEntry& k, const KnobValues& knobs) const override {
    if (!k.attention) return Support::no("kernel " + k.name + " does not implement op attention");
    return k.attention->supports(p_, knobs);
  }

  MemoryNeed memory_need(const KernelEntry& /*k*/, const CaseSettings& s) const override {
    const double hs = p_.head_size, rows_x_hs = static_cast<double>(p_.total_q()) * p_.heads * hs;
    const double q = rows_x_hs * dtype_bytes(p_.types.q), o = rows_x_hs * dtype_bytes(p_.types.o);
    // One spare block: the inputs may hold a block that unused table slots point to.
    const double cache =
        static_cast<double>(p_.num_blocks() + 1) * p_.block_size * p_.kv_heads * hs * dtype_bytes(p_.types.kv);
    const double seqs = p_.num_seqs();
    const double tables = sizeof(int32_t) * (2 * seqs + 1 + seqs * (p_.max_blocks_per_seq() + 1));
    const double inputs = q + 2 * cache + tables;
    // Checked rows are at most every (token, head): fp32 reference values, the flat index and the row id.
    const double rows = static_cast<double>(p_.total_q()) * p_.heads;
    MemoryNeed n;
    if (!inputs_) n.host_bytes += inputs;
    if (s.gate && ref_.where.empty()) n.host_bytes += rows * (hs * sizeof(float) + sizeof(int64_t) + sizeof(reference::RowId));
    const double lse = p_.return_lse ? rows * sizeof(float) : 0.0;
    n.host_bytes += o + lse;  // the output (and the LSE) downloaded for the gate
    n.device_bytes = inputs + o + lse + attention_workspace_bound(p_);
    return n;
  }

  void prepare(const CaseSettings& s, Device* gpu) override {
    if (!inputs_) inputs_ = std::make_unique<HostInputs>(build_inputs(p_, s.seed, s.block_order, input_spread_));
    if (!s.gate || !ref_.where.empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    const std::string conflict = gpu ? reference::gpu_reference_conflict(p_) : "";
    if (s.reference == ReferenceWhere::gpu && (!gpu || !conflict.empty()))
      throw std::runtime_error("--reference gpu: " + (gpu ? conflict : std::string("no CUDA device for it")));
    if (gpu && conflict.empty()) reference_every_row(*gpu);
    else reference_sampled(s);
    ref_.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ref_.coverage = row_coverage(p_, ref_.rows);
  }

  std::unique_ptr<BoundKernel> bind(const KernelEntry& k, Device& dev, const KnobValues& knobs) override {
    return std::make_unique<AttentionBound>(*k.attention, dev, *inputs_, &ref_, knobs);
  }

 private:
  void reference_every_row(Device& gpu) {
    const int64_t n = p_.total_q() * p_.heads;
    ref_.out.resize(static_cast<std::size_t>(n) * p_.head_size);
    ref_.lse.resize(p_.return_lse ? n : 0);
    reference_on_device(gpu, *inputs_, ref_.out.data(), p_.return_lse ? ref_.lse.data() : nullptr);
    ref_.rows.resize(n);
    for (int64_t r = 0; r < n; ++r) ref_.rows[r] = r;
    ref_.where = "gpu";
  }

  void reference_sampled(const CaseSettings& s) {
    const auto rows = select_check_rows(p_, s.reference_gflop * 1e9, s.seed);
    ref_.out.resize(rows.size() * p_.head_size);
    ref_.lse.resize(p_.return_lse ? rows.size() : 0);
    reference::paged_attention(inputs_->params(), rows, ref_.out.data(), p_.return_lse ? ref_.lse.data() : nullptr);
    ref_.rows.reserve(rows.size());
    for (const auto& r : rows) ref_.rows.push_back(r.token * p_.heads + r.head);
    ref_.where = "cpu";
  }

  AttentionProblem p_;
  InputSpread input_spread_;
  std::unique_ptr<HostInputs> inputs_;
  AttentionReference ref_;
};

}  // namespace

nlohmann::json attention_problem_dims(const AttentionProblem& p, const InputSpread& spread) {
  nlohmann::json d = {{"heads", p.heads},         {"kv_heads", p.kv_heads},
                      {"head_size", p.head_size}, {"causal", p.causal},
                      {"batch", p.num_seqs()},    {"max_seqlen_q", p.max_seqlen_q()},
                      {"max_seqlen_k", p.max_seqlen_k()}, {"scale", p.softmax_scale()}};
  if (p.top_left) d["causal_bottom_right"] = false;
  if (spread.qk_std != 1.f) d["scores"] = "wide";
  if (p.features.any()) d["features"] = features_json(p.features);
  bool uniform = true;
  nlohmann::json seq = nlohmann::json::array();
  for (int s = 0; s < p.num_seqs(); ++s) {
    seq.push_back({p.q_lens[s], p.kv_lens[s]});
    uniform = uniform && p.q_lens[s] == p.q_lens[0] && p.kv_lens[s] == p.kv_lens[0];
  }
  if (!uniform) d["seqlens"] = seq;
  return d;
}

std::unique_ptr<OpCase> make_attention_case(const ShapeCase& c) { return std::make_unique<AttentionCase>(c); }

std::unique_ptr<OpCase> make_op_case(const ShapeCase& c) {
  switch (c.op) {
    case Op::attention:
      return make_attention_case(c);
    case Op::gated_block:
      return make_gated_case(c);
    case Op::attention_backward:
      return make_attention_bwd_case(c);
    case Op::gated_block_backward:
      return make_gated_bwd_case(c);
  }
  return nullptr;
}

}  // namespace attnbench
