// One thread per scale block: its elements loaded and scaled, the amax, the scale code and the element codes by the
// shared rules (fp4 codes packed two per byte, element 2i in the low nibble).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/device/mx_rules.hpp"
#include "cuda/mx_quantize.hpp"
#include "cuda/runtime.hpp"

namespace attnbench::cuda {
namespace {

constexpr int kThreads = 256;

template <bool kBf16>
__device__ __forceinline__ float half_bits_to_float(uint16_t h) {
  if constexpr (kBf16) return __uint_as_float(static_cast<unsigned>(h) << 16);
  else return __half2float(__ushort_as_half(h));
}

template <int kKind, bool kBf16>
__global__ void __launch_bounds__(kThreads) mx_quantize_kernel(const uint16_t* __restrict__ x, int64_t rows,
                                                                int64_t cols, float pre_scale,
                                                                uint8_t* __restrict__ codes,
                                                                uint8_t* __restrict__ scales) {
  constexpr int kBlk = kKind == device::kNvfp4 ? 16 : 32;
  const int64_t nb = cols / kBlk, total = rows * nb;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t first = i / nb * cols + i % nb * kBlk;  // the block's first element
    float v[kBlk];
    float amax = 0.f;
#pragma unroll
    for (int e = 0; e < kBlk; ++e) {
      v[e] = device::mul_rn(half_bits_to_float<kBf16>(x[first + e]), pre_scale);
      amax = device::fmax_abs(amax, v[e]);
    }
    const unsigned char s = device::mx_scale_code(kKind, amax);
    const bool dead = !(amax > 0.f);
    scales[i] = s;
    if constexpr (kKind == device::kMxfp8) {
#pragma unroll
      for (int e = 0; e < kBlk; ++e) codes[first + e] = device::mx_element_code(kKind, v[e], s, dead);
    } else {
#pragma unroll
      for (int e = 0; e < kBlk; e += 2)
        codes[(first + e) / 2] = static_cast<uint8_t>(device::mx_element_code(kKind, v[e], s, dead) |
                                                      (device::mx_element_code(kKind, v[e + 1], s, dead) << 4));
    }
  }
}

template <int kKind>
void launch_kind(DType dt, const uint16_t* x, int64_t rows, int64_t cols, float pre, uint8_t* codes, uint8_t* scales,
                 cudaStream_t stream) {
  const int64_t total = rows * (cols / device::mx_block_elems(kKind));
  if (total == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 132 * 16));
  if (dt == DType::bf16) mx_quantize_kernel<kKind, true><<<blocks, kThreads, 0, stream>>>(x, rows, cols, pre, codes, scales);
  else mx_quantize_kernel<kKind, false><<<blocks, kThreads, 0, stream>>>(x, rows, cols, pre, codes, scales);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_mx_quantize_rows(mx::MxFormat f, DType dt, const void* x, int64_t rows, int64_t cols, float pre_scale,
                             uint8_t* codes, uint8_t* scales, cudaStream_t stream) {
  if (!is_16bit(dt))
    throw std::invalid_argument(std::string("launch_mx_quantize_rows: a 16-bit input, not ") + dtype_name(dt));
  if (cols % mx::mx_block_elems(f) != 0)
    throw std::invalid_argument("launch_mx_quantize_rows: a row of " + std::to_string(cols) +
                                " elements is not whole blocks of " + std::to_string(mx::mx_block_elems(f)));
  const auto* xh = static_cast<const uint16_t*>(x);
  switch (f) {
    case mx::MxFormat::mxfp8: return launch_kind<device::kMxfp8>(dt, xh, rows, cols, pre_scale, codes, scales, stream);
    case mx::MxFormat::mxfp4: return launch_kind<device::kMxfp4>(dt, xh, rows, cols, pre_scale, codes, scales, stream);
    case mx::MxFormat::nvfp4: return launch_kind<device::kNvfp4>(dt, xh, rows, cols, pre_scale, codes, scales, stream);
  }
}

}  // namespace attnbench::cuda
