// The gated block backward's elementwise kernels: the sigmoid gate's backward (dO, dGATE and the gated O Y of one
// pass over O, GATE and dY), the fp32-to-dtype cast and the SDPA backward's cu_seqlens. The gate pass follows the
// forward's (gated_sigmoid.cu): each thread takes one chunk of V elements of a head in kTokens consecutive tokens and
// issues all its loads first.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "cuda/gated_bwd_io.cuh"
#include "cuda/gated_bwd_kernels.hpp"
#include "cuda/runtime.hpp"

namespace attnbench::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTokens = 2;  // tokens per thread: six loads in flight

using dev::load_f32;
using dev::store_f32;

// s (1 - s) of s = 1 / (1 + e), e = exp(-g): for g >= 0 as s s e, where 1 - s would cancel.
__device__ __forceinline__ float sigmoid_slope(float g, float e, float s) { return s * (g >= 0.f ? s * e : 1.f - s); }

// Thread i < units takes chunk c = i % chunks_per_token of the tokens [kTokens j, kTokens j + kTokens), j =
// i / chunks_per_token; the launcher keeps units at most 2^32 - 1 - kThreads.
template <DType DT, int V>
__global__ void __launch_bounds__(kThreads)
    gate_bwd_kernel(const __grid_constant__ GatedGateBwdParams p, unsigned chunks_per_token, unsigned units) {
  using T = typename StorageOf<DT>::type;
  const unsigned i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= units) return;
  const unsigned group = i / chunks_per_token, c = i - group * chunks_per_token;
  const unsigned chunks_per_head = static_cast<unsigned>(p.d_head) / V, h = c / chunks_per_head;
  const unsigned k = (c - h * chunks_per_head) * V;  // the chunk's first element in its head
  const int64_t t0 = static_cast<int64_t>(group) * kTokens, n = p.tokens - t0;
  const int64_t packed = static_cast<int64_t>(p.heads) * p.d_head;  // o, dy, d_o and y's token stride
  const int64_t at = t0 * packed + static_cast<int64_t>(h) * p.d_head + k;
  const int64_t gat = t0 * p.gate_stride_token + h * p.gate_stride_head + k;
  const int64_t dgat = t0 * p.d_gate_stride_token + h * p.d_gate_stride_head + k;
  const bool need_o = p.y || p.d_gate, need_dy = p.d_o || p.d_gate;
  float o[kTokens][V] = {}, g[kTokens][V] = {}, dy[kTokens][V] = {};
#pragma unroll
  for (int j = 0; j < kTokens; ++j)
    if (j < n) {
      load_f32<DT, V>(static_cast<const T*>(p.gate) + gat + j * p.gate_stride_token, g[j]);
      if (need_o) load_f32<DT, V>(static_cast<const T*>(p.o) + at + j * packed, o[j]);
      if (need_dy) load_f32<DT, V>(static_cast<const T*>(p.dy) + at + j * packed, dy[j]);
    }
#pragma unroll
  for (int j = 0; j < kTokens; ++j) {
    if (j >= n) break;
    float d_o[V], d_gate[V], y[V];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float ex = __expf(-g[j][e]), s = 1.f / (1.f + ex);
      d_o[e] = dy[j][e] * s;
      d_gate[e] = dy[j][e] * o[j][e] * sigmoid_slope(g[j][e], ex, s);
      y[e] = o[j][e] / (1.f + ex);  // the forward's expression (dev::gated_bits): the forward's Y bit for bit
    }
    if (p.d_o) store_f32<DT, V>(static_cast<T*>(p.d_o) + at + j * packed, d_o);
    if (p.d_gate) store_f32<DT, V>(static_cast<T*>(p.d_gate) + dgat + j * p.d_gate_stride_token, d_gate);
    if (p.y) store_f32<DT, V>(static_cast<T*>(p.y) + at + j * packed, y);
  }
}

// Chunks of V elements, grid-stride; V = 8 takes two 16-byte loads and one 16-byte store.
template <DType DT, int V>
__global__ void __launch_bounds__(kThreads) cast_kernel(const float* __restrict__ src, void* dst, int64_t chunks) {
  using T = typename StorageOf<DT>::type;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; c < chunks; c += stride) {
    float x[V];
    if constexpr (V == 8) {
      const float4 lo = reinterpret_cast<const float4*>(src)[2 * c],
                   hi = reinterpret_cast<const float4*>(src)[2 * c + 1];
      const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) x[j] = v[j];
    } else {
      x[0] = src[c];
    }
    store_f32<DT, V>(static_cast<T*>(dst) + c * V, x);
  }
}

__global__ void cu_seqlens_kernel(int32_t* cu, int batch, int seqlen) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= batch; i += gridDim.x * blockDim.x) cu[i] = i * seqlen;
}

// Whether every tensor of the gate pass allows 16-byte chunks: pointers aligned, strides whole chunks.
bool gate_bwd_vectorisable(const GatedGateBwdParams& p) {
  for (const void* ptr : {p.o, p.gate, p.dy, static_cast<const void*>(p.d_o), static_cast<const void*>(p.d_gate),
                          static_cast<const void*>(p.y)})
    if (!dev::aligned_to(ptr, 16)) return false;
  for (int64_t s : {p.gate_stride_token, p.gate_stride_head, p.d_gate_stride_token, p.d_gate_stride_head,
                    static_cast<int64_t>(p.d_head)})
    if (s % 8 != 0) return false;
  return true;
}

template <DType DT, int V>
void launch_gate_bwd(const GatedGateBwdParams& p, cudaStream_t stream) {
  const int64_t chunks_per_token = static_cast<int64_t>(p.heads) * (p.d_head / V);
  if (p.tokens <= 0 || chunks_per_token <= 0) return;
  // The kernel indexes its (token group, chunk) pairs in 32 bits; no tensor that fits a GPU comes near this.
  constexpr int64_t kMaxUnits = std::numeric_limits<uint32_t>::max() - kThreads;  // no wrap in blockIdx * kThreads
  const int64_t groups = (p.tokens + kTokens - 1) / kTokens;
  if (chunks_per_token > kMaxUnits || groups > kMaxUnits / chunks_per_token)
    throw std::invalid_argument("launch_gated_gate_bwd: ceil(tokens / " + std::to_string(kTokens) +
                                ") * heads * (d_head / " + std::to_string(V) + ") exceeds the kernel's 32-bit index");
  const int64_t units = groups * chunks_per_token;
  const auto blocks = static_cast<unsigned>((units + kThreads - 1) / kThreads);
  gate_bwd_kernel<DT, V><<<blocks, kThreads, 0, stream>>>(p, static_cast<unsigned>(chunks_per_token),
                                                          static_cast<unsigned>(units));
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

template <DType DT>
void launch_cast(const float* src, void* dst, int64_t n, cudaStream_t stream) {
  constexpr int64_t kMaxBlocks = int64_t{1} << 16;  // grid-stride beyond: a cast this large is bandwidth-bound anyway
  const bool vec = n % 8 == 0 && dev::aligned_to(src, 16) && dev::aligned_to(dst, 16);
  const int64_t chunks = vec ? n / 8 : n;
  const auto blocks = static_cast<unsigned>(std::min((chunks + kThreads - 1) / kThreads, kMaxBlocks));
  if (vec) cast_kernel<DT, 8><<<blocks, kThreads, 0, stream>>>(src, dst, chunks);
  else cast_kernel<DT, 1><<<blocks, kThreads, 0, stream>>>(src, dst, chunks);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_gated_gate_bwd(DType dt, const GatedGateBwdParams& p, cudaStream_t stream) {
  // The kernel finds a chunk's head in unsigned arithmetic.
  if (p.heads < 0 || p.d_head < 0) throw std::invalid_argument("launch_gated_gate_bwd: negative heads or d_head");
  if (!p.d_o && !p.d_gate && !p.y) return;
  if (!p.gate || (!p.o && (p.y || p.d_gate)) || (!p.dy && (p.d_o || p.d_gate)))
    throw std::invalid_argument("launch_gated_gate_bwd: an input an asked-for output needs is null");
  const bool vec = gate_bwd_vectorisable(p);
  if (dt == DType::bf16) vec ? launch_gate_bwd<DType::bf16, 8>(p, stream) : launch_gate_bwd<DType::bf16, 1>(p, stream);
  else vec ? launch_gate_bwd<DType::f16, 8>(p, stream) : launch_gate_bwd<DType::f16, 1>(p, stream);
}

void launch_gated_cast(DType dt, const float* src, void* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dt == DType::bf16 ? launch_cast<DType::bf16>(src, dst, n, stream) : launch_cast<DType::f16>(src, dst, n, stream);
}

void launch_gated_cu_seqlens(int32_t* cu, int batch, int seqlen, cudaStream_t stream) {
  if (batch < 0) throw std::invalid_argument("launch_gated_cu_seqlens: negative batch");
  const int blocks = std::min((batch + kThreads) / kThreads, 64);  // batch + 1 entries
  cu_seqlens_kernel<<<blocks, kThreads, 0, stream>>>(cu, batch, seqlen);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace attnbench::cuda
