// cuda.gated_block's provider: cuBLASLt projections, the gated block's norm + RoPE, sigmoid-gate and table kernels,
// cuda.unified as the SDPA. Open to a provider that swaps only the SDPA (the vendor chain of kernels/cudnn/).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "common/gated_provider.hpp"

namespace attnbench {

class CudaGatedProvider : public GatedProvider {
 public:
  std::string name() const override { return "cuda.gated_block"; }
  Backend backend() const override { return Backend::cuda; }
  std::unique_ptr<AttentionKernel> make_sdpa(const AttentionParams& layout) const override;
  std::unique_ptr<GatedGemm> make_gemm(DType dt, int64_t m, int64_t n, int64_t k) const override;
  // The MX modes' projections need block-scaled MMA (tcgen05 with scale factors, or cuBLASLt's block-scaled
  // GEMMs), which SM90 lacks; dequantising to bf16 first would read more bytes than the bf16 block.
  std::string mx_conflict() const override {
    return "block-scaled MMA needs SM100 or newer (this backend is built for sm_90a)";
  }
  // FP8: cuBLASLt's e4m3 GEMMs (the descales as alpha) and the quantisation kernel.
  std::string fp8_conflict() const override { return ""; }
  std::unique_ptr<GatedGemm> make_fp8_gemm(DType dt, int64_t m, int64_t n, int64_t k, float alpha) const override;
  void quantize(DType dt, const GatedQuantizeParams& p, void* stream) const override;
  void fill_tables(const GatedTablesParams& p, void* stream) const override;
  void zero(void* dst, std::size_t bytes, void* stream) const override;
  void norm_rope(DType dt, int d_head, const GatedNormRopeParams& p, void* stream) const override;
  void sigmoid_gate(DType dt, const GatedSigmoidParams& p, void* stream) const override;
  // save_for_backward: the norm + RoPE and gate kernels write the save set; the LSE transpose kernel.
  void lse_reorder(const GatedLseReorderParams& p, void* stream) const override;
  std::string save_conflict() const override { return ""; }
  std::string params_conflict(const GatedGeometry& g, const GatedOptions& o,
                              const GatedBlockParams& p) const override;
};

}  // namespace attnbench
