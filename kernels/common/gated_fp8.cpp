// The FP8 mode's defaults and declines (gated_fp8.hpp, validate_gated_fp8 in gated_block.hpp).
#include <cmath>
#include <string>

#include "attnbench/gated_block.hpp"
#include "attnbench/gated_fp8.hpp"

namespace attnbench {

namespace {
// The power of two at or above 6 sigma / 448: the weights' largest codes stay below 448.
float weight_descale(double fan_in) { return std::exp2(std::ceil(std::log2(6.0 / std::sqrt(fan_in) / 448.0))); }
}  // namespace

Fp8QuantSpec gated_fp8_defaults(int d_model, int64_t attn_width) {
  Fp8QuantSpec s;
  s.descale_h = 1.f / 64;
  s.descale_w_qkvg = weight_descale(d_model);
  s.descale_w_o = weight_descale(static_cast<double>(attn_width));
  s.scale_q = s.scale_k = 8.f;
  s.scale_v = s.scale_o = 16.f;
  return s;
}

void validate_gated_fp8(const GatedGeometry& g, const GatedOptions& o) {
  if (!o.fp8) return;
  if (o.mx) throw GatedDecline("fp8", "the FP8 mode and the MX modes exclude each other (set one of fp8, mx)");
  if (g.d_model() % 16 != 0)
    throw GatedDecline("d_model", "the FP8 mode's e4m3 rows of h and W_qkvg are 16-byte multiples: d_model % 16 == 0, "
                                  "got " + std::to_string(g.d_model()));
  for (const Fp8Factor& f : kFp8Factors) {
    const float v = (*o.fp8).*f.field;
    if (!std::isfinite(v) || !(v > 0.f) || !std::isfinite(1.f / v))
      throw GatedDecline(std::string("fp8.") + f.name,
                         "must be finite and > 0 with a finite reciprocal, got " + std::to_string(v));
  }
}

}  // namespace attnbench
