// What a backend supplies to the gated block: the projection GEMM, the elementwise passes (the SDPA tables, the
// zeroed pad of the projection, norm + RoPE, the sigmoid gate), the SDPA kernel, and its own declines and params
// checks. The block itself (its stages, workspace, declines and SDPA params) is written once over this interface
// (gated_orchestrator.hpp).
// Pointers are in the backend's memory, in elements of the dtype's 16-bit halves; strides in elements. Every call
// only enqueues on `stream` (a cudaStream_t; ignored on the CPU) and allocates nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "attnbench/dtype.hpp"
#include "attnbench/gated_block.hpp"
#include "attnbench/kernel.hpp"
#include "attnbench/knobs.hpp"
#include "attnbench/mx_quant.hpp"
#include "device/host_device.hpp"

namespace attnbench {

// save_for_backward's outputs of the norm + RoPE pass (GatedSaveOut's layouts, packed [tokens, heads, d_head]).
struct GatedNormRopeSave {
  void *q = nullptr, *k = nullptr, *v = nullptr;  // the stored rows; V's as loaded
  float *rstd_q = nullptr, *rstd_k = nullptr;     // under norm: each Q / K row's rsqrt(mean(x^2) + eps)
  void *q_pre = nullptr, *k_pre = nullptr;        // optional: the Q / K rows as loaded
};

// Per-head RMSNorm (fp32, weight offset + w) and rotate-half RoPE over [0, rope_dim), in place, for every Q head
// (row t: proj + t * row_stride + q0 + h * q_head_stride) and K head (proj + t * row_stride + k0 + h * d_head).
// With save.q set (save_for_backward) nothing is stored back: the rows go to the save set, V's too (save_row_of).
struct GatedNormRopeParams {
  void* proj = nullptr;
  int64_t row_stride = 0;
  int64_t tokens = 0;
  int h_q = 0, h_kv = 0;
  int64_t q0 = 0, q_head_stride = 0, k0 = 0;
  const void* q_weight = nullptr;  // [d_head]; unused without norm
  const void* k_weight = nullptr;
  float weight_offset = 0.f;
  float eps = 1e-6f;
  bool norm = true;
  const void* cos = nullptr;  // [tokens, rope_dim]
  const void* sin = nullptr;
  int rope_dim = 0;
  // The FP8 mode's fused pass (codes set): the Q and K rows are not stored back; each is written as the e4m3 codes
  // of x * scale_q (scale_k) to codes + t * codes_stride + h * d_head (codes_k0 + h * d_head), and each V head row
  // (proj + t * row_stride + v0 + h * d_head, neither normed nor rotated) to codes_v0 + h * d_head with scale_v.
  uint8_t* codes = nullptr;
  int64_t codes_stride = 0, codes_k0 = 0, codes_v0 = 0, v0 = 0;
  float scale_q = 1.f, scale_k = 1.f, scale_v = 1.f;
  GatedNormRopeSave save;  // with codes unset only
  // Head rows per token the pass walks: Q, K, and V's when they are quantised or saved.
  ATTNBENCH_HD_INLINE int row_heads() const { return h_q + h_kv + (codes || save.q ? h_kv : 0); }
};

// Head row hh (of h_q + h_kv, plus h_kv V rows when codes is set) of a token in the norm + RoPE pass: which tensor,
// its column in the projection row, its codes' column and scale.
struct NormRopeRow {
  enum Kind { q, k, v } kind;
  int64_t src, dst;
  float scale;
};
ATTNBENCH_HD_INLINE NormRopeRow norm_rope_row_of(const GatedNormRopeParams& p, int d_head, int hh) {
  if (hh < p.h_q) return {NormRopeRow::q, p.q0 + hh * p.q_head_stride, static_cast<int64_t>(hh) * d_head, p.scale_q};
  hh -= p.h_q;
  if (hh < p.h_kv)
    return {NormRopeRow::k, p.k0 + static_cast<int64_t>(hh) * d_head, p.codes_k0 + static_cast<int64_t>(hh) * d_head,
            p.scale_k};
  hh -= p.h_kv;
  return {NormRopeRow::v, p.v0 + static_cast<int64_t>(hh) * d_head, p.codes_v0 + static_cast<int64_t>(hh) * d_head,
          p.scale_v};
}

// Where a head row of token t (norm_rope_row_of's) goes under save_for_backward: its stored row, rstd and pre-norm
// copy in the packed save set (rstd and pre null where not written).
struct NormRopeSaveRow {
  void* out;
  float* rstd;
  void* pre;
};
ATTNBENCH_HD_INLINE NormRopeSaveRow save_row_of(const GatedNormRopeParams& p, int d_head, int hh, int64_t t) {
  const GatedNormRopeSave& s = p.save;
  auto at = [&](void* base, int heads, int h) {  // 16-bit halves, [tokens, heads, d_head]
    return base ? static_cast<void*>(static_cast<uint16_t*>(base) + (t * heads + h) * d_head) : nullptr;
  };
  auto rs = [&](float* base, int heads, int h) { return base ? base + t * heads + h : nullptr; };
  if (hh < p.h_q) return {at(s.q, p.h_q, hh), rs(s.rstd_q, p.h_q, hh), at(s.q_pre, p.h_q, hh)};
  hh -= p.h_q;
  if (hh < p.h_kv) return {at(s.k, p.h_kv, hh), rs(s.rstd_k, p.h_kv, hh), at(s.k_pre, p.h_kv, hh)};
  return {at(s.v, p.h_kv, hh - p.h_kv), nullptr, nullptr};
}

// The FP8 mode's quantisation pass: for each part and head h < heads, codes dst[t * dst_stride + dst0 + h * d_head
// + i] = e4m3(x * scale) (common/device/mx_rules.hpp's e4m3 rule, nearest even, saturating at 448), t < rows, x =
// src[t * src_stride + src0 + h * src_head_stride + i] in the dtype; with gate set, x is first replaced by
// round(x * sigmoid(gate[t * gate_stride_token + h * gate_stride_head + i])), the sigmoid gate pass's value.
struct GatedQuantizePart {
  int64_t src0 = 0, src_head_stride = 0, dst0 = 0;
  int heads = 0;
  float scale = 1.f;
};
struct GatedQuantizeParams {
  const void* src = nullptr;
  int64_t src_stride = 0;
  uint8_t* dst = nullptr;
  int64_t dst_stride = 0;
  int64_t rows = 0;
  int d_head = 0;
  GatedQuantizePart parts[3];
  int n_parts = 0;
  const void* gate = nullptr;
  int64_t gate_stride_token = 0, gate_stride_head = 0;
};

// out[t, h, :] = round(o[t, h, :] * sigmoid(gate[t * gate_stride_token + h * gate_stride_head + :])). Out of
// place (out and o do not overlap), so the pass is a function of its inputs: a stage timed alone repeats it on the
// same O instead of gating its own output again (into fp32 denormals, a slower path). With gate_save set
// (save_for_backward) the gate's elements are copied there too, packed: gate_save[t, h, :].
struct GatedSigmoidParams {
  const void* o = nullptr;
  void* out = nullptr;
  int64_t o_stride_token = 0;  // o's and out's; the head stride of both is d_head
  const void* gate = nullptr;
  int64_t gate_stride_token = 0, gate_stride_head = 0;
  int64_t tokens = 0;
  int heads = 0, d_head = 0;
  void* gate_save = nullptr;
};

// save_for_backward with return_lse: dst[b, h, s] = src[(b * seqlen + s) * heads + h], the save set's LSE [T, h_q]
// into params.lse's [B, h_q, S].
struct GatedLseReorderParams {
  const float* src = nullptr;
  float* dst = nullptr;
  int batch = 0, seqlen = 0, heads = 0;
};

// The SDPA's constant tables for B sequences of S tokens viewed as a paged cache of block_size-token blocks:
// cu_seqlens_q[b] = b * S, seqused_k[b] = S, block_table[b, j] = b * S / block_size + j (identity).
struct GatedTablesParams {
  int32_t* cu_seqlens_q = nullptr;
  int32_t* seqused_k = nullptr;
  int32_t* block_table = nullptr;
  int batch = 0, seqlen = 0, block_size = 0, blocks_per_seq = 0;
};

// C[M, N] = A[M, K] * B[N, K]^T in the dtype, rows contiguous, fp32 accumulation: built once for its shape.
class GatedGemm {
 public:
  virtual ~GatedGemm() = default;
  virtual std::size_t workspace_bytes() const = 0;  // its part of the block's workspace (0: none)
  virtual std::string summary() const = 0;          // the block's summary names it
  // workspace: workspace_bytes() bytes, or null when that is 0.
  virtual void run(const void* a, const void* b, void* c, void* workspace, void* stream) const = 0;
};

// C[M, N] = q(A)[M, K] * B[N, K]^T, the MX modes' projection: A in the dtype, quantised in blocks along each row to
// a_format after a_scale multiplies it (its values divided back by a_scale); B MX codes and scales of b_format
// (mx_quant.hpp's storage), its values times b_descale; fp32 accumulation, C in the dtype. Built once per shape.
struct GatedMxGemmDesc {
  DType dt = DType::bf16;
  int64_t m = 0, n = 0, k = 0;
  mx::MxFormat a_format = mx::MxFormat::mxfp8, b_format = mx::MxFormat::mxfp8;
  float a_scale = 1.f, b_descale = 1.f;
};
class GatedMxGemm {
 public:
  virtual ~GatedMxGemm() = default;
  virtual std::size_t workspace_bytes() const = 0;
  virtual std::string summary() const = 0;
  virtual void run(const void* a, const uint8_t* b_codes, const uint8_t* b_scales, void* c, void* workspace,
                   void* stream) const = 0;
};

// One backend's pieces. Shared by every block its kernel creates, so it is const and keeps no per-call state.
class GatedProvider {
 public:
  virtual ~GatedProvider() = default;
  virtual std::string name() const = 0;  // the kernel's: "cpu.gated_block", "cuda.gated_block", ...
  virtual Backend backend() const = 0;
  // The SDPA kernel of one block. `layout` has the strides its params will have (gated_sdpa_strides; pointers
  // null), for a kernel that plans per memory layout; the others ignore it.
  virtual std::unique_ptr<AttentionKernel> make_sdpa(const AttentionParams& layout) const = 0;
  virtual std::unique_ptr<GatedGemm> make_gemm(DType dt, int64_t m, int64_t n, int64_t k) const = 0;
  // The MX modes' GEMM, and why the backend has none ("" when it has one): a block under GatedOptions::mx is
  // declined under the field "mx" with that reason.
  virtual std::string mx_conflict() const { return name() + " has no block-scaled GEMM"; }
  virtual std::unique_ptr<GatedMxGemm> make_mx_gemm(const GatedMxGemmDesc&) const { return nullptr; }
  // The FP8 mode's projection, C[M, N] (dtype) = alpha * A[M, K] B[N, K]^T over e4m3 codes, and why the backend
  // has none ("" when it has one): a block under GatedOptions::fp8 is declined under "fp8" with that reason.
  virtual std::string fp8_conflict() const { return name() + " has no FP8 GEMM"; }
  virtual std::unique_ptr<GatedGemm> make_fp8_gemm(DType, int64_t, int64_t, int64_t, float) const { return nullptr; }
  virtual void quantize(DType, const GatedQuantizeParams&, void*) const {
    throw std::logic_error(name() + ": no FP8 quantisation pass");
  }
  virtual void fill_tables(const GatedTablesParams& p, void* stream) const = 0;
  // Zeroes `bytes` bytes at dst: the projection's pad rows, on every call (the workspace is the caller's memory).
  virtual void zero(void* dst, std::size_t bytes, void* stream) const = 0;
  virtual void norm_rope(DType dt, int d_head, const GatedNormRopeParams& p, void* stream) const = 0;
  virtual void sigmoid_gate(DType dt, const GatedSigmoidParams& p, void* stream) const = 0;
  // save_for_backward with return_lse; a backend without it declines save_for_backward (save_conflict).
  virtual void lse_reorder(const GatedLseReorderParams&, void*) const {
    throw std::logic_error(name() + ": no LSE reorder pass");
  }
  // Why the backend cannot write the save set ("" when it can): its norm + RoPE and gate passes take the save
  // fields and it has lse_reorder. A block under save_for_backward is declined under "save_for_backward".
  virtual std::string save_conflict() const { return name() + " cannot write the backward's save set"; }
  // false: every stage is its own launch (a chain of library calls): the block clears fuse_gate and fuse_norm_rope
  // from the options it is given, and its summary says so.
  virtual bool fuses() const { return true; }
  // The backend's own declines (a work limit), after the common ones and before the SDPA's: throws GatedDecline.
  virtual void check_support(const GatedGeometry&, const GatedOptions&, const KnobValues&) const {}
  // Why the backend cannot take a call's pointers ("" when it can), e.g. an alignment its kernels assume.
  virtual std::string params_conflict(const GatedGeometry&, const GatedOptions&, const GatedBlockParams&) const {
    return "";
  }
};

}  // namespace attnbench
