// LtGemm (lt_gemm.hpp): host code over cuBLASLt.
#include "cuda/lt_gemm.hpp"

#include <algorithm>
#include <stdexcept>

// A failed cuBLASLt call: std::runtime_error naming it and its status.
#define LT_GEMM_CHECK(label, expr)                                                                                     \
  do {                                                                                                                 \
    cublasStatus_t st_ = (expr);                                                                                       \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                                  \
      throw std::runtime_error(std::string(label) + ": " + #expr + ": " + cublasLtGetStatusString(st_));               \
  } while (0)

namespace attnbench::cuda {
namespace {

constexpr std::size_t kMaxWorkspaceBytes = std::size_t{32} << 20;  // cuBLAS's recommendation for Hopper

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

}  // namespace

LtGemm::LtGemm(const LtGemmDesc& d) : d_(d) {
  if (const std::string why = shape_conflict(d.shape); !why.empty())
    throw std::invalid_argument(std::string(d.label) + " " + shape_text(d.shape) + ": " + why);
  LT_GEMM_CHECK(d_.label, cublasLtCreate(&lt_));
  try {
    init();
  } catch (...) {
    destroy();
    throw;
  }
}

LtGemm::~LtGemm() { destroy(); }

void LtGemm::run(const void* a, const void* b, void* c, void* workspace, cudaStream_t stream) const {
  const float beta = 0.f;
  LT_GEMM_CHECK(d_.label, cublasLtMatmul(lt_, op_, &d_.alpha, b, lt_a_, a, lt_b_, &beta, c, c_, c, c_,
                                         &pick(a, b, c), workspace, ws_bytes_, stream));
}

// cuBLASLt's A is our B: op(B)^T [n, k], stored column-major as B's rows; its B is our A, op(A)^T [k, m].
void LtGemm::init() {
  const GatedGemmShape& s = d_.shape;
  const cudaDataType_t t = s.dt == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const cudaDataType_t ti = d_.e4m3 ? CUDA_R_8F_E4M3 : t;
  LT_GEMM_CHECK(d_.label, cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_GEMM_CHECK(d_.label, cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT_GEMM_CHECK(d_.label, cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  LT_GEMM_CHECK(d_.label, s.trans_b ? cublasLtMatrixLayoutCreate(&lt_a_, ti, s.k, s.n, s.ldb)
                                    : cublasLtMatrixLayoutCreate(&lt_a_, ti, s.n, s.k, s.ldb));
  LT_GEMM_CHECK(d_.label, s.trans_a ? cublasLtMatrixLayoutCreate(&lt_b_, ti, s.m, s.k, s.lda)
                                    : cublasLtMatrixLayoutCreate(&lt_b_, ti, s.k, s.m, s.lda));
  LT_GEMM_CHECK(d_.label, cublasLtMatrixLayoutCreate(&c_, t, s.n, s.m, s.ldc));
  fast_ = heuristic(kFastAlign);
  if (d_.least_align) least_ = heuristic(kLeastAlign);
  if (!fast_.found && !least_.found)
    throw std::invalid_argument(std::string(d_.label) + " " + shape_text(s) +
                                ": cuBLASLt's heuristic has no algorithm");
  ws_bytes_ = std::max(fast_.ws_bytes, least_.ws_bytes);
}

// The heuristic's best algorithm for operands aligned to `align` bytes; none found is no error.
LtGemm::Algo LtGemm::heuristic(uint32_t align) const {
  cublasLtMatmulPreference_t pref;
  LT_GEMM_CHECK(d_.label, cublasLtMatmulPreferenceCreate(&pref));
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
  LT_GEMM_CHECK(d_.label, st);
  if (found == 0) return {};
  return {true, heur.algo, heur.workspaceSize};
}

// The 256-byte algorithm where a, b and c allow it, else the 16-byte one.
const cublasLtMatmulAlgo_t& LtGemm::pick(const void* a, const void* b, const void* c) const {
  const auto all = [&](uintptr_t bytes) { return aligned(a, bytes) && aligned(b, bytes) && aligned(c, bytes); };
  if (fast_.found && all(kFastAlign)) return fast_.algo;
  if (least_.found && all(kLeastAlign)) return least_.algo;
  throw std::invalid_argument(std::string(d_.label) + " " + shape_text(d_.shape) + ": A, B and C must be " +
                              std::to_string(least_.found ? kLeastAlign : kFastAlign) + "-byte aligned");
}

std::string LtGemm::id_text(const Algo& a) {
  if (!a.found) return "none";
  int id = -1;
  cublasLtMatmulAlgoConfigGetAttribute(&a.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, nullptr);
  return std::to_string(id);
}

void LtGemm::destroy() {
  if (lt_a_) cublasLtMatrixLayoutDestroy(lt_a_);
  if (lt_b_) cublasLtMatrixLayoutDestroy(lt_b_);
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (op_) cublasLtMatmulDescDestroy(op_);
  if (lt_) cublasLtDestroy(lt_);
  lt_a_ = lt_b_ = c_ = nullptr;
  op_ = nullptr;
  lt_ = nullptr;
}

}  // namespace attnbench::cuda
