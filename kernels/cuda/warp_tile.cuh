// One warp's share of flash attention in the mma.sync m16n8k16 register layout: 16 query rows against a run of
// keys. Accumulator element e of an n8 tile sits at row lane/4 + 8*(e/2), column 2*(lane%4) + e%2, so each thread
// owns two rows (r = 0, 1) and a row is spread over the 4 lanes of a quad.
#pragma once
#include <cstdint>

#include "cuda/mma_sm80.cuh"

namespace attnbench::cuda::dev {

// Q fragments (A operand, 16 rows x D) of rows [row0, row0 + 16) of a swizzled [rows][D] tile.
template <int D>
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[D / 16][4], uint32_t sq, int row0, int lane) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) ldmatrix_x4(qf[ks], sq + swz<D>(row0 + lane % 16, ks * 2 + lane / 16));
}

// s[NT8][4] = Q (16 x D) * K^T for keys [krow0, krow0 + 8 * NT8) of the swizzled K tile. Q comes from registers
// (QF non-null) or is re-read from the swizzled Q tile at sq / qrow0 (large head sizes, to save registers).
template <DType DT, int D, int NT8, bool kQInRegs>
__device__ __forceinline__ void qk_tile(float (&s)[NT8][4], const uint32_t (&qf)[kQInRegs ? D / 16 : 1][4],
                                        uint32_t sq, int qrow0, uint32_t sk, int krow0, int lane) {
  static_assert(NT8 % 2 == 0, "keys come in pairs of n8 tiles");
#pragma unroll
  for (int n = 0; n < NT8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    uint32_t a[4];
    if constexpr (kQInRegs) {
      a[0] = qf[ks][0]; a[1] = qf[ks][1]; a[2] = qf[ks][2]; a[3] = qf[ks][3];
    } else {
      ldmatrix_x4(a, sq + swz<D>(qrow0 + lane % 16, ks * 2 + lane / 16));
    }
#pragma unroll
    for (int np = 0; np < NT8 / 2; ++np) {
      uint32_t b[4];  // keys np*16 + [0,8) then [8,16); each: k-low, k-high halves
      ldmatrix_x4(b, sk + swz<D>(krow0 + np * 16 + (lane / 16) * 8 + lane % 8, ks * 2 + (lane / 8) % 2));
      mma_16816<DT>(s[2 * np], a, b[0], b[1]);
      mma_16816<DT>(s[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// The max's slack for a 16-bit P (fp16 and bf16 hold p <= 2^8 at their usual relative precision).
constexpr int kSlackLog2P16 = 8;

// Base-2 online softmax of one score tile (masked with -inf): updates the running max m (raw score units) and the
// thread-partial row sums l, turns s into probabilities, and hands each row's O rescale factor to
// rescale(r, alpha). c = softmax scale * log2(e). Both rows at once, the quads' shuffles of the two rows side by
// side; PARTS > 1 splits each row's max and sum into PARTS interleaved partials (dependency chains of 2 NT8 / PARTS
// instead of 2 NT8: the wide kernel, whose softmax runs alone on its warp; the narrow kernels keep 1, whose
// occupancy depends on every register). P_LOG2 > 0 leaves the probabilities in s scaled by 2^P_LOG2 (an 8-bit P's
// range: the exponent's bias, free) while l stays unscaled. SLACK_LOG2 > 0 keeps a row's max until the tile's
// exceeds it by more than 2^SLACK_LOG2 in probability (p then reaches 2^SLACK_LOG2; m, l and O stay consistent, so
// the result is the same): alpha is then exactly 1 on most tiles past the first and the O rescale is skipped.
// OFF: each row's scores in s lack off[r], one value for the thread's scores of the row on this tile (ALiBi's
// distance to the thread's first column, which differs across a quad): the max, before the quad's reduction, and the
// probabilities add it, so it costs per row, not per score.
template <int NT8, int PARTS = 1, int P_LOG2 = 0, int SLACK_LOG2 = 0, bool OFF = false, typename Rescale>
__device__ __forceinline__ void softmax_tile(float (&s)[NT8][4], float (&m)[2], float (&l)[2], float c,
                                             Rescale&& rescale, const float* off = nullptr) {
  constexpr int kParts = PARTS;
  static_assert(kParts >= 1 && (2 * NT8) % kParts == 0, "partials must divide a row's values");
  float part[2][kParts];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int k = 0; k < kParts; ++k) part[r][k] = OFF ? m[r] - off[r] : m[r];
#pragma unroll
  for (int n = 0; n < NT8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float& acc = part[e >> 1][(2 * n + (e & 1)) % kParts];
      acc = fmaxf(acc, s[n][e]);
    }
  float mx[2], ms[2], alpha[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = part[r][0];
#pragma unroll
    for (int k = 1; k < kParts; ++k) mx[r] = fmaxf(mx[r], part[r][k]);
    if constexpr (OFF) mx[r] += off[r];
  }
#pragma unroll
  for (int d = 1; d <= 2; d *= 2)
#pragma unroll
    for (int r = 0; r < 2; ++r) mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], d));
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // Both -inf (nothing visible yet): NaN, not greater, the max stays -inf.
    const bool move = SLACK_LOG2 == 0 || (mx[r] - m[r]) * c > static_cast<float>(SLACK_LOG2);
    const float m_new = move ? mx[r] : m[r];
    const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing visible yet stays at p = 0
    alpha[r] = move ? exp2_approx((m[r] - m_use) * c) : 1.f;
    m[r] = m_new;
    ms[r] = m_use * c - static_cast<float>(P_LOG2);
    if constexpr (OFF) ms[r] -= off[r] * c;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int k = 0; k < kParts; ++k) part[r][k] = 0.f;
#pragma unroll
  for (int n = 0; n < NT8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float pr = exp2_approx(fmaf(s[n][e], c, -ms[e >> 1]));
      s[n][e] = pr;
      part[e >> 1][(2 * n + (e & 1)) % kParts] += pr;
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = part[r][0];
#pragma unroll
    for (int k = 1; k < kParts; ++k) sum += part[r][k];
    if constexpr (P_LOG2 != 0) sum *= 1.f / static_cast<float>(1 << P_LOG2);
    l[r] = l[r] * alpha[r] + sum;
    rescale(r, alpha[r]);
  }
}

// Online softmax over one tile of scores that also rescales the output accumulator rows. SLACK_LOG2 > 0: the max's
// slack (softmax_tile), and a warp whose rows' maxima all stayed skips the rescale.
template <int NT8, int NO8, int SLACK_LOG2 = 0>
__device__ __forceinline__ void online_softmax(float (&s)[NT8][4], float (&m)[2], float (&l)[2], float (&o)[NO8][4],
                                               float c) {
  auto rescale = [&](int r, float alpha) {
#pragma unroll
    for (int d = 0; d < NO8; ++d) {
      o[d][2 * r] *= alpha;
      o[d][2 * r + 1] *= alpha;
    }
  };
  if constexpr (SLACK_LOG2 == 0) {
    softmax_tile<NT8>(s, m, l, c, rescale);
  } else {
    float alpha[2];
    softmax_tile<NT8, 1, 0, SLACK_LOG2>(s, m, l, c, [&](int r, float a) { alpha[r] = a; });
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
      rescale(0, alpha[0]);
      rescale(1, alpha[1]);
    }
  }
}

// o (16 x DS) += P (16 x 8*NT8, from the score registers: the accumulator layout of two n8 tiles is the A layout of
// one k16 step) * V for keys [vrow0, vrow0 + 8 * NT8) and columns [8 c8, 8 c8 + DS) of the swizzled [rows][D] V
// tile (ldmatrix .trans gives V^T fragments); DS = D, c8 = 0: the whole head.
template <DType DT, int D, int NT8, int DS = D>
__device__ __forceinline__ void pv_tile(float (&o)[DS / 8][4], const float (&s)[NT8][4], uint32_t sv, int vrow0,
                                        int lane, int c8 = 0) {
#pragma unroll
  for (int kk = 0; kk < NT8 / 2; ++kk) {
    const uint32_t a[4] = {pack2<DT>(s[2 * kk][0], s[2 * kk][1]), pack2<DT>(s[2 * kk][2], s[2 * kk][3]),
                           pack2<DT>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                           pack2<DT>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < DS / 16; ++dp) {
      uint32_t b[4];  // keys [0,8) / [8,16) of this k-step, d columns dp*16 + [0,8) then [8,16)
      ldmatrix_x4_trans(b, sv + swz<D>(vrow0 + kk * 16 + ((lane / 8) & 1) * 8 + lane % 8, c8 + dp * 2 + lane / 16));
      mma_16816<DT>(o[2 * dp], a, b[0], b[1]);
      mma_16816<DT>(o[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

// Two-m16-tile variants (32 query rows per warp, FA2's per-warp share): every K (V) ldmatrix.x4 feeds MT x 2 mma
// instead of 2. Q is re-read from the swizzled Q tile each k-step (registers go to the MT x D/8 accumulators).
// s[MT][NT8][4] = Q rows [qrow0 + 16 mt, +16) * K^T for keys [krow0, krow0 + 8 * NT8).
template <DType DT, int D, int NT8, int MT>
__device__ __forceinline__ void qk_tile_mt(float (&s)[MT][NT8][4], uint32_t sq, int qrow0, uint32_t sk, int krow0,
                                           int lane) {
  static_assert(NT8 % 2 == 0, "keys come in pairs of n8 tiles");
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < NT8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) ldmatrix_x4(a[mt], sq + swz<D>(qrow0 + 16 * mt + lane % 16, ks * 2 + lane / 16));
#pragma unroll
    for (int np = 0; np < NT8 / 2; ++np) {
      uint32_t b[4];
      ldmatrix_x4(b, sk + swz<D>(krow0 + np * 16 + (lane / 16) * 8 + lane % 8, ks * 2 + (lane / 8) % 2));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16816<DT>(s[mt][2 * np], a[mt], b[0], b[1]);
        mma_16816<DT>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// o[MT] (16 x D each) += P[MT] * V for keys [vrow0, vrow0 + 8 * NT8): one V^T fragment per (k-step, d pair) feeds
// the MT m-tiles.
template <DType DT, int D, int NT8, int MT>
__device__ __forceinline__ void pv_tile_mt(float (&o)[MT][D / 8][4], const float (&s)[MT][NT8][4], uint32_t sv,
                                           int vrow0, int lane) {
#pragma unroll
  for (int kk = 0; kk < NT8 / 2; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      a[mt][0] = pack2<DT>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      a[mt][1] = pack2<DT>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      a[mt][2] = pack2<DT>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      a[mt][3] = pack2<DT>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, sv + swz<D>(vrow0 + kk * 16 + ((lane / 8) & 1) * 8 + lane % 8, dp * 2 + lane / 16));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16816<DT>(o[mt][2 * dp], a[mt], b[0], b[1]);
        mma_16816<DT>(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// Output gate: 1 / (1 + 2^(-g log2 e)) in fp32 (sigmoid), for two adjacent 16-bit gate values packed in `g2`.
template <DType DT> __device__ __forceinline__ float2 sigmoid2(uint32_t g2) {
  const float2 g = unpack2<DT>(g2);
  return make_float2(1.f / (1.f + __expf(-g.x)), 1.f / (1.f + __expf(-g.y)));
}

}  // namespace attnbench::cuda::dev
