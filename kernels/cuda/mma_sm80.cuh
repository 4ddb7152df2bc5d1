// Small wrappers over the Ampere-style warp-level PTX the narrow regime uses; each names the PTX it emits.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "attnbench/dtype.hpp"
#include "cuda/storage.cuh"

namespace attnbench::cuda::dev {

using cuda::StorageOf;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async.cg.shared.global [dst], [src], 16, src_bytes: src_bytes 0 zero-fills the 16 bytes (no read).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
// cp.async.commit_group
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// cp.async.wait_group N: at most N of this thread's most recent groups still pending.
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ldmatrix.sync.aligned.m8n8.x4.shared.b16
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32: c += a * b.
template <DType DT>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (DT == DType::bf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two fp32 -> one 32-bit register of two 16-bit values, `lo` in the low half (cvt.rn.{bf16x2,f16x2}.f32).
template <DType DT> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (DT == DType::bf16) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// One 32-bit register of two 16-bit values -> two fp32 (x = the low half): the inverse of pack2.
template <DType DT> __device__ __forceinline__ float2 unpack2(uint32_t v2) {
  if constexpr (DT == DType::bf16) {
    const __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&v2);
    return make_float2(__low2float(v), __high2float(v));
  } else {
    const __half2 v = *reinterpret_cast<const __half2*>(&v2);
    return make_float2(__low2float(v), __high2float(v));
  }
}

// ex2.approx.ftz.f32: 2^x (the softmax works in base 2 with scale * log2(e) folded into one FFMA).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// rcp.approx.ftz.f32: 1 / x within an ulp (1 / inf = 0).
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Butterfly reductions over the 4 lanes (a quad) that share one accumulator row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Swizzled byte offset of 16-byte chunk `chunk` in row `row` of a [rows][D] 16-bit tile: the low three chunk bits
// are XORed with row % 8, so the 8 rows an ldmatrix phase reads sit in 8 different bank groups.
template <int D> __device__ __forceinline__ uint32_t swz(int row, int chunk) {
  static_assert(D % 64 == 0, "rows must span at least 8 chunks of 16 bytes");
  return static_cast<uint32_t>(row * (D * 2) + ((chunk ^ (row & 7)) << 4));
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a [rows][D] 8-bit tile: the low three chunk bits XORed with
// row % 8, so the 8 rows an ldmatrix phase reads sit in 8 different bank groups.
template <int D> __device__ __forceinline__ uint32_t swz8(int row, int chunk) {
  static_assert(D % 128 == 0, "rows must span at least 8 chunks of 16 codes");
  return static_cast<uint32_t>(row * D + ((chunk ^ (row & 7)) << 4));
}

}  // namespace attnbench::cuda::dev
