// cuda.gated_block's provider (host code; declared in gated_provider.hpp): the projections through cuBLASLt,
// bf16/fp16 in, fp32 accumulate, descriptors and heuristic algorithm chosen at construction; the norm+RoPE,
// sigmoid-gate and table kernels; cuda.unified as the SDPA, its K/V "cache" the projection viewed as blocks of
// block_size tokens with an identity block table (no repacking copy). Every call only launches: a block's
// execute() captures into a graph.
#include <cublasLt.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "common/gated_orchestrator.hpp"
#include "cuda/gated_kernels.hpp"
#include "cuda/gated_provider.hpp"
#include "cuda/runtime.hpp"

namespace attnbench {
namespace {

#define GATED_LT_CHECK(expr)                                                                              \
  do {                                                                                                    \
    cublasStatus_t st_ = (expr);                                                                          \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                     \
      throw std::runtime_error(std::string("gated GEMM: ") + #expr + ": " + cublasLtGetStatusString(st_)); \
  } while (0)

constexpr std::size_t kGemmWorkspaceBytes = std::size_t{32} << 20;
constexpr uintptr_t kGemmAlign = 256;  // cuBLASLt's default alignment assumption for A, B, C, D

// C[rows, cols] = alpha * X[rows, k] * W[cols, k]^T, all row-major: column-major D (cols x rows) = op_T(W) * X
// (the "TN" form cuBLASLt's FP8 GEMMs require). X and W in `in` (the dtype, or e4m3 codes), C in the dtype.
class LtGemm final : public GatedGemm {
 public:
  LtGemm(DType dt, DType in, int64_t rows, int64_t cols, int64_t k, float alpha) : alpha_(alpha) {
    GATED_LT_CHECK(cublasLtCreate(&lt_));
    try {
      init(dt, in, rows, cols, k);
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~LtGemm() override { destroy(); }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  std::size_t workspace_bytes() const override { return ws_bytes_; }
  std::string summary() const override { return summary_; }

  void run(const void* x, const void* w, void* c, void* ws, void* stream) const override {
    const float beta = 0.f;
    GATED_LT_CHECK(cublasLtMatmul(lt_, op_, &alpha_, w, a_, x, b_, &beta, c, c_, c, c_, &algo_, ws, ws_bytes_,
                                  static_cast<cudaStream_t>(stream)));
  }

 private:
  void init(DType dt, DType in, int64_t rows, int64_t cols, int64_t k) {
    const cudaDataType_t t = dt == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const cudaDataType_t ti = in == DType::e4m3 ? CUDA_R_8F_E4M3 : t;
    GATED_LT_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    GATED_LT_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    GATED_LT_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    GATED_LT_CHECK(cublasLtMatrixLayoutCreate(&a_, ti, k, cols, k));
    GATED_LT_CHECK(cublasLtMatrixLayoutCreate(&b_, ti, k, rows, k));
    GATED_LT_CHECK(cublasLtMatrixLayoutCreate(&c_, t, cols, rows, cols));
    cublasLtMatmulPreference_t pref;
    GATED_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    std::size_t wsb = kGemmWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    const cublasStatus_t st = [&] {
      cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                                              sizeof wsb);
      if (s != CUBLAS_STATUS_SUCCESS) return s;
      return cublasLtMatmulAlgoGetHeuristic(lt_, op_, a_, b_, c_, c_, pref, 1, &heur, &found);
    }();
    cublasLtMatmulPreferenceDestroy(pref);
    GATED_LT_CHECK(st);
    if (found == 0)
      throw std::runtime_error("gated GEMM: cuBLASLt has no algorithm for the " + std::to_string(rows) + " x " +
                               std::to_string(cols) + " x " + std::to_string(k) + " GEMM");
    algo_ = heur.algo;
    ws_bytes_ = heur.workspaceSize;
    int id = -1;
    cublasLtMatmulAlgoConfigGetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, nullptr);
    summary_ = std::string(in == DType::e4m3 ? "cuBLASLt e4m3 algo " : "cuBLASLt algo ") + std::to_string(id) + " ws " +
               std::to_string(ws_bytes_ >> 10) + "K";
  }

  void destroy() {
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (c_) cublasLtMatrixLayoutDestroy(c_);
    if (op_) cublasLtMatmulDescDestroy(op_);
    if (lt_) cublasLtDestroy(lt_);
    a_ = b_ = c_ = nullptr;
    op_ = nullptr;
    lt_ = nullptr;
  }

  float alpha_;
  cublasLtHandle_t lt_ = nullptr;
  std::string summary_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  std::size_t ws_bytes_ = 0;
};

bool misaligned(const void* p, uintptr_t align) { return reinterpret_cast<uintptr_t>(p) % align != 0; }

}  // namespace

std::unique_ptr<AttentionKernel> CudaGatedProvider::make_sdpa(const AttentionParams& /*layout*/) const {
  return make_cuda_unified();
}

std::unique_ptr<GatedGemm> CudaGatedProvider::make_gemm(DType dt, int64_t m, int64_t n, int64_t k) const {
  return std::make_unique<LtGemm>(dt, dt, m, n, k, 1.f);
}

std::unique_ptr<GatedGemm> CudaGatedProvider::make_fp8_gemm(DType dt, int64_t m, int64_t n, int64_t k,
                                                            float alpha) const {
  return std::make_unique<LtGemm>(dt, DType::e4m3, m, n, k, alpha);
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
    if (misaligned(ptr, kGemmAlign)) return "h, W_qkvg, W_o, out and workspace must be 256-byte aligned";
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
