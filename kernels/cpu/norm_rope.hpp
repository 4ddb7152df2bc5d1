// The per-head QK-RMSNorm + rotate-half RoPE of one row, fp32: the gated block's norm + RoPE pass and cpu.unified's
// Q prologue both call it, so the fused and the separate path compute the same values.
#pragma once

namespace attnbench::cpu {

// One head row x[0, d) in place, fp32: when `norm`, x *= rsqrt(mean(x^2) + eps) * (offset + w); then rotate-half
// RoPE over [0, rope_dim): with h = rope_dim / 2, x[i] = x[i] cos[i] - x[i + h] sin[i] and
// x[i + h] = x[i + h] cos[i + h] + x[i] sin[i + h] for i < h (cos, sin: rope_dim floats of this token). Returns
// the norm's rsqrt(mean(x^2) + eps) (1 without norm): the backward's saved rstd.
float norm_rope_row(float* x, int d, bool norm, const float* w, float offset, float eps, int rope_dim,
                    const float* cos, const float* sin);

}  // namespace attnbench::cpu
