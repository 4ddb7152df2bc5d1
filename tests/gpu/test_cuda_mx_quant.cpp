// The device quantiser (kernels/cuda/mx_quantize.cu) against the host one (kernels/common/mx_quant.cpp): the same
// codes and scales, byte for byte, for every format, both 16-bit dtypes and a non-trivial pre-scale, over rows of
// normals at many magnitudes, exact grid ties, dead blocks, NaN and infinities.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attnbench/gpu_runtime.hpp"
#include "attnbench/mx_quant.hpp"
#include "cuda/mx_quantize.hpp"
#include "cuda/runtime.hpp"

namespace attnbench::gputest {
namespace {

std::vector<uint16_t> edge_halves(DType dt, int rows, int cols) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<uint16_t> x(static_cast<std::size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      float v = n(rng) * std::ldexp(1.f, (r * 5) % (dt == DType::bf16 ? 60 : 24) - 12);
      if (r % 5 == 1) v = std::ldexp(0.25f * static_cast<float>(c % 25) - 3.f, r % 7 - 3);  // grid ties
      if (r % 5 == 2 && c < 32) v = 0.f;                                                     // a dead block
      if (r % 5 == 3 && c % 13 == 0) v = c % 2 ? NAN : (c % 3 ? INFINITY : -INFINITY);
      x[static_cast<std::size_t>(r) * cols + c] = float_to_half(v, dt);
    }
  return x;
}

TEST(CudaMxQuant, DeviceCodesAndScalesEqualTheHostsBitForBit) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int rows = 300, cols = 256;
  for (DType dt : {DType::bf16, DType::f16})
    for (mx::MxFormat f : {mx::MxFormat::mxfp8, mx::MxFormat::mxfp4, mx::MxFormat::nvfp4})
      for (float pre : {1.f, 0.37f}) {
        const std::vector<uint16_t> x = edge_halves(dt, rows, cols);
        std::vector<uint8_t> codes(mx::mx_code_bytes(f, rows, cols)), scales(mx::mx_scale_bytes(f, rows, cols));
        mx::quantize_rows(f, dt, x.data(), rows, cols, pre, codes.data(), scales.data());
        gpu::DeviceBuffer dx(x.size() * 2), dc(codes.size()), ds(scales.size());
        dx.upload(x.data(), x.size() * 2);
        cuda::launch_mx_quantize_rows(f, dt, dx.data(), rows, cols, pre, static_cast<uint8_t*>(dc.data()),
                                      static_cast<uint8_t*>(ds.data()), nullptr);
        std::vector<uint8_t> gc(codes.size()), gs(scales.size());
        dc.download(gc.data(), gc.size());
        ds.download(gs.data(), gs.size());
        const std::string what = std::string(dtype_name(dt)) + " " + mx::mx_format_name(f) + " pre " + std::to_string(pre);
        for (std::size_t i = 0; i < scales.size(); ++i) ASSERT_EQ(gs[i], scales[i]) << what << " scale " << i;
        for (std::size_t i = 0; i < codes.size(); ++i) ASSERT_EQ(gc[i], codes[i]) << what << " code byte " << i;
      }
}

}  // namespace
}  // namespace attnbench::gputest
