// The gated block's FP8 mode (GatedOptions::fp8): per-tensor static scales over e4m3 codes. h, W_qkvg and W_o
// arrive as e4m3 codes (value = code * descale_*); the projection's epilogue applies descale_h * descale_w_qkvg;
// norm + RoPE run in the dtype; Q, K and V are quantised (code = e4m3(x * scale_*)) for the FP8 SDPA, which
// dequantises by 1 / scale_*; the gated O is quantised with scale_o and the out projection's epilogue applies
// descale_w_o / scale_o. README, "The gated block's FP8 mode".
#pragma once
#include <cstdint>

namespace attnbench {

struct Fp8QuantSpec {
  float descale_h = 1.f, descale_w_qkvg = 1.f, descale_w_o = 1.f;
  float scale_q = 1.f, scale_k = 1.f, scale_v = 1.f, scale_o = 1.f;
};

// The spec's factors by name (the shape field's keys), in declaration order: the one list the parser, the declines
// and the results' dims walk.
struct Fp8Factor {
  const char* name;
  float Fp8QuantSpec::*field;
};
inline constexpr Fp8Factor kFp8Factors[] = {
    {"descale_h", &Fp8QuantSpec::descale_h}, {"descale_w_qkvg", &Fp8QuantSpec::descale_w_qkvg},
    {"descale_w_o", &Fp8QuantSpec::descale_w_o}, {"scale_q", &Fp8QuantSpec::scale_q},
    {"scale_k", &Fp8QuantSpec::scale_k}, {"scale_v", &Fp8QuantSpec::scale_v}, {"scale_o", &Fp8QuantSpec::scale_o}};

// The spec a shape gets for the fields it leaves out, from the input builder's distributions: descale_h 2^-6
// (h ~ N(0, 1)); descale_w_* the power of two at or above 6 sigma / 448 of the weights (sigma = 1 / sqrt(fan-in));
// scale_q = scale_k = 8, scale_v = scale_o = 16 (normed Q and K stay below ~6, V and O below ~7: every code under
// 448, and each factor differs from 1 so that a kernel ignoring one fails the gate).
Fp8QuantSpec gated_fp8_defaults(int d_model, int64_t attn_width);

}  // namespace attnbench
