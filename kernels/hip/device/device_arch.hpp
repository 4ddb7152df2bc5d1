// The arch policy of the hip.unified kernel bodies on a gfx9 device (CDNA2 gfx90a, CDNA3 gfx942): hardware thread
// and block indices, s_barrier, wave-local ordering, ds_bpermute shuffles and the MFMA builtins. The CPU emulator
// provides the same members (kernels/hip/emulator/arch.hpp). Device code only: included by .hip files.
#pragma once
#include <hip/hip_runtime.h>

#include "hip/device/common.hpp"

namespace attnbench::hip {

struct DeviceArch {
  using f32x4 = float __attribute__((ext_vector_type(4)));
  using f32x16 = float __attribute__((ext_vector_type(16)));

  __device__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ int block_x() const { return static_cast<int>(blockIdx.x); }
  __device__ int block_y() const { return static_cast<int>(blockIdx.y); }
  __device__ int block_z() const { return static_cast<int>(blockIdx.z); }
  __device__ void barrier() const { __syncthreads(); }
  // LDS written by some lanes of a wave and read by others: the wave runs in lockstep, so only the compiler's and
  // the LDS queue's order must hold (no s_barrier).
  __device__ void wave_sync() const {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
  }
  __device__ float shfl_xor(float v, int mask) const { return __shfl_xor(v, mask); }
  __device__ float exp2(float x) const { return exp2f(x); }
  __device__ float log2(float x) const { return log2f(x); }

  // v_mfma_f32_32x32x8_f16 / v_mfma_f32_32x32x8_bf16 (the bf16 "_1k" builtin, 4 halves per lane).
  template <DType DT>
  __device__ f32x16 mfma32(Frag a, Frag b, f32x16 c) const {
    if constexpr (DT == DType::f16) {
      using h4 = _Float16 __attribute__((ext_vector_type(4)));
      return __builtin_amdgcn_mfma_f32_32x32x8f16(bits_as<h4>(a), bits_as<h4>(b), c, 0, 0, 0);
    } else {
      using s4 = short __attribute__((ext_vector_type(4)));
      return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(bits_as<s4>(a), bits_as<s4>(b), c, 0, 0, 0);
    }
  }
  // v_mfma_f32_16x16x16_f16 / v_mfma_f32_16x16x16_bf16.
  template <DType DT>
  __device__ f32x4 mfma16(Frag a, Frag b, f32x4 c) const {
    if constexpr (DT == DType::f16) {
      using h4 = _Float16 __attribute__((ext_vector_type(4)));
      return __builtin_amdgcn_mfma_f32_16x16x16f16(bits_as<h4>(a), bits_as<h4>(b), c, 0, 0, 0);
    } else {
      using s4 = short __attribute__((ext_vector_type(4)));
      return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(bits_as<s4>(a), bits_as<s4>(b), c, 0, 0, 0);
    }
  }
};

}  // namespace attnbench::hip
