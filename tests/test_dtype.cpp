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

namespace {
// fp8 by the definition, for every code: (-1)^s 2^(e-bias) 1.m, subnormals 2^(1-bias) 0.m.
double fp8_by_definition(uint8_t c, bool e4) {
  const int mb = e4 ? 3 : 2, bias = e4 ? 7 : 15, emax = e4 ? 15 : 31;
  const int s = c >> 7, e = (c >> mb) & emax, m = c & ((1 << mb) - 1);
  const double sign = s ? -1.0 : 1.0;
  if (e4 && e == 15 && m == 7) return NAN;
  if (!e4 && e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, 1 - bias - mb);
  return sign * std::ldexp((1 << mb) + m, e - bias - mb);
}
}  // namespace

TEST(DType, Fp8NamesBytesAndParsing) {
  EXPECT_EQ(dtype_bytes(DType::e4m3), 1u);
  EXPECT_EQ(dtype_bytes(DType::e5m2), 1u);
  EXPECT_EQ(dtype_bytes(DType::bf16), 2u);
  EXPECT_EQ(parse_dtype("e4m3"), DType::e4m3);
  EXPECT_EQ(parse_dtype("fp8_e5m2"), DType::e5m2);
  EXPECT_STREQ(dtype_name(DType::e5m2), "e5m2");
  EXPECT_FALSE(is_16bit(DType::e4m3));
  EXPECT_FALSE(parse_dtype("fp8"));
}

// Every code decodes by the definition and encodes back to itself (the two zeros and NaN aside).
TEST(DType, Fp8DecodeIsExactAndEncodeRoundTripsEveryCode) {
  for (DType d : {DType::e4m3, DType::e5m2}) {
    const bool e4 = d == DType::e4m3;
    for (int c = 0; c < 256; ++c) {
      const float got = fp8_to_float(static_cast<uint8_t>(c), d);
      const double want = fp8_by_definition(static_cast<uint8_t>(c), e4);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << c;
        EXPECT_TRUE(std::isnan(fp8_to_float(float_to_fp8(got, d), d))) << c;
        continue;
      }
      ASSERT_EQ(static_cast<double>(got), want) << dtype_name(d) << " code " << c;
      EXPECT_EQ(float_to_fp8(got, d), c) << dtype_name(d) << " code " << c;
    }
  }
}

// Round to nearest even between neighbours, saturation (e4m3) or overflow to inf (e5m2), subnormals.
TEST(DType, Fp8EncodeRoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(fp8_to_float(float_to_fp8(1.0625f, DType::e4m3), DType::e4m3), 1.0f);     // tie 1 | 1.125: even
  EXPECT_EQ(fp8_to_float(float_to_fp8(1.1875f, DType::e4m3), DType::e4m3), 1.25f);    // tie 1.125 | 1.25: even
  EXPECT_EQ(fp8_to_float(float_to_fp8(1.07f, DType::e4m3), DType::e4m3), 1.125f);
  EXPECT_EQ(fp8_to_float(float_to_fp8(1e6f, DType::e4m3), DType::e4m3), 448.f);
  EXPECT_EQ(fp8_to_float(float_to_fp8(-1e6f, DType::e4m3), DType::e4m3), -448.f);
  EXPECT_EQ(fp8_to_float(float_to_fp8(464.f, DType::e4m3), DType::e4m3), 448.f);
  EXPECT_TRUE(std::isinf(fp8_to_float(float_to_fp8(1e6f, DType::e5m2), DType::e5m2)));
  EXPECT_EQ(fp8_to_float(float_to_fp8(57344.f, DType::e5m2), DType::e5m2), 57344.f);
  EXPECT_EQ(fp8_to_float(float_to_fp8(std::ldexp(1.f, -9), DType::e4m3), DType::e4m3), std::ldexp(1.f, -9));
  EXPECT_EQ(float_to_fp8(std::ldexp(1.f, -11), DType::e4m3), 0);  // half the smallest subnormal: ties to 0
  EXPECT_EQ(float_to_fp8(-0.f, DType::e5m2), 0x80);
  EXPECT_EQ(float_to_fp8(NAN, DType::e4m3) & 0x7f, 0x7f);
}
