// The gated block's elementwise kernels: O * sigmoid(GATE) into another buffer (when the gate is not fused into
// the SDPA epilogue), and the one-time SDPA tables of the workspace. The gate pass gives each thread one 16-byte chunk
// position (8 elements of a head) in kTokens consecutive tokens, found by one 32-bit division per thread; the
// thread issues all its loads before any math, so 2 * kTokens 16-byte loads are in flight. Under save_for_backward it
// also stores each gate chunk it loaded to the packed save set (no second read of the GATE columns).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "cuda/gated_kernels.hpp"
#include "cuda/runtime.hpp"
#include "cuda/elementwise.cuh"
#include "cuda/storage.cuh"

namespace attnbench::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTokens = 2;  // tokens per thread: four loads in flight cover the latency at this occupancy

using dev::store16;

// One 16-byte chunk, 8 elements; the lower half of each word is the element first in memory.
template <DType DT>
__device__ __forceinline__ uint4 gate8(const uint4& o, const uint4& g) {
  const auto word = [](uint32_t ow, uint32_t gw) {
    return dev::gated_bits<DT>(ow, gw) | dev::gated_bits<DT>(ow >> 16, gw >> 16) << 16;
  };
  return make_uint4(word(o.x, g.x), word(o.y, g.y), word(o.z, g.z), word(o.w, g.w));
}

// Thread i < units takes chunk c = i % chunks_per_token of the tokens [kTokens * g, kTokens * g + kTokens) below
// p.tokens, g = i / chunks_per_token; the launcher keeps units at most 2^32 - 1 - kThreads.
template <DType DT>
__global__ void __launch_bounds__(kThreads)
    sigmoid_gate_kernel(const __grid_constant__ GatedSigmoidParams p, unsigned chunks_per_token, unsigned units) {
  using T = typename StorageOf<DT>::type;
  const unsigned i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= units) return;
  const unsigned group = i / chunks_per_token, c = i - group * chunks_per_token;
  const unsigned chunks_per_head = static_cast<unsigned>(p.d_head) / 8, h = c / chunks_per_head;
  const unsigned k = (c - h * chunks_per_head) * 8;  // the chunk's first element in its head
  const int64_t t0 = static_cast<int64_t>(group) * kTokens;
  const int64_t n = p.tokens - t0;  // kTokens or more, except in the last group
  const int64_t at = t0 * p.o_stride_token + static_cast<int64_t>(h) * p.d_head + k;
  const T* o = static_cast<const T*>(p.o) + at;
  T* out = static_cast<T*>(p.out) + at;
  const T* g = static_cast<const T*>(p.gate) + t0 * p.gate_stride_token + h * p.gate_stride_head + k;
  uint4 ov[kTokens], gv[kTokens];  // every load issued before the first use
#pragma unroll
  for (int j = 0; j < kTokens; ++j)
    if (j < n) {
      ov[j] = *reinterpret_cast<const uint4*>(o + j * p.o_stride_token);
      gv[j] = *reinterpret_cast<const uint4*>(g + j * p.gate_stride_token);
    }
#pragma unroll
  for (int j = 0; j < kTokens; ++j)
    if (j < n) store16(out + j * p.o_stride_token, gate8<DT>(ov[j], gv[j]));
  if (p.gate_save == nullptr) return;
  const int64_t row = static_cast<int64_t>(p.heads) * p.d_head;  // the packed gate's token stride
  T* gs = static_cast<T*>(p.gate_save) + t0 * row + static_cast<int64_t>(h) * p.d_head + k;
#pragma unroll
  for (int j = 0; j < kTokens; ++j)
    if (j < n) store16(gs + j * row, gv[j]);
}

__global__ void tables_kernel(const __grid_constant__ GatedTablesParams p) {
  const int stride = gridDim.x * blockDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= p.batch; i += stride) {
    p.cu_seqlens_q[i] = i * p.seqlen;
    if (i < p.batch) p.seqused_k[i] = p.seqlen;
  }
  const int64_t n = static_cast<int64_t>(p.batch) * p.blocks_per_seq;
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t b = i / p.blocks_per_seq, j = i % p.blocks_per_seq;
    p.block_table[i] = static_cast<int32_t>(b * p.seqlen / p.block_size + j);  // block_size divides S when B > 1
  }
}

}  // namespace

void launch_gated_sigmoid(DType dt, const GatedSigmoidParams& p, cudaStream_t stream) {
  // The kernel finds a chunk's head in unsigned arithmetic.
  if (p.heads < 0 || p.d_head < 0) throw std::invalid_argument("launch_gated_sigmoid: negative heads or d_head");
  const int64_t chunks_per_token = static_cast<int64_t>(p.heads) * (p.d_head / 8);
  if (p.tokens <= 0 || chunks_per_token <= 0) return;
  // The kernel indexes its (token group, chunk) pairs in 32 bits; no tensor that fits a GPU comes near this.
  constexpr int64_t kMaxUnits = std::numeric_limits<uint32_t>::max() - kThreads;  // no wrap in blockIdx * kThreads
  const int64_t groups = (p.tokens + kTokens - 1) / kTokens;
  if (chunks_per_token > kMaxUnits || groups > kMaxUnits / chunks_per_token)
    throw std::invalid_argument("launch_gated_sigmoid: ceil(tokens / " + std::to_string(kTokens) +
                                ") * heads * (d_head / 8) = " + std::to_string(groups) + " * " +
                                std::to_string(chunks_per_token) + " exceeds the kernel's 32-bit index");
  const int64_t units = groups * chunks_per_token;
  const auto blocks = static_cast<unsigned>((units + kThreads - 1) / kThreads);
  const auto cpt = static_cast<unsigned>(chunks_per_token), n = static_cast<unsigned>(units);
  if (dt == DType::bf16) sigmoid_gate_kernel<DType::bf16><<<blocks, kThreads, 0, stream>>>(p, cpt, n);
  else sigmoid_gate_kernel<DType::f16><<<blocks, kThreads, 0, stream>>>(p, cpt, n);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

void launch_gated_tables(const GatedTablesParams& p, cudaStream_t stream) {
  tables_kernel<<<64, 256, 0, stream>>>(p);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace attnbench::cuda
