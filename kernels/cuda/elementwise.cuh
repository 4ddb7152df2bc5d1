// The gated block's elementwise passes' shared pieces (gated_sigmoid.cu, gated_quantize.cu, gated_norm_rope.cu):
// 16-bit elements packed in words, one 16-byte store, the sigmoid gate's rule, so the gate pass and the fused gate +
// quantisation pass write the same bits, and the e4m3 codes of a pair.
#pragma once
#include <cuda_fp8.h>
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

// The e4m3 codes of lo and hi (lo in the low byte) by the hardware's conversion (cvt.rn.satfinite.e4m3x2.f32), one
// instruction a pair where the shared rule (device::e4m3_code) takes ~20 an element: the rule's bytes, nearest even
// and saturating at 448 (CudaGatedFp8.HardwarePairConversionIsTheSharedRuleOnEveryFp32), with NaN set to the rule's
// 0x7f here rather than left to the instruction.
__device__ __forceinline__ uint32_t e4m3_codes2(float lo, float hi) {
  uint32_t c = __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
  if (lo != lo) c = (c & 0xff00u) | 0x7fu;
  if (hi != hi) c = (c & 0x00ffu) | 0x7f00u;
  return c;
}

}  // namespace attnbench::cuda::dev
