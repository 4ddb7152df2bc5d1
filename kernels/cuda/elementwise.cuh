// The gated block's elementwise passes' shared pieces (gated_sigmoid.cu, gated_quantize.cu): 16-bit elements
// packed in words, one 16-byte store, and the sigmoid gate's rule, so the gate pass and the fused gate +
// quantisation pass write the same bits.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "cuda/storage.cuh"

namespace attnbench::cuda::dev {

// A 16-bit element from the low half of a word, and its bits: results are packed into whole words.
template <class T>
__device__ __forceinline__ T elem(uint32_t w) {
  const auto b = static_cast<unsigned short>(w);
  T t;
  memcpy(&t, &b, sizeof t);
  return t;
}
template <class T>
__device__ __forceinline__ uint32_t bits(T t) {
  unsigned short b;
  memcpy(&b, &t, sizeof b);
  return b;
}

// One 16-byte store: nvcc splits a plain uint4 store of packed results into four 4-byte ones.
__device__ __forceinline__ void store16(void* dst, const uint4& v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// round(o * sigmoid(g)) of the elements in the low halves of o and g, as its bits.
template <DType DT>
__device__ __forceinline__ uint32_t gated_bits(uint32_t o, uint32_t g) {
  using H = StorageOf<DT>;
  using T = typename H::type;
  return bits(H::from_float(H::to_float(elem<T>(o)) / (1.f + __expf(-H::to_float(elem<T>(g))))));
}

}  // namespace attnbench::cuda::dev
