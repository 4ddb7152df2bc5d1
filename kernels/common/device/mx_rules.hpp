// The block-scaled quantisers' rules, one statement for the host and the CUDA kernels (bit-identical by
// construction: integer rounding and single fp32 operations only). Formats: MXFP8 (e4m3 elements, an E8M0 scale per
// 32), MXFP4 (e2m1, E8M0 per 32), NVFP4 (e2m1, an e4m3 scale per 16). README, "The gated block's MX modes".
#pragma once

#include <string.h>

#include "host_device.hpp"

namespace attnbench::device {

enum MxKind : int { kMxfp8 = 0, kMxfp4 = 1, kNvfp4 = 2 };

ATTNBENCH_HD_INLINE int mx_block_elems(int kind) { return kind == kNvfp4 ? 16 : 32; }

ATTNBENCH_HD_INLINE unsigned f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  unsigned u;
  memcpy(&u, &x, 4);
  return u;
#endif
}

ATTNBENCH_HD_INLINE float f32_from_bits(unsigned u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, 4);
  return x;
#endif
}

// One fp32 product, rounded to nearest even (never contracted into a neighbouring add).
ATTNBENCH_HD_INLINE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

ATTNBENCH_HD_INLINE float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// 2^k for k in [-127, 127] (2^-127 is an fp32 subnormal).
ATTNBENCH_HD_INLINE float pow2f(int k) {
  return k >= -126 ? f32_from_bits(static_cast<unsigned>(k + 127) << 23) : f32_from_bits(0x00400000u);
}

// e2m1 (fp4): bit 3 the sign, bits 0-2 the index into {0, 0.5, 1, 1.5, 2, 3, 4, 6}; nearest, a tie to the even
// index; saturates at 6 (infinity too); zero of either sign and NaN are code 0.
ATTNBENCH_HD_INLINE unsigned char e2m1_code(float x) {
  const unsigned u = f32_bits(x), a_bits = u & 0x7fffffffu;
  if (a_bits > 0x7f800000u) return 0;
  const float a = f32_from_bits(a_bits);
  const unsigned c = a <= 0.25f ? 0u : a < 0.75f ? 1u : a <= 1.25f ? 2u : a < 1.75f ? 3u
                   : a <= 2.5f ? 4u : a < 3.5f ? 5u : a <= 5.f ? 6u : 7u;
  return static_cast<unsigned char>(c == 0 ? 0u : (c | ((u >> 28) & 8u)));
}

// e4m3 (fn): nearest even, saturating at +-448 (infinity too), NaN the code 0x7f; the sign is kept (-0 is 0x80).
ATTNBENCH_HD_INLINE unsigned char e4m3_code(float x) {
  const unsigned u = f32_bits(x), a = u & 0x7fffffffu, s = (u >> 24) & 0x80u;
  if (a > 0x7f800000u) return 0x7f;
  if (a >= 0x43e00000u) return static_cast<unsigned char>(s | 0x7eu);  // >= 448: the largest finite code
  if (a >= 0x3c800000u) {                                             // >= 2^-6: a normal code, 3 mantissa bits
    const unsigned r = a + 0x7ffffu + ((a >> 20) & 1u);
    return static_cast<unsigned char>(s | ((r >> 20) - (120u << 3)));  // fp32 bias 127 -> e4m3 bias 7
  }
  const int e = static_cast<int>(a >> 23) - 127;  // a subnormal code: the multiple of 2^-9 nearest a
  const int shift = 14 - e;                       // a / 2^-9 = mant24 >> shift
  if (a < 0x00800000u || shift >= 32) return static_cast<unsigned char>(s);
  const unsigned mant = (a & 0x7fffffu) | 0x800000u;
  unsigned q = mant >> shift;
  const unsigned rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<unsigned char>(s | q);
}

// An E8M0 scale: the code of the power of two at or above v = amax * inv_max (one fp32 product), biased by 127,
// clamped to [0, 254]; v <= 0 (a dead block) is code 0.
ATTNBENCH_HD_INLINE unsigned char e8m0_code(float amax, float inv_max) {
  const unsigned v = f32_bits(mul_rn(amax, inv_max));
  if (v == 0 || v > 0x7f800000u || (v >> 31)) return 0;
  const unsigned exp = v >> 23, mant = v & 0x7fffffu;
  if (exp == 0) return mant > 0x400000u ? 1 : 0;  // subnormal v: 2^-126 or 2^-127
  const int code = static_cast<int>(exp) + (mant != 0 ? 1 : 0);
  return static_cast<unsigned char>(code > 254 ? 254 : code);
}

// The fp32 reciprocals the scales are computed with: fp32(1 / 6) and fp32(1 / 448).
constexpr float kInvE2m1Max = 1.f / 6.f;
constexpr float kInvE4m3Max = 1.f / 448.f;

// A finite element's magnitude for amax (NaN and infinities do not set the scale).
ATTNBENCH_HD_INLINE float finite_abs(float x) {
  const unsigned a = f32_bits(x) & 0x7fffffffu;
  return a < 0x7f800000u ? f32_from_bits(a) : 0.f;
}

ATTNBENCH_HD_INLINE float fmax_abs(float m, float x) {
  const float a = finite_abs(x);
  return a > m ? a : m;
}

// The block's scale code from its amax: E8M0 for MX, e4m3 of max(amax * fp32(1 / 6), 2^-9) for NVFP4; 0 for a dead
// block.
ATTNBENCH_HD_INLINE unsigned char mx_scale_code(int kind, float amax) {
  if (!(amax > 0.f)) return 0;
  if (kind == kMxfp8) return e8m0_code(amax, kInvE4m3Max);
  if (kind == kMxfp4) return e8m0_code(amax, kInvE2m1Max);
  const float v = mul_rn(amax, kInvE2m1Max);
  return e4m3_code(v > 0.001953125f ? v : 0.001953125f);
}

// The value of an e4m3 code (NaN for 0x7f / 0xff).
ATTNBENCH_HD_INLINE float e4m3_value(unsigned char c) {
  const unsigned e = (c >> 3) & 15u, m = c & 7u;
  const float sign = (c & 0x80u) ? -1.f : 1.f;
  if (e == 15 && m == 7) return f32_from_bits(0x7fc00000u);
  if (e == 0) return sign * static_cast<float>(m) * 0.001953125f;
  return sign * f32_from_bits(((e + 120u) << 23) | (m << 20));
}

// One element's code under the block's scale code: x / 2^(scale - 127) (exact) for MX, x / scale (one fp32
// division) for NVFP4; e4m3 for MXFP8, e2m1 otherwise. A dead block's elements are code 0.
ATTNBENCH_HD_INLINE unsigned char mx_element_code(int kind, float x, unsigned char scale, bool dead) {
  if (dead) return 0;
  if (kind == kNvfp4) return e2m1_code(div_rn(x, e4m3_value(scale)));
  const float y = mul_rn(x, pow2f(127 - static_cast<int>(scale)));
  return kind == kMxfp8 ? e4m3_code(y) : e2m1_code(y);
}

}  // namespace attnbench::device
