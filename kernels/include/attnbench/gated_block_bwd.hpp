// The gated block's backward (op gated_block_backward): from the output gradient dy and the forward's save set,
// the gradients of h, W_qkvg, W_o and the two norm weights, each computed only when asked for. The options (the
// recompute policy and the need_* selection, fixed when a block is built: they decide which GEMMs exist), the save
// set, the params, the block interface, the declines and the declared work model. The README has the math.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnbench/attention.hpp"
#include "attnbench/gated_block.hpp"
#include "attnbench/kernel.hpp"
#include "attnbench/knobs.hpp"

namespace attnbench {

// recompute_qk_pre: the backward projects the pre-norm Q and K again (h W_q^T, h W_k^T); save_all: it reads them
// from the save set (GatedSaved::q_pre, k_pre).
enum class RecomputePolicy { recompute_qk_pre, save_all };
const char* recompute_policy_name(RecomputePolicy r);
RecomputePolicy parse_recompute_policy(const std::string& s);  // throws GatedDecline("recompute", ...)

struct GatedBwdOptions {
  RecomputePolicy recompute = RecomputePolicy::recompute_qk_pre;
  bool need_dh = true, need_dw_qkvg = true, need_dw_o = true;
  std::optional<bool> need_dw_norms;  // unset: follows GatedOptions::qk_norm
  bool dw_norms(const GatedOptions& o) const { return need_dw_norms.value_or(o.qk_norm); }
  // Whether the gradient reaching the projection (dQ, dGATE, dK, dV) is needed: for dh, dW_qkvg or the norms.
  bool needs_dproj(const GatedOptions& o) const { return need_dh || need_dw_qkvg || dw_norms(o); }
};

// What the forward keeps for the backward, in the backend's memory (dtype halves unless said): q [T, h_q, d] and k
// [T, h_kv, d] after norm + RoPE, v [T, h_kv, d] (the SDPA's inputs); gate [T, h_q, d], the GATE columns before the
// sigmoid; o [T, h_q, d], the SDPA's output before the gate; lse fp32 [T, h_q], natural log (AttentionBwdParams');
// rstd_q [T, h_q] and rstd_k [T, h_kv] fp32, each head row's rsqrt(mean(x^2) + eps) (unused without qk_norm);
// under save_all q_pre [T, h_q, d] and k_pre [T, h_kv, d], the projection's Q and K before the norm. T = B S.
struct GatedSaved {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *gate = nullptr, *o = nullptr;
  const float *lse = nullptr, *rstd_q = nullptr, *rstd_k = nullptr;
  const void *q_pre = nullptr, *k_pre = nullptr;
};

// One call's data: the forward's inputs (GatedBlockParams' shapes and layout), dy [B, S, d_model], the save set,
// and the gradients asked for (null when not): dh [B, S, d_model], dw_qkvg [N, d_model] in the block's
// q_gate_layout, dw_o [d_model, h_q d], dw_q_norm and dw_k_norm [d] (of the weight w; the offset is a constant),
// all dtype halves, written whole. workspace: workspace_size() bytes; nothing kept between calls.
struct GatedBlockBwdParams {
  const void *h = nullptr, *w_qkvg = nullptr, *q_norm_weight = nullptr, *k_norm_weight = nullptr;
  const void *cos = nullptr, *sin = nullptr, *w_o = nullptr, *dy = nullptr;
  GatedSaved saved;
  void *dh = nullptr, *dw_qkvg = nullptr, *dw_o = nullptr, *dw_q_norm = nullptr, *dw_k_norm = nullptr;
  void* workspace = nullptr;
  int batch = 0, seqlen = 0, d_model = 0, h_q = 0, h_kv = 0, d_head = 0, rope_dim = 0;
  DType dtype = DType::bf16;
};
GatedBlockBwdParams make_gated_bwd_params(const GatedGeometry& g);

// What no backward serves, as GatedDecline naming the field: a dtype but bf16 / fp16 ("dtype"); fp8 or mx (inference
// only); fuse_gate (no pre-gate O) and fuse_norm_rope (no pre-norm Q/K); need_dw_norms under qk_norm false; no
// gradient asked for ("need"); the options validate_gated_options declines.
void validate_gated_bwd(const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b);

// The SDPA backward's problem: B packed sequences of S queries and keys, h_q / h_kv heads, the block's mask, window
// and scale.
AttentionProblem gated_bwd_sdpa_problem(const GatedGeometry& g, const GatedOptions& o);

// Declared work: the GEMMs the selection runs (dY = dy W_o; dW_o = dy^T Y; the Q/K recompute; dW_qkvg = dP^T h;
// dh = dP W_qkvg), 2 m n k each, plus the SDPA backward's 2.5x forward FLOPs when the projection's gradient is
// needed. Bytes: dy, the weights, h and the save set read once where used; the gradients written once.
WorkModel gated_block_bwd_work(const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b);

// The stages, in order, each only where the selection needs it: q/k recompute (qk_pre_proj), dy_proj (dY),
// gate_bwd (dO, dGATE and the gated O Y), dw_o, sdpa_bwd, norm_rope_bwd (dQ, dK through RoPE and the norm, dV,
// into the projection's gradient dP), dw_qkvg, dh.
enum class GatedBwdStage { qk_pre_proj, dy_proj, gate_bwd, dw_o, sdpa_bwd, norm_rope_bwd, dw_qkvg, dh };
std::vector<GatedBwdStage> gated_bwd_stages(const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b);
const char* gated_bwd_stage_name(GatedBwdStage s);

class GatedBlockBwd {
 public:
  virtual ~GatedBlockBwd() = default;
  virtual const GatedGeometry& geometry() const = 0;
  virtual const GatedOptions& options() const = 0;
  virtual const GatedBwdOptions& bwd_options() const = 0;
  virtual std::size_t workspace_size() const = 0;
  // Writes the workspace's constant tables (the SDPA backward's cu_seqlens), enqueued on `stream`: once per
  // workspace, before the first execute() and any graph capture.
  virtual void prepare_workspace(void* workspace, void* stream) = 0;
  // One complete backward on `stream`; allocates nothing, copies nothing to the host (graph-capturable). Throws
  // std::invalid_argument when params do not match the block (dims, a needed pointer null, an unwanted one set).
  virtual void execute(const GatedBlockBwdParams& p, void* stream) const = 0;
  virtual std::vector<std::string> stage_names() const = 0;
  virtual void execute_stage(int stage, const GatedBlockBwdParams& p, void* stream) const = 0;
  virtual std::string summary() const = 0;
};

// supports() never throws; create() throws GatedDecline for what supports() declines.
class GatedBlockBwdKernel {
 public:
  virtual ~GatedBlockBwdKernel() = default;
  virtual std::string name() const = 0;
  virtual Backend backend() const = 0;
  virtual Support supports(const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b,
                           const KnobValues& knobs) const = 0;
  virtual std::unique_ptr<GatedBlockBwd> create(const GatedGeometry& g, const GatedOptions& o,
                                                const GatedBwdOptions& b, const KnobValues& knobs) const = 0;
};

// cpu.gated_block_bwd: fp32 GEMMs and passes over dtype-rounded stage outputs, cpu.unified_bwd for the SDPA.
std::unique_ptr<GatedBlockBwdKernel> make_cpu_gated_block_bwd();
#ifdef ATTNBENCH_WITH_CUDA
// cuda.gated_block_bwd: cuBLASLt GEMMs, the gate's and the norm + RoPE's backward kernels, cuda.unified_bwd.
std::unique_ptr<GatedBlockBwdKernel> make_cuda_gated_block_bwd();
#endif
#ifdef ATTNBENCH_WITH_CUDNN
// cudnn.gated_chain_bwd: the vendor chain (cuBLASLt GEMMs, the CUDA provider's passes, cudnn.sdpa_backward).
std::unique_ptr<GatedBlockBwdKernel> make_cudnn_gated_chain_bwd();
#endif

}  // namespace attnbench
