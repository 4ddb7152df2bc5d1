#include "attnbench/mx_quant.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace attnbench::mx {

namespace {
constexpr float kE2m1[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};

float block_amax(const float* x, int n) {
  float a = 0.f;
  for (int i = 0; i < n; ++i)
    if (std::isfinite(x[i])) a = std::fmax(a, std::fabs(x[i]));
  return a;
}

void check_size(int n, int most, const char* what) {
  if (n < 0 || n > most)
    throw std::invalid_argument(std::string(what) + ": a block holds at most " + std::to_string(most) +
                                " elements, got " + std::to_string(n));
}
}  // namespace

uint8_t e2m1_encode(float x) {
  if (!(std::fabs(x) > 0.f)) return 0;  // zero, either sign, and NaN
  const float a = std::fabs(x);
  int code = 7;  // saturates at 6
  for (int i = 0; i < 7; ++i) {
    const float mid = 0.5f * (kE2m1[i] + kE2m1[i + 1]);
    if (a < mid || (a == mid && i % 2 == 0)) {  // a tie goes to the even code
      code = i;
      break;
    }
  }
  return code == 0 ? 0 : static_cast<uint8_t>(code | (std::signbit(x) ? 8 : 0));
}

float e2m1_decode(uint8_t code) { return (code & 8 ? -1.f : 1.f) * kE2m1[code & 7]; }

uint8_t e8m0_scale(float amax, float element_max) {
  const float v = amax * (1.f / element_max);  // fp32, as the formats' definition computes it
  if (!(v > 0.f)) return 0;
  int e = 0;
  const float m = std::frexp(v, &e);  // v = m 2^e, m in [0.5, 1): 2^e >= v, 2^(e-1) when m is exactly 0.5
  if (m == 0.5f) --e;
  if (e < -127) return 0;
  if (e > 127) return 254;
  return static_cast<uint8_t>(e + 127);
}

float e8m0_decode(uint8_t code) { return std::ldexp(1.f, static_cast<int>(code) - 127); }

Block quantize_mx(const float* x, int n, bool fp4, DType element) {
  check_size(n, kMxBlock, "quantize_mx");
  if (!fp4 && element != DType::e4m3)
    throw std::invalid_argument(std::string("quantize_mx: MX codes are e2m1 or e4m3, not ") + dtype_name(element));
  Block b;
  b.codes.assign(n, 0);
  const float amax = block_amax(x, n);
  if (!(amax > 0.f)) return b;  // a dead block
  b.scale = e8m0_scale(amax, fp4 ? 6.f : 448.f);
  const int shift = 127 - static_cast<int>(b.scale);
  for (int i = 0; i < n; ++i) {
    const float y = std::ldexp(x[i], shift);  // exact: a power of two
    b.codes[i] = fp4 ? e2m1_encode(y) : float_to_fp8(y, DType::e4m3);
  }
  return b;
}

Block quantize_nvfp4(const float* x, int n) {
  check_size(n, kNvfp4Block, "quantize_nvfp4");
  Block b;
  b.codes.assign(n, 0);
  const float amax = block_amax(x, n);
  if (!(amax > 0.f)) return b;
  b.scale = float_to_fp8(std::fmax(amax * (1.f / 6.f), 0x1p-9f), DType::e4m3);
  const float s = fp8_to_float(b.scale, DType::e4m3);
  for (int i = 0; i < n; ++i) b.codes[i] = e2m1_encode(x[i] / s);
  return b;
}

std::vector<float> dequantize_mx(const Block& b, bool fp4, DType element) {
  std::vector<float> y(b.codes.size());
  const float s = e8m0_decode(b.scale);
  for (std::size_t i = 0; i < y.size(); ++i)
    y[i] = (fp4 ? e2m1_decode(b.codes[i]) : fp8_to_float(b.codes[i], element)) * s;
  return y;
}

std::vector<float> dequantize_nvfp4(const Block& b) {
  std::vector<float> y(b.codes.size());
  const float s = fp8_to_float(b.scale, DType::e4m3);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = e2m1_decode(b.codes[i]) * s;
  return y;
}

}  // namespace attnbench::mx
