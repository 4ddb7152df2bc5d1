// 2D prefill, flash regime (transposed x8): each wave owns 32 packed query rows and computes S^T = K Q^T with
// mfma 32x32x8, so a lane holds 16 keys of ONE query per 32-key tile: the row max and sum are in-lane work plus one
// xor-32 shuffle, one rescale factor covers all of a lane's O registers, and the S^T accumulator, rounded to the
// dtype, is already the B operand of O^T += V^T P^T (acc_feeds_b): P^T never leaves the registers. Q^T is the
// B operand of S^T and stays in registers; K and V^T come through LDS (kv_tile.hpp); O^T is staged through LDS,
// aliased into the dead K/V region, for coalesced row stores. Instances are fp16 only (bf16 runs the narrow
// regime); the body takes DT so that the atoms' dtype stays one template argument.
#pragma once

#include "hip/device/kv_tile.hpp"
#include "hip/device/mfma_layout.hpp"
#include "hip/device/rows.hpp"

namespace attnbench::hip {

template <int D, int W>
struct FlashTile {
  static_assert(D == 64 || D == 128, "the flash regime has head sizes 64 and 128");
  static constexpr int kWaves = W, kThreads = kWaveSize * W, kBM = flash_block_m(W), kBN = kBlockN;
  static constexpr int kKBuffers = flash_k_buffers(W);
  static constexpr int kKPitch = D + kPad, kVtPitch = kBlockN + kPad, kOPitch = D + kPad;
  static constexpr int kLdsBytes = flash_lds_bytes(D, W);
  static_assert(kLdsBytes <= kLdsLimit, "LDS per workgroup");
};

// One wave's share: the Q^T fragments, O^T accumulators and softmax state of its 32 queries.
template <class A, class L, DType DT, int D, int W>
struct FlashWave {
  using T = FlashTile<D, W>;
  using M = typename L::Wide;
  static constexpr int kKt = T::kBN / M::M;  // 32-key sub-tiles per K/V tile
  static constexpr int kPk = T::kBN / M::K;  // k-steps of P V per K/V tile
  Frag q[D / M::K];
  typename A::f32x16 o[D / M::M];
  float m = kNegInf, l = 0.f;  // l: this lane's half of the query's sum until finish()
  int my_end = 0;              // one past the last key of this lane's query

  // Q^T of the query this lane feeds (B operand: column b.col, 4 consecutive d from b.row); zeros past the rows.
  ATTNBENCH_HD_INLINE void init(const AttentionParams& p, const WorkRows& w, int wave, int lane) {
    const Coord qb = M::b(lane, 0);
    const int q_row = w.r0 + wave * M::N + qb.col;
    const uint16_t* src =
        static_cast<const uint16_t*>(p.q) + row_offset(w.rows, q_row, p.q_stride_token, p.q_stride_head);
    HIP_UNROLL
    for (int ks = 0; ks < D / M::K; ++ks) q[ks] = q_row < w.rows.count() ? load_frag(src + ks * M::K + qb.row) : 0;
    each_o([&](int db, int r) { o[db][r] = 0.f; });
    my_end = w.visible_end(w.r0 + wave * M::N + M::acc(lane, 0).col);  // the accumulators' query (one per lane)
  }

  template <class F>
  ATTNBENCH_HD_INLINE static void each_o(F&& f) {
    HIP_UNROLL
    for (int db = 0; db < D / M::M; ++db)
      HIP_UNROLL
      for (int r = 0; r < M::kAcc; ++r) f(db, r);
  }

  // One K/V tile at key n0: S^T from kb (K, the A operand) and q, masked, softmax, O^T += V^T P^T.
  ATTNBENCH_HD_INLINE void step(const A& a, const WorkRows& w, const uint16_t* kb, const uint16_t* vt_lds, int n0,
                                float c, int lane) {
    typename A::f32x16 s[kKt];
    const Coord ka = M::a(lane, 0);
    HIP_UNROLL
    for (int kt = 0; kt < kKt; ++kt) {
      HIP_UNROLL
      for (int r = 0; r < M::kAcc; ++r) s[kt][r] = 0.f;
      HIP_UNROLL
      for (int ks = 0; ks < D / M::K; ++ks)
        s[kt] = a.template mfma32<DT>(load_frag(kb + (kt * M::M + ka.row) * T::kKPitch + ks * M::K + ka.col), q[ks],
                                      s[kt]);
      if (n0 + T::kBN > w.mask_from)
        HIP_UNROLL
        for (int r = 0; r < M::kAcc; ++r)
          if (n0 + kt * M::M + M::acc(lane, r).row >= my_end) s[kt][r] = kNegInf;
    }
    softmax(a, s, c);
    pv(a, s, vt_lds, lane);
  }

  // Online softmax of this lane's query: its 32 keys of the tile here, the other 32 in lane ^ 32.
  ATTNBENCH_HD_INLINE void softmax(const A& a, typename A::f32x16 (&s)[kKt], float c) {
    float mx = m;
    HIP_UNROLL
    for (int kt = 0; kt < kKt; ++kt)
      HIP_UNROLL
      for (int r = 0; r < M::kAcc; ++r) mx = max2(mx, s[kt][r]);
    mx = max2(mx, a.shfl_xor(mx, 32));
    const float m_use = mx == kNegInf ? 0.f : mx;  // nothing visible yet: p = 0
    const float alpha = a.exp2((m - m_use) * c);
    m = mx;
    float sum = 0.f;
    HIP_UNROLL
    for (int kt = 0; kt < kKt; ++kt)
      HIP_UNROLL
      for (int r = 0; r < M::kAcc; ++r) {
        s[kt][r] = a.exp2(s[kt][r] * c - m_use * c);
        sum += s[kt][r];
      }
    l = l * alpha + sum;
    each_o([&](int db, int r) { o[db][r] *= alpha; });
  }

  // P^T as the B operand: k-step ks covers keys 8 ks.. of the tile, registers 4 (ks % 4).. of sub-tile ks / 4.
  ATTNBENCH_HD_INLINE void pv(const A& a, const typename A::f32x16 (&s)[kKt], const uint16_t* vt_lds, int lane) {
    constexpr int kStepsPerKt = M::kAcc / M::kOperand;
    Frag pf[kPk];
    HIP_UNROLL
    for (int ks = 0; ks < kPk; ++ks) {
      const int kt = ks / kStepsPerKt, r = (ks % kStepsPerKt) * M::kOperand;
      pf[ks] = pack4<DT>(s[kt][r], s[kt][r + 1], s[kt][r + 2], s[kt][r + 3]);
    }
    const Coord va = M::a(lane, 0);
    HIP_UNROLL
    for (int db = 0; db < D / M::M; ++db)
      HIP_UNROLL
      for (int ks = 0; ks < kPk; ++ks)
        o[db] = a.template mfma32<DT>(load_frag(vt_lds + (db * M::M + va.row) * T::kVtPitch + ks * M::K + va.col),
                                      pf[ks], o[db]);
  }

  // O^T / l into the LDS staging tile (row: the query, col: d).
  ATTNBENCH_HD_INLINE void stage_o(const A& a, uint16_t* o_lds, int wave, int lane) {
    const float lsum = l + a.shfl_xor(l, 32);
    const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
    each_o([&](int db, int r) {
      const Coord e = M::acc(lane, r);  // row: d within the 32-d block, col: the query
      o_lds[(wave * M::N + e.col) * T::kOPitch + db * M::M + e.row] = float_to_half<DT>(o[db][r] * inv);
    });
  }
};

template <class A, class L, DType DT, int D, int W>
ATTNBENCH_HD void flash_block(const A& a, const AttentionParams& p, int q_major, unsigned char* lds) {
  using T = FlashTile<D, W>;
  const WorkRows w = prefill_rows(a, p, q_major, T::kBM);
  if (!w.active) return;
  const int tid = a.thread(), wave = tid / kWaveSize, lane = tid % kWaveSize;
  uint16_t* k_lds = reinterpret_cast<uint16_t*>(lds);
  uint16_t* vt_lds = k_lds + T::kKBuffers * T::kBN * T::kKPitch;
  const auto k_buffer = [&](int t) { return k_lds + (t % T::kKBuffers) * T::kBN * T::kKPitch; };
  FlashWave<A, L, DT, D, W> fw;
  fw.init(p, w, wave, lane);
  const float c = p.scale * kLog2e;

  if (T::kKBuffers == 2 && w.n_tiles > 0)
    load_kv_tile<D, T::kThreads>(a, p, w.table_row, w.rows.kvh, 0, w.rows.kv_len, k_lds, nullptr);
  for (int t = 0; t < w.n_tiles; ++t) {
    const int n0 = t * T::kBN;
    // Single-buffered: this tile's K with its V. Double: the next tile's K into the other buffer (free since the
    // last barrier), this tile's K loaded one step earlier.
    uint16_t* k_dst = T::kKBuffers == 1 ? k_buffer(t) : t + 1 < w.n_tiles ? k_buffer(t + 1) : nullptr;
    load_kv_tile<D, T::kThreads>(a, p, w.table_row, w.rows.kvh, T::kKBuffers == 1 ? n0 : n0 + T::kBN, w.rows.kv_len,
                                 k_dst, nullptr);
    load_kv_tile<D, T::kThreads>(a, p, w.table_row, w.rows.kvh, n0, w.rows.kv_len, nullptr, vt_lds);
    a.barrier();
    fw.step(a, w, k_buffer(t), vt_lds, n0, c, lane);
    a.barrier();  // every wave is done with K and V^T before the next loads
  }

  // Epilogue: the staging tile aliases K/V (dead after the loop's last barrier), then 16-byte row stores.
  uint16_t* o_lds = reinterpret_cast<uint16_t*>(lds);
  fw.stage_o(a, o_lds, wave, lane);
  a.barrier();
  constexpr int kParts = D / 8;
  for (int ch = tid; ch < T::kBM * kParts; ch += T::kThreads) {
    const int rr = ch / kParts, d0 = (ch % kParts) * 8;
    if (w.r0 + rr < w.rows.count())
      store_chunk(static_cast<uint16_t*>(p.out) + row_offset(w.rows, w.r0 + rr, p.o_stride_token, p.o_stride_head) + d0,
                  load_chunk(o_lds + rr * T::kOPitch + d0));
  }
}

}  // namespace attnbench::hip
