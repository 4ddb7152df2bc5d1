#include "attnbench/mx_ref.hpp"

#include <algorithm>
#include <cmath>

#include "attnbench/dtype.hpp"

namespace attnbench::reference {
namespace {

// The e2m1 grid point nearest a (a >= 0), a tie to the even index, saturating at 6.
float e2m1_nearest(float a) {
  static const float grid[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  if (std::isnan(a)) return 0.f;
  if (a >= 6.f) return 6.f;  // infinity too
  int best = 7;
  for (int i = 6; i >= 0; --i) {
    const float d = std::fabs(a - grid[i]), db = std::fabs(a - grid[best]);
    if (d < db || (d == db && i % 2 == 0)) best = i;
  }
  return grid[best];
}

// The least power of two at or above v > 0, as an exponent clamped to E8M0's [-127, 127].
int pow2_at_or_above(float v) {
  int e = std::ilogb(v);
  if (std::ldexp(1.f, e) < v) ++e;
  return e < -127 ? -127 : e > 127 ? 127 : e;
}

float element(mx::MxFormat f, float y) {
  if (f == mx::MxFormat::mxfp8) return fp8_to_float(float_to_fp8(y, DType::e4m3), DType::e4m3);
  return std::copysign(e2m1_nearest(std::fabs(y)), y);
}

}  // namespace

void mx_fake_quantize(mx::MxFormat f, float* x, int64_t n, float pre_scale) {
  const int blk = mx::mx_block_elems(f);
  for (int64_t b0 = 0; b0 < n; b0 += blk) {
    float y[32], amax = 0.f;
    for (int i = 0; i < blk; ++i) {
      y[i] = x[b0 + i] * pre_scale;
      if (std::isfinite(y[i])) amax = std::max(amax, std::fabs(y[i]));
    }
    float scale = 0.f;
    if (amax > 0.f && f == mx::MxFormat::nvfp4)
      scale = fp8_to_float(float_to_fp8(std::max(amax * (1.f / 6.f), 0x1p-9f), DType::e4m3), DType::e4m3);
    else if (amax > 0.f)
      scale = std::ldexp(1.f, pow2_at_or_above(amax * (f == mx::MxFormat::mxfp8 ? 1.f / 448.f : 1.f / 6.f)));
    for (int i = 0; i < blk; ++i) {
      const float q = scale > 0.f ? element(f, y[i] / scale) * scale : 0.f;
      x[b0 + i] = q / pre_scale;
    }
  }
}

}  // namespace attnbench::reference
