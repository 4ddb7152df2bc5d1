// The gated block's elementwise kernels: O * sigmoid(GATE) in place (when the gate is not fused into the SDPA
// epilogue), 8 elements (16 bytes) per thread; and the one-time SDPA tables of the workspace.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/gated_kernels.hpp"
#include "cuda/runtime.hpp"
#include "cuda/storage.cuh"

namespace attnbench::cuda {
namespace {

constexpr int kThreads = 256;


template <DType DT>
__global__ void __launch_bounds__(kThreads) sigmoid_gate_kernel(const __grid_constant__ GatedSigmoidParams p) {
  using H = StorageOf<DT>;
  using T = typename H::type;
  const int64_t chunks_per_head = p.d_head / 8, chunks_per_token = chunks_per_head * p.heads;
  const int64_t total = p.tokens * chunks_per_token;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t t = i / chunks_per_token, rem = i % chunks_per_token;
    const int64_t h = rem / chunks_per_head, c = rem % chunks_per_head;
    T* o = static_cast<T*>(p.o) + t * p.o_stride_token + h * p.d_head + c * 8;
    const T* g = static_cast<const T*>(p.gate) + t * p.gate_stride_token + h * p.gate_stride_head + c * 8;
    uint4 o_raw = *reinterpret_cast<const uint4*>(o);
    const uint4 g_raw = *reinterpret_cast<const uint4*>(g);
    auto* ov = reinterpret_cast<T*>(&o_raw);
    const auto* gv = reinterpret_cast<const T*>(&g_raw);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      ov[j] = H::from_float(H::to_float(ov[j]) / (1.f + __expf(-H::to_float(gv[j]))));
    *reinterpret_cast<uint4*>(o) = o_raw;
  }
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
  const int64_t total = p.tokens * p.heads * (p.d_head / 8);
  if (total == 0) return;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 132 * 16);
  if (dt == DType::bf16) sigmoid_gate_kernel<DType::bf16><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
  else sigmoid_gate_kernel<DType::f16><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

void launch_gated_tables(const GatedTablesParams& p, cudaStream_t stream) {
  tables_kernel<<<64, 256, 0, stream>>>(p);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace attnbench::cuda
