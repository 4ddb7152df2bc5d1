// The MX modes' names and declines (gated_mx.hpp, validate_gated_mx in gated_block.hpp).
#include <cmath>
#include <stdexcept>
#include <string>

#include "attnbench/gated_block.hpp"
#include "attnbench/gated_mx.hpp"

namespace attnbench {

const char* mx_codes_name(MxCodes c) {
  switch (c) {
    case MxCodes::e4m3: return "e4m3";
    case MxCodes::e5m2: return "e5m2";
    case MxCodes::e2m1: return "e2m1";
  }
  return "?";
}

std::optional<MxCodes> parse_mx_codes(const std::string& s) {
  if (s == "e4m3") return MxCodes::e4m3;
  if (s == "e5m2") return MxCodes::e5m2;
  if (s == "e2m1") return MxCodes::e2m1;
  return std::nullopt;
}

const char* fp4_format_name(Fp4Format f) { return f == Fp4Format::nvfp4 ? "nvfp4" : "mxfp4"; }

std::optional<Fp4Format> parse_fp4_format(const std::string& s) {
  if (s == "nvfp4") return Fp4Format::nvfp4;
  if (s == "mxfp4") return Fp4Format::mxfp4;
  return std::nullopt;
}

mx::MxFormat mx_format_of(MxCodes c) {
  if (c == MxCodes::e5m2) throw std::invalid_argument("mx_format_of: MX codes are e4m3 or e2m1, not e5m2");
  return c == MxCodes::e4m3 ? mx::MxFormat::mxfp8 : mx::MxFormat::mxfp4;
}

mx::MxFormat mx_o_format(const MxQuantSpec& s) {
  if (!s.o_fp4) return mx::MxFormat::mxfp8;
  return s.o_format == Fp4Format::nvfp4 ? mx::MxFormat::nvfp4 : mx::MxFormat::mxfp4;
}

namespace {
void check_codes(const char* field, MxCodes c) {
  if (c == MxCodes::e5m2)
    throw GatedDecline(field, "MX codes are e4m3 (MXFP8) or e2m1 (MXFP4), not e5m2 (no MX format has e5m2 "
                              "elements with an E8M0 scale here)");
}

void check_factor(const char* field, float v, bool o_fp4) {
  if (!std::isfinite(v) || !(v > 0.f)) throw GatedDecline(field, "must be finite and > 0, got " + std::to_string(v));
  if (o_fp4 && v != 1.f)
    throw GatedDecline(field, "must be 1 under o_fp4 (the fp4 blocks' scales carry O's range), got " +
                                  std::to_string(v));
}
}  // namespace

void validate_gated_mx(const GatedGeometry& g, const GatedOptions& o) {
  if (!o.mx) return;
  const MxQuantSpec& s = *o.mx;
  if (g.dtype() != DType::bf16)
    throw GatedDecline("dtype", std::string("the MX modes run bf16 activations (an e4m3 value times its scale is "
                                            "not always an fp16 value), got ") + dtype_name(g.dtype()));
  check_codes("mx.w_qkvg", s.w_qkvg);
  check_codes("mx.w_o", s.w_o);
  if (g.d_model() % mx::kMxBlock != 0)
    throw GatedDecline("d_model", "MX blocks of 32 along d_model need d_model % 32 == 0, got " +
                                      std::to_string(g.d_model()));
  check_factor("mx.scale_o", s.scale_o, s.o_fp4);
  check_factor("mx.descale_w_o", s.descale_w_o, s.o_fp4);
  if (s.o_fp4) {
    const int granule = 4 * mx::mx_block_elems(mx_o_format(s));
    if (g.d_head() % granule != 0)
      throw GatedDecline("d_head", std::string("fp4 O (") + fp4_format_name(s.o_format) + ", blocks of " +
                                       std::to_string(granule / 4) + ") needs d_head % " + std::to_string(granule) +
                                       " == 0 (a head's row is whole groups of four scale blocks), got " +
                                       std::to_string(g.d_head()));
  }
  if (o.fuse_norm_rope && s.w_qkvg == MxCodes::e2m1)
    throw GatedDecline("fuse_norm_rope", "not served with e2m1 (fp4) W_qkvg: norm + RoPE run as their own pass "
                                         "after the fp4 projection");
}

}  // namespace attnbench
