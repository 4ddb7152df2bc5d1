// The unified paged attention op: the problem description (host), the one params struct every backend reads
// (pointers + explicit strides), and the declared work model (FLOPs, bytes).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnbench/dtype.hpp"

namespace attnbench {

// What is asked, independent of where the data lives. One entry of q_lens/kv_lens per sequence.
struct AttentionProblem {
  std::vector<int> q_lens;
  std::vector<int> kv_lens;
  int heads = 0;
  int kv_heads = 0;
  int head_size = 0;
  int block_size = 64;
  bool causal = true;
  float scale = 0.f;  // 0 means 1/sqrt(head_size)
  DType dtype = DType::bf16;
  bool output_gate = false;  // the epilogue applies O * sigmoid(gate) (params.gate); kernels that can't decline

  int num_seqs() const { return static_cast<int>(q_lens.size()); }
  int64_t total_q() const;
  int max_seqlen_q() const;
  int max_seqlen_k() const;
  int group_size() const { return heads / kv_heads; }
  bool is_decode() const { return max_seqlen_q() == 1; }
  float softmax_scale() const;
  // Blocks per sequence in the block table, and blocks in the cache (the sum of each sequence's blocks).
  int max_blocks_per_seq() const;
  int64_t num_blocks() const;
  // Throws std::invalid_argument naming the field on an inconsistent problem.
  void validate() const;
};

// Causal visibility, bottom-right aligned: the last key query row i of a sequence may see.
// Keys [0, visible_end) are visible to row i; decode rows see every key.
inline int causal_visible_end(int i, int q_len, int kv_len) { return i + (kv_len - q_len) + 1; }

// Declared work of one call: matmul FLOPs over visible (query, key) pairs and the fewest bytes moved
// (Q, O, and each sequence's K and V read once).
struct WorkModel {
  double flops = 0;
  double bytes = 0;
};
WorkModel attention_work(const AttentionProblem& p);

// The contract between host and every backend. Pointers live in the backend's memory.
// Q, O: [total_q, heads, head_size]; K, V caches: [num_blocks, block_size, kv_heads, head_size];
// strides in elements.
struct AttentionParams {
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  void* out = nullptr;
  const int32_t* cu_seqlens_q = nullptr;  // [num_seqs + 1]
  const int32_t* seqused_k = nullptr;     // [num_seqs]
  const int32_t* block_table = nullptr;   // [num_seqs, block_table_stride]
  void* workspace = nullptr;              // plan().workspace_bytes, owned by the caller
  // Output gate (problem.output_gate, the gated block's fuse_gate): the epilogue writes O * sigmoid(gate) with
  // gate[token * gate_stride_token + head * gate_stride_head + d], same dtype as O.
  const void* gate = nullptr;
  int64_t gate_stride_token = 0, gate_stride_head = 0;

  int64_t q_stride_token = 0, q_stride_head = 0;
  int64_t o_stride_token = 0, o_stride_head = 0;
  int64_t kv_stride_block = 0, kv_stride_token = 0, kv_stride_head = 0;
  int block_table_stride = 0;

  int num_seqs = 0, heads = 0, kv_heads = 0, head_size = 0, block_size = 0;
  int max_seqlen_q = 0, max_seqlen_k = 0;
  int64_t total_q = 0;
  float scale = 0.f;  // already resolved (never 0)
  bool causal = true;
  DType dtype = DType::bf16;
};

// Fills dims, scale and the dense-packed strides of the paged layout from a problem (pointers left null).
AttentionParams make_attention_params(const AttentionProblem& p);

}  // namespace attnbench
