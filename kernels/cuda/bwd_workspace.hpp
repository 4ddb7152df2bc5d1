// cuda.unified_bwd's workspace and its two small kernels, shared by both dK/dV kernels (unified_bwd.cu, bwd_wgmma.cu):
// the preprocess (D = rowsum(dO o O), the LSE in base 2, both per head in rows a TMA box reads, and a zeroed fp32
// dQ) and the postprocess (dQ scaled and rounded to the dtype).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "attnbench/attention_bwd.hpp"

namespace attnbench::cuda {

// The fp32 dQ accumulator [heads][row_stride][head_size], LSE * log2(e) and D [heads][row_stride]: sequence s's
// rows from bwd_seq_row(s, cu_seqlens_q[s]), a multiple of 4, so that every query tile's row of floats starts on 16
// bytes, as a TMA box's first element must, and a tile's dQ rows are a box of one map. 256-byte aligned, carved from
// params.workspace.
// Where a GQA group's query heads are split over `splits` CTAs per key tile, dK and dV are added in fp32 into
// dk_acc, dv_acc ([total_k][kv_heads][head_size], unscaled; null otherwise) and cast by the postprocess.
struct BwdWorkspace {
  float* dq_acc;
  float* lse2;
  float* dsum;
  int64_t row_stride;
  float* dk_acc = nullptr;
  float* dv_acc = nullptr;
  int splits = 1;
};

// The LSE's base change (the kernels exponentiate in base 2) and the scores' scale into it.
constexpr float kLog2e = 1.4426950408889634f;

constexpr std::size_t bwd_align256(std::size_t b) { return (b + 255) / 256 * 256; }
// ceil4(q0) + 4 s: past ceil4 of the sequence before's end, which it is >= 4 beyond (q0 = that end).
__host__ __device__ constexpr int64_t bwd_seq_row(int seq, int64_t q0) { return (q0 + 3) / 4 * 4 + 4 * seq; }
constexpr int64_t bwd_row_stride(int64_t total_q, int num_seqs) { return bwd_seq_row(num_seqs, total_q); }

inline std::size_t bwd_dkdv_acc_bytes(const AttentionBwdParams& p) {
  return static_cast<std::size_t>(p.total_k) * p.kv_heads * p.head_size * 4;
}

inline std::size_t bwd_workspace_bytes(const AttentionBwdParams& p, int splits) {
  const std::size_t per_head = static_cast<std::size_t>(p.heads) * bwd_row_stride(p.total_q, p.num_seqs) * 4;
  const std::size_t dkdv = splits > 1 ? 2 * bwd_align256(bwd_dkdv_acc_bytes(p)) : 0;
  return bwd_align256(per_head * p.head_size) + 2 * bwd_align256(per_head) + dkdv;
}

inline BwdWorkspace bwd_workspace(const AttentionBwdParams& p, int splits) {
  char* base = static_cast<char*>(p.workspace);
  const int64_t rs = bwd_row_stride(p.total_q, p.num_seqs);
  const std::size_t per_head = bwd_align256(static_cast<std::size_t>(p.heads) * rs * 4);
  const std::size_t acc = bwd_align256(static_cast<std::size_t>(p.heads) * rs * 4 * p.head_size);
  BwdWorkspace ws{reinterpret_cast<float*>(base), reinterpret_cast<float*>(base + acc),
                  reinterpret_cast<float*>(base + acc + per_head), rs};
  if (splits > 1) {
    char* dkdv = base + acc + 2 * per_head;
    ws.dk_acc = reinterpret_cast<float*>(dkdv);
    ws.dv_acc = reinterpret_cast<float*>(dkdv + bwd_align256(bwd_dkdv_acc_bytes(p)));
    ws.splits = splits;
  }
  return ws;
}

template <DType DT>
void launch_bwd_preprocess(const AttentionBwdParams& p, const BwdWorkspace& ws, cudaStream_t stream);
template <DType DT>
void launch_bwd_postprocess(const AttentionBwdParams& p, const BwdWorkspace& ws, cudaStream_t stream);

}  // namespace attnbench::cuda
