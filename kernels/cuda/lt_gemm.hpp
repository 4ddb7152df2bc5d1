// C = alpha op(A) op(B) through cuBLASLt, GatedGemmShape's row-major contract (any transpose, leading dimensions),
// fp32 accumulation, C in the shape's dtype and A, B in it or as e4m3 codes. Row-major C [m, n] is column-major
// C^T = op(B)^T op(A)^T, so B is cuBLASLt's A. Handle, descriptors and algorithms are made at construction: the
// heuristic's best for 256-byte aligned operands (its default assumption) and, when asked, one for 16-byte aligned
// ones (operands at row and column offsets of larger tensors), picked per call by the pointers. run() only launches.
// The gated block's forward (gated_block.cpp) and backward (gated_block_bwd.cpp) providers wrap it.
#pragma once
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/gated_bwd_provider.hpp"

namespace attnbench::cuda {

struct LtGemmDesc {
  GatedGemmShape shape;
  bool e4m3 = false;                    // A and B as e4m3 codes (cuBLASLt's FP8 GEMMs take trans_a false, trans_b true)
  float alpha = 1.f;
  bool least_align = true;              // also an algorithm for 16-byte aligned operands
  const char* label = "cuBLASLt GEMM";  // what its errors start with
};

class LtGemm {
 public:
  static constexpr uint32_t kFastAlign = 256;  // cuBLASLt's default assumption for A, B, C and D
  static constexpr uint32_t kLeastAlign = 16;  // what the fallback algorithm asks of them

  // Throws std::invalid_argument for a shape outside the contract or one the heuristic has no algorithm for.
  explicit LtGemm(const LtGemmDesc& d);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  const LtGemmDesc& desc() const { return d_; }
  std::size_t workspace_bytes() const { return ws_bytes_; }  // the larger of the two algorithms'
  std::string algo_id() const { return id_text(fast_); }     // cuBLASLt's id of the 256-byte algorithm, or "none"
  std::string least_algo_id() const { return id_text(least_); }

  // workspace: workspace_bytes() bytes. Throws std::invalid_argument when a, b and c suit neither algorithm.
  void run(const void* a, const void* b, void* c, void* workspace, cudaStream_t stream) const;

 private:
  struct Algo {
    bool found = false;
    cublasLtMatmulAlgo_t algo{};
    std::size_t ws_bytes = 0;
  };

  void init();
  Algo heuristic(uint32_t align) const;
  const cublasLtMatmulAlgo_t& pick(const void* a, const void* b, const void* c) const;
  static std::string id_text(const Algo& a);
  void destroy();

  LtGemmDesc d_;
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t lt_a_ = nullptr, lt_b_ = nullptr, c_ = nullptr;
  Algo fast_, least_;
  std::size_t ws_bytes_ = 0;
};

}  // namespace attnbench::cuda
