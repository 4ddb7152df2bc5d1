// cpu.gated_block internals that tests reach: the norm + RoPE of one head row and the projection GEMM.
// The harness only needs make_cpu_gated_block() (attnbench/gated_block.hpp).
#pragma once
#include <cstdint>

#include "attnbench/dtype.hpp"

namespace attnbench::cpu {

// One head row x[0, d) in place, fp32: when `norm`, x *= rsqrt(mean(x^2) + eps) * (offset + w); then rotate-half
// RoPE over [0, rope_dim): with h = rope_dim / 2, x[i] = x[i] cos[i] - x[i + h] sin[i] and
// x[i + h] = x[i + h] cos[i + h] + x[i] sin[i + h] for i < h (cos, sin: rope_dim floats of this token).
void norm_rope_row(float* x, int d, bool norm, const float* w, float offset, float eps, int rope_dim,
                   const float* cos, const float* sin);

// C[m, n] = round(sum_k A[m, k] * B[n, k]) for m < M, n < N: fp32 accumulation over dtype halves, rounded once
// to dtype. Row strides in elements; K a multiple of 4. scratch: gemm_scratch_floats(K) floats per OpenMP thread.
std::size_t gemm_scratch_floats(int K);
void gemm_abt(DType dt, int64_t M, int64_t N, int K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
              uint16_t* C, int64_t ldc, float* scratch, int threads);

}  // namespace attnbench::cpu
