#include "gate.hpp"

#include <cmath>
#include <sstream>

namespace attnbench {

double default_atol(DType d) { return d == DType::f16 ? 2e-2 : 4e-2; }

GateResult gate_rows(const uint16_t* out, int64_t n_out, DType dtype, int row_len, const std::vector<int64_t>& ref_rows,
                     const float* ref, double atol) {
  GateResult g;
  g.atol = atol;
  g.rows_checked = static_cast<int64_t>(ref_rows.size());
  int64_t first_nonfinite = -1;
  for (int64_t i = 0; i < n_out; ++i) {
    if (!std::isfinite(half_to_float(out[i], dtype))) {
      if (first_nonfinite < 0) first_nonfinite = i;
      ++g.nonfinite;
    }
  }
  double err2 = 0, ref2 = 0;
  for (std::size_t r = 0; r < ref_rows.size(); ++r) {
    const int64_t base = ref_rows[r] * row_len;
    for (int d = 0; d < row_len; ++d) {
      const double got = half_to_float(out[base + d], dtype);
      const double want = ref[r * row_len + d];
      const double diff = std::fabs(got - want);
      if (!std::isfinite(got)) continue;  // counted above
      if (!std::isfinite(want)) {           // a broken reference never lets a row pass
        if (first_nonfinite < 0) first_nonfinite = base + d;
        ++g.nonfinite;
        continue;
      }
      err2 += diff * diff;
      ref2 += want * want;
      if (diff > g.max_abs || g.worst_index < 0) {
        g.max_abs = diff;
        g.worst_index = base + d;
      }
    }
  }
  g.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  std::ostringstream os;
  if (g.nonfinite > 0) {
    g.max_abs = INFINITY;
    g.worst_index = first_nonfinite;
    os << g.nonfinite << " non-finite output element(s), first at flat index " << first_nonfinite;
  } else if (g.worst_index >= 0) {
    os << "worst at flat index " << g.worst_index;
  }
  g.passed = g.nonfinite == 0 && g.rows_checked > 0 && g.max_abs <= atol;
  g.detail = os.str();
  return g;
}

}  // namespace attnbench
