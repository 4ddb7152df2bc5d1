// The reference's own statement of the block-scaled quantisers (written apart from the kernels' rules, and tested
// against them): a row of fp32 values replaced by what its MXFP8 / MXFP4 / NVFP4 quantisation stands for.
#pragma once
#include <cstdint>

#include "attnbench/mx_quant.hpp"

namespace attnbench::reference {

// x[0, n) (n whole blocks) -> q(x * pre_scale) / pre_scale, q the format's quantise-dequantise of each block: the
// scale from the block's largest finite magnitude (E8M0: the least power of two at or above amax / max in fp32;
// NVFP4: e4m3 of max(amax / 6, 2^-9)), each element to the nearest code of the grid (ties to the even code,
// saturating), a block of no finite nonzero magnitude to zeros.
void mx_fake_quantize(mx::MxFormat f, float* x, int64_t n, float pre_scale);

}  // namespace attnbench::reference
