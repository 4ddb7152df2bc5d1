#include "attnbench/attention_bwd.hpp"

#include <stdexcept>

#include "device/visibility.hpp"

namespace attnbench {

int64_t total_k(const AttentionProblem& p) {
  int64_t t = 0;
  for (int k : p.kv_lens) t += k;
  return t;
}

AttentionBwdParams make_attention_bwd_params(const AttentionProblem& p) {
  AttentionBwdParams a;
  a.num_seqs = p.num_seqs();
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.head_size = p.head_size;
  a.max_seqlen_q = p.max_seqlen_q();
  a.max_seqlen_k = p.max_seqlen_k();
  a.total_q = p.total_q();
  a.total_k = total_k(p);
  a.scale = p.softmax_scale();
  a.causal = p.causal;
  a.top_left = p.top_left;
  a.window_left = p.features.window_left;
  a.window_right = p.features.window_right;
  a.softcap = p.features.softcap;
  a.dtype = p.types.o;
  a.q_stride_head = a.k_stride_head = p.head_size;
  a.q_stride_token = static_cast<int64_t>(p.heads) * p.head_size;
  a.k_stride_token = static_cast<int64_t>(p.kv_heads) * p.head_size;
  return a;
}

WorkModel attention_bwd_work(const AttentionProblem& p) {
  const WorkModel fwd = attention_work(p);
  const double b = dtype_bytes(p.types.o), hd = p.head_size;
  const double q_side = static_cast<double>(p.total_q()) * p.heads * hd;      // Q, O, dO read; dQ written
  const double k_side = static_cast<double>(total_k(p)) * p.kv_heads * hd;  // K, V read; dK, dV written
  return {2.5 * fwd.flops, b * (4 * q_side + 4 * k_side) + 4.0 * p.total_q() * p.heads};
}

double attention_bwd_workspace_bound(const AttentionProblem& p) {
  // dQ's fp32 accumulator, the LSE and D, per head with each sequence's rows from a 16-byte boundary; 3 alignments.
  return 4.0 * p.heads * (p.total_q() + 4.0 * p.num_seqs() + 4) * (p.head_size + 2) + 768;
}

std::string attention_bwd_conflict(const AttentionProblem& p) {
  try {
    p.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  if (!p.types.uniform() || !is_16bit(p.types.o))
    return "types " + p.types.name() + ": the backward stores every tensor in one dtype, bf16 or fp16";
  const AttentionFeatures& f = p.features;
  if (!f.alibi_slopes.empty()) return "feature 'alibi_slopes': no backward implements it";
  if (!f.sinks.empty()) return "feature 'sinks': no backward implements it";
  if (!f.qq_bias.empty()) return "feature 'qq_bias': no backward implements it";
  if (p.fusion.output_gate || p.fusion.has_q_prologue())
    return "the gated block's fusions have no backward of their own (the block's backward runs them apart)";
  if (p.return_lse) return "return_lse: the backward reads the LSE, it writes none";
  return "";
}

void check_attention_bwd_params(const std::string& kernel, const AttentionProblem& p, const AttentionBwdParams& a) {
  const AttentionBwdParams want = make_attention_bwd_params(p);
  auto bad = [&](const std::string& what) { throw std::invalid_argument(kernel + ": params." + what); };
  if (a.num_seqs != want.num_seqs || a.heads != want.heads || a.kv_heads != want.kv_heads ||
      a.head_size != want.head_size || a.total_q != want.total_q || a.total_k != want.total_k)
    bad("dims differ from the problem's");
  if (a.max_seqlen_q < want.max_seqlen_q || a.max_seqlen_k < want.max_seqlen_k)
    bad("max_seqlen_q / max_seqlen_k below the problem's longest sequence");
  if (a.causal != want.causal || a.top_left != want.top_left || a.window_left != want.window_left ||
      a.window_right != want.window_right || a.softcap != want.softcap || a.dtype != want.dtype)
    bad("mask, features or dtype differ from the problem's");
  if (!(a.scale > 0.f)) bad("scale must be resolved (> 0)");
  if (!a.q || !a.k || !a.v || !a.o || !a.d_o || !a.lse || !a.dq || !a.dk || !a.dv || !a.cu_seqlens_q ||
      !a.cu_seqlens_k)
    bad("a tensor or offset pointer is null");
}

}  // namespace attnbench
