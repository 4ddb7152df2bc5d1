// cpu.unified's inner pieces: the branch-free exp and select the vectorised softmax needs, and the register-tiled
// fp32 micro-kernels of its two small GEMMs (S^T = K Q^T, O += P V).
#pragma once
#include <cstdint>
#include <cstring>

namespace attnbench::cpu {

// The softmax loops must vectorise under the default -ftrapping-math: g++ will not turn a branch that guards a
// float operation into a select, so these helpers keep every lane's work unconditional and do their clamping and
// masking on the bits.

// e^x for x <= 0 (every caller subtracts a running max). Cephes expf polynomial, ~1 ulp. |x| is clamped to 87 on
// the integer bits (a float compare there becomes a branch); e^-87 ~ 1e-38 stands in for 0, which no softmax
// weight can notice. A NaN argument gives NaN (set on the result's bits), so a NaN score reaches the output.
inline float fast_exp(float x) {
  int32_t ix;
  std::memcpy(&ix, &x, 4);
  ix &= 0x7fffffff;
  const int32_t nan = -static_cast<int32_t>(ix > 0x7f800000) & 0x7fc00000;
  ix = ix < 0x42ae0000 ? ix : 0x42ae0000;  // 0x42ae0000 = 87.0f
  std::memcpy(&x, &ix, 4);
  x = -x;
  const int n = static_cast<int>(x * 1.44269504088896341f - 0.5f);  // truncation of a value <= 0: round to nearest
  const float fn = static_cast<float>(n);
  const float r = (x - fn * 0.693359375f) - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const int32_t bits = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  float y = e * scale;
  int32_t iy;
  std::memcpy(&iy, &y, 4);
  iy |= nan;
  std::memcpy(&y, &iy, 4);
  return y;
}

// keep ? v : +0, as a bit mask (v may be NaN where keep is false).
inline float keep_if(bool keep, float v) {
  int32_t b;
  std::memcpy(&b, &v, 4);
  b &= -static_cast<int32_t>(keep);
  std::memcpy(&v, &b, 4);
  return v;
}

// Four floats in one register: a GCC/Clang generic vector, lowered to the target's SIMD (SSE2 with the default
// x86-64 flags, NEON on arm64). The micro-kernel needs it because the auto-vectoriser keeps a local accumulator
// array in memory (a store and a reload per multiply-add); named vectors stay in registers.
using f32x4 = float __attribute__((vector_size(16)));

// C[R x NB] (+)= A[R x K] * B[K x NB], A(r, k) = A[r * ars + k * acs] (so A may be read transposed), B and C
// row-major; R * NB / 4 accumulator registers.
template <int R, int NB, bool Accumulate>
inline void micro_kernel(int K, const float* __restrict A, int ars, int acs, const float* __restrict B, int ldb,
                         float* __restrict C, int ldc) {
  static_assert(NB % 4 == 0, "column block is whole vectors");
  constexpr int V = NB / 4;
  f32x4 c[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      if constexpr (Accumulate)
        std::memcpy(&c[r][v], C + r * ldc + 4 * v, sizeof(f32x4));
      else
        c[r][v] = f32x4{0.f, 0.f, 0.f, 0.f};
    }
  for (int k = 0; k < K; ++k) {
    f32x4 b[V];
    for (int v = 0; v < V; ++v) std::memcpy(&b[v], B + static_cast<std::size_t>(k) * ldb + 4 * v, sizeof(f32x4));
    for (int r = 0; r < R; ++r) {
      const float a = A[r * ars + k * acs];
      for (int v = 0; v < V; ++v) c[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) std::memcpy(C + r * ldc + 4 * v, &c[r][v], sizeof(f32x4));
}

// The last rows - fewer than R - of a gemm.
template <int R, int NB, bool Accumulate>
void micro_kernel_tail(int rows, int K, const float* A, int ars, int acs, const float* B, int ldb, float* C,
                       int ldc) {
  if constexpr (R > 0) {
    if (rows == R) return micro_kernel<R, NB, Accumulate>(K, A, ars, acs, B, ldb, C, ldc);
    micro_kernel_tail<R - 1, NB, Accumulate>(rows, K, A, ars, acs, B, ldb, C, ldc);
  }
}

// C[M x N] (+)= A[M x K] * B[K x N], N a multiple of NB.
template <int R, int NB, bool Accumulate>
void gemm(int M, int N, int K, const float* A, int ars, int acs, const float* B, int ldb, float* C, int ldc) {
  for (int n0 = 0; n0 < N; n0 += NB) {
    int m0 = 0;
    for (; m0 + R <= M; m0 += R)
      micro_kernel<R, NB, Accumulate>(K, A + m0 * ars, ars, acs, B + n0, ldb, C + m0 * ldc + n0, ldc);
    micro_kernel_tail<R - 1, NB, Accumulate>(M - m0, K, A + m0 * ars, ars, acs, B + n0, ldb, C + m0 * ldc + n0,
                                             ldc);
  }
}

}  // namespace attnbench::cpu
