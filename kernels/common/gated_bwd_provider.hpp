// What a backend supplies to the gated block's backward: GEMMs of any transpose, the gate's and the norm + RoPE's
// backward passes, an fp32-to-dtype cast, a zero fill and the SDPA backward. The backward itself (its stages,
// workspace and declines) is written once over this interface (gated_bwd_orchestrator.hpp). Pointers are in the
// backend's memory, strides in elements; every call only enqueues on `stream` and allocates nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "attnbench/attention_bwd.hpp"
#include "attnbench/dtype.hpp"
#include "attnbench/gated_block_bwd.hpp"
#include "attnbench/kernel.hpp"

namespace attnbench {

// C[m, n] = op(A) op(B) in the dtype, fp32 accumulation, row-major with leading dimensions: op(A) is A [m, k]
// (lda >= k) or, with trans_a, the transpose of A stored [k, m] (lda >= m); op(B) is B [k, n] or, with trans_b,
// the transpose of B stored [n, k].
struct GatedGemmShape {
  DType dt = DType::bf16;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
};
class GatedBwdGemm {
 public:
  virtual ~GatedBwdGemm() = default;
  virtual std::size_t workspace_bytes() const = 0;
  virtual std::string summary() const = 0;
  virtual void run(const void* a, const void* b, void* c, void* workspace, void* stream) const = 0;
};

// Per element of [tokens, heads, d_head], s = sigmoid(gate): d_o = dy s, d_gate = dy o s (1 - s), y = o s, each
// rounded to the dtype and each skipped when its pointer is null. o, dy, d_o and y are packed (token stride heads
// d_head); gate and d_gate have their own token and head strides.
struct GatedGateBwdParams {
  const void *o = nullptr, *gate = nullptr, *dy = nullptr;
  void *d_o = nullptr, *d_gate = nullptr, *y = nullptr;
  int64_t gate_stride_token = 0, gate_stride_head = 0, d_gate_stride_token = 0, d_gate_stride_head = 0;
  int64_t tokens = 0;
  int heads = 0, d_head = 0;
};

// One tensor of the norm + RoPE backward: for each token t and head h < heads, the gradient g (packed [tokens,
// heads, d]) goes back through RoPE (rotating by -angle over [0, rope_dim)) and, when the pass norms, through the
// RMSNorm y = x rstd (offset + w): dx = rstd (dn - n mean(dn n)), n = x rstd, dn = g' (offset + w), with x the
// pre-norm row (x, x_stride_token, x_stride_head) and rstd [tokens, heads]; dx to dst + t dst_stride_token +
// h dst_stride_head in the dtype. dw (fp32 [d], may be null) gets sum over rows of g' n added.
struct GatedNormRopeBwdTensor {
  const void* g = nullptr;
  const void* x = nullptr;
  int64_t x_stride_token = 0, x_stride_head = 0;
  const float* rstd = nullptr;
  const void* weight = nullptr;
  float* dw = nullptr;
  void* dst = nullptr;
  int64_t dst_stride_token = 0, dst_stride_head = 0;
  int heads = 0;
};
struct GatedNormRopeBwdParams {
  GatedNormRopeBwdTensor q, k;
  // dV copied from packed [tokens, h_kv, d] to dst_v at its strides (the projection gradient's V columns).
  const void* dv = nullptr;
  void* dst_v = nullptr;
  int64_t dst_v_stride_token = 0, dst_v_stride_head = 0;
  int64_t tokens = 0;
  bool norm = true;
  float weight_offset = 0.f;
  const void* cos = nullptr;  // [tokens, rope_dim]
  const void* sin = nullptr;
  int rope_dim = 0;
};

class GatedBwdProvider {
 public:
  virtual ~GatedBwdProvider() = default;
  virtual std::string name() const = 0;  // the kernel's: "cpu.gated_block_bwd", ...
  virtual Backend backend() const = 0;
  virtual std::unique_ptr<AttentionBwdKernel> make_sdpa_bwd() const = 0;
  virtual std::unique_ptr<GatedBwdGemm> make_gemm(const GatedGemmShape& s) const = 0;
  virtual void gate_bwd(DType dt, const GatedGateBwdParams& p, void* stream) const = 0;
  virtual void norm_rope_bwd(DType dt, int d_head, const GatedNormRopeBwdParams& p, void* stream) const = 0;
  virtual void cast(DType dt, const float* src, void* dst, int64_t n, void* stream) const = 0;  // rounded to dt
  virtual void zero(void* dst, std::size_t bytes, void* stream) const = 0;
  // cu[b] = b * seqlen for b <= batch: the SDPA backward's cu_seqlens_q and _k, once per workspace.
  virtual void fill_cu_seqlens(int32_t* cu, int batch, int seqlen, void* stream) const = 0;
  // The backend's own declines (a work limit), after the common ones and before the SDPA backward's.
  virtual void check_support(const GatedGeometry&, const GatedOptions&, const GatedBwdOptions&,
                             const KnobValues&) const {}
};

// The kernel named provider->name(), its blocks sharing the provider.
std::unique_ptr<GatedBlockBwdKernel> make_gated_block_bwd_kernel(std::shared_ptr<const GatedBwdProvider> provider);

}  // namespace attnbench
