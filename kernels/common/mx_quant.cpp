#include "attnbench/mx_quant.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "device/mx_rules.hpp"

namespace attnbench::mx {

namespace {
constexpr float kE2m1[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};

void check_size(int n, int most, const char* what) {
  if (n < 0 || n > most)
    throw std::invalid_argument(std::string(what) + ": a block holds at most " + std::to_string(most) +
                                " elements, got " + std::to_string(n));
}

int kind_of(MxFormat f) {
  return f == MxFormat::mxfp8 ? device::kMxfp8 : f == MxFormat::mxfp4 ? device::kMxfp4 : device::kNvfp4;
}

// One block of n values (get(i) the fp32 value times pre_scale): its scale code, and each code through put(i, c).
template <class Get, class Put>
uint8_t quantize_block(int kind, int n, Get get, Put put) {
  float amax = 0.f;
  for (int i = 0; i < n; ++i) amax = device::fmax_abs(amax, get(i));
  const uint8_t scale = device::mx_scale_code(kind, amax);
  const bool dead = !(amax > 0.f);
  for (int i = 0; i < n; ++i) put(i, device::mx_element_code(kind, get(i), scale, dead));
  return scale;
}

float scale_value(MxFormat f, uint8_t code) {
  return f == MxFormat::nvfp4 ? device::e4m3_value(code) : e8m0_decode(code);
}

void check_cols(MxFormat f, int64_t cols) {
  if (cols % mx_block_elems(f) != 0)
    throw std::invalid_argument(std::string(mx_format_name(f)) + ": a row of " + std::to_string(cols) +
                                " elements is not whole blocks of " + std::to_string(mx_block_elems(f)));
}

template <class Value>
void quantize_rows_of(MxFormat f, Value value, int64_t rows, int64_t cols, float pre_scale, uint8_t* codes,
                      uint8_t* scales) {
  check_cols(f, cols);
  const int blk = mx_block_elems(f), kind = kind_of(f);
  const int64_t code_row = mx_code_bytes(f, 1, cols), nb = cols / blk;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c0 = b * blk;
      uint8_t* crow = codes + r * code_row;
      scales[r * nb + b] = quantize_block(
          kind, blk, [&](int i) { return device::mul_rn(value(r * cols + c0 + i), pre_scale); },
          [&](int i, uint8_t c) {
            const int64_t col = c0 + i;
            if (!mx_is_fp4(f)) crow[col] = c;
            else if (col % 2 == 0) crow[col / 2] = c;
            else crow[col / 2] = static_cast<uint8_t>(crow[col / 2] | (c << 4));
          });
    }
}
}  // namespace

uint8_t e2m1_encode(float x) { return device::e2m1_code(x); }

float e2m1_decode(uint8_t code) { return (code & 8 ? -1.f : 1.f) * kE2m1[code & 7]; }

uint8_t e8m0_scale(float amax, float element_max) {
  return amax > 0.f ? device::e8m0_code(amax, 1.f / element_max) : 0;
}

float e8m0_decode(uint8_t code) { return std::ldexp(1.f, static_cast<int>(code) - 127); }

Block quantize_mx(const float* x, int n, bool fp4, DType element) {
  check_size(n, kMxBlock, "quantize_mx");
  if (!fp4 && element != DType::e4m3)
    throw std::invalid_argument(std::string("quantize_mx: MX codes are e2m1 or e4m3, not ") + dtype_name(element));
  Block b;
  b.codes.assign(n, 0);
  b.scale = quantize_block(fp4 ? device::kMxfp4 : device::kMxfp8, n, [&](int i) { return x[i]; },
                           [&](int i, uint8_t c) { b.codes[i] = c; });
  return b;
}

Block quantize_nvfp4(const float* x, int n) {
  check_size(n, kNvfp4Block, "quantize_nvfp4");
  Block b;
  b.codes.assign(n, 0);
  b.scale = quantize_block(device::kNvfp4, n, [&](int i) { return x[i]; }, [&](int i, uint8_t c) { b.codes[i] = c; });
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

const char* mx_format_name(MxFormat f) {
  switch (f) {
    case MxFormat::mxfp8: return "mxfp8";
    case MxFormat::mxfp4: return "mxfp4";
    case MxFormat::nvfp4: return "nvfp4";
  }
  return "?";
}

std::optional<MxFormat> parse_mx_format(const std::string& s) {
  if (s == "mxfp8") return MxFormat::mxfp8;
  if (s == "mxfp4") return MxFormat::mxfp4;
  if (s == "nvfp4") return MxFormat::nvfp4;
  return std::nullopt;
}

int mx_block_elems(MxFormat f) { return device::mx_block_elems(kind_of(f)); }

int64_t mx_code_bytes(MxFormat f, int64_t rows, int64_t cols) { return rows * (mx_is_fp4(f) ? cols / 2 : cols); }

int64_t mx_scale_bytes(MxFormat f, int64_t rows, int64_t cols) { return rows * (cols / mx_block_elems(f)); }

void quantize_rows(MxFormat f, const float* x, int64_t rows, int64_t cols, float pre_scale, uint8_t* codes,
                   uint8_t* scales) {
  quantize_rows_of(f, [x](int64_t i) { return x[i]; }, rows, cols, pre_scale, codes, scales);
}

void quantize_rows(MxFormat f, DType dt, const uint16_t* x, int64_t rows, int64_t cols, float pre_scale,
                   uint8_t* codes, uint8_t* scales) {
  if (!is_16bit(dt)) throw std::invalid_argument(std::string("quantize_rows: a 16-bit input, not ") + dtype_name(dt));
  quantize_rows_of(f, [x, dt](int64_t i) { return half_to_float(x[i], dt); }, rows, cols, pre_scale, codes, scales);
}

void dequantize_row(MxFormat f, const uint8_t* codes, const uint8_t* scales, int64_t cols, float post_scale,
                    float* out) {
  const int blk = mx_block_elems(f);
  for (int64_t c = 0; c < cols; ++c) {
    const float s = scale_value(f, scales[c / blk]) * post_scale;
    const float v = !mx_is_fp4(f) ? device::e4m3_value(codes[c])
                                  : e2m1_decode(static_cast<uint8_t>((codes[c / 2] >> (4 * (c % 2))) & 15));
    out[c] = v * s;
  }
}

void fake_quantize_row(MxFormat f, float* x, int64_t n, float pre_scale) {
  check_cols(f, n);
  const int blk = mx_block_elems(f), kind = kind_of(f);
  for (int64_t b0 = 0; b0 < n; b0 += blk) {
    float* xb = x + b0;
    uint8_t codes[32];
    const uint8_t scale = quantize_block(kind, blk, [&](int i) { return device::mul_rn(xb[i], pre_scale); },
                                         [&](int i, uint8_t c) { codes[i] = c; });
    const float s = scale_value(f, scale);
    for (int i = 0; i < blk; ++i) {
      const float v = f == MxFormat::mxfp8 ? device::e4m3_value(codes[i]) : e2m1_decode(codes[i]);
      xb[i] = v * s / pre_scale;
    }
  }
}

}  // namespace attnbench::mx
