// The device storage type of each 16-bit dtype and its fp32 conversions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

}  // namespace attnbench::cuda
