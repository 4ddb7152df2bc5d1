// Launchers of the gated block's own kernels (gated_norm_rope.cu, gated_sigmoid.cu). Host-callable, no device
// headers; each only enqueues on `stream` (graph-capturable) and throws on a launch error. Pointers are in
// elements of the dtype's 16-bit halves; strides in elements.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "attnbench/dtype.hpp"

namespace attnbench::cuda {

// Per-head RMSNorm (fp32, weight offset + w) and rotate-half RoPE over [0, rope_dim), in place, for every Q head
// (row t: proj + t * row_stride + q0 + h * q_head_stride) and K head (proj + t * row_stride + k0 + h * d_head).
struct GatedNormRopeParams {
  void* proj = nullptr;
  int64_t row_stride = 0;
  int64_t tokens = 0;
  int h_q = 0, h_kv = 0;
  int64_t q0 = 0, q_head_stride = 0, k0 = 0;
  const void* q_weight = nullptr;  // [d_head]; unused without norm
  const void* k_weight = nullptr;
  float weight_offset = 0.f;
  float eps = 1e-6f;
  bool norm = true;
  const void* cos = nullptr;  // [tokens, rope_dim]
  const void* sin = nullptr;
  int rope_dim = 0;
};
void launch_gated_norm_rope(DType dt, int d_head, const GatedNormRopeParams& p, cudaStream_t stream);

// o[t, h, :] = round(o[t, h, :] * sigmoid(gate[t * gate_stride_token + h * gate_stride_head + :])), in place.
struct GatedSigmoidParams {
  void* o = nullptr;
  int64_t o_stride_token = 0;  // the head stride of o is d_head
  const void* gate = nullptr;
  int64_t gate_stride_token = 0, gate_stride_head = 0;
  int64_t tokens = 0;
  int heads = 0, d_head = 0;
};
void launch_gated_sigmoid(DType dt, const GatedSigmoidParams& p, cudaStream_t stream);

// The SDPA's constant tables for B sequences of S tokens viewed as a paged cache of block_size-token blocks:
// cu_seqlens_q[b] = b * S, seqused_k[b] = S, block_table[b, j] = b * S / block_size + j (identity).
struct GatedTablesParams {
  int32_t* cu_seqlens_q = nullptr;
  int32_t* seqused_k = nullptr;
  int32_t* block_table = nullptr;
  int batch = 0, seqlen = 0, block_size = 0, blocks_per_seq = 0;
};
void launch_gated_tables(const GatedTablesParams& p, cudaStream_t stream);

}  // namespace attnbench::cuda
