// Block-scaled quantisers of the MX and NVFP4 formats on the host, over the shared rules
// (kernels/common/device/mx_rules.hpp, which the CUDA quantiser runs too): e2m1 (fp4) codes rounded to nearest even
// on the grid {0, 0.5, 1, 1.5, 2, 3, 4, 6} and saturating at 6; an MX block's E8M0 scale, the power of two at or
// above amax · fp32(1 / max) of its element format (6 for e2m1, 448 for e4m3); an NVFP4 block's e4m3 scale,
// max(amax · fp32(1 / 6), 2^-9). A dead block (amax 0) is all code 0, scale code 0.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnbench/dtype.hpp"

namespace attnbench::mx {

inline constexpr int kMxBlock = 32;     // elements per MX scale
inline constexpr int kNvfp4Block = 16;  // elements per NVFP4 scale

// e2m1: bit 3 the sign, bits 0-2 the index into the magnitude grid. Zero is code 0 whatever its sign; NaN is 0.
uint8_t e2m1_encode(float x);
float e2m1_decode(uint8_t code);

// E8M0: the code is the exponent biased by 127 (code 0 is 2^-127, 254 is 2^127; 255, NaN, is never produced).
uint8_t e8m0_scale(float amax, float element_max);
float e8m0_decode(uint8_t code);

// One block quantised: codes (e2m1 in the low nibble, or e4m3) and the scale's code.
struct Block {
  std::vector<uint8_t> codes;
  uint8_t scale = 0;
};
// MXFP4 (e2m1 elements) or MXFP8 (element = DType::e4m3) over x[0, n), n <= kMxBlock: each x / 2^(scale - 127).
Block quantize_mx(const float* x, int n, bool fp4, DType element = DType::e4m3);
// NVFP4 over x[0, n), n <= kNvfp4Block: e2m1 codes of x / scale, the scale an e4m3 code.
Block quantize_nvfp4(const float* x, int n);
// The block's values back in fp32.
std::vector<float> dequantize_mx(const Block& b, bool fp4, DType element = DType::e4m3);
std::vector<float> dequantize_nvfp4(const Block& b);

// A block-scaled tensor's format. Storage of a [rows, cols] tensor, blocks along each row (cols a multiple of the
// block): codes row-major, one byte per e4m3 code or two e2m1 codes per byte (element 2i in the low nibble);
// scales [rows, cols / block], one byte each.
enum class MxFormat { mxfp8, mxfp4, nvfp4 };
const char* mx_format_name(MxFormat f);
std::optional<MxFormat> parse_mx_format(const std::string& s);  // "mxfp8", "mxfp4", "nvfp4"
int mx_block_elems(MxFormat f);
inline bool mx_is_fp4(MxFormat f) { return f != MxFormat::mxfp8; }
int64_t mx_code_bytes(MxFormat f, int64_t rows, int64_t cols);
int64_t mx_scale_bytes(MxFormat f, int64_t rows, int64_t cols);

// Rows of x * pre_scale quantised block by block; x fp32 or halves of a 16-bit dtype. Throws std::invalid_argument
// when cols is not a multiple of the block.
void quantize_rows(MxFormat f, const float* x, int64_t rows, int64_t cols, float pre_scale, uint8_t* codes,
                   uint8_t* scales);
void quantize_rows(MxFormat f, DType dt, const uint16_t* x, int64_t rows, int64_t cols, float pre_scale,
                   uint8_t* codes, uint8_t* scales);
// One row's values: code * scale, times post_scale, into out[0, cols).
void dequantize_row(MxFormat f, const uint8_t* codes, const uint8_t* scales, int64_t cols, float post_scale,
                    float* out);
// x[0, n) replaced by the values its quantisation under pre_scale stands for, divided back by pre_scale (n a
// multiple of the block): what a block-scaled GEMM multiplies.
void fake_quantize_row(MxFormat f, float* x, int64_t n, float pre_scale);

}  // namespace attnbench::mx
