// cuda.gated_block_bwd's provider (host code; declared in gated_block_bwd.hpp). GEMMs through cuBLASLt, bf16/fp16 in
// and out, fp32 accumulate, row-major as gated_block.cpp's: column-major D^T = op(B)^T op(A)^T, so B is cuBLASLt's A.
// Descriptors and algorithms are chosen at construction, two of them: the heuristic's best for 256-byte aligned
// operands (its default assumption) and one for 16-byte aligned ones, picked per call by the pointers (the
// backward's GEMMs read row and column offsets of larger tensors). Every call only launches.
#include "cuda/gated_block_bwd.hpp"

#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "attnbench/attention_bwd.hpp"
#include "cuda/gated_bwd_kernels.hpp"
#include "cuda/runtime.hpp"

namespace attnbench {
namespace {

// gated_block.cpp's GATED_LT_CHECK is file-local.
#define GATED_BWD_LT_CHECK(expr)                                                                               \
  do {                                                                                                         \
    cublasStatus_t st_ = (expr);                                                                               \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                          \
      throw std::runtime_error(std::string("gated bwd GEMM: ") + #expr + ": " + cublasLtGetStatusString(st_)); \
  } while (0)

constexpr std::size_t kMaxWorkspaceBytes = std::size_t{32} << 20;  // cuBLAS's recommendation for Hopper
constexpr uint32_t kFastAlign = 256;  // cuBLASLt's default assumption for A, B, C and D
constexpr uint32_t kLeastAlign = 16;  // what the fallback algorithm asks of them

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

std::string shape_text(const GatedGemmShape& s) {
  return std::to_string(s.m) + " x " + std::to_string(s.n) + " x " + std::to_string(s.k) + " " +
         (s.trans_a ? "t" : "n") + (s.trans_b ? "t" : "n") + " (lda " + std::to_string(s.lda) + ", ldb " +
         std::to_string(s.ldb) + ", ldc " + std::to_string(s.ldc) + ")";
}

// Why the shape is no GEMM of GatedGemmShape's contract ("" when it is one).
std::string shape_conflict(const GatedGemmShape& s) {
  if (s.dt != DType::bf16 && s.dt != DType::f16) return "dtype not bf16 or fp16";
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) return "m, n and k must be positive";
  if (s.lda < (s.trans_a ? s.m : s.k)) return s.trans_a ? "lda < m (A stored [k, m])" : "lda < k (A stored [m, k])";
  if (s.ldb < (s.trans_b ? s.k : s.n)) return s.trans_b ? "ldb < k (B stored [n, k])" : "ldb < n (B stored [k, n])";
  if (s.ldc < s.n) return "ldc < n";
  return "";
}

class LtBwdGemm final : public GatedBwdGemm {
 public:
  explicit LtBwdGemm(const GatedGemmShape& s) : s_(s) {
    if (const std::string why = shape_conflict(s); !why.empty())
      throw std::invalid_argument("gated bwd GEMM " + shape_text(s) + ": " + why);
    GATED_BWD_LT_CHECK(cublasLtCreate(&lt_));
    try {
      init();
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~LtBwdGemm() override { destroy(); }
  LtBwdGemm(const LtBwdGemm&) = delete;
  LtBwdGemm& operator=(const LtBwdGemm&) = delete;

  std::size_t workspace_bytes() const override { return ws_bytes_; }
  std::string summary() const override { return summary_; }

  void run(const void* a, const void* b, void* c, void* ws, void* stream) const override {
    const float one = 1.f, zero = 0.f;
    GATED_BWD_LT_CHECK(cublasLtMatmul(lt_, op_, &one, b, lt_a_, a, lt_b_, &zero, c, c_, c, c_, &pick(a, b, c), ws,
                                      ws_bytes_, static_cast<cudaStream_t>(stream)));
  }

 private:
  struct Algo {
    bool found = false;
    cublasLtMatmulAlgo_t algo{};
    std::size_t ws_bytes = 0;
  };

  // cuBLASLt's A is our B: op(B)^T [n, k], stored column-major as B's rows; its B is our A, op(A)^T [k, m].
  void init() {
    const cudaDataType_t t = s_.dt == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    GATED_BWD_LT_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = s_.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s_.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    GATED_BWD_LT_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    GATED_BWD_LT_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    GATED_BWD_LT_CHECK(s_.trans_b ? cublasLtMatrixLayoutCreate(&lt_a_, t, s_.k, s_.n, s_.ldb)
                                  : cublasLtMatrixLayoutCreate(&lt_a_, t, s_.n, s_.k, s_.ldb));
    GATED_BWD_LT_CHECK(s_.trans_a ? cublasLtMatrixLayoutCreate(&lt_b_, t, s_.m, s_.k, s_.lda)
                                  : cublasLtMatrixLayoutCreate(&lt_b_, t, s_.k, s_.m, s_.lda));
    GATED_BWD_LT_CHECK(cublasLtMatrixLayoutCreate(&c_, t, s_.n, s_.m, s_.ldc));
    fast_ = heuristic(kFastAlign);
    least_ = heuristic(kLeastAlign);
    if (!fast_.found && !least_.found)
      throw std::invalid_argument("gated bwd GEMM " + shape_text(s_) + ": cuBLASLt's heuristic has no algorithm");
    ws_bytes_ = std::max(fast_.ws_bytes, least_.ws_bytes);
    summary_ = "cuBLASLt " + std::string(s_.trans_a ? "t" : "n") + (s_.trans_b ? "t" : "n") + " algo " +
               algo_id(fast_) + " (16-byte: " + algo_id(least_) + ") ws " + std::to_string(ws_bytes_ >> 10) + "K";
  }

  // The heuristic's best algorithm for operands aligned to `align` bytes; none found is no error.
  Algo heuristic(uint32_t align) const {
    cublasLtMatmulPreference_t pref;
    GATED_BWD_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    const cublasStatus_t st = [&] {
      std::size_t wsb = kMaxWorkspaceBytes;
      cublasStatus_t r = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                                              sizeof wsb);
      for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        if (r == CUBLAS_STATUS_SUCCESS) r = cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align);
      if (r != CUBLAS_STATUS_SUCCESS) return r;
      return cublasLtMatmulAlgoGetHeuristic(lt_, op_, lt_a_, lt_b_, c_, c_, pref, 1, &heur, &found);
    }();
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) return {};  // the heuristic's answer for "no algorithm"
    GATED_BWD_LT_CHECK(st);
    if (found == 0) return {};
    return {true, heur.algo, heur.workspaceSize};
  }

  // The 256-byte algorithm where a, b and c allow it, else the 16-byte one.
  const cublasLtMatmulAlgo_t& pick(const void* a, const void* b, const void* c) const {
    const auto all = [&](uintptr_t bytes) { return aligned(a, bytes) && aligned(b, bytes) && aligned(c, bytes); };
    if (fast_.found && all(kFastAlign)) return fast_.algo;
    if (least_.found && all(kLeastAlign)) return least_.algo;
    throw std::invalid_argument("gated bwd GEMM " + shape_text(s_) + ": A, B and C must be " +
                                std::to_string(least_.found ? kLeastAlign : kFastAlign) + "-byte aligned");
  }

  static std::string algo_id(const Algo& a) {
    if (!a.found) return "none";
    int id = -1;
    cublasLtMatmulAlgoConfigGetAttribute(&a.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, nullptr);
    return std::to_string(id);
  }

  void destroy() {
    if (lt_a_) cublasLtMatrixLayoutDestroy(lt_a_);
    if (lt_b_) cublasLtMatrixLayoutDestroy(lt_b_);
    if (c_) cublasLtMatrixLayoutDestroy(c_);
    if (op_) cublasLtMatmulDescDestroy(op_);
    if (lt_) cublasLtDestroy(lt_);
    lt_a_ = lt_b_ = c_ = nullptr;
    op_ = nullptr;
    lt_ = nullptr;
  }

  GatedGemmShape s_;
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t lt_a_ = nullptr, lt_b_ = nullptr, c_ = nullptr;
  Algo fast_, least_;
  std::size_t ws_bytes_ = 0;
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
