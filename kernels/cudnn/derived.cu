// The derived index tensors of cudnn.sdpa (derived.hpp): one thread per entry.
#include "cuda/runtime.hpp"
#include "cudnn/derived.hpp"

namespace attnbench::cudnn {
namespace {

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads) derive_tables_kernel(const int32_t* cu_seqlens_q, int num_seqs,
                                                                 int64_t q_stride_token, int64_t o_stride_token,
                                                                 DerivedTables t) {
  const int i = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (i <= num_seqs) derive_entry(cu_seqlens_q, num_seqs, i, q_stride_token, o_stride_token, t);
}

}  // namespace

void launch_derive_tables(const int32_t* cu_seqlens_q, int num_seqs, int64_t q_stride_token, int64_t o_stride_token,
                          const DerivedTables& t, cudaStream_t stream) {
  const int blocks = (num_seqs + 1 + kThreads - 1) / kThreads;
  derive_tables_kernel<<<blocks, kThreads, 0, stream>>>(cu_seqlens_q, num_seqs, q_stride_token, o_stride_token, t);
  cuda::check_last_launch("cudnn.sdpa: derive_tables_kernel");
}

}  // namespace attnbench::cudnn
