// Storage dtypes of attention inputs/outputs and exact host conversions to and from fp32.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace attnbench {

enum class DType { f16, bf16 };

inline const char* dtype_name(DType d) { return d == DType::f16 ? "fp16" : "bf16"; }

inline std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "fp16" || s == "f16" || s == "half") return DType::f16;
  if (s == "bf16") return DType::bf16;
  return std::nullopt;
}

inline constexpr std::size_t dtype_bytes(DType) { return 2; }

// fp32 -> bf16, round to nearest even; NaN stays NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// fp32 -> IEEE fp16, round to nearest even, with subnormals, overflow to inf, NaN kept.
inline uint16_t float_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (absx < 0x38800000u) {                                                // subnormal or zero in fp16
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);            // below half the smallest subnormal
    const uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(absx >> 23);  // 14..24
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((absx >> 13) - (112u << 10));
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

// IEEE fp16 -> fp32, exact for every input (subnormals, inf, NaN). Written with selects, not branches, so
// loops converting tiles vectorise.
inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;  // exponent and mantissa in fp32 position
  const uint32_t exp = em & 0x0f800000u;
  uint32_t normal = em + ((127u - 15u) << 23);
  normal += exp == 0x0f800000u ? ((128u - 16u) << 23) : 0u;  // inf/NaN keep an all-ones exponent
  // zero/subnormal: (1.mantissa * 2^-14) - 2^-14 = mantissa * 2^-24, exactly
  const uint32_t biased = em + (113u << 23);
  float sub;
  std::memcpy(&sub, &biased, 4);
  sub -= 6.103515625e-05f;
  uint32_t sub_bits;
  std::memcpy(&sub_bits, &sub, 4);
  const uint32_t u = (exp == 0 ? sub_bits : normal) | sign;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// fp16 -> fp32 for all 65536 inputs, built once (the same values as f16_to_float): a lookup where a loop
// converts many scattered values.
inline const float* f16_table() {
  static const float* table = [] {
    static float t[65536];
    for (uint32_t i = 0; i < 65536; ++i) t[i] = f16_to_float(static_cast<uint16_t>(i));
    return t;
  }();
  return table;
}

inline float half_to_float(uint16_t h, DType d) { return d == DType::f16 ? f16_to_float(h) : bf16_to_float(h); }
inline uint16_t float_to_half(float f, DType d) { return d == DType::f16 ? float_to_f16(f) : float_to_bf16(f); }

}  // namespace attnbench
