// 1 / RMS of a head row of D elements held by D/8 consecutive lanes, 8 fp32 values each: each lane sums its squares
// in order, xor-shuffles add the lanes' sums, then rsqrt(mean + eps). Shared by the gated block's norm + RoPE
// kernel and the wide kernel's Q prologue, so both produce the same values.
#pragma once
#include <cuda_runtime.h>

namespace attnbench::cuda {

template <int D>
__device__ __forceinline__ float row_inv_rms(const float (&x)[8], float eps) {
  constexpr int kLanes = D / 8;
  static_assert(kLanes <= 32 && 32 % kLanes == 0, "a row's lanes sit in one warp");
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) ss += x[j] * x[j];
#pragma unroll
  for (int off = kLanes / 2; off > 0; off /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  return rsqrtf(ss / D + eps);
}

}  // namespace attnbench::cuda
