// cuda.gated_block_bwd's provider (host code; declared in gated_block_bwd.hpp). GEMMs through lt_gemm.hpp's cuBLASLt
// wrapper, bf16/fp16 in and out, fp32 accumulate, with its 16-byte aligned fallback algorithm (the backward's GEMMs
// read row and column offsets of larger tensors). Every call only launches.
#include "cuda/gated_block_bwd.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "attnbench/attention_bwd.hpp"
#include "cuda/gated_bwd_kernels.hpp"
#include "cuda/lt_gemm.hpp"
#include "cuda/runtime.hpp"

namespace attnbench {
namespace {

cuda::LtGemmDesc bwd_desc(const GatedGemmShape& s) {
  cuda::LtGemmDesc d;
  d.shape = s;
  d.label = "gated bwd GEMM";
  return d;
}

class LtBwdGemm final : public GatedBwdGemm {
 public:
  explicit LtBwdGemm(const GatedGemmShape& s)
      : lt_(bwd_desc(s)),
        summary_("cuBLASLt " + std::string(s.trans_a ? "t" : "n") + (s.trans_b ? "t" : "n") + " algo " +
                 lt_.algo_id() + " (16-byte: " + lt_.least_algo_id() + ") ws " +
                 std::to_string(lt_.workspace_bytes() >> 10) + "K") {}

  std::size_t workspace_bytes() const override { return lt_.workspace_bytes(); }
  std::string summary() const override { return summary_; }
  void run(const void* a, const void* b, void* c, void* ws, void* stream) const override {
    lt_.run(a, b, c, ws, static_cast<cudaStream_t>(stream));
  }

 private:
  cuda::LtGemm lt_;
  std::string summary_;
};

}  // namespace

std::unique_ptr<AttentionBwdKernel> CudaBwdProvider::make_sdpa_bwd() const { return make_cuda_unified_bwd(); }

std::unique_ptr<GatedBwdGemm> CudaBwdProvider::make_gemm(const GatedGemmShape& s) const {
  return std::make_unique<LtBwdGemm>(s);
}

void CudaBwdProvider::gate_bwd(DType dt, const GatedGateBwdParams& p, void* stream) const {
  cuda::launch_gated_gate_bwd(dt, p, static_cast<cudaStream_t>(stream));
}

void CudaBwdProvider::norm_rope_bwd(DType dt, int d_head, const GatedNormRopeBwdParams& p, void* stream) const {
  cuda::launch_gated_norm_rope_bwd(dt, d_head, p, static_cast<cudaStream_t>(stream));
}

void CudaBwdProvider::cast(DType dt, const float* src, void* dst, int64_t n, void* stream) const {
  cuda::launch_gated_cast(dt, src, dst, n, static_cast<cudaStream_t>(stream));
}

void CudaBwdProvider::zero(void* dst, std::size_t bytes, void* stream) const {
  if (bytes > 0) ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream)));
}

void CudaBwdProvider::fill_cu_seqlens(int32_t* cu, int batch, int seqlen, void* stream) const {
  cuda::launch_gated_cu_seqlens(cu, batch, seqlen, static_cast<cudaStream_t>(stream));
}

std::unique_ptr<GatedBlockBwdKernel> make_cuda_gated_block_bwd() {
  return make_gated_block_bwd_kernel(std::make_shared<const CudaBwdProvider>());
}

}  // namespace attnbench
