#include "cases/gate.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace attnbench {

const char* reference_where_name(ReferenceWhere w) {
  switch (w) {
    case ReferenceWhere::automatic: return "auto";
    case ReferenceWhere::cpu: return "cpu";
    case ReferenceWhere::gpu: return "gpu";
  }
  return "?";
}

ReferenceWhere parse_reference_where(const std::string& s) {
  if (s == "auto") return ReferenceWhere::automatic;
  if (s == "cpu") return ReferenceWhere::cpu;
  if (s == "gpu") return ReferenceWhere::gpu;
  throw std::invalid_argument("--reference: '" + s + "' is not auto|cpu|gpu");
}

double default_atol(DType d) { return d == DType::f16 ? 2e-2 : 4e-2; }
// Per-row relative L2 bounds between the measured distributions (README, "The gate"): the worst correct kernel
// reads 0.45x of each (fp16 keeps 3 more mantissa bits: 8x less error); a 16-bit O accumulator over rows of 3000
// keys or more, 1.2x and more.
double default_rtol(DType d) { return d == DType::f16 ? 1e-3 : 8e-3; }

Tolerance attention_tolerance(const AttentionTypes& t, const Tolerance& base) {
  if (is_16bit(t.q)) return base;
  constexpr double kP8 = 1.0 / 16;  // e4m3: 3 mantissa bits, RNE
  return {base.atol + kP8 * 4, base.rtol + kP8};
}

// Twice the forward's bounds (README, "The gradient gate"): a correct kernel that rounds P before dS reads up to 0.49x
// of them (fp16; 0.39x bf16), the weakest planted bug (the last key tile dropped from dQ over 16k keys) 17x above.
Tolerance gradient_tolerance(DType /*d*/, const Tolerance& base) { return {2 * base.atol, 2 * base.rtol}; }

double gradient_row_floor(const float* ref, int64_t rows, int row_len) {
  constexpr double kFloorShare = 0.1;
  double sum2 = 0;
  const int64_t n = rows * row_len;
  for (int64_t i = 0; i < n; ++i) sum2 += static_cast<double>(ref[i]) * ref[i];
  return rows > 0 ? kFloorShare * std::sqrt(sum2 / static_cast<double>(rows)) : 0.0;
}

namespace {

struct RowError {
  double err2 = 0, ref2 = 0;
};

double row_rel(const RowError& r) {
  if (r.ref2 > 0) return std::sqrt(r.err2 / r.ref2);
  return r.err2 > 0 ? INFINITY : 0.0;
}

std::string num(double v) {
  std::ostringstream os;
  os << std::setprecision(3) << v;
  return os.str();
}

}  // namespace

GateResult gate_rows(const uint16_t* out, int64_t n_out, DType dtype, int row_len, const std::vector<int64_t>& ref_rows,
                     const float* ref, const Tolerance& tol, double ref_floor) {
  GateResult g;
  g.atol = tol.atol;
  g.rtol = tol.rtol;
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
    RowError row;
    for (int d = 0; d < row_len; ++d) {
      const double got = half_to_float(out[base + d], dtype);
      const double want = ref[r * row_len + d];
      if (!std::isfinite(got)) continue;  // counted above
      if (!std::isfinite(want)) {           // a broken reference never lets a row pass
        if (first_nonfinite < 0) first_nonfinite = base + d;
        ++g.nonfinite;
        continue;
      }
      const double diff = std::fabs(got - want);
      row.err2 += diff * diff;
      row.ref2 += want * want;
      if (diff > g.max_abs || g.worst_index < 0) {
        g.max_abs = diff;
        g.worst_index = base + d;
      }
    }
    err2 += row.err2;
    ref2 += row.ref2;
    row.ref2 = std::max(row.ref2, ref_floor * ref_floor);
    const double rel = row_rel(row);
    if (rel > g.max_row_rel || g.worst_row < 0) {
      g.max_row_rel = rel;
      g.worst_row = ref_rows[r];
    }
  }
  g.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (g.nonfinite > 0) {
    g.max_abs = INFINITY;
    g.max_row_rel = INFINITY;
    g.worst_index = first_nonfinite;
    g.failed.push_back("nonfinite");
  }
  if (g.rows_checked == 0) g.failed.push_back("no_rows");
  if (g.nonfinite == 0 && g.max_abs > tol.atol) g.failed.push_back("max_abs");
  if (g.nonfinite == 0 && g.max_row_rel > tol.rtol) g.failed.push_back("row_rel_l2");
  g.passed = g.failed.empty();
  std::ostringstream os;
  if (g.nonfinite > 0) {
    os << g.nonfinite << " non-finite output element(s), first at flat index " << first_nonfinite;
  } else if (g.worst_index >= 0) {
    os << "worst element at flat index " << g.worst_index << ", worst row " << g.worst_row << " (of " << row_len
       << " elements)";
  }
  g.detail = os.str();
  return g;
}

void gate_lse(GateResult& g, const float* got, int64_t n_got, const std::vector<int64_t>& got_index, const float* ref,
              double tol) {
  g.lse_tol = tol;
  g.lse_checked = static_cast<int64_t>(got_index.size());
  int64_t nan = 0;
  for (int64_t i = 0; i < n_got; ++i) nan += std::isnan(got[i]) ? 1 : 0;
  for (std::size_t r = 0; r < got_index.size(); ++r) {
    const double x = got[got_index[r]], want = ref[r];
    const bool both_empty = x == -INFINITY && want == -INFINITY;
    const double err = both_empty ? 0.0 : std::fabs(x - want) / std::max(1.0, std::fabs(want));
    if (!(err <= g.lse_max_err)) g.lse_max_err = std::isnan(err) ? INFINITY : err;
  }
  if (nan > 0 || !(g.lse_max_err <= tol)) {
    g.failed.push_back("lse");
    g.passed = false;
    if (nan > 0) g.lse_max_err = INFINITY;
  }
}

GateResult merge_tensor_gates(const std::vector<std::pair<std::string, GateResult>>& parts) {
  GateResult m;
  m.passed = !parts.empty();
  double worst = -1;
  for (const auto& [name, g] : parts) {
    m.passed = m.passed && g.passed;
    for (const auto& f : g.failed) m.failed.push_back(name + "." + f);
    m.max_abs = std::max(m.max_abs, g.max_abs);
    m.rel_l2 = std::max(m.rel_l2, g.rel_l2);
    m.max_row_rel = std::max(m.max_row_rel, g.max_row_rel);
    m.rows_checked += g.rows_checked;
    m.nonfinite += g.nonfinite;
    const double share = g.rtol > 0 ? g.max_row_rel / g.rtol : g.max_row_rel;
    if (share > worst) {
      worst = share;
      m.atol = g.atol;
      m.rtol = g.rtol;
      m.worst_row = g.worst_row;
      m.worst_index = g.worst_index;
      m.detail = name + ": " + g.detail;
    }
    m.tensors.push_back({name, g.passed, g.max_abs, g.rel_l2, g.max_row_rel, g.atol, g.rtol, g.rows_checked,
                         g.nonfinite, g.worst_row, g.failed});
  }
  if (parts.empty()) m.failed.push_back("no_rows");
  return m;
}

namespace {

// One criterion of a failed gate in words: "row_rel_l2 0.5 > rtol 0.01;".
std::string criterion_words(const std::string& f, int64_t nonfinite, double max_abs, double atol, double row_rel,
                            double rtol) {
  if (f == "nonfinite") return " nonfinite " + std::to_string(nonfinite) + " element(s);";
  if (f == "no_rows") return " no rows checked;";
  if (f == "max_abs") return " max_abs " + num(max_abs) + " > atol " + num(atol) + ";";
  if (f == "row_rel_l2") return " row_rel_l2 " + num(row_rel) + " > rtol " + num(rtol) + ";";
  return "";
}

}  // namespace

std::string gate_failure_reason(const GateResult& g) {
  std::string s = "gate failed:";
  for (const auto& t : g.tensors)
    for (const auto& f : t.failed)
      s += " " + t.name + criterion_words(f, t.nonfinite, t.max_abs, t.atol, t.max_row_rel, t.rtol);
  if (!g.tensors.empty()) return s + " " + g.detail;
  for (const auto& f : g.failed) {
    s += criterion_words(f, g.nonfinite, g.max_abs, g.atol, g.max_row_rel, g.rtol);
    if (f == "lse") s += " lse error " + num(g.lse_max_err) + " > " + num(g.lse_tol) + ";";
  }
  return s + " " + g.detail;
}

}  // namespace attnbench
