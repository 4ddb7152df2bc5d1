#include "plugins/plugin_kernel.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace attnbench {

namespace {

int32_t c_dtype(DType d) {
  switch (d) {
    case DType::f16: return ATTNBENCH_FP16;
    case DType::bf16: return ATTNBENCH_BF16;
    case DType::e4m3: return ATTNBENCH_E4M3;
    case DType::e5m2: return ATTNBENCH_E5M2;
  }
  return -1;
}

const float* list_or_null(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

// A message a plugin wrote into a buffer of ours, cut at the buffer's end should it not have ended it.
std::string message(char* buf, std::size_t size) {
  buf[size - 1] = '\0';
  return buf;
}

constexpr std::size_t kMessageBytes = 1024;

// A plan made by plugin code: its handle is released once, when the harness is done with the plan.
struct PluginPlan final : AttentionPlan {
  PluginPlan(const attnbench_kernel& k, void* h) : kernel(k), handle(h) {}
  ~PluginPlan() override {
    if (kernel.release) kernel.release(kernel.user, handle);
  }
  PluginPlan(const PluginPlan&) = delete;
  PluginPlan& operator=(const PluginPlan&) = delete;
  const attnbench_kernel& kernel;
  void* handle;
};

class PluginKernel final : public AttentionKernel {
 public:
  PluginKernel(const attnbench_kernel& k, Backend b) : k_(k), backend_(b), name_(k.name) {}
  std::string name() const override { return name_; }
  Backend backend() const override { return backend_; }

  // Plugins read no knobs of ours: they see the problem only.
  Support supports(const AttentionProblem& p, const KnobValues&) const override {
    const CProblem cp(p);
    char reason[kMessageBytes] = {0};
    const int32_t s = k_.supports(k_.user, &cp.c, reason, sizeof reason);
    if (s == ATTNBENCH_OK) return Support::yes();
    std::string why = message(reason, sizeof reason);
    if (why.empty()) why = name_ + " declined (no reason given)";
    if (s == ATTNBENCH_NO_INSTANCE) return Support::no_instance(why);
    if (s != ATTNBENCH_DECLINE) why += " (supports() returned " + std::to_string(s) + ", not a status of plugin.h)";
    return Support::no(why);
  }

  std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues&) const override {
    const CProblem cp(p);
    attnbench_plan out{};
    char error[kMessageBytes] = {0};
    if (k_.plan(k_.user, &cp.c, &out, error, sizeof error) != ATTNBENCH_OK)
      throw std::runtime_error(name_ + ": plan failed: " + message(error, sizeof error));
    auto plan = std::make_unique<PluginPlan>(k_, out.handle);
    plan->workspace_bytes = static_cast<std::size_t>(out.workspace_bytes);
    plan->graph_replay = out.graph_replay != 0;
    plan->summary = message(out.summary, sizeof out.summary);
    return plan;
  }

  void run(const AttentionPlan& plan, const AttentionParams& params, void* stream) const override {
    const auto& pp = dynamic_cast<const PluginPlan&>(plan);
    const attnbench_params c = c_params(params);
    char error[kMessageBytes];
    error[0] = '\0';
    if (k_.run(k_.user, pp.handle, &c, is_gpu(backend_) ? stream : nullptr, error, sizeof error) != ATTNBENCH_OK)
      throw std::runtime_error(name_ + ": run failed: " + message(error, sizeof error));
  }

 private:
  const attnbench_kernel& k_;
  Backend backend_;
  std::string name_;
};

}  // namespace

std::optional<Backend> plugin_backend(int32_t backend) {
  switch (backend) {
    case ATTNBENCH_BACKEND_CPU: return Backend::cpu;
    case ATTNBENCH_BACKEND_CUDA: return Backend::cuda;
    case ATTNBENCH_BACKEND_HIP: return Backend::hip;
  }
  return std::nullopt;
}

std::shared_ptr<const AttentionKernel> make_plugin_kernel(const attnbench_kernel& k, Backend backend) {
  return std::make_shared<PluginKernel>(k, backend);
}

CProblem::CProblem(const AttentionProblem& p)
    : q_lens_(p.q_lens.begin(), p.q_lens.end()), kv_lens_(p.kv_lens.begin(), p.kv_lens.end()),
      first_feature_(p.features.first_set()) {
  c.op = ATTNBENCH_OP_ATTENTION;
  c.num_seqs = p.num_seqs();
  c.q_lens = q_lens_.data();
  c.kv_lens = kv_lens_.data();
  c.total_q = p.total_q();
  c.max_seqlen_q = p.max_seqlen_q();
  c.max_seqlen_k = p.max_seqlen_k();
  c.heads = p.heads;
  c.kv_heads = p.kv_heads;
  c.head_size = p.head_size;
  c.block_size = p.block_size;
  c.causal = p.causal;
  c.top_left = p.top_left;
  c.return_lse = p.return_lse;
  c.scale = p.softmax_scale();
  c.q_dtype = c_dtype(p.types.q);
  c.kv_dtype = c_dtype(p.types.kv);
  c.o_dtype = c_dtype(p.types.o);
  const AttentionFeatures& f = p.features;
  c.features = {f.window_left, f.window_right, f.softcap, list_or_null(f.alibi_slopes), list_or_null(f.sinks),
                list_or_null(f.qq_bias), f.qq_bias_len, f.q_scale, f.k_scale, f.v_scale};
  c.first_feature = first_feature_.empty() ? nullptr : first_feature_.c_str();
  c.fusion = {p.fusion.output_gate, p.fusion.q_norm, p.fusion.q_rope_dim};
}

attnbench_params c_params(const AttentionParams& a) {
  attnbench_params c{};
  c.q = a.q;
  c.k_cache = a.k_cache;
  c.v_cache = a.v_cache;
  c.out = a.out;
  c.cu_seqlens_q = a.cu_seqlens_q;
  c.seqused_k = a.seqused_k;
  c.block_table = a.block_table;
  c.workspace = a.workspace;
  c.lse = a.lse;
  c.lse_stride_start = a.lse_stride_start;
  c.lse_stride_row = a.lse_stride_row;
  c.lse_stride_head = a.lse_stride_head;
  c.q_stride_token = a.q_stride_token;
  c.q_stride_head = a.q_stride_head;
  c.o_stride_token = a.o_stride_token;
  c.o_stride_head = a.o_stride_head;
  c.kv_stride_block = a.kv_stride_block;
  c.kv_stride_token = a.kv_stride_token;
  c.kv_stride_head = a.kv_stride_head;
  c.block_table_stride = a.block_table_stride;
  c.num_seqs = a.num_seqs;
  c.heads = a.heads;
  c.kv_heads = a.kv_heads;
  c.head_size = a.head_size;
  c.block_size = a.block_size;
  c.max_seqlen_q = a.max_seqlen_q;
  c.max_seqlen_k = a.max_seqlen_k;
  c.total_q = a.total_q;
  c.scale = a.scale;
  c.causal = a.causal;
  c.top_left = a.top_left;
  c.q_dtype = c_dtype(a.types.q);
  c.kv_dtype = c_dtype(a.types.kv);
  c.o_dtype = c_dtype(a.types.o);
  const AttentionFeatureParams& f = a.features;
  c.features = {f.window_left, f.window_right, f.softcap, f.alibi_slopes, f.sinks,
                f.qq_bias, f.qq_bias_len, f.q_scale, f.k_scale, f.v_scale};
  c.fusion = {a.epilogue.gate, a.epilogue.gate_stride_token, a.epilogue.gate_stride_head,
              a.prologue.q_norm_weight, a.prologue.q_norm_offset, a.prologue.q_norm_eps,
              a.prologue.rope_cos, a.prologue.rope_sin, a.prologue.q_rope_dim};
  return c;
}

}  // namespace attnbench
