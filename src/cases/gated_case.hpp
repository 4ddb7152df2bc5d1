// The gated block in the runner (op gated_block): seeded inputs, the options the knobs select, the checked rows,
// the tolerance rule. make_gated_case() (op_case.hpp) is the OpCase; the pieces are here for the tests.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_ref.hpp"
#include "cases/gate.hpp"
#include "cases/shapes.hpp"

namespace attnbench {

GatedGeometry gated_geometry(const GatedShape& s, DType dtype);  // throws GatedDecline
// The shape's causal, alignment, window and qk_norm, and the knobs ATTNBENCH_GATED_FUSE_GATE, _FUSE_NORM_ROPE, _QGATE_LAYOUT.
GatedOptions gated_options(const GatedShape& s, const KnobValues& knobs);

// Seeded host inputs (16-bit halves of the dtype): h ~ N(0, 1); Wq, Wgate, Wk, Wv ~ N(0, 1/d_model);
// W_o ~ N(0, 1/(h_q d)); norm weights 1 + N(0, 0.1^2); cos, sin of rotate-half RoPE at positions 0..S-1 of each
// sequence, inverse frequencies 10000^(-2i/rope_dim), i < rope_dim/2, the angle repeated over both halves.
// seq_lens: the shape's, empty for none (the builder leaves it empty).
struct GatedHostInputs {
  std::vector<uint16_t> h, wq, wgate, wk, wv, q_norm_weight, k_norm_weight, cos, sin, w_o;
  std::vector<int32_t> seq_lens;
  reference::GatedRefInputs ref() const;
};
GatedHostInputs build_gated_inputs(const GatedGeometry& g, uint64_t seed);
// The MX modes' weights: Wq, Wgate, Wk, Wv (codes of s.w_qkvg) and W_o (s.w_o) replaced by the values of their
// quantisation along d_model / h_q d (exact in bf16), so that the reference reads what the codes stand for.
void apply_mx_weights(const GatedGeometry& g, const MxQuantSpec& s, GatedHostInputs& in);
// The FP8 mode's inputs: h, Wq, Wgate, Wk, Wv and W_o replaced by the values of their e4m3 codes (code =
// e4m3(x / descale), value = code * descale in the dtype: exact when the descale is a power of two, as the defaults
// are, else within the dtype's rounding), so that the reference reads what the codes stand for.
void apply_fp8_inputs(const GatedGeometry& g, const Fp8QuantSpec& s, GatedHostInputs& in);

// The weights in a block's storage for options `o`: W_qkvg's halves in o.q_gate_layout's order, or under o.mx
// the MX codes and scales of W_qkvg (that order) and W_o (W_o's halves are the inputs' own), or under o.fp8 the
// e4m3 codes of h, W_qkvg and W_o (no scales: the spec's descales).
struct GatedKernelWeights {
  std::vector<uint16_t> w_qkvg;
  std::vector<uint8_t> qkvg_codes, qkvg_scales, o_codes, o_scales, h_codes;
};
GatedKernelWeights gated_kernel_weights(const GatedGeometry& g, const GatedOptions& o, const GatedHostInputs& in);

// Output rows (flat tokens b * S + s) the gate checks: all of them when the reference's per-row work fits
// budget_flops; else the first and last row of each sequence, both sides of the 64- and 128-row tile
// boundaries at the start and the end of each sequence, then a seeded random row of every 64-token tile while the
// budget lasts, and seeded random rows until the budget is spent (at least 16 rows). Sorted, unique.
std::vector<int64_t> gated_check_rows(const GatedGeometry& g, const GatedOptions& o, const int32_t* seq_lens,
                                      double budget_flops, uint64_t seed);

// The tolerance rule of the gated block: atol = base.atol * max(1, rms(ref)) (outputs of larger magnitude get the
// same relative slack on max_abs), and each checked row's relative L2 error <= base.rtol * kGatedRtolFactor: the
// block rounds normalised Q and K to 16 bits before the scores, an error that peaky attention (the (1 + w) norm
// weight quadruples the scores) amplifies to 1.8e-2 in bf16 (README, "The gate").
inline constexpr double kGatedRtolFactor = 5;

// What the checked tokens cover (check_rows.hpp's units; a token holds every head).
RowCoverage gated_row_coverage(const GatedGeometry& g, const std::vector<int64_t>& rows);

// Where the block's lse [B, h_q, S] holds row r's (flat token b S + s) head h, for each checked row and head in
// reference::gated_block's order (r-major): (b h_q + h) S + s.

std::vector<int64_t> gated_lse_index(const GatedGeometry& g, const std::vector<int64_t>& rows);
// Under the MX modes (mx set) the block and the reference quantise the gated O from values that differ by the bf16
// chain's error r = base.rtol * kGatedRtolFactor: an element near a rounding boundary lands on the other neighbour.
// With the O format's largest relative gap between neighbouring codes d (e4m3 1/8, e2m1 1/2), a fraction ~r/d of the
// elements moves by ~d |x|: a row error of ~sqrt(r d). Both bounds grow by the factor 1 + sqrt(d / r).
// Under the FP8 mode (fp8) the block and the reference both make kGatedFp8Quantisations e4m3 quantisations (Q, K,
// V, the gated O; d = 1/8) of values that differ by the 16-bit rounding of the stage before (base.rtol: Q and K
// are quantised before the scores amplify their error); their row errors add in quadrature to sqrt(4 d base.rtol),
// a factor 1 + sqrt(4 d base.rtol) / r on both bounds. The FP8 SDPA's e4m3 P, which the reference does not round,
// adds kFp8PRtol to rtol and 4 kFp8PRtol * max(1, rms) to atol (the attention op's 8-bit rule, README "The gate").
inline constexpr double kGatedFp8Quantisations = 4;
inline constexpr double kFp8PRtol = 0.0625;
Tolerance gated_tolerance(const Tolerance& base, const float* ref, std::size_t n,
                          const std::optional<MxQuantSpec>& mx = std::nullopt, bool fp8 = false);

}  // namespace attnbench
