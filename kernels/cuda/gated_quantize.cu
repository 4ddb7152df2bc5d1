// The gated block's FP8 quantisation pass: code = e4m3(x * scale), the bytes of the rule the CPU block uses
// (common/device/mx_rules.hpp) by the hardware's pair conversion (elementwise.cuh). Each thread takes one
// 16-element chunk position of a token's head rows (its part and head found once, by 32-bit division) in 2
// consecutive tokens, 1 with the gate: its four 16-byte loads are all issued before any math, then one 16-byte store
// of codes per token.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/device/mx_rules.hpp"
#include "cuda/gated_kernels.hpp"
#include "cuda/elementwise.cuh"
#include "cuda/runtime.hpp"
#include "cuda/storage.cuh"

namespace attnbench::cuda {
namespace {

constexpr int kThreads = 256;
// Tokens per thread: four loads in flight.
template <bool kGate>
constexpr int kTokens = kGate ? 1 : 2;

using dev::e4m3_codes2;
using dev::elem;
using dev::store16;

// The value coded of the element in the low half of x: x * scale (one fp32 product); with the gate, round(x *
// sigmoid(g)) first, the sigmoid gate pass's rule (elementwise.cuh), so that the fused and unfused blocks write the
// same bytes.
template <DType DT, bool kGate>
__device__ __forceinline__ float scaled1(uint32_t x, uint32_t g, float scale) {
  using H = StorageOf<DT>;
  using T = typename H::type;
  if constexpr (kGate) x = dev::gated_bits<DT>(x, g);
  return device::mul_rn(H::to_float(elem<T>(x)), scale);
}

// The four codes of words x01, x23 (elements in memory order, the lower half first), as one word of bytes.
template <DType DT, bool kGate>
__device__ __forceinline__ uint32_t codes4(uint32_t x01, uint32_t x23, uint32_t g01, uint32_t g23, float s) {
  return e4m3_codes2(scaled1<DT, kGate>(x01, g01, s), scaled1<DT, kGate>(x01 >> 16, g01 >> 16, s)) |
         e4m3_codes2(scaled1<DT, kGate>(x23, g23, s), scaled1<DT, kGate>(x23 >> 16, g23 >> 16, s)) << 16;
}

// The 16 codes of a chunk: elements 0-7 in x[0], 8-15 in x[1].
template <DType DT, bool kGate>
__device__ __forceinline__ uint4 codes16(const uint4 (&x)[2], const uint4 (&g)[2], float s) {
  return make_uint4(codes4<DT, kGate>(x[0].x, x[0].y, g[0].x, g[0].y, s),
                    codes4<DT, kGate>(x[0].z, x[0].w, g[0].z, g[0].w, s),
                    codes4<DT, kGate>(x[1].x, x[1].y, g[1].x, g[1].y, s),
                    codes4<DT, kGate>(x[1].z, x[1].w, g[1].z, g[1].w, s));
}

// Chunk c of a token's chunks (the parts' heads in order, d_head / 16 chunks each): its offsets within a token's
// source, codes and gate rows, and its part's scale.
struct Chunk {
  int64_t src, dst, gate;
  float scale;
};
__device__ __forceinline__ Chunk chunk_of(const GatedQuantizeParams& p, unsigned c) {
  const unsigned chunks_per_head = static_cast<unsigned>(p.d_head) / 16;
  int part = 0;
  for (; part + 1 < p.n_parts && c >= p.parts[part].heads * chunks_per_head; ++part)
    c -= p.parts[part].heads * chunks_per_head;
  const GatedQuantizePart& pt = p.parts[part];
  const unsigned h = c / chunks_per_head, k = (c - h * chunks_per_head) * 16;
  return {pt.src0 + h * pt.src_head_stride + k, pt.dst0 + static_cast<int64_t>(h) * p.d_head + k,
          h * p.gate_stride_head + k, pt.scale};
}

// Thread i < units takes chunk i % chunks_per_token of the tokens [kT * g, kT * g + kT) below p.rows, g = i /
// chunks_per_token, kT = kTokens<kGate>; the launcher keeps units at most 2^32 - 1 - kThreads.
template <DType DT, bool kGate>
__global__ void __launch_bounds__(kThreads)
    quantize_kernel(const __grid_constant__ GatedQuantizeParams p, unsigned chunks_per_token, unsigned units) {
  using T = typename StorageOf<DT>::type;
  constexpr int kT = kTokens<kGate>;
  const unsigned i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= units) return;
  const unsigned group = i / chunks_per_token;
  const Chunk ch = chunk_of(p, i - group * chunks_per_token);
  const int64_t t0 = static_cast<int64_t>(group) * kT;
  const int64_t n = p.rows - t0;  // kT or more, except in the last group
  const T* x = static_cast<const T*>(p.src) + t0 * p.src_stride + ch.src;
  const T* g = kGate ? static_cast<const T*>(p.gate) + t0 * p.gate_stride_token + ch.gate : nullptr;
  uint4 xv[kT][2], gv[kT][2] = {};  // every load issued before the first use
#pragma unroll
  for (int j = 0; j < kT; ++j)
    if (j < n) {
      const T* xj = x + j * p.src_stride;
      xv[j][0] = *reinterpret_cast<const uint4*>(xj);
      xv[j][1] = *reinterpret_cast<const uint4*>(xj + 8);
      if constexpr (kGate) {
        const T* gj = g + j * p.gate_stride_token;
        gv[j][0] = *reinterpret_cast<const uint4*>(gj);
        gv[j][1] = *reinterpret_cast<const uint4*>(gj + 8);
      }
    }
#pragma unroll
  for (int j = 0; j < kT; ++j)
    if (j < n) store16(p.dst + (t0 + j) * p.dst_stride + ch.dst, codes16<DT, kGate>(xv[j], gv[j], ch.scale));
}

// The kernel for the dtype and gate over all tokens; throws when its 32-bit index would not cover them.
template <DType DT, bool kGate>
void launch(const GatedQuantizeParams& p, int64_t chunks_per_token, cudaStream_t stream) {
  constexpr int64_t kMaxUnits = std::numeric_limits<uint32_t>::max() - kThreads;  // no wrap in blockIdx * kThreads
  const int64_t groups = (p.rows + kTokens<kGate> - 1) / kTokens<kGate>;
  if (chunks_per_token > kMaxUnits || groups > kMaxUnits / chunks_per_token)
    throw std::invalid_argument("launch_gated_quantize: ceil(rows / " + std::to_string(kTokens<kGate>) +
                                ") * heads * (d_head / 16) = " + std::to_string(groups) + " * " +
                                std::to_string(chunks_per_token) + " exceeds the kernel's 32-bit index");
  const int64_t units = groups * chunks_per_token;
  quantize_kernel<DT, kGate><<<static_cast<unsigned>((units + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      p, static_cast<unsigned>(chunks_per_token), static_cast<unsigned>(units));
}

template <DType DT>
void launch(const GatedQuantizeParams& p, int64_t chunks_per_token, cudaStream_t stream) {
  if (p.gate != nullptr) launch<DT, true>(p, chunks_per_token, stream);
  else launch<DT, false>(p, chunks_per_token, stream);
}

}  // namespace

void launch_gated_quantize(DType dt, const GatedQuantizeParams& p, cudaStream_t stream) {
  if (p.n_parts > static_cast<int>(std::size(p.parts)))
    throw std::invalid_argument("launch_gated_quantize: n_parts = " + std::to_string(p.n_parts) + " exceeds 3");
  int64_t chunks_per_token = 0;
  for (int i = 0; i < p.n_parts; ++i) {
    // The kernel finds a chunk's part and head in unsigned arithmetic.
    if (p.parts[i].heads < 0 || p.d_head < 0)
      throw std::invalid_argument("launch_gated_quantize: negative heads or d_head");
    chunks_per_token += static_cast<int64_t>(p.parts[i].heads) * (p.d_head / 16);
  }
  if (p.rows <= 0 || chunks_per_token == 0) return;
  if (dt == DType::bf16) launch<DType::bf16>(p, chunks_per_token, stream);
  else launch<DType::f16>(p, chunks_per_token, stream);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace attnbench::cuda
