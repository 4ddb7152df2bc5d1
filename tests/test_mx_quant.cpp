// The block-scaled quantisers against their definitions: e2m1 rounding to nearest even on its grid (every tie,
// saturation, signs, zero and NaN), E8M0 as the power of two at or above amax / max (exact powers, the clamps),
// NVFP4's e4m3 scale with its 2^-9 floor, dead blocks, and round trips within half a grid step.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attnbench/mx_quant.hpp"

namespace attnbench::mx {
namespace {

TEST(MxQuant, E2m1RoundsToNearestEvenAndSaturates) {
  const std::vector<std::pair<float, float>> cases = {
      {0.f, 0.f},   {0.2f, 0.f},  {0.25f, 0.f},  {0.26f, 0.5f}, {0.75f, 1.f}, {1.25f, 1.f}, {1.75f, 2.f},
      {2.5f, 2.f},  {3.5f, 4.f},  {5.f, 4.f},    {5.01f, 6.f},  {6.f, 6.f},   {7.f, 6.f},   {1e30f, 6.f},
      {-0.75f, -1.f}, {-5.f, -4.f}, {-100.f, -6.f}};
  for (const auto& [x, want] : cases) EXPECT_EQ(e2m1_decode(e2m1_encode(x)), want) << x;
  EXPECT_EQ(e2m1_encode(-0.f), 0) << "zero is code 0 whatever its sign";
  EXPECT_EQ(e2m1_encode(-0.1f), 0);
  EXPECT_EQ(e2m1_encode(NAN), 0);
  EXPECT_EQ(e2m1_encode(-6.f), 15);
  for (int c = 0; c < 16; ++c) {
    if (c == 8) continue;  // -0 encodes as 0
    EXPECT_EQ(e2m1_encode(e2m1_decode(static_cast<uint8_t>(c))), c) << "code " << c;
  }
}

TEST(MxQuant, E8m0IsThePowerOfTwoAtOrAboveAmaxOverMax) {
  EXPECT_EQ(e8m0_scale(6.f, 6.f), 127);      // amax / 6 rounds to 1 in fp32: 2^0
  EXPECT_EQ(e8m0_scale(7.f, 6.f), 128);      // 1.17: 2^1
  EXPECT_EQ(e8m0_scale(3.f, 6.f), 126);      // 0.5 exactly: 2^-1
  EXPECT_EQ(e8m0_scale(448.f, 448.f), 127);
  EXPECT_EQ(e8m0_scale(449.f, 448.f), 128);
  EXPECT_EQ(e8m0_scale(0.f, 6.f), 0);
  EXPECT_EQ(e8m0_scale(1e-40f, 6.f), 0);     // below 2^-127: the smallest scale
  EXPECT_EQ(e8m0_scale(3e38f, 6.f), 253);    // 5e37: 2^126
  EXPECT_EQ(e8m0_scale(3e38f, 1.f), 254);    // 2^128 would be needed: the largest scale, 2^127
  EXPECT_EQ(e8m0_decode(127), 1.f);
  EXPECT_EQ(e8m0_decode(130), 8.f);
  for (float amax : {0.001f, 0.3f, 1.f, 5.9f, 6.f, 100.f, 12345.f}) {
    const float s = e8m0_decode(e8m0_scale(amax, 6.f));
    EXPECT_GE(s, amax * (1.f / 6.f)) << amax;
    EXPECT_LT(s / 2, amax * (1.f / 6.f)) << amax << ": not the smallest such power";
  }
}

TEST(MxQuant, BlocksRoundTripAndDeadBlocksAreZero) {
  std::vector<float> x(kMxBlock);
  for (int i = 0; i < kMxBlock; ++i) x[i] = std::sin(0.7f * i) * 3.7f;
  const Block b4 = quantize_mx(x.data(), kMxBlock, /*fp4=*/true);
  const Block b8 = quantize_mx(x.data(), kMxBlock, /*fp4=*/false);
  const std::vector<float> y4 = dequantize_mx(b4, true), y8 = dequantize_mx(b8, false);
  const float s4 = e8m0_decode(b4.scale);
  for (int i = 0; i < kMxBlock; ++i) {
    EXPECT_LE(std::fabs(y4[i] - x[i]), 1.0f * s4 + 1e-6f) << i;  // half the widest e2m1 step (2), times the scale
    EXPECT_LE(std::fabs(y8[i] - x[i]), 0.0625f * std::fabs(x[i]) + 1e-6f) << i;  // e4m3: 3 mantissa bits
  }
  const std::vector<float> zeros(kMxBlock, 0.f);
  for (const Block& d : {quantize_mx(zeros.data(), kMxBlock, true), quantize_nvfp4(zeros.data(), kNvfp4Block)}) {
    EXPECT_EQ(d.scale, 0);
    for (uint8_t c : d.codes) EXPECT_EQ(c, 0);
  }
  EXPECT_THROW(quantize_mx(x.data(), kMxBlock + 1, true), std::invalid_argument);
  EXPECT_THROW(quantize_mx(x.data(), kMxBlock, false, DType::e5m2), std::invalid_argument);
  EXPECT_THROW(quantize_nvfp4(x.data(), kNvfp4Block + 1), std::invalid_argument);
}

TEST(MxQuant, Nvfp4ScaleIsE4m3WithAFloor) {
  std::vector<float> x(kNvfp4Block, 0.f);
  x[3] = 6.f;  // amax / 6 = 1: scale 1.0 in e4m3
  Block b = quantize_nvfp4(x.data(), kNvfp4Block);
  EXPECT_EQ(fp8_to_float(b.scale, DType::e4m3), 1.f);
  EXPECT_EQ(e2m1_decode(b.codes[3]), 6.f);
  x[3] = 1e-5f;  // amax / 6 is below 2^-9: the floor, e4m3's smallest subnormal
  b = quantize_nvfp4(x.data(), kNvfp4Block);
  EXPECT_EQ(fp8_to_float(b.scale, DType::e4m3), 0x1p-9f);
  EXPECT_EQ(b.codes[3], 0) << "1e-5 / 2^-9 = 0.005 rounds to 0";
  for (int i = 0; i < kNvfp4Block; ++i) x[i] = 0.37f * (i - 7);
  b = quantize_nvfp4(x.data(), kNvfp4Block);
  const std::vector<float> y = dequantize_nvfp4(b);
  const float s = fp8_to_float(b.scale, DType::e4m3);
  for (int i = 0; i < kNvfp4Block; ++i) EXPECT_LE(std::fabs(y[i] - x[i]), 1.0f * s + 1e-6f) << i;
}

}  // namespace
}  // namespace attnbench::mx
