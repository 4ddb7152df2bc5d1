// cpu.gated_block internals that tests reach: the projection GEMM (the norm + RoPE of a head row: norm_rope.hpp).
// The harness only needs make_cpu_gated_block() (attnbench/gated_block.hpp).
#pragma once
#include <cstdint>
#include <memory>

#include "attnbench/dtype.hpp"
#include "common/gated_bwd_provider.hpp"
#include "common/gated_provider.hpp"
#include "cpu/norm_rope.hpp"

namespace attnbench::cpu {

// C[m, n] = round(sum_k A[m, k] * B[n, k]) for m < M, n < N: fp32 accumulation over dtype halves, rounded once
// to dtype. Row strides in elements; K a multiple of 4. scratch: gemm_scratch_floats(K) floats per OpenMP thread.
std::size_t gemm_scratch_floats(int K);
void gemm_abt(DType dt, int64_t M, int64_t N, int K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
              uint16_t* C, int64_t ldc, float* scratch, int threads);
// The backward's GEMMs (common/gated_bwd_provider.hpp's GatedGemmShape: any transpose, any K); the same tiles as
// gemm_abt, scratch gemm_scratch_floats(K rounded up to 4) floats per thread.
void gemm_op(const GatedGemmShape& s, const uint16_t* A, const uint16_t* B, uint16_t* C, float* scratch, int threads);
// The FP8 mode's projection: C[m, n] = round(alpha * sum_k value[A[m, k]] * value[B[n, k]]), A [M, K] and B
// [N, K] e4m3 codes, value the 256 codes' values; the same tiles and scratch as gemm_abt, C packed.
void gemm_fp8_abt(DType dt, int64_t M, int64_t N, int K, float alpha, const float* value, const uint8_t* A,
                  const uint8_t* B, uint16_t* C, float* scratch, int threads);
// The MX modes' projection (common/gated_provider.hpp's GatedMxGemmDesc): A [m, k] halves, B [n, k] MX codes and
// scales, C [m, n] packed; the same tiles and scratch as gemm_abt.
void gemm_mx_abt(const GatedMxGemmDesc& g, const uint16_t* A, const uint8_t* b_codes, const uint8_t* b_scales,
                 uint16_t* C, float* scratch, int threads);

// cpu.gated_block_bwd's provider (make_cpu_gated_block_bwd() is the orchestrator over it), for tests that wrap it.
std::shared_ptr<const GatedBwdProvider> make_cpu_gated_bwd_provider();

}  // namespace attnbench::cpu
