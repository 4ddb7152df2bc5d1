#include "cpu/norm_rope.hpp"

#include <cmath>

namespace attnbench::cpu {

float norm_rope_row(float* x, int d, bool norm, const float* w, float offset, float eps, int rope_dim,
                    const float* cos, const float* sin) {
  float inv = 1.f;
  if (norm) {
    float ss = 0.f;
    for (int i = 0; i < d; ++i) ss += x[i] * x[i];
    inv = 1.f / std::sqrt(ss / static_cast<float>(d) + eps);
    for (int i = 0; i < d; ++i) x[i] = x[i] * inv * (offset + w[i]);
  }
  const int h = rope_dim / 2;
  for (int i = 0; i < h; ++i) {
    const float x1 = x[i], x2 = x[i + h];
    x[i] = x1 * cos[i] - x2 * sin[i];
    x[i + h] = x2 * cos[i + h] + x1 * sin[i + h];
  }
  return inv;
}

}  // namespace attnbench::cpu
