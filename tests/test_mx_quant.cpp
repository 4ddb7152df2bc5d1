// The block-scaled quantisers against their definitions: e2m1 rounding to nearest even on its grid (every tie,
// saturation, signs, zero and NaN), E8M0 as the power of two at or above amax / max (exact powers, the clamps),
// NVFP4's e4m3 scale with its 2^-9 floor, dead blocks, and round trips within half a grid step; the shared rules
// against the host conversions and the reference's own quantisers; the row storage.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../kernels/common/device/mx_rules.hpp"
#include "attnbench/mx_quant.hpp"
#include "attnbench/mx_ref.hpp"

#ifdef ATTNBENCH_WITH_CUDA
#include <cuda_fp8.h>
#endif

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

namespace attnbench::mx {
namespace {

// The shared rule's e4m3 encoder against the host conversion of dtype.hpp (written apart), over a stride through
// every fp32 bit pattern and the edges: nearest even, the subnormal codes, saturation at 448, NaN.
TEST(MxQuant, SharedE4m3RuleMatchesTheHostConversion) {
  auto same = [](float x) {
    const uint8_t want = float_to_fp8(x, DType::e4m3), got = device::e4m3_code(x);
    if (std::isnan(x)) return got == 0x7f;
    return got == want;
  };
  for (uint64_t u = 0; u < (1ull << 32); u += 4093) {
    const uint32_t b = static_cast<uint32_t>(u);
    float x;
    std::memcpy(&x, &b, 4);
    ASSERT_TRUE(same(x)) << std::hexfloat << x;
  }
  for (float x : {0.f, -0.f, 448.f, 464.f, 463.99f, 480.f, -1e30f, INFINITY, -INFINITY, 0x1p-9f, 0x1p-10f,
                  0x1.8p-10f, 0x1p-6f, 0x1.ep-7f, 1.0625f, 1.1875f, 3e-39f})
    EXPECT_TRUE(same(x)) << std::hexfloat << x;
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7f) != 0x7f) {
      EXPECT_EQ(device::e4m3_value(static_cast<uint8_t>(c)), fp8_to_float(c, DType::e4m3)) << c;
    }
}

#ifdef ATTNBENCH_WITH_CUDA
// The toolkit's satfinite e4m3 pair conversion (the hardware's instruction on the device, which the FP8 gated block's
// passes use: cuda/elementwise.cuh) is the shared rule on every fp32 input, through its host definition; NaN, which
// the passes set to 0x7f themselves, apart. A stride through every bit pattern, in both bytes of the pair.
TEST(MxQuant, ToolkitPairConversionIsTheSharedE4m3Rule) {
  for (uint64_t u = 0; u < (1ull << 32); u += 61) {
    const uint32_t b = static_cast<uint32_t>(u), nb = ~b;
    float lo, hi;
    std::memcpy(&lo, &b, 4);
    std::memcpy(&hi, &nb, 4);
    const unsigned pair = __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
    if (!std::isnan(lo)) {
      ASSERT_EQ(pair & 0xffu, device::e4m3_code(lo)) << std::hexfloat << lo;
    }
    if (!std::isnan(hi)) {
      ASSERT_EQ(pair >> 8, device::e4m3_code(hi)) << std::hexfloat << hi;
    }
  }
}
#endif

// Rows with every kind of block: seeded normals at several magnitudes, exact grid ties times a power of two, a
// dead block, NaN and infinities among finite values, values near the E8M0 clamps.
std::vector<float> edge_rows(int cols, int rows) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> x(static_cast<std::size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      float& v = x[static_cast<std::size_t>(r) * cols + c];
      const int kind = r % 6;
      v = n(rng) * std::ldexp(1.f, (r * 7) % 40 - 20);
      if (kind == 1) v = std::ldexp(0.25f * static_cast<float>(c % 25) - 3.f, r % 9 - 4);  // ties
      if (kind == 2 && c < 32) v = 0.f;                                                     // a dead block
      if (kind == 3 && c % 11 == 0) v = c % 2 ? NAN : (c % 3 ? INFINITY : -INFINITY);
      if (kind == 4) v = n(rng) * 1e-38f;
      if (kind == 5) v = n(rng) * 3e37f;
    }
  return x;
}

// The reference's quantisers (reference/mx_ref.cpp, another statement of the formats) agree with the kernels'
// shared rules value for value, under a pre-scale of 1 and of 0.37.
TEST(MxQuant, ReferenceQuantiserMatchesTheSharedRules) {
  const int cols = 128, rows = 24;
  for (MxFormat f : {MxFormat::mxfp8, MxFormat::mxfp4, MxFormat::nvfp4})
    for (float pre : {1.f, 0.37f}) {
      std::vector<float> a = edge_rows(cols, rows), b = a;
      for (int r = 0; r < rows; ++r) {
        fake_quantize_row(f, a.data() + r * cols, cols, pre);
        reference::mx_fake_quantize(f, b.data() + r * cols, cols, pre);
      }
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) || std::isnan(b[i])) {
          EXPECT_TRUE(std::isnan(a[i]) && std::isnan(b[i])) << mx_format_name(f) << " element " << i;
          continue;
        }
        ASSERT_EQ(a[i], b[i]) << mx_format_name(f) << " pre " << pre << " element " << i;
      }
    }
}

// The storage: codes row-major, fp4 two per byte with element 2i in the low nibble, one scale byte per block;
// dequantize_row inverts it; rows of a partial block are refused.
TEST(MxQuant, RowStorageAndItsInverse) {
  const int cols = 64, rows = 3;
  std::vector<float> x(rows * cols);
  for (int i = 0; i < rows * cols; ++i) x[i] = 0.1f * static_cast<float>(i % 17) - 0.8f;
  for (MxFormat f : {MxFormat::mxfp8, MxFormat::mxfp4, MxFormat::nvfp4}) {
    std::vector<uint8_t> codes(mx_code_bytes(f, rows, cols)), scales(mx_scale_bytes(f, rows, cols));
    EXPECT_EQ(codes.size(), static_cast<std::size_t>(mx_is_fp4(f) ? rows * cols / 2 : rows * cols));
    EXPECT_EQ(scales.size(), static_cast<std::size_t>(rows * cols / mx_block_elems(f)));
    quantize_rows(f, x.data(), rows, cols, 1.f, codes.data(), scales.data());
    std::vector<float> want = x, got(cols);
    for (int r = 0; r < rows; ++r) {
      fake_quantize_row(f, want.data() + r * cols, cols, 1.f);
      dequantize_row(f, codes.data() + mx_code_bytes(f, r, cols), scales.data() + mx_scale_bytes(f, r, cols), cols,
                     1.f, got.data());
      for (int c = 0; c < cols; ++c) ASSERT_EQ(got[c], want[r * cols + c]) << mx_format_name(f) << " " << r << "," << c;
    }
    if (mx_is_fp4(f)) {  // element 0 in the low nibble of byte 0, element 1 in the high one
      const Block b = f == MxFormat::nvfp4 ? quantize_nvfp4(x.data(), kNvfp4Block) : quantize_mx(x.data(), kMxBlock, true);
      EXPECT_EQ(codes[0], b.codes[0] | (b.codes[1] << 4));
    }
    EXPECT_THROW(quantize_rows(f, x.data(), 1, cols - 8, 1.f, codes.data(), scales.data()), std::invalid_argument);
  }
}

}  // namespace
}  // namespace attnbench::mx
