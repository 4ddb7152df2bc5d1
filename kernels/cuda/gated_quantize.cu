// The gated block's FP8 quantisation pass: 16 elements of a head row per thread (two 16-byte loads, one 16-byte
// store of codes), code = e4m3(x * scale) by the rule the CPU block shares (common/device/mx_rules.hpp), so both
// write the same bytes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "common/device/mx_rules.hpp"
#include "cuda/gated_kernels.hpp"
#include "cuda/runtime.hpp"
#include "cuda/storage.cuh"

namespace attnbench::cuda {
namespace {

constexpr int kThreads = 256;

template <DType DT>
__global__ void __launch_bounds__(kThreads) quantize_kernel(const __grid_constant__ GatedQuantizeParams p) {
  using H = StorageOf<DT>;
  using T = typename H::type;
  const int chunks_per_head = p.d_head / 16;
  int64_t per_row = 0;
  for (int i = 0; i < p.n_parts; ++i) per_row += static_cast<int64_t>(p.parts[i].heads) * chunks_per_head;
  const int64_t total = p.rows * per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t t = i / per_row;
    int64_t c = i % per_row;
    int part = 0;
    while (c >= static_cast<int64_t>(p.parts[part].heads) * chunks_per_head) c -= p.parts[part++].heads * chunks_per_head;
    const GatedQuantizePart& pt = p.parts[part];
    const int64_t h = c / chunks_per_head, k = (c % chunks_per_head) * 16;
    const T* x = static_cast<const T*>(p.src) + t * p.src_stride + pt.src0 + h * pt.src_head_stride + k;
    uint4 raw[2] = {*reinterpret_cast<const uint4*>(x), *reinterpret_cast<const uint4*>(x + 8)};
    auto* v = reinterpret_cast<T*>(raw);
    if (p.gate != nullptr) {  // the sigmoid gate pass's value, rounded as it stores it
      const T* g = static_cast<const T*>(p.gate) + t * p.gate_stride_token + h * p.gate_stride_head + k;
      uint4 graw[2] = {*reinterpret_cast<const uint4*>(g), *reinterpret_cast<const uint4*>(g + 8)};
      const auto* gv = reinterpret_cast<const T*>(graw);
#pragma unroll
      for (int j = 0; j < 16; ++j) v[j] = H::from_float(H::to_float(v[j]) / (1.f + __expf(-H::to_float(gv[j]))));
    }
    uint4 out;
    auto* b = reinterpret_cast<unsigned char*>(&out);
#pragma unroll
    for (int j = 0; j < 16; ++j) b[j] = device::e4m3_code(device::mul_rn(H::to_float(v[j]), pt.scale));
    *reinterpret_cast<uint4*>(p.dst + t * p.dst_stride + pt.dst0 + h * p.d_head + k) = out;
  }
}

}  // namespace

void launch_gated_quantize(DType dt, const GatedQuantizeParams& p, cudaStream_t stream) {
  int64_t per_row = 0;
  for (int i = 0; i < p.n_parts; ++i) per_row += static_cast<int64_t>(p.parts[i].heads) * (p.d_head / 16);
  const int64_t total = p.rows * per_row;
  if (total == 0) return;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 132 * 16);
  if (dt == DType::bf16) quantize_kernel<DType::bf16><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
  else quantize_kernel<DType::f16><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace attnbench::cuda
