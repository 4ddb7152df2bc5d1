// cpu.unified's reading of stored values: 8-bit codes (an 8-bit K/V cache, an 8-bit Q) through tables of their
// dequantised values, 16-bit halves by their dtype.
#pragma once
#include <cstdint>

#include "attnbench/attention.hpp"
#include "attnbench/dtype.hpp"

namespace attnbench::cpu {

// An 8-bit K/V cache's codes in fp32, times k_scale / v_scale, and an 8-bit Q's times q_scale: built once per plan.
struct CodeLut {
  bool kv_on = false, q_on = false;
  float k_scale = 1.f, v_scale = 1.f, q_scale = 1.f;
  float k[256] = {}, v[256] = {}, q[256] = {};
  CodeLut() = default;
  CodeLut(const AttentionTypes& t, const AttentionFeatures& f)
      : kv_on(!is_16bit(t.kv)), q_on(!is_16bit(t.q)), k_scale(f.k_scale), v_scale(f.v_scale), q_scale(f.q_scale) {
    for (int c = 0; c < 256; ++c) {
      const uint8_t b = static_cast<uint8_t>(c);
      if (kv_on) k[c] = fp8_to_float(b, t.kv) * k_scale, v[c] = fp8_to_float(b, t.kv) * v_scale;
      if (q_on) q[c] = fp8_to_float(b, t.q) * q_scale;
    }
  }
};

// One token's K and V rows of kv head kh, converted to fp32: 16-bit halves of DT, or 8-bit codes through the LUT.
template <DType DT>
void convert_kv_row(const AttentionParams& p, const CodeLut& lut, int64_t base, float* kd, float* vd) {
  const int d = p.head_size;
  if (lut.kv_on) {
    const uint8_t* kc = static_cast<const uint8_t*>(p.k_cache) + base;
    const uint8_t* vc = static_cast<const uint8_t*>(p.v_cache) + base;
    for (int c = 0; c < d; ++c) kd[c] = lut.k[kc[c]];
    for (int c = 0; c < d; ++c) vd[c] = lut.v[vc[c]];
  } else {
    const uint16_t* kc = static_cast<const uint16_t*>(p.k_cache) + base;
    const uint16_t* vc = static_cast<const uint16_t*>(p.v_cache) + base;
    for (int c = 0; c < d; ++c) kd[c] = half_to_float(kc[c], DT);
    for (int c = 0; c < d; ++c) vd[c] = half_to_float(vc[c], DT);
  }
}

}  // namespace attnbench::cpu
