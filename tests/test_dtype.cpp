// Host conversions between fp32 and the 16-bit storage dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "attnbench/dtype.hpp"

using namespace attnbench;

namespace {
// fp16 -> fp32 by the definition: (-1)^s * 2^(e-15) * 1.m, subnormals 2^-14 * 0.m.
double f16_by_definition(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = s ? -1.0 : 1.0;
  if (e == 0x1f) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}
}  // namespace

TEST(DType, Fp16ToFloatIsExactForEveryInput) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = f16_to_float(static_cast<uint16_t>(h));
    const double want = f16_by_definition(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << "h=" << h;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << h;
    }
  }
}

TEST(DType, Fp16RoundTripAndRounding) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_f16(f), h) << h;
  }
  EXPECT_EQ(float_to_f16(1.0f + 1.0f / 2048), 0x3c00);  // tie to even
  EXPECT_EQ(float_to_f16(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_EQ(float_to_f16(70000.f), 0x7c00);            // overflow to inf
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(NAN))));
}

TEST(DType, Bf16RoundTripAndRounding) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), h) << h;
  }
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);  // tie to even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_EQ(parse_dtype("fp16"), DType::f16);
  EXPECT_FALSE(parse_dtype("fp8").has_value());
}
