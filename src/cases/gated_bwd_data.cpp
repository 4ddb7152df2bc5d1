#include "cases/gated_bwd_data.hpp"

#include <chrono>
#include <cmath>
#include <random>
#include <tuple>
#include <utility>

#include "cases/inputs.hpp"

namespace attnbench {

namespace {

std::vector<uint16_t> rounded(const std::vector<float>& x, DType dt) {
  std::vector<uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = float_to_half(x[i], dt);
  return out;
}

std::vector<int64_t> every_row(int64_t rows) {
  std::vector<int64_t> r(rows);
  for (int64_t i = 0; i < rows; ++i) r[i] = i;
  return r;
}

}  // namespace

GatedBwdHost build_gated_bwd_host(const GatedGeometry& g, const GatedOptions& o, uint64_t seed, Device* gpu) {
  GatedBwdHost host;
  const DType dt = g.dtype();
  host.in = build_gated_inputs(g, seed);
  std::mt19937_64 rng(seed ^ 0x6a7bd1ULL);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const int64_t dm = g.d_model();
  for (int64_t t = 0; t < g.tokens(); ++t) {
    const float f = static_cast<float>(std::exp2(u(rng)));
    for (int64_t c = 0; c < dm; ++c) {
      uint16_t& x = host.in.h[t * dm + c];
      x = float_to_half(half_to_float(x, dt) * f, dt);
    }
  }
  host.dy = random_normal(static_cast<std::size_t>(g.tokens() * dm), dt, seed, 109, 0.f, 1.f);
  const auto t0 = std::chrono::steady_clock::now();
  if (gpu) {
    gated_bwd_reference_on_device(*gpu, g, o, host);
    host.where = "gpu";
  } else {
    host.ref = reference::gated_block_backward(g, o, host.in.ref(), host.dy.data());
  }
  host.ref_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const reference::GatedBwdRef& r = host.ref;
  for (auto [dst, src] : {std::pair{&host.q, &r.q}, {&host.k, &r.k}, {&host.v, &r.v}, {&host.gate, &r.gate},
                          {&host.o, &r.o}, {&host.q_pre, &r.q_pre}, {&host.k_pre, &r.k_pre}})
    *dst = rounded(*src, dt);
  return host;
}

std::vector<float> reference_dw_qkvg(const GatedGeometry& g, QGateLayout layout, const reference::GatedBwdRef& r) {
  const GatedColumns c = gated_columns(g, layout);
  const int64_t dm = g.d_model(), d = g.d_head();
  std::vector<float> out(static_cast<std::size_t>(g.n_qkvg() * dm));
  auto put = [&](const std::vector<float>& part, int heads, int64_t first, int64_t head_stride) {
    for (int h = 0; h < heads; ++h)
      for (int64_t i = 0; i < d; ++i)
        std::copy_n(part.begin() + (h * d + i) * dm, dm, out.begin() + (first + h * head_stride + i) * dm);
  };
  put(r.dwq, g.h_q(), c.q0, c.q_head_stride);
  put(r.dwgate, g.h_q(), c.g0, c.g_head_stride);
  put(r.dwk, g.h_kv(), c.k0, d);
  put(r.dwv, g.h_kv(), c.v0, d);
  return out;
}

Tolerance gated_bwd_tolerance(DType dt, const Tolerance& base, const std::vector<float>& ref, int row_len) {
  double top = 0;  // the largest row RMS: a K or V row of dW_qkvg sums a whole GQA group and outgrows the Q rows
  for (std::size_t r0 = 0; r0 + row_len <= ref.size(); r0 += row_len) {
    double ss = 0;
    for (int i = 0; i < row_len; ++i) ss += static_cast<double>(ref[r0 + i]) * ref[r0 + i];
    top = std::max(top, ss / row_len);
  }
  const Tolerance t = gradient_tolerance(dt, base);
  return {t.atol * std::max(1.0, std::sqrt(top)), t.rtol * kGatedRtolFactor};
}

GateResult gate_gated_gradients(const GatedGeometry& g, const GatedOptions& o, const GatedBwdOptions& b,
                                const GatedBwdGrads& got, const GatedBwdHost& host, const Tolerance& base) {
  const reference::GatedBwdRef& r = host.ref;
  const std::vector<float> dw_qkvg = b.need_dw_qkvg ? reference_dw_qkvg(g, o.q_gate_layout, r) : std::vector<float>{};
  const int dm = g.d_model(), d = g.d_head();
  const int aw = static_cast<int>(g.attn_width());
  std::vector<std::pair<std::string, GateResult>> parts;
  auto add = [&](const char* name, bool wanted, const uint16_t* out, const std::vector<float>& want, int row_len) {
    if (!wanted) return;
    const int64_t n = static_cast<int64_t>(want.size()), rows = n / row_len;
    const Tolerance tol = gated_bwd_tolerance(g.dtype(), base, want, row_len);
    const double floor = gradient_row_floor(want.data(), rows, row_len);
    parts.emplace_back(name, gate_rows(out, n, g.dtype(), row_len, every_row(rows), want.data(), tol, floor));
  };
  add("dh", b.need_dh, got.dh, r.dh, dm);
  add("dw_qkvg", b.need_dw_qkvg, got.dw_qkvg, dw_qkvg, dm);
  add("dw_o", b.need_dw_o, got.dw_o, r.dw_o, aw);
  add("dw_q_norm", b.dw_norms(o), got.dw_q_norm, r.dw_q_norm, d);
  add("dw_k_norm", b.dw_norms(o), got.dw_k_norm, r.dw_k_norm, d);
  GateResult gr = merge_tensor_gates(parts);
  gr.reference = host.where;
  gr.reference_ms = host.ref_ms;
  return gr;
}

}  // namespace attnbench
