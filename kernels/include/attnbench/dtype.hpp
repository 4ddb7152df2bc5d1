// Storage dtypes of attention inputs/outputs (16-bit fp16/bf16 and the 8-bit OCP e4m3 / e5m2) and exact host
// conversions to and from fp32.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace attnbench {

enum class DType { f16, bf16, e4m3, e5m2 };

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::e4m3: return "e4m3";
    case DType::e5m2: return "e5m2";
  }
  return "?";
}

inline std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "fp16" || s == "f16" || s == "half") return DType::f16;
  if (s == "bf16") return DType::bf16;
  if (s == "e4m3" || s == "fp8_e4m3") return DType::e4m3;
  if (s == "e5m2" || s == "fp8_e5m2") return DType::e5m2;
  return std::nullopt;
}

// The names parse_dtype accepts first, for messages.
inline const char* dtype_names() { return "bf16, fp16, e4m3, e5m2"; }

inline constexpr std::size_t dtype_bytes(DType d) { return d == DType::e4m3 || d == DType::e5m2 ? 1 : 2; }
inline constexpr bool is_16bit(DType d) { return d == DType::f16 || d == DType::bf16; }

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

// 16-bit dtypes only (is_16bit): anything but fp16 reads as bf16.
inline float half_to_float(uint16_t h, DType d) { return d == DType::f16 ? f16_to_float(h) : bf16_to_float(h); }
inline uint16_t float_to_half(float f, DType d) { return d == DType::f16 ? float_to_f16(f) : float_to_bf16(f); }

// OCP 8-bit floats. e4m3 ("fn": bias 7, no infinities, max 448, NaN = S.1111.111); e5m2 (bias 15, IEEE-like, max
// 57344, inf and NaN). fp32 -> fp8 rounds to nearest even; e4m3 saturates finite overflow to +-448 (what FP8 GEMMs
// and attention kernels do), e5m2 overflows to inf; NaN stays NaN.
inline float fp8_to_float(uint8_t c, DType d) {
  const bool e4 = d == DType::e4m3;
  const int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15, emax_code = e4 ? 15 : 31;
  const int s = c >> 7, e = (c >> mbits) & emax_code, m = c & ((1 << mbits) - 1);
  const float sign = s ? -1.f : 1.f;
  if (e4 && e == 15 && m == 7) return NAN;
  if (!e4 && e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), 1 - bias - mbits);
  return sign * std::ldexp(static_cast<float>((1 << mbits) + m), e - bias - mbits);
}

inline uint8_t float_to_fp8(float f, DType d) {
  const bool e4 = d == DType::e4m3;
  const int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return e4 ? 0x7f : 0x7e;
  const float a = std::fabs(f), max_finite = e4 ? 448.f : 57344.f;
  if (!e4 && std::isinf(a)) return sign | 0x7c;
  // Scale so that the spacing of the target's grid at a's binade is 1, round half to even there, rebuild.
  const int min_exp = 1 - bias;  // smallest normal exponent
  int exp = std::isfinite(a) && a > 0 ? std::ilogb(a) : min_exp;
  if (exp < min_exp) exp = min_exp;
  const float q = std::nearbyint(std::ldexp(a, mbits - exp));  // default rounding: to nearest even
  const float r = std::ldexp(q, exp - mbits);
  if (r > max_finite || std::isinf(a)) return e4 ? (sign | 0x7e) : (sign | 0x7c);  // e4m3: +-448, e5m2: inf
  if (r == 0) return sign;
  int e = std::ilogb(r);
  int m;
  if (e < min_exp) {  // subnormal
    e = 0;
    m = static_cast<int>(std::ldexp(r, bias - 1 + mbits));
  } else {
    m = static_cast<int>(std::ldexp(r, mbits - e)) - (1 << mbits);
    e += bias;
  }
  return static_cast<uint8_t>(sign | (e << mbits) | m);
}

}  // namespace attnbench
