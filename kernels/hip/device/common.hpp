// What the hip.unified kernel bodies share on both of their compilers (clang for gfx9 devices, the host compiler
// for the CPU emulator): 16-bit conversions, loads and stores of packed halves, the packed-row map.
// A kernel body is a template over an arch policy `A` (device_arch.hpp on the GPU, emulator/arch.hpp on the CPU)
// that provides the thread and block indices, barriers, shuffles, exp2/log2 and the MFMA atoms.
#pragma once
#include <cstdint>

#include "attnbench/dtype.hpp"
#include "common/device/host_device.hpp"

#if defined(__HIP__)
#define HIP_UNROLL _Pragma("unroll")
#else
#define HIP_UNROLL
#endif

namespace attnbench::hip {

// Four 16-bit values packed in 64 bits: an MFMA operand of one lane, as it is loaded and as the atoms take it.
using Frag = uint64_t;

template <class To, class From>
ATTNBENCH_HD_INLINE To bits_as(const From& v) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To t;
  __builtin_memcpy(&t, &v, sizeof(To));
  return t;
}

template <DType DT>
ATTNBENCH_HD_INLINE float half_to_float(uint16_t h) {
  if constexpr (DT == DType::f16) {
    return static_cast<float>(bits_as<_Float16>(h));
  } else {
    return bits_as<float>(static_cast<uint32_t>(h) << 16);
  }
}

// Round to nearest even (gfx942 has no bf16 convert instruction); NaN stays NaN.
template <DType DT>
ATTNBENCH_HD_INLINE uint16_t float_to_half(float f) {
  if constexpr (DT == DType::f16) {
    return bits_as<uint16_t>(static_cast<_Float16>(f));
  } else {
    uint32_t u = bits_as<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
}

template <DType DT>
ATTNBENCH_HD_INLINE Frag pack4(float x0, float x1, float x2, float x3) {
  return static_cast<Frag>(float_to_half<DT>(x0)) | static_cast<Frag>(float_to_half<DT>(x1)) << 16 |
         static_cast<Frag>(float_to_half<DT>(x2)) << 32 | static_cast<Frag>(float_to_half<DT>(x3)) << 48;
}
ATTNBENCH_HD_INLINE uint16_t frag_half(Frag f, int i) { return static_cast<uint16_t>(f >> (16 * i)); }

// Aligned loads and stores: a plain access on the device (one instruction), memcpy on the host (no aliasing UB).
ATTNBENCH_HD_INLINE Frag load_frag(const uint16_t* p) {
#if defined(__HIP_DEVICE_COMPILE__)
  return *reinterpret_cast<const Frag*>(p);
#else
  Frag f;
  __builtin_memcpy(&f, p, sizeof f);
  return f;
#endif
}

struct alignas(16) Chunk {  // 8 halves: one 16-byte global load per thread
  Frag lo, hi;
  ATTNBENCH_HD_INLINE uint16_t get(int e) const { return frag_half(e < 4 ? lo : hi, e % 4); }
};
ATTNBENCH_HD_INLINE Chunk load_chunk(const uint16_t* p) {
#if defined(__HIP_DEVICE_COMPILE__)
  return *reinterpret_cast<const Chunk*>(p);
#else
  Chunk c;
  __builtin_memcpy(&c, p, sizeof c);
  return c;
#endif
}
ATTNBENCH_HD_INLINE void store_chunk(uint16_t* p, const Chunk& c) {
#if defined(__HIP_DEVICE_COMPILE__)
  *reinterpret_cast<Chunk*>(p) = c;
#else
  __builtin_memcpy(p, &c, sizeof c);
#endif
}

// The packed rows of one (sequence, kv head): row r is token r / group of the sequence, query head
// kvh * group + r % group, so a workgroup's rows share the K/V they read.
struct PackedRows {
  int q_start = 0, q_len = 0, kv_len = 0, group = 1, kvh = 0;
  ATTNBENCH_HD_INLINE int count() const { return q_len * group; }
  ATTNBENCH_HD_INLINE int token(int r) const { return r / group; }
  ATTNBENCH_HD_INLINE int head(int r) const { return kvh * group + r % group; }
};

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -__builtin_huge_valf();
ATTNBENCH_HD_INLINE float max2(float x, float y) { return x < y ? y : x; }

}  // namespace attnbench::hip
