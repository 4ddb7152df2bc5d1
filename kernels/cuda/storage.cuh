// The device storage type of each dtype: the 16-bit ones with their fp32 conversions, the 8-bit K/V codes.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "attnbench/dtype.hpp"

namespace attnbench::cuda {

template <DType DT> struct StorageOf;
template <> struct StorageOf<DType::f16> {
  using type = __half;
  __device__ static float to_float(type v) { return __half2float(v); }
  __device__ static type from_float(float v) { return __float2half_rn(v); }
};
template <> struct StorageOf<DType::bf16> {
  using type = __nv_bfloat16;
  __device__ static float to_float(type v) { return __bfloat162float(v); }
  __device__ static type from_float(float v) { return __float2bfloat16_rn(v); }
};

// 8-bit K/V codes: bytes in memory, widened to the 16-bit compute dtype in shared memory (feature_tile.cuh).
template <> struct StorageOf<DType::e4m3> {
  using type = unsigned char;
  static constexpr __nv_fp8_interpretation_t kind = __NV_E4M3;
};
template <> struct StorageOf<DType::e5m2> {
  using type = unsigned char;
  static constexpr __nv_fp8_interpretation_t kind = __NV_E5M2;
};

}  // namespace attnbench::cuda
