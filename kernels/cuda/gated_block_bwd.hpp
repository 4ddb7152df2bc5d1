// cuda.gated_block_bwd's provider: cuBLASLt GEMMs of any transpose, the gate and norm + RoPE backward kernels, the
// cast and the cu_seqlens fill, cuda.unified_bwd as the SDPA backward. Open to a provider that swaps only the SDPA
// backward (as kernels/cudnn/ does for the forward).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/gated_bwd_provider.hpp"

namespace attnbench {

class CudaBwdProvider : public GatedBwdProvider {
 public:
  std::string name() const override { return "cuda.gated_block_bwd"; }
  Backend backend() const override { return Backend::cuda; }
  std::unique_ptr<AttentionBwdKernel> make_sdpa_bwd() const override;
  // Throws std::invalid_argument for a shape cuBLASLt's heuristic has no algorithm for.
  std::unique_ptr<GatedBwdGemm> make_gemm(const GatedGemmShape& s) const override;
  void gate_bwd(DType dt, const GatedGateBwdParams& p, void* stream) const override;
  void norm_rope_bwd(DType dt, int d_head, const GatedNormRopeBwdParams& p, void* stream) const override;
  void cast(DType dt, const float* src, void* dst, int64_t n, void* stream) const override;
  void zero(void* dst, std::size_t bytes, void* stream) const override;
  void fill_cu_seqlens(int32_t* cu, int batch, int seqlen, void* stream) const override;
};

}  // namespace attnbench
