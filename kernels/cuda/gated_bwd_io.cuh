// The gated backward kernels' loads and stores of V consecutive 16-bit elements as fp32 (gated_bwd_kernels.cu,
// gated_norm_rope_bwd.cu): one 16-byte access when V is 8 (the caller guarantees the alignment), V scalar ones
// otherwise. Each value is rounded once, on store.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/elementwise.cuh"
#include "cuda/storage.cuh"

namespace attnbench::cuda::dev {

template <DType DT, int V>
__device__ __forceinline__ void load_f32(const void* src, float (&x)[V]) {
  using H = StorageOf<DT>;
  using T = typename H::type;
  static_assert(V == 1 || V == 8, "one element or one 16-byte chunk");
  if constexpr (V == 8) {
    const uint4 raw = *static_cast<const uint4*>(src);
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      x[2 * j] = H::to_float(elem<T>(w[j]));
      x[2 * j + 1] = H::to_float(elem<T>(w[j] >> 16));
    }
  } else {
    x[0] = H::to_float(*static_cast<const T*>(src));
  }
}

template <DType DT, int V>
__device__ __forceinline__ void store_f32(void* dst, const float (&x)[V]) {
  using H = StorageOf<DT>;
  using T = typename H::type;
  if constexpr (V == 8) {
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) w[j] = bits(H::from_float(x[2 * j])) | bits(H::from_float(x[2 * j + 1])) << 16;
    store16(dst, make_uint4(w[0], w[1], w[2], w[3]));
  } else {
    *static_cast<T*>(dst) = H::from_float(x[0]);
  }
}

// Whether p is a multiple of `bytes` (a power of two) from address 0.
__host__ __device__ inline bool aligned_to(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

}  // namespace attnbench::cuda::dev
