// The attention backward op (shape files' "op": "attention_backward"): given Q, K, V, the forward's O and LSE and
// the output gradient dO, the gradients dQ, dK, dV. Training's packed varlen layout: Q, O, dO, dQ [total_q, heads,
// head_size] and K, V, dK, dV [total_k, kv_heads, head_size], sequences delimited by cu_seqlens_q / cu_seqlens_k. The
// problem is the forward's AttentionProblem (lengths, heads, mask, scale, dtype, window, softcap; its block_size
// names no layout here). One params struct, one kernel interface, the declared work model.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "attnbench/attention.hpp"
#include "attnbench/kernel.hpp"
#include "attnbench/knobs.hpp"

namespace attnbench {

// The contract between host and every backward kernel; pointers live in the backend's memory, strides in elements.
// Q, O, dO and dQ share the q strides; K, V, dK and dV the k strides. With GQA, dK/dV of a kv head hold the sum over
// the query heads of its group.
struct AttentionBwdParams {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *d_o = nullptr;
  const float* lse = nullptr;  // [total_q, heads] fp32, natural log, as the forward's return_lse writes it
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;  // written whole: a kernel never reads what they held
  const int32_t* cu_seqlens_q = nullptr;  // [num_seqs + 1]
  const int32_t* cu_seqlens_k = nullptr;  // [num_seqs + 1]
  void* workspace = nullptr;              // plan().workspace_bytes, owned by the caller; nothing kept between calls
  int64_t q_stride_token = 0, q_stride_head = 0;
  int64_t k_stride_token = 0, k_stride_head = 0;
  int num_seqs = 0, heads = 0, kv_heads = 0, head_size = 0, max_seqlen_q = 0, max_seqlen_k = 0;
  int64_t total_q = 0, total_k = 0;
  float scale = 0.f;  // resolved (never 0)
  bool causal = true, top_left = false;
  int window_left = -1, window_right = -1;  // the forward's sliding window (features.hpp)
  float softcap = 0.f;                      // the forward's s <- c tanh(s / c), c > 0
  DType dtype = DType::bf16;                // every tensor's but the LSE
};

// Dims, scale, mask and the dense-packed strides of a problem (pointers left null).
AttentionBwdParams make_attention_bwd_params(const AttentionProblem& p);
int64_t total_k(const AttentionProblem& p);

// FlashAttention's count: 2.5x the forward's visible-pair FLOPs (five matmuls to the forward's two). Bytes: Q, K, V,
// O, dO and the LSE read, dQ, dK, dV written, once each (keys no row sees included: their gradients are written).
WorkModel attention_bwd_work(const AttentionProblem& p);

// Bytes of workspace any backward plan of p asks for at most: an fp32 dQ accumulator, D and the LSE, a float per row.
double attention_bwd_workspace_bound(const AttentionProblem& p);

// Why no backward kernel takes this problem ("" when one may): an invalid problem, storage other than one 16-bit
// dtype (the backward is bf16/fp16 only), a forward feature other than the window and softcap, a fusion, return_lse.
std::string attention_bwd_conflict(const AttentionProblem& p);

// Throws std::invalid_argument prefixed with `kernel` where a call's params differ from its problem (dims, mask,
// features) or a pointer is null.
void check_attention_bwd_params(const std::string& kernel, const AttentionProblem& p, const AttentionBwdParams& a);

struct AttentionBwdPlan {
  virtual ~AttentionBwdPlan() = default;
  std::size_t workspace_bytes = 0;
  bool graph_replay = false;
  std::string summary;
};

class AttentionBwdKernel {
 public:
  virtual ~AttentionBwdKernel() = default;
  virtual std::string name() const = 0;
  virtual Backend backend() const = 0;
  virtual Support supports(const AttentionProblem& p, const KnobValues& knobs) const = 0;
  virtual std::unique_ptr<AttentionBwdPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const = 0;
  // Enqueues one complete backward on `stream` (ignored by the CPU backend); allocates nothing.
  virtual void run(const AttentionBwdPlan& plan, const AttentionBwdParams& params, void* stream) const = 0;
};

// cpu.unified_bwd: the backward over 64x64 tiles (dK/dV per key tile, dQ per query tile, both summed in fp32).
std::unique_ptr<AttentionBwdKernel> make_cpu_unified_bwd();

#ifdef ATTNBENCH_WITH_CUDA
// cuda.unified_bwd: a D preprocess, dK/dV per key tile in registers, dQ summed in fp32 and a postprocess; the dK/dV
// kernel on wgmma and TMA at d64 and d128, FlashAttention-2's on mma.sync at d256 (in two 128-column chunks) or
// where ATTNBENCH_SM90_BWD_PATH=mma.
std::unique_ptr<AttentionBwdKernel> make_cuda_unified_bwd();
#endif

#ifdef ATTNBENCH_WITH_CUDNN
// cudnn.sdpa_backward: cuDNN's fused SDPA backward (frontend graph API) on the packed inputs: ragged Q/K/LSE,
// padding mask, causal / sliding-window band.
std::unique_ptr<AttentionBwdKernel> make_cudnn_sdpa_backward();
#endif

}  // namespace attnbench
