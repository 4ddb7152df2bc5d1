// fp32 reference of the gated attention block (Eigen): every stage in fp32 from the same 16-bit inputs, nothing
// rounded in between. Computes only requested output rows: K and V need the projection of every key the rows
// can see, Q, GATE and out only the requested rows. No GPU headers.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "attnbench/gated_block.hpp"

namespace attnbench::reference {

// Host inputs, 16-bit halves of the geometry's dtype, with the projection weights kept separate (the fused
// W_qkvg layout is a kernel's concern): h [B, S, d_model]; wq, wgate [h_q * d, d_model]; wk, wv [h_kv * d,
// d_model]; q_norm_weight, k_norm_weight [d]; cos, sin [B, S, rope_dim]; w_o [d_model, h_q * d].
struct GatedRefInputs {
  const uint16_t* h = nullptr;
  const uint16_t* wq = nullptr;
  const uint16_t* wgate = nullptr;
  const uint16_t* wk = nullptr;
  const uint16_t* wv = nullptr;
  const uint16_t* q_norm_weight = nullptr;
  const uint16_t* k_norm_weight = nullptr;
  const uint16_t* cos = nullptr;
  const uint16_t* sin = nullptr;
  const uint16_t* w_o = nullptr;
  const int32_t* seq_lens = nullptr;  // [B] or null: GatedBlockParams::seq_lens
};

// The keys [first, end) flat token `row` (b * S + s) sees (first >= end: none): the reference's own statement of the
// block's mask, kept apart from the kernels' rule. The sequence has kv_len = seq_lens[b] keys (S when seq_lens is
// null); the row sits at key position s + kv_len - S (causal_bottom_right) or s, and sees the keys of
// [0, kv_len) that is_causal and the window around that position leave.
std::pair<int, int> gated_visible_keys(const GatedGeometry& g, const GatedOptions& o, const int32_t* seq_lens,
                                       int64_t row);

// out: rows.size() * d_model floats, row r the output of flat token rows[r] (b * S + s). Uses the options'
// is_causal, causal_bottom_right, window_left, window_right, qk_norm, norm_weight_offset and attn_scale (layout and
// fusion do not change the math), and in.seq_lens. Under mx and fp8 the inputs are the values the codes stand for;
// fp8 rounds Q, K, V (after norm + RoPE) and the gated O to e4m3 under their scales, as the block's codes do. lse
// (optional): rows.size() * h_q floats, row r's SDPA log-sum-exp of query head h at r * h_q + h (natural log of the
// sum of exp over its scaled scores; -inf for none).
// Multi-threaded (OpenMP); throws std::out_of_range for a row outside [0, B * S).
void gated_block(const GatedGeometry& g, const GatedOptions& o, const GatedRefInputs& in,
                 const std::vector<int64_t>& rows, float* out, float* lse = nullptr);

// FLOPs the reference spends on `rows` (K/V projection of the keys they see, plus per-row work): the harness
// sizes its sample with it.
double gated_block_ref_flops(const GatedGeometry& g, const GatedOptions& o, const int32_t* seq_lens,
                             const std::vector<int64_t>& rows);

}  // namespace attnbench::reference
