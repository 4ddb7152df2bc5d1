// cuda.unified_bwd's preprocess and postprocess (bwd_workspace.hpp).
#include <cuda_runtime.h>

#include "cuda/bwd_workspace.hpp"
#include "cuda/mma_sm80.cuh"
#include "cuda/runtime.hpp"
#include "cuda/storage.cuh"

namespace attnbench::cuda {
namespace {

// The sequence token `tok` belongs to: cu[s] <= tok < cu[s + 1].
__device__ int seq_of(const int32_t* cu, int num_seqs, int64_t tok) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (cu[mid] <= tok) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// A warp per (token, head) row: D = sum_c O dO in fp32, the LSE in base 2 (both at the head's row of its sequence's
// rows, bwd_seq_row), the row's fp32 dQ zeroed.
template <DType DT>
__global__ void bwd_preprocess(AttentionBwdParams p, BwdWorkspace ws) {
  using S = StorageOf<DT>;
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.total_q * p.heads) return;
  const int64_t tok = row / p.heads, h = row % p.heads;
  const auto* o = static_cast<const typename S::type*>(p.o) + tok * p.q_stride_token + h * p.q_stride_head;
  const auto* g = static_cast<const typename S::type*>(p.d_o) + tok * p.q_stride_token + h * p.q_stride_head;
  const int s = seq_of(p.cu_seqlens_q, p.num_seqs, tok);
  const int64_t at = h * ws.row_stride + bwd_seq_row(s, p.cu_seqlens_q[s]) + tok - p.cu_seqlens_q[s];
  float acc = 0.f;
  for (int c = lane; c < p.head_size; c += 32) {
    acc += S::to_float(o[c]) * S::to_float(g[c]);
    ws.dq_acc[at * p.head_size + c] = 0.f;
  }
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) {
    ws.dsum[at] = acc;
    ws.lse2[at] = p.lse[row] * kLog2e;
  }
}

// dQ = scale * dQ_acc in the dtype, a thread per element in dQ's order.
template <DType DT>
__global__ void bwd_postprocess(AttentionBwdParams p, BwdWorkspace ws) {
  using S = StorageOf<DT>;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.total_q * p.heads * p.head_size) return;
  const int64_t row = i / p.head_size, c = i % p.head_size, tok = row / p.heads, h = row % p.heads;
  const int s = seq_of(p.cu_seqlens_q, p.num_seqs, tok);
  const int64_t at = h * ws.row_stride + bwd_seq_row(s, p.cu_seqlens_q[s]) + tok - p.cu_seqlens_q[s];
  auto* dq = static_cast<typename S::type*>(p.dq);
  dq[tok * p.q_stride_token + h * p.q_stride_head + c] = S::from_float(ws.dq_acc[at * p.head_size + c] * p.scale);
}

// A split group's dK = scale * dK_acc and dV = dV_acc in the dtype, a thread per element in their order.
template <DType DT>
__global__ void bwd_postprocess_dkdv(AttentionBwdParams p, BwdWorkspace ws) {
  using S = StorageOf<DT>;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.total_k * p.kv_heads * p.head_size) return;
  const int64_t row = i / p.head_size, c = i % p.head_size, tok = row / p.kv_heads, h = row % p.kv_heads;
  const int64_t at = tok * p.k_stride_token + h * p.k_stride_head + c;
  static_cast<typename S::type*>(p.dk)[at] = S::from_float(ws.dk_acc[i] * p.scale);
  static_cast<typename S::type*>(p.dv)[at] = S::from_float(ws.dv_acc[i]);
}

}  // namespace

template <DType DT>
void launch_bwd_preprocess(const AttentionBwdParams& p, const BwdWorkspace& ws, cudaStream_t stream) {
  const int64_t rows = p.total_q * p.heads;
  bwd_preprocess<DT><<<static_cast<unsigned>((rows * 32 + 255) / 256), 256, 0, stream>>>(p, ws);
  check_last_launch("cuda.unified_bwd preprocess");
  if (ws.splits > 1) {  // dk_acc and dv_acc are one span (bwd_workspace)
    const std::size_t bytes = bwd_align256(bwd_dkdv_acc_bytes(p)) + bwd_dkdv_acc_bytes(p);
    ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(ws.dk_acc, 0, bytes, stream));
  }
}

template <DType DT>
void launch_bwd_postprocess(const AttentionBwdParams& p, const BwdWorkspace& ws, cudaStream_t stream) {
  const int64_t n = p.total_q * p.heads * p.head_size;
  bwd_postprocess<DT><<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(p, ws);
  check_last_launch("cuda.unified_bwd postprocess");
  if (ws.splits > 1) {
    const int64_t nk = p.total_k * p.kv_heads * p.head_size;
    bwd_postprocess_dkdv<DT><<<static_cast<unsigned>((nk + 255) / 256), 256, 0, stream>>>(p, ws);
    check_last_launch("cuda.unified_bwd dK/dV postprocess");
  }
}

template void launch_bwd_preprocess<DType::bf16>(const AttentionBwdParams&, const BwdWorkspace&, cudaStream_t);
template void launch_bwd_preprocess<DType::f16>(const AttentionBwdParams&, const BwdWorkspace&, cudaStream_t);
template void launch_bwd_postprocess<DType::bf16>(const AttentionBwdParams&, const BwdWorkspace&, cudaStream_t);
template void launch_bwd_postprocess<DType::f16>(const AttentionBwdParams&, const BwdWorkspace&, cudaStream_t);

}  // namespace attnbench::cuda
