// The narrow regime's wave (mfma 16x16x16): MT 16-row tiles of packed query rows against NKT 16-key tiles of the
// LDS K/V tile. S = Q K^T leaves a row's 16 keys in 16 lanes (accumulator rows 4 (lane / 16) + r): the row max
// is an xor 1/2/4/8 reduction, and P must go through a per-wave LDS tile to become the A operand of O = P V (the
// A layout holds a row's keys in one lane). Q is the A operand of S and stays in registers. Used by the 2D narrow
// prefill (MT = 2: 32 rows per wave, all 64 keys) and the 3D decode kernel (MT = 1, 16 keys per wave).
#pragma once

#include "hip/device/kv_tile.hpp"
#include "hip/device/mfma_layout.hpp"
#include "hip/device/rows.hpp"

namespace attnbench::hip {

template <class A, class L, DType DT, int D, int MT, int NKT>
struct NarrowWave {
  using M = typename L::Narrow;
  static constexpr int kPPitch = NKT * M::N + kPad;  // P tile [MT * 16][NKT * 16 + kPad]
  static constexpr int kSteps = D / M::K;             // k-steps of S = Q K^T
  Frag q[MT][kSteps];
  typename A::f32x4 o[MT][D / M::N];
  float m[MT][M::kAcc], l[MT][M::kAcc];  // per accumulator row; l is this lane's partial sum until finish()

  // Q of rows [row0, row0 + 16 MT) of w (A operand: row a.row, 4 consecutive d from a.col); zeros past the rows.
  ATTNBENCH_HD_INLINE void init(const AttentionParams& p, const WorkRows& w, int row0, int lane) {
    const Coord qa = M::a(lane, 0);
    HIP_UNROLL
    for (int mt = 0; mt < MT; ++mt) {
      const int row = row0 + mt * M::M + qa.row;
      const uint16_t* src =
          static_cast<const uint16_t*>(p.q) + row_offset(w.rows, row, p.q_stride_token, p.q_stride_head);
      HIP_UNROLL
      for (int ks = 0; ks < kSteps; ++ks) q[mt][ks] = row < w.rows.count() ? load_frag(src + ks * M::K + qa.col) : 0;
      HIP_UNROLL
      for (int r = 0; r < M::kAcc; ++r) m[mt][r] = kNegInf, l[mt][r] = 0.f;
      HIP_UNROLL
      for (int dn = 0; dn < D / M::N; ++dn)
        HIP_UNROLL
        for (int r = 0; r < M::kAcc; ++r) o[mt][dn][r] = 0.f;
    }
  }

  // f(mt, nt, r, e) for every score register: e is its (row, key) in its 16 x 16 tile.
  template <class F>
  ATTNBENCH_HD_INLINE static void each_score(int lane, F&& f) {
    HIP_UNROLL
    for (int mt = 0; mt < MT; ++mt)
      HIP_UNROLL
      for (int nt = 0; nt < NKT; ++nt)
        HIP_UNROLL
        for (int r = 0; r < M::kAcc; ++r) f(mt, nt, r, M::acc(lane, r));
  }

  // One K/V tile: this wave's keys are [key0, key0 + 16 NKT) of the LDS tile, n0 the tile's first key.
  ATTNBENCH_HD_INLINE void step(const A& a, const WorkRows& w, int row0, const uint16_t* k_lds,
                                const uint16_t* vt_lds, uint16_t* p_lds, int key0, int n0, float c, int lane) {
    typename A::f32x4 s[MT][NKT];
    each_score(lane, [&](int mt, int nt, int r, Coord) { s[mt][nt][r] = 0.f; });
    const Coord kb = M::b(lane, 0);
    HIP_UNROLL
    for (int ks = 0; ks < kSteps; ++ks)
      HIP_UNROLL
      for (int nt = 0; nt < NKT; ++nt) {  // one K fragment feeds the MT row tiles
        const Frag kf = load_frag(k_lds + (key0 + nt * M::N + kb.col) * (D + kPad) + ks * M::K + kb.row);
        HIP_UNROLL
        for (int mt = 0; mt < MT; ++mt) s[mt][nt] = a.template mfma16<DT>(q[mt][ks], kf, s[mt][nt]);
      }
    if (n0 + key0 + NKT * M::N > w.mask_from)
      each_score(lane, [&](int mt, int nt, int r, Coord e) {
        if (n0 + key0 + nt * M::N + e.col >= w.visible_end(row0 + mt * M::M + e.row)) s[mt][nt][r] = kNegInf;
      });
    softmax(a, s, c);
    stage_p(a, s, p_lds, lane);
    pv(a, vt_lds, p_lds, key0, lane);
  }

  // Online softmax per accumulator row: max over the row's 16 lanes, this lane's share of the sum.
  ATTNBENCH_HD_INLINE void softmax(const A& a, typename A::f32x4 (&s)[MT][NKT], float c) {
    HIP_UNROLL
    for (int mt = 0; mt < MT; ++mt)
      HIP_UNROLL
      for (int r = 0; r < M::kAcc; ++r) {
        float mx = m[mt][r];
        HIP_UNROLL
        for (int nt = 0; nt < NKT; ++nt) mx = max2(mx, s[mt][nt][r]);
        HIP_UNROLL
        for (int x = 1; x < M::N; x *= 2) mx = max2(mx, a.shfl_xor(mx, x));
        const float m_use = mx == kNegInf ? 0.f : mx;
        const float alpha = a.exp2((m[mt][r] - m_use) * c);
        m[mt][r] = mx;
        float sum = 0.f;
        HIP_UNROLL
        for (int nt = 0; nt < NKT; ++nt) {
          s[mt][nt][r] = a.exp2(s[mt][nt][r] * c - m_use * c);
          sum += s[mt][nt][r];
        }
        l[mt][r] = l[mt][r] * alpha + sum;
        HIP_UNROLL
        for (int dn = 0; dn < D / M::N; ++dn) o[mt][dn][r] *= alpha;
      }
  }

  // P (accumulator layout) into the wave's LDS tile, rounded to the dtype.
  ATTNBENCH_HD_INLINE void stage_p(const A& a, const typename A::f32x4 (&s)[MT][NKT], uint16_t* p_lds, int lane) {
    each_score(lane, [&](int mt, int nt, int r, Coord e) {
      p_lds[(mt * M::M + e.row) * kPPitch + nt * M::N + e.col] = float_to_half<DT>(s[mt][nt][r]);
    });
    a.wave_sync();
  }

  // O += P V: P read back as the A operand, V^T fragments (B operand: 4 consecutive keys of one d) shared by the
  // MT row tiles.
  ATTNBENCH_HD_INLINE void pv(const A& a, const uint16_t* vt_lds, const uint16_t* p_lds, int key0, int lane) {
    const Coord pa = M::a(lane, 0), vb = M::b(lane, 0);
    HIP_UNROLL
    for (int ks = 0; ks < NKT * M::N / M::K; ++ks) {
      Frag pf[MT];
      HIP_UNROLL
      for (int mt = 0; mt < MT; ++mt) pf[mt] = load_frag(p_lds + (mt * M::M + pa.row) * kPPitch + ks * M::K + pa.col);
      HIP_UNROLL
      for (int dn = 0; dn < D / M::N; ++dn) {
        const Frag vf = load_frag(vt_lds + (dn * M::N + vb.col) * (kBlockN + kPad) + key0 + ks * M::K + vb.row);
        HIP_UNROLL
        for (int mt = 0; mt < MT; ++mt) o[mt][dn] = a.template mfma16<DT>(pf[mt], vf, o[mt][dn]);
      }
    }
    a.wave_sync();  // the P tile is rewritten by the next step
  }

  // The row sums over the row's 16 lanes; afterwards l holds each row's total.
  ATTNBENCH_HD_INLINE void finish(const A& a) {
    HIP_UNROLL
    for (int mt = 0; mt < MT; ++mt)
      HIP_UNROLL
      for (int r = 0; r < M::kAcc; ++r)
        HIP_UNROLL
        for (int x = 1; x < M::N; x *= 2) l[mt][r] += a.shfl_xor(l[mt][r], x);
  }
};

template <int D>
struct NarrowTile {
  static_assert(D == 64 || D == 128, "the narrow regime has head sizes 64 and 128");
  static constexpr int kWaves = narrow_waves(D), kThreads = kWaveSize * kWaves, kBM = narrow_block_m(kWaves);
  static constexpr int kMt = kNarrowRowsPerWave / 16, kNkt = kBlockN / 16;
  static constexpr int kLdsBytes = narrow_lds_bytes(D, kWaves);
  static_assert(kLdsBytes <= kLdsLimit, "LDS per workgroup");
};

// 2D prefill, narrow regime: K and V^T single-buffered in LDS, each wave 32 rows against the whole tile; O written
// straight from the accumulators (16 consecutive d per 16 lanes).
template <class A, class L, DType DT, int D>
ATTNBENCH_HD void narrow_block(const A& a, const AttentionParams& p, int q_major, unsigned char* lds) {
  using T = NarrowTile<D>;
  using Wave = NarrowWave<A, L, DT, D, T::kMt, T::kNkt>;
  using M = typename L::Narrow;
  const WorkRows w = prefill_rows(a, p, q_major, T::kBM);
  if (!w.active) return;
  const int tid = a.thread(), wave = tid / kWaveSize, lane = tid % kWaveSize;
  uint16_t* k_lds = reinterpret_cast<uint16_t*>(lds);
  uint16_t* vt_lds = k_lds + kBlockN * (D + kPad);
  uint16_t* p_lds = vt_lds + D * (kBlockN + kPad) + wave * T::kMt * M::M * Wave::kPPitch;
  const int row0 = w.r0 + wave * kNarrowRowsPerWave;
  const float c = p.scale * kLog2e;
  Wave wv;
  wv.init(p, w, row0, lane);
  for (int t = 0; t < w.n_tiles; ++t) {
    load_kv_tile<D, T::kThreads>(a, p, w.table_row, w.rows.kvh, t * kBlockN, w.rows.kv_len, k_lds, vt_lds);
    a.barrier();
    wv.step(a, w, row0, k_lds, vt_lds, p_lds, 0, t * kBlockN, c, lane);
    a.barrier();
  }
  wv.finish(a);
  HIP_UNROLL
  for (int mt = 0; mt < T::kMt; ++mt)
    HIP_UNROLL
    for (int r = 0; r < M::kAcc; ++r) {
      const Coord e = M::acc(lane, r);
      const int row = row0 + mt * M::M + e.row;
      if (row >= w.rows.count()) continue;
      const float inv = wv.l[mt][r] > 0.f ? 1.f / wv.l[mt][r] : 0.f;
      uint16_t* dst =
          static_cast<uint16_t*>(p.out) + row_offset(w.rows, row, p.o_stride_token, p.o_stride_head) + e.col;
      HIP_UNROLL
      for (int dn = 0; dn < D / M::N; ++dn) dst[dn * M::N] = float_to_half<DT>(wv.o[mt][dn][r] * inv);
    }
}

}  // namespace attnbench::hip
