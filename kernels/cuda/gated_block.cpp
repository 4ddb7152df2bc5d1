// cuda.gated_block's provider (host code; declared in gated_provider.hpp): the projections through lt_gemm.hpp's
// cuBLASLt wrapper, bf16/fp16 (or e4m3) in, fp32 accumulate, descriptors and algorithm chosen at construction; the
// norm+RoPE, sigmoid-gate and table kernels; cuda.unified as the SDPA, its K/V "cache" the projection viewed as
// blocks of block_size tokens with an identity block table (no repacking copy). Every call only launches: a block's
// execute() captures into a graph.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "common/gated_orchestrator.hpp"
#include "cuda/gated_kernels.hpp"
#include "cuda/gated_provider.hpp"
#include "cuda/lt_gemm.hpp"
#include "cuda/runtime.hpp"

namespace attnbench {
namespace {

// C[rows, cols] = alpha X[rows, k] W[cols, k]^T, all row-major: op(A) op(B) with A = X and B = W transposed (the "TN"
// form cuBLASLt's FP8 GEMMs require). X and W in the dtype, or as e4m3 codes; C in the dtype. The block's operands
// are 256-byte aligned (params_conflict), so one algorithm: no 16-byte fallback.
cuda::LtGemmDesc projection_desc(DType dt, bool e4m3, int64_t rows, int64_t cols, int64_t k, float alpha) {
  cuda::LtGemmDesc d;
  d.shape.dt = dt;
  d.shape.m = rows;
  d.shape.n = cols;
  d.shape.k = k;
  d.shape.trans_b = true;
  d.shape.lda = d.shape.ldb = k;
  d.shape.ldc = cols;
  d.e4m3 = e4m3;
  d.alpha = alpha;
  d.least_align = false;
  d.label = "gated GEMM";
  return d;
}

class LtFwdGemm final : public GatedGemm {
 public:
  explicit LtFwdGemm(const cuda::LtGemmDesc& d)
      : lt_(d),
        summary_(std::string(d.e4m3 ? "cuBLASLt e4m3 algo " : "cuBLASLt algo ") + lt_.algo_id() + " ws " +
                 std::to_string(lt_.workspace_bytes() >> 10) + "K") {}

  std::size_t workspace_bytes() const override { return lt_.workspace_bytes(); }
  std::string summary() const override { return summary_; }
  void run(const void* x, const void* w, void* c, void* ws, void* stream) const override {
    lt_.run(x, w, c, ws, static_cast<cudaStream_t>(stream));
  }

 private:
  cuda::LtGemm lt_;
  std::string summary_;
};

bool misaligned(const void* p, uintptr_t align) { return reinterpret_cast<uintptr_t>(p) % align != 0; }

}  // namespace

std::unique_ptr<AttentionKernel> CudaGatedProvider::make_sdpa(const AttentionParams& /*layout*/) const {
  return make_cuda_unified();
}

std::unique_ptr<GatedGemm> CudaGatedProvider::make_gemm(DType dt, int64_t m, int64_t n, int64_t k) const {
  return std::make_unique<LtFwdGemm>(projection_desc(dt, false, m, n, k, 1.f));
}

std::unique_ptr<GatedGemm> CudaGatedProvider::make_fp8_gemm(DType dt, int64_t m, int64_t n, int64_t k,
                                                            float alpha) const {
  return std::make_unique<LtFwdGemm>(projection_desc(dt, true, m, n, k, alpha));
}

void CudaGatedProvider::quantize(DType dt, const GatedQuantizeParams& p, void* stream) const {
  cuda::launch_gated_quantize(dt, p, static_cast<cudaStream_t>(stream));
}

void CudaGatedProvider::fill_tables(const GatedTablesParams& p, void* stream) const {
  cuda::launch_gated_tables(p, static_cast<cudaStream_t>(stream));
}

void CudaGatedProvider::zero(void* dst, std::size_t bytes, void* stream) const {
  ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream)));
}

void CudaGatedProvider::norm_rope(DType dt, int d_head, const GatedNormRopeParams& p, void* stream) const {
  cuda::launch_gated_norm_rope(dt, d_head, p, static_cast<cudaStream_t>(stream));
}

void CudaGatedProvider::sigmoid_gate(DType dt, const GatedSigmoidParams& p, void* stream) const {
  cuda::launch_gated_sigmoid(dt, p, static_cast<cudaStream_t>(stream));
}

void CudaGatedProvider::lse_reorder(const GatedLseReorderParams& p, void* stream) const {
  cuda::launch_gated_lse_reorder(p, static_cast<cudaStream_t>(stream));
}

// cuBLASLt's algorithms assume 256-byte operands; the kernels load weights, cos and sin 16 bytes at a time.
std::string CudaGatedProvider::params_conflict(const GatedGeometry& g, const GatedOptions& o,
                                               const GatedBlockParams& p) const {
  const void* out = p.out;
  const void* ws = p.workspace;
  for (const void* ptr : {p.h, p.w_qkvg, p.w_o, out, ws})
    if (misaligned(ptr, cuda::LtGemm::kFastAlign))
      return "h, W_qkvg, W_o, out and workspace must be 256-byte aligned";
  if (o.qk_norm && (misaligned(p.q_norm_weight, 16) || misaligned(p.k_norm_weight, 16)))
    return "norm weights must be 16-byte aligned";
  if (o.fuse_norm_rope && g.rope_dim() > 0 && (misaligned(p.cos, 16) || misaligned(p.sin, 16)))
    return "with fuse_norm_rope, cos and sin must be 16-byte aligned";
  const GatedSaveOut& s = p.save;  // the kernels store rows 16 bytes at a time; the SDPA's TMA reads q, k, v
  for (const void* ptr : {s.q, s.k, s.v, s.gate, s.o, s.q_pre, s.k_pre})
    if (misaligned(ptr, 16)) return "the save set's q, k, v, gate, o, q_pre and k_pre must be 16-byte aligned";
  return "";
}

std::unique_ptr<GatedBlockKernel> make_cuda_gated_block() {
  return make_gated_block_kernel(std::make_shared<const CudaGatedProvider>());
}

}  // namespace attnbench
