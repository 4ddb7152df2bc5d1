// fp32 references (Eigen) over exactly the inputs the kernels see. No GPU headers.
#pragma once
#include <cstdint>
#include <vector>

#include "attnbench/attention.hpp"

namespace attnbench::reference {

// One output row: a query token of the packed Q and a query head.
struct RowId {
  int64_t token = 0;
  int head = 0;
};

// Paged attention in fp32 for the requested rows. `p` holds HOST pointers (O in a 16-bit dtype, Q in it or in an
// 8-bit one read as code * q_scale, K/V in Q's 16-bit dtype or in an 8-bit one read as code * k_scale / v_scale;
// index arrays as int32). Gathers K/V through the block table,
// maps query head h to kv head h / (heads / kv_heads), applies the attention features (README, "Attention
// features"), the bottom-right causal mask and the sliding window, softmax in fp32 (with the sinks), weights V.
// out: rows.size() * head_size floats, row-major in the order of `rows`. lse (optional): rows.size() floats, each
// row's natural-log sum of exp over its final scores and its sink (AttentionParams::lse's definition; -inf for a row
// that sees no key and has no sink). Multi-threaded over rows.
void paged_attention(const AttentionParams& p, const std::vector<RowId>& rows, float* out, float* lse = nullptr);

// Every row: out is [total_q, heads, head_size] fp32, lse (optional) [total_q, heads].
void paged_attention_all(const AttentionParams& p, float* out, float* lse = nullptr);

}  // namespace attnbench::reference
