// The unified paged attention op: the problem description (host), the one params struct every backend reads
// (pointers + explicit strides), and the declared work model (FLOPs, bytes).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnbench/dtype.hpp"
#include "attnbench/features.hpp"
#include "attnbench/types.hpp"

namespace attnbench {

// The gated block's fusions, as named options of a problem; a kernel without them declines a problem that asks.
// Epilogue: O * sigmoid(gate) (AttentionEpilogue). Q prologue: each Q row RMS-normalised (q_norm) and rotated over
// its first q_rope_dim dims (rotate-half RoPE) as it is loaded (AttentionQPrologue).
struct AttentionFusion {
  bool output_gate = false;
  bool q_norm = false;
  int q_rope_dim = 0;
  bool has_q_prologue() const { return q_norm || q_rope_dim > 0; }
};

// What is asked, independent of where the data lives. One entry of q_lens/kv_lens per sequence.
struct AttentionProblem {
  std::vector<int> q_lens;
  std::vector<int> kv_lens;
  int heads = 0;
  int kv_heads = 0;
  int head_size = 0;
  int block_size = 64;
  bool causal = true;
  // Where query row i of a sequence sits among its keys: bottom-right (false), at i + kv_len - q_len, or top-left
  // (true), at i. The causal diagonal, the sliding window and ALiBi's distance follow it; it differs only where
  // q_len != kv_len.
  bool top_left = false;
  // The kernel also writes each row's log-sum-exp (AttentionParams::lse); a kernel that cannot declines.
  bool return_lse = false;
  float scale = 0.f;  // 0 means 1/sqrt(head_size)
  AttentionTypes types;      // storage of Q, K/V and O (types.hpp)
  AttentionFusion fusion;    // the gated block's output-gate epilogue and Q prologue, when asked for
  AttentionFeatures features;  // sliding window, softcap, ALiBi, sinks, qq-bias, K/V scales (features.hpp)

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

// The key position of query row i of a sequence (AttentionProblem::top_left), and causal visibility: keys
// [0, causal_visible_end) are visible to row i (bottom-right, a decode row sees every key). The reference's (and
// its tests') own statement of the rule, kept apart from the kernels' shared one
// (kernels/common/device/visibility.hpp) so that each checks the other.
inline int query_key_position(int i, int q_len, int kv_len, bool top_left) { return top_left ? i : i + (kv_len - q_len); }
inline int causal_visible_end(int i, int q_len, int kv_len, bool top_left) {
  return query_key_position(i, q_len, kv_len, top_left) + 1;
}

// Declared work of one call: matmul FLOPs over visible (query, key) pairs (the sliding window's included) and the
// fewest bytes moved (Q, O, and once each key of a sequence that some row sees, K and V).
struct WorkModel {
  double flops = 0;
  double bytes = 0;
};
WorkModel attention_work(const AttentionProblem& p);

// Output-gate epilogue (the gated block's fuse_gate): O * sigmoid(gate) with
// gate[token * gate_stride_token + head * gate_stride_head + d], same dtype as O; null without the fusion.
struct AttentionEpilogue {
  const void* gate = nullptr;
  int64_t gate_stride_token = 0, gate_stride_head = 0;
};

// Q prologue, on each Q row x of token t (t counts from the batch's first token) in fp32: with q_norm,
// x *= rsqrt(mean(x^2) + q_norm_eps) * (q_norm_offset + q_norm_weight[d]); then, with h = q_rope_dim / 2 and
// c, s = rope_cos, rope_sin + t * q_rope_dim: x[i] = x[i] c[i] - x[i + h] s[i] and x[i + h] = x[i + h] c[i + h] +
// x[i] s[i + h] for i < h; rounded once to the dtype before the scores. Weight, cos and sin are in the dtype (the
// gated block's QK-RMSNorm and partial RoPE).
struct AttentionQPrologue {
  const void* q_norm_weight = nullptr;  // [head_size]
  float q_norm_offset = 0.f, q_norm_eps = 1e-6f;
  const void* rope_cos = nullptr;  // [total_q, q_rope_dim]
  const void* rope_sin = nullptr;
  int q_rope_dim = 0;
};

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
  // plan().workspace_bytes, owned by the caller. A cuda.unified plan may keep state there between its calls and
  // writes it again when another cuda.unified plan ran on any of those bytes since, so they may share one buffer, at
  // the same or overlapping offsets; nothing else may write it between such a plan's calls, and a graph captured
  // from its calls holds it while it may replay.
  void* workspace = nullptr;
  AttentionEpilogue epilogue;   // problem.fusion.output_gate
  AttentionQPrologue prologue;  // problem.fusion.q_norm / q_rope_dim
  AttentionFeatureParams features;  // the problem's features; pointers in the backend's memory
  // problem.return_lse (null otherwise): per row, ln(sum_j e^(s_j) + e^sink) over its visible keys' final scores
  // (fp32; -inf for a row that sees no key and has no sink), at lse[q_start * lse_stride_start + i *
  // lse_stride_row + head * lse_stride_head], q_start = cu_seqlens_q[seq], i the row's index in its sequence.
  // make_attention_params: [total_q, heads] (start and row strides heads, head stride 1).
  float* lse = nullptr;
  int64_t lse_stride_start = 0, lse_stride_row = 0, lse_stride_head = 0;

  int64_t q_stride_token = 0, q_stride_head = 0;
  int64_t o_stride_token = 0, o_stride_head = 0;
  int64_t kv_stride_block = 0, kv_stride_token = 0, kv_stride_head = 0;
  int block_table_stride = 0;  // >= 0: sequence s's row starts s * block_table_stride entries in

  int num_seqs = 0, heads = 0, kv_heads = 0, head_size = 0, block_size = 0;
  int max_seqlen_q = 0, max_seqlen_k = 0;
  int64_t total_q = 0;
  float scale = 0.f;  // already resolved (never 0)
  bool causal = true;
  bool top_left = false;  // AttentionProblem::top_left
  AttentionTypes types;
};

// A call's Q-prologue params against its problem's fusion: the pointers where the problem has the step, none where
// it has not. Throws std::invalid_argument prefixed with `kernel`.
void check_q_prologue_params(const std::string& kernel, const AttentionFusion& f, const AttentionQPrologue& a);

// The layout rules the GPU kernels share: every stride a multiple of 16 bytes (8 elements of Q and O, 8 or 16 of
// K/V by its dtype), and a K/V page
// spanning fewer than 2^31 elements (offsets inside a page are 32-bit). Throws std::invalid_argument prefixed with
// `kernel`, naming the strides.
void check_gpu_layout(const std::string& kernel, const AttentionParams& a);
// A non-negative block_table_stride (the kernels widen a row's offset unsigned); check_gpu_layout asks it too.
// Throws std::invalid_argument prefixed with `kernel`, naming the value.
void check_block_table(const std::string& kernel, const AttentionParams& a);

// Why a kernel that stores Q, K/V and O in one 16-bit dtype (fp16 or bf16) cannot take this problem ("" when it
// can): the decline today's kernels give 8-bit storage and mixed types.
std::string sixteen_bit_storage_conflict(const AttentionProblem& p);
// Why `kernel`, which stores O in one 16-bit dtype and Q in it (K/V in it or in 8-bit codes, e4m3 / e5m2) or Q and
// K/V in 8-bit codes (the FP8 SDPA), cannot take this problem's types ("" when it can): the unified kernels' one
// type rule.
std::string unified_storage_conflict(const AttentionProblem& p, const std::string& kernel);

// Fills dims, scale and the dense-packed strides of the paged layout from a problem (pointers left null).
AttentionParams make_attention_params(const AttentionProblem& p);

// "return_lse: not written by KERNEL" when the problem asks for the LSE, "" otherwise: the decline of kernels
// that do not write it.
std::string lse_conflict(const AttentionProblem& p, const std::string& kernel);
// A call's lse pointer against its problem's return_lse: set exactly when asked for. Throws std::invalid_argument
// prefixed with `kernel`.
void check_lse_params(const std::string& kernel, bool return_lse, const AttentionParams& a);

}  // namespace attnbench
