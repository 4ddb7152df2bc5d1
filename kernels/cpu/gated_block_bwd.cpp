// cpu.gated_block_bwd's provider: the backward's pieces on the host in fp32 over dtype-rounded stage outputs (the
// GEMMs of gemm_op, the gate's and the norm + RoPE's backward passes), cpu.unified_bwd for the SDPA. OpenMP. The
// stages: common/gated_bwd_orchestrator.cpp.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "attnbench/gated_block_bwd.hpp"
#include "common/gated_bwd_provider.hpp"
#include "cpu/gated_block.hpp"
#include "cpu/work_limit.hpp"

namespace attnbench {
namespace {

float f(const void* base, int64_t i, DType dt) { return half_to_float(static_cast<const uint16_t*>(base)[i], dt); }

class CpuBwdGemm final : public GatedBwdGemm {
 public:
  explicit CpuBwdGemm(const GatedGemmShape& s)
      : s_(s), threads_(std::max(1, omp_get_max_threads())),
        scratch_(cpu::gemm_scratch_floats(static_cast<int>((s.k + 3) / 4 * 4)) * threads_, 0.f) {}
  std::size_t workspace_bytes() const override { return 0; }
  std::string summary() const override { return "fp32-acc threads=" + std::to_string(threads_); }
  void run(const void* a, const void* b, void* c, void*, void*) const override {
    cpu::gemm_op(s_, static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), static_cast<uint16_t*>(c),
                 scratch_.data(), threads_);
  }

 private:
  GatedGemmShape s_;
  int threads_;
  mutable std::vector<float> scratch_;  // one call at a time per block
};

// One head row back through RoPE (g' = R^T g over [0, rope_dim)) and the norm; dx rounded into dst, g' n added to
// dw (this thread's sums).
void norm_rope_bwd_row(DType dt, int d, const GatedNormRopeBwdParams& p, const GatedNormRopeBwdTensor& t,
                       int64_t tok, int h, const float* c, const float* s, float* dw) {
  float g[256], x[256];
  for (int i = 0; i < d; ++i) g[i] = f(t.g, (tok * t.heads + h) * d + i, dt);
  const int hh = p.rope_dim / 2;
  for (int i = 0; i < hh; ++i) {
    const float g1 = g[i], g2 = g[i + hh];
    g[i] = g1 * c[i] + g2 * s[i + hh];
    g[i + hh] = g2 * c[i + hh] - g1 * s[i];
  }
  auto* dst = static_cast<uint16_t*>(t.dst) + tok * t.dst_stride_token + h * t.dst_stride_head;
  if (!p.norm) {
    for (int i = 0; i < d; ++i) dst[i] = float_to_half(g[i], dt);
    return;
  }
  const float r = t.rstd[tok * t.heads + h];
  double dot = 0;
  for (int i = 0; i < d; ++i) {
    x[i] = f(t.x, tok * t.x_stride_token + h * t.x_stride_head + i, dt) * r;  // n
    const float dn = g[i] * (p.weight_offset + f(t.weight, i, dt));
    dot += static_cast<double>(dn) * x[i];
    if (dw) dw[i] += g[i] * x[i];
    g[i] = dn;
  }
  const float mean = static_cast<float>(dot / d);
  for (int i = 0; i < d; ++i) dst[i] = float_to_half(r * (g[i] - x[i] * mean), dt);
}

class CpuBwdProvider final : public GatedBwdProvider {
 public:
  std::string name() const override { return "cpu.gated_block_bwd"; }
  Backend backend() const override { return Backend::cpu; }
  std::unique_ptr<AttentionBwdKernel> make_sdpa_bwd() const override { return make_cpu_unified_bwd(); }
  std::unique_ptr<GatedBwdGemm> make_gemm(const GatedGemmShape& s) const override {
    return std::make_unique<CpuBwdGemm>(s);
  }

  void gate_bwd(DType dt, const GatedGateBwdParams& p, void*) const override {
    const int d = p.d_head;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < p.tokens; ++t)
      for (int h = 0; h < p.heads; ++h) {
        const int64_t at = (t * p.heads + h) * d, ga = t * p.gate_stride_token + h * p.gate_stride_head;
        const int64_t da = t * p.d_gate_stride_token + h * p.d_gate_stride_head;
        for (int i = 0; i < d; ++i) {
          const float o = f(p.o, at + i, dt), s = 1.f / (1.f + std::exp(-f(p.gate, ga + i, dt)));
          if (p.y) static_cast<uint16_t*>(p.y)[at + i] = float_to_half(o * s, dt);
          if (!p.dy) continue;
          const float dy = f(p.dy, at + i, dt);
          if (p.d_o) static_cast<uint16_t*>(p.d_o)[at + i] = float_to_half(dy * s, dt);
          if (p.d_gate) static_cast<uint16_t*>(p.d_gate)[da + i] = float_to_half(dy * o * s * (1.f - s), dt);
        }
      }
  }

  void norm_rope_bwd(DType dt, int d, const GatedNormRopeBwdParams& p, void*) const override {
    const int rd = p.rope_dim, hq = p.q.heads, hk = p.k.heads;
#pragma omp parallel
    {
      float dw[512] = {}, c[256] = {}, s[256] = {};  // this thread's dw sums (d_head <= 256): nothing allocated
#pragma omp for schedule(static)
      for (int64_t t = 0; t < p.tokens; ++t) {
        for (int i = 0; i < rd; ++i) {
          c[i] = f(p.cos, t * rd + i, dt);
          s[i] = f(p.sin, t * rd + i, dt);
        }
        for (int h = 0; h < hq; ++h) norm_rope_bwd_row(dt, d, p, p.q, t, h, c, s, p.q.dw ? dw : nullptr);
        for (int h = 0; h < hk; ++h) norm_rope_bwd_row(dt, d, p, p.k, t, h, c, s, p.k.dw ? dw + d : nullptr);
        auto* dst = static_cast<uint16_t*>(p.dst_v) + t * p.dst_v_stride_token;
        for (int h = 0; h < hk; ++h)
          std::memcpy(dst + h * p.dst_v_stride_head, static_cast<const uint16_t*>(p.dv) + (t * hk + h) * d, 2 * d);
      }
#pragma omp critical(attnbench_norm_rope_bwd_dw)
      for (int i = 0; i < d; ++i) {
        if (p.q.dw) p.q.dw[i] += dw[i];
        if (p.k.dw) p.k.dw[i] += dw[d + i];
      }
    }
  }

  void cast(DType dt, const float* src, void* dst, int64_t n, void*) const override {
    for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = float_to_half(src[i], dt);
  }
  void zero(void* dst, std::size_t bytes, void*) const override { std::memset(dst, 0, bytes); }
  void fill_cu_seqlens(int32_t* cu, int batch, int seqlen, void*) const override {
    for (int b = 0; b <= batch; ++b) cu[b] = b * seqlen;
  }

  void check_support(const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b,
                     const KnobValues& knobs) const override {
    const std::string over = cpu::over_work_limit(gated_block_bwd_work(g, o, b).flops, knobs);
    if (!over.empty()) throw GatedDecline("work", "the backward " + over);
  }
};

}  // namespace

std::shared_ptr<const GatedBwdProvider> cpu::make_cpu_gated_bwd_provider() {
  return std::make_shared<const CpuBwdProvider>();
}

std::unique_ptr<GatedBlockBwdKernel> make_cpu_gated_block_bwd() {
  return make_gated_block_bwd_kernel(cpu::make_cpu_gated_bwd_provider());
}

}  // namespace attnbench
