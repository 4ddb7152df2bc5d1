// The gated block's save_for_backward pass with return_lse: the save set's LSE [T, h_q] (the SDPA's own layout
// there) transposed into params.lse's [B, h_q, S], through a shared-memory tile so that both the reads (along
// heads) and the writes (along tokens) are coalesced.
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>

#include "cuda/gated_kernels.hpp"
#include "cuda/runtime.hpp"

namespace attnbench::cuda {
namespace {

constexpr int kTile = 32;  // tokens x heads per block
constexpr int kRowsPerPass = 8;

// Block (x, y, b): tokens [x * kTile, +kTile) of sequence b, heads [y * kTile, +kTile); 32 x 8 threads.
__global__ void __launch_bounds__(kTile * kRowsPerPass)
    lse_reorder_kernel(const __grid_constant__ GatedLseReorderParams p) {
  __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts on the transposed read
  const int s0 = blockIdx.x * kTile, h0 = blockIdx.y * kTile, b = blockIdx.z;
  const int64_t seq0 = static_cast<int64_t>(b) * p.seqlen;
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass) {  // token s0 + r, head h0 + threadIdx.x
    const int s = s0 + r, h = h0 + threadIdx.x;
    if (s < p.seqlen && h < p.heads) tile[r][threadIdx.x] = p.src[(seq0 + s) * p.heads + h];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass) {  // head h0 + r, token s0 + threadIdx.x
    const int s = s0 + threadIdx.x, h = h0 + r;
    if (s < p.seqlen && h < p.heads)
      p.dst[(static_cast<int64_t>(b) * p.heads + h) * p.seqlen + s] = tile[threadIdx.x][r];
  }
}

}  // namespace

void launch_gated_lse_reorder(const GatedLseReorderParams& p, cudaStream_t stream) {
  if (p.batch <= 0 || p.seqlen <= 0 || p.heads <= 0) return;
  if (p.batch > 65535) throw std::invalid_argument("launch_gated_lse_reorder: batch > 65535 (grid z)");
  const dim3 grid((p.seqlen + kTile - 1) / kTile, (p.heads + kTile - 1) / kTile, p.batch);
  lse_reorder_kernel<<<grid, dim3(kTile, kRowsPerPass), 0, stream>>>(p);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace attnbench::cuda
