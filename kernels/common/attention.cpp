#include "attnbench/attention.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "device/paged.hpp"
#include "device/visibility.hpp"

namespace attnbench {

int64_t AttentionProblem::total_q() const {
  int64_t t = 0;
  for (int q : q_lens) t += q;
  return t;
}

int AttentionProblem::max_seqlen_q() const {
  return q_lens.empty() ? 0 : *std::max_element(q_lens.begin(), q_lens.end());
}

int AttentionProblem::max_seqlen_k() const {
  return kv_lens.empty() ? 0 : *std::max_element(kv_lens.begin(), kv_lens.end());
}

float AttentionProblem::softmax_scale() const {
  return scale > 0.f ? scale : 1.0f / std::sqrt(static_cast<float>(head_size));
}

int AttentionProblem::max_blocks_per_seq() const { return (max_seqlen_k() + block_size - 1) / block_size; }

int64_t AttentionProblem::num_blocks() const {
  int64_t n = 0;
  for (int kv : kv_lens) n += (kv + block_size - 1) / block_size;
  return n;
}

void AttentionProblem::validate() const {
  auto bad = [](const std::string& field, const std::string& why) {
    throw std::invalid_argument("field '" + field + "': " + why);
  };
  if (q_lens.empty()) bad("seqlens", "no sequences");
  if (q_lens.size() != kv_lens.size()) bad("seqlens", "q and kv lists differ in length");
  for (std::size_t i = 0; i < q_lens.size(); ++i) {
    if (q_lens[i] <= 0) bad("seqlen_q", "must be > 0, got " + std::to_string(q_lens[i]));
    if (kv_lens[i] <= 0) bad("seqlen_k", "must be > 0, got " + std::to_string(kv_lens[i]));
    if (q_lens[i] > kv_lens[i])
      bad("seqlen_q", "seqlen_q " + std::to_string(q_lens[i]) + " > seqlen_k " + std::to_string(kv_lens[i]) +
                          " (sequence " + std::to_string(i) + ")");
  }
  if (heads <= 0) bad("heads", "must be > 0, got " + std::to_string(heads));
  if (kv_heads <= 0) bad("kv_heads", "must be > 0, got " + std::to_string(kv_heads));
  if (heads % kv_heads != 0)
    bad("kv_heads", "heads " + std::to_string(heads) + " is not a multiple of kv_heads " + std::to_string(kv_heads));
  if (head_size <= 0) bad("head_size", "must be > 0, got " + std::to_string(head_size));
  if (block_size <= 0) bad("block_size", "must be > 0, got " + std::to_string(block_size));
  if (!(scale >= 0.f) || !std::isfinite(scale)) bad("scale", "must be a finite number >= 0");
  if (fusion.q_rope_dim < 0 || fusion.q_rope_dim > head_size || fusion.q_rope_dim % 2 != 0)
    bad("q_rope_dim", "must be even and in [0, head_size = " + std::to_string(head_size) + "], got " +
                          std::to_string(fusion.q_rope_dim));
  features.validate(heads, max_seqlen_q());
  if (is_16bit(types.kv) && (features.k_scale != 1.f || features.v_scale != 1.f))
    bad(features.k_scale != 1.f ? "k_scale" : "v_scale",
        "dequantises an 8-bit K/V cache; this one is " + std::string(dtype_name(types.kv)) + " (set kv_dtype)");
  if (!is_16bit(types.q) && is_16bit(types.kv))
    bad("q_dtype", std::string("an 8-bit Q (") + dtype_name(types.q) + ") is the FP8 SDPA's: it needs an 8-bit K/V "
        "cache (kv_dtype), this one is " + dtype_name(types.kv));
  if (is_16bit(types.q) && features.q_scale != 1.f)
    bad("q_scale", "dequantises an 8-bit Q; this one is " + std::string(dtype_name(types.q)) + " (set q_dtype)");
  if (!is_16bit(types.q) && fusion.has_q_prologue())
    bad(fusion.q_norm ? "q_norm" : "q_rope_dim", "the Q prologue reads a 16-bit Q; this one is " +
                                                     std::string(dtype_name(types.q)));
}

WorkModel attention_work(const AttentionProblem& p) {
  WorkModel w;
  double pairs = 0;      // visible (query, key) pairs, per head
  double kv_tokens = 0;  // keys some row sees (a sliding window leaves the rest unread)
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int q = p.q_lens[s];
    const device::Visibility vis(q, p.kv_lens[s], p.causal, p.top_left, p.features.window_left,
                                 p.features.window_right);
    for (int i = 0; i < q; ++i) pairs += vis.visible_count(i);
    if (q > 0) kv_tokens += std::max(0, vis.visible_end(q - 1) - vis.first_visible(0));
  }
  w.flops = 4.0 * pairs * p.heads * p.head_size;  // QK^T and PV, 2 FLOPs per multiply-add
  const double qb = static_cast<double>(dtype_bytes(p.types.q)), ob = static_cast<double>(dtype_bytes(p.types.o));
  const double kvb = static_cast<double>(dtype_bytes(p.types.kv));
  w.bytes = (qb + ob) * p.total_q() * p.heads * p.head_size + kvb * 2.0 * kv_tokens * p.kv_heads * p.head_size;
  return w;
}

void check_q_prologue_params(const std::string& kernel, const AttentionFusion& f, const AttentionQPrologue& a) {
  if (a.q_rope_dim != f.q_rope_dim)
    throw std::invalid_argument(kernel + ": params.prologue.q_rope_dim " + std::to_string(a.q_rope_dim) +
                                " differs from the problem's " + std::to_string(f.q_rope_dim));
  if ((a.q_norm_weight != nullptr) != f.q_norm)
    throw std::invalid_argument(kernel + (f.q_norm ? ": the problem has q_norm, params.prologue.q_norm_weight is null"
                                                   : ": params.prologue.q_norm_weight is set for a problem without q_norm"));
  if (f.q_rope_dim > 0 && (a.rope_cos == nullptr || a.rope_sin == nullptr))
    throw std::invalid_argument(kernel + ": the problem has q_rope_dim > 0, params.prologue.rope_cos / rope_sin is null");
}

AttentionParams make_attention_params(const AttentionProblem& p) {
  AttentionParams a;
  a.num_seqs = p.num_seqs();
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.head_size = p.head_size;
  a.block_size = p.block_size;
  a.max_seqlen_q = p.max_seqlen_q();
  a.max_seqlen_k = p.max_seqlen_k();
  a.total_q = p.total_q();
  a.scale = p.softmax_scale();
  a.causal = p.causal;
  a.top_left = p.top_left;
  a.types = p.types;
  a.features.window_left = p.features.window_left;
  a.features.window_right = p.features.window_right;
  a.features.softcap = p.features.softcap;
  a.features.qq_bias_len = p.features.qq_bias_len;
  a.features.k_scale = p.features.k_scale;
  a.features.v_scale = p.features.v_scale;
  a.features.q_scale = p.features.q_scale;
  a.q_stride_head = p.head_size;
  a.q_stride_token = static_cast<int64_t>(p.heads) * p.head_size;
  a.o_stride_head = a.q_stride_head;
  a.o_stride_token = a.q_stride_token;
  a.kv_stride_head = p.head_size;
  a.kv_stride_token = static_cast<int64_t>(p.kv_heads) * p.head_size;
  a.kv_stride_block = a.kv_stride_token * p.block_size;
  a.block_table_stride = p.max_blocks_per_seq();
  a.prologue.q_rope_dim = p.fusion.q_rope_dim;
  a.lse_stride_start = a.lse_stride_row = p.heads;
  a.lse_stride_head = 1;
  return a;
}

std::string lse_conflict(const AttentionProblem& p, const std::string& kernel) {
  return p.return_lse ? "return_lse: not written by " + kernel : "";
}

void check_lse_params(const std::string& kernel, bool return_lse, const AttentionParams& a) {
  if (return_lse && a.lse == nullptr)
    throw std::invalid_argument(kernel + ": the problem has return_lse, params.lse is null");
  if (!return_lse && a.lse != nullptr)
    throw std::invalid_argument(kernel + ": params.lse is set for a problem without return_lse");
}

void check_block_table(const std::string& kernel, const AttentionParams& a) {
  if (a.block_table_stride < 0)
    throw std::invalid_argument(kernel + ": params.block_table_stride " + std::to_string(a.block_table_stride) +
                                " is negative");
}

void check_gpu_layout(const std::string& kernel, const AttentionParams& a) {
  check_block_table(kernel, a);
  const int64_t q_chunk = 16 / static_cast<int64_t>(dtype_bytes(a.types.q));
  if ((a.q_stride_token | a.q_stride_head) % q_chunk != 0 || (a.o_stride_token | a.o_stride_head) % 8 != 0)
    throw std::invalid_argument(kernel + ": Q and O strides must be multiples of 16 bytes (" + std::to_string(q_chunk) +
                                " elements of Q, 8 of O)");
  const int64_t kv_chunk = 16 / static_cast<int64_t>(dtype_bytes(a.types.kv));
  if ((a.kv_stride_block | a.kv_stride_token | a.kv_stride_head) % kv_chunk != 0)
    throw std::invalid_argument(kernel + ": K/V strides must be multiples of " + std::to_string(kv_chunk) +
                                " elements (16-byte rows of " + dtype_name(a.types.kv) + ")");
  if (!device::page_fits_int32(a.block_size, a.kv_heads, a.head_size, a.kv_stride_token, a.kv_stride_head))
    throw std::invalid_argument(kernel + ": a K/V page must span fewer than 2^31 elements (kv_stride_token " +
                                std::to_string(a.kv_stride_token) + ", kv_stride_head " +
                                std::to_string(a.kv_stride_head) + ")");
}

std::string sixteen_bit_storage_conflict(const AttentionProblem& p) {
  const AttentionTypes& t = p.types;
  if (t.uniform() && is_16bit(t.q)) return "";
  if (!t.uniform())
    return "types " + t.name() + " (q-kv-o): this kernel stores Q, K/V and O in one dtype, fp16 or bf16";
  return std::string("dtype ") + dtype_name(t.q) + ": this kernel stores Q, K/V and O in fp16 or bf16 only";
}

std::string unified_storage_conflict(const AttentionProblem& p, const std::string& kernel) {
  const AttentionTypes& t = p.types;
  if (is_16bit(t.o) && ((t.q == t.o && (t.kv == t.q || !is_16bit(t.kv))) || (!is_16bit(t.q) && !is_16bit(t.kv))))
    return "";
  return (t.uniform() ? std::string("dtype ") + dtype_name(t.q) : "types " + t.name() + " (q-kv-o)") + ": " + kernel +
         " stores O in fp16 or bf16, Q in it or in 8-bit codes (e4m3, e5m2), K/V in Q's dtype or in 8-bit codes";
}

}  // namespace attnbench
