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

// Paged attention in fp32 for the requested rows. `p` holds HOST pointers (Q and O in one 16-bit dtype, K/V in it
// or in an 8-bit one read as code * k_scale / v_scale; index arrays as int32). Gathers K/V through the block table,
// maps query head h to kv head h / (heads / kv_heads), applies the attention features (README, "Attention
// features"), the bottom-right causal mask and the sliding window, softmax in fp32 (with the sinks), weights V.
// out: rows.size() * head_size floats, row-major in the order of `rows`. Multi-threaded over rows.
void paged_attention(const AttentionParams& p, const std::vector<RowId>& rows, float* out);

// Every row: out is [total_q, heads, head_size] fp32.
void paged_attention_all(const AttentionParams& p, float* out);

}  // namespace attnbench::reference
