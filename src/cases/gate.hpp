// The correctness gate: compares a kernel's 16-bit output with the fp32 reference on the checked rows.
// Two bounds, both must hold: max_abs (catches a few large errors) and each checked row's relative L2 error
// (catches errors that are small in absolute terms because the output is small, as at long KV lengths where
// attention outputs shrink like 1/sqrt(kv_len)). The derivation of both defaults is in the README ("The gate").
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attnbench/dtype.hpp"
#include "attnbench/types.hpp"

namespace attnbench {

// Where the fp32 reference runs: automatic (the GPU when a CUDA device is there and the GPU reference is built:
// every row; else the Eigen reference on the CPU), cpu (Eigen, rows sampled above --reference-gflop), gpu (required).
enum class ReferenceWhere { automatic, cpu, gpu };
const char* reference_where_name(ReferenceWhere w);
ReferenceWhere parse_reference_where(const std::string& s);  // throws std::invalid_argument

struct Tolerance {
  double atol = 0;  // bound on max |out - ref| over the checked elements
  double rtol = 0;  // bound on every checked row's ||out - ref||_2 / ||ref||_2
};

// One tolerance table per dtype, used everywhere.
double default_atol(DType d);
double default_rtol(DType d);
inline Tolerance default_tolerance(DType d) { return {default_atol(d), default_rtol(d)}; }
// The bounds of an attention row of these types: `base`, widened for the FP8 SDPA (an 8-bit Q), whose kernels may
// round P to e4m3 (README, "The gate"): rtol + 2^-4 (e4m3's relative rounding, an upper bound of a row's relative
// error from its weights) and atol + 2^-4 * 4 (that rounding times a weighted mean of |v| over N(0, 1) values).
Tolerance attention_tolerance(const AttentionTypes& t, const Tolerance& base);

// The bounds of a backward's gradients (dQ, dK, dV) of dtype d from the forward's `base`: README, "The gradient
// gate".
Tolerance gradient_tolerance(DType d, const Tolerance& base);
// The ref_floor of a gradient tensor (rows x row_len floats): a share of its rows' RMS norm. A causal row that sees
// one key has dQ = 0 exactly (dP = D), and a kernel summing dP and D in other orders leaves rounding noise there.
double gradient_row_floor(const float* ref, int64_t rows, int row_len);

// How much of an output the checked rows reach: the (sequence, head) pairs and the (64-row tile of a sequence, head)
// units holding at least one checked row, of all of them. Every row checked covers everything.
struct RowCoverage {
  int64_t sequence_heads = 0, sequence_heads_covered = 0;
  int64_t tile_heads = 0, tile_heads_covered = 0;
  bool complete() const { return sequence_heads_covered == sequence_heads && tile_heads_covered == tile_heads; }
};

// One output tensor of a gate over several (a backward's dq, dk, dv): its own result, as gate_rows gives it.
struct TensorGate {
  std::string name;
  bool passed = false;
  double max_abs = 0, rel_l2 = 0, max_row_rel = 0, atol = 0, rtol = 0;
  int64_t rows_checked = 0, nonfinite = 0, worst_row = -1;
  std::vector<std::string> failed;
};

struct GateResult {
  bool passed = false;
  double max_abs = 0;
  double rel_l2 = 0;          // over all checked elements
  double max_row_rel = 0;     // the largest per-row relative L2 error
  double atol = 0, rtol = 0;  // the bounds applied
  int64_t rows_checked = 0;
  int64_t nonfinite = 0;     // NaN/Inf anywhere in the output (unwritten poisoned elements included)
  int64_t worst_index = -1;  // flat element index in the output of the worst |out - ref|
  int64_t worst_row = -1;    // flat row index of the largest row relative error
  std::vector<std::string> failed;  // the criteria that failed: nonfinite, max_abs, row_rel_l2, no_rows, lse
  std::string detail;               // where the worst errors are
  std::string reference;            // where the reference ran: "gpu" (every row) or "cpu" (Eigen); "" unknown
  double reference_ms = 0;          // the reference's wall time for the case (its rows share it)
  RowCoverage coverage;             // what the checked rows reach (all units when every row is checked)
  // return_lse (gate_lse): rows whose LSE was compared, the largest |lse - ref| / max(1, |ref|), its bound.
  int64_t lse_checked = 0;
  double lse_max_err = 0, lse_tol = 0;
  // A gate over several tensors (merge_tensor_gates): each one's result; empty for a single output.
  std::vector<TensorGate> tensors;
};

// out: the full output (n_out halves of dtype), [rows_total, row_len] flat. ref_rows: for each checked row,
// its flat row index into out; ref: ref_rows.size() * row_len floats. Every element of out is scanned for
// non-finite values; only the checked rows are compared.
// ref_floor: a row's relative error is taken against max(||ref row||, ref_floor) (0: its own norm), for outputs with
// rows whose exact value cancels to zero (a gradient's: README, "The gradient gate").
GateResult gate_rows(const uint16_t* out, int64_t n_out, DType dtype, int row_len, const std::vector<int64_t>& ref_rows,
                     const float* ref, const Tolerance& tol, double ref_floor = 0);

// The LSE criterion of a return_lse call, added to g: got (n_got floats, every row's LSE; unwritten poisoned ones
// are NaN) at got_index[r] against ref[r] for each checked row. A row passes when |got - ref| <= tol * max(1,
// |ref|), or both are -inf (a row that sees no key and has no sink); a NaN anywhere in got fails ("lse").
void gate_lse(GateResult& g, const float* got, int64_t n_got, const std::vector<int64_t>& got_index, const float* ref,
              double tol);

// The gate of several output tensors, each gated alone (gate_rows, its own rows and bounds): passed when every one
// passed; failed names the tensor and the criterion ("dk.row_rel_l2"); max_abs, rel_l2 and max_row_rel are the
// largest of any tensor, atol/rtol and the worst row and index those of the tensor with the largest max_row_rel /
// rtol, whose name leads the detail; rows_checked and nonfinite are sums.
GateResult merge_tensor_gates(const std::vector<std::pair<std::string, GateResult>>& parts);

// "gate failed: row_rel_l2 0.5 > rtol 0.01; ..." naming each failed criterion, for a mismatch row's reason.
std::string gate_failure_reason(const GateResult& g);

}  // namespace attnbench
