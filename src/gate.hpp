// The correctness gate: compares a kernel's 16-bit output with the fp32 reference on the checked rows.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attnbench/dtype.hpp"

namespace attnbench {

// One tolerance table per dtype, used everywhere (max_abs).
double default_atol(DType d);

struct GateResult {
  bool passed = false;
  double max_abs = 0;
  double rel_l2 = 0;
  double atol = 0;
  int64_t rows_checked = 0;
  int64_t nonfinite = 0;     // NaN/Inf anywhere in the output (unwritten poisoned elements included)
  int64_t worst_index = -1;  // flat element index in the output of the worst |out - ref|
  std::string detail;        // e.g. "token 5 head 3 dim 17: got 0.51 want 0.49"
};

// out: the full output (n_out halves of dtype), [rows_total, row_len] flat. ref_rows: for each checked row,
// its flat row index into out; ref: ref_rows.size() * row_len floats. Every element of out is scanned for
// non-finite values; only the checked rows are compared. describe(flat_index) names an element.
GateResult gate_rows(const uint16_t* out, int64_t n_out, DType dtype, int row_len, const std::vector<int64_t>& ref_rows,
                     const float* ref, double atol);

}  // namespace attnbench
