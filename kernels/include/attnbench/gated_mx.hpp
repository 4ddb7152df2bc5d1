// The gated block's MX modes (GatedOptions::mx): both projections block-scaled. h is quantised to MXFP8 per 32
// along d_model; W_qkvg and W_o arrive as MX codes (e4m3: MXFP8, e2m1: MXFP4) with E8M0 scales per 32 along their
// rows; the gated O is quantised per row to MXFP8, or with o_fp4 to NVFP4 / MXFP4, before the out projection.
// Norm + RoPE, the SDPA and the gate stay in bf16. README, "The gated block's MX modes".
#pragma once
#include <optional>
#include <string>

#include "attnbench/mx_quant.hpp"

namespace attnbench {

enum class MxCodes { e4m3, e5m2, e2m1 };  // an MX tensor's element codes (e5m2 is named so that it is declined)
const char* mx_codes_name(MxCodes c);
std::optional<MxCodes> parse_mx_codes(const std::string& s);  // "e4m3", "e5m2", "e2m1"

enum class Fp4Format { nvfp4, mxfp4 };  // nvfp4: e4m3 scale per 16; mxfp4: E8M0 per 32
const char* fp4_format_name(Fp4Format f);
std::optional<Fp4Format> parse_fp4_format(const std::string& s);

struct MxQuantSpec {
  MxCodes w_qkvg = MxCodes::e4m3;
  MxCodes w_o = MxCodes::e4m3;
  bool o_fp4 = false;  // the gated O in fp4 (o_format) instead of MXFP8
  Fp4Format o_format = Fp4Format::nvfp4;
  // Per-tensor factors of the out projection (MXFP8 O only; 1 under o_fp4, whose block scales carry O's range):
  // O * scale_o is quantised, W_o's values are code * block scale * descale_w_o, out = acc * descale_w_o / scale_o.
  float scale_o = 1.f;
  float descale_w_o = 1.f;
};

// The storage formats the spec gives each tensor.
mx::MxFormat mx_format_of(MxCodes c);  // e4m3 -> mxfp8, e2m1 -> mxfp4; throws for e5m2
inline mx::MxFormat mx_h_format() { return mx::MxFormat::mxfp8; }
mx::MxFormat mx_o_format(const MxQuantSpec& s);

}  // namespace attnbench
