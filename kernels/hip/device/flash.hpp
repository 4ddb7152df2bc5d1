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

// S^T of 32-key tile kt: keys from k_lds (A operand), this wave's queries from qf (B operand).
template <class A, class M, DType DT, int D>
ATTNBENCH_HD_INLINE typename A::f32x16 flash_scores(const A& a, const Frag (&qf)[D / M::K], const uint16_t* k_lds,
                                                    int kt, int lane) {
  typename A::f32x16 s;
  HIP_UNROLL
  for (int r = 0; r < M::kAcc; ++r) s[r] = 0.f;
  const Coord ka = M::a(lane, 0);
  HIP_UNROLL
  for (int ks = 0; ks < D / M::K; ++ks)
    s = a.template mfma32<DT>(load_frag(k_lds + (kt * M::M + ka.row) * (D + kPad) + ks * M::K + ka.col), qf[ks], s);
  return s;
}

template <class A, class L, DType DT, int D, int W>
ATTNBENCH_HD void flash_block(const A& a, const AttentionParams& p, int q_major, unsigned char* lds) {
  using T = FlashTile<D, W>;
  using M = typename L::Wide;
  constexpr int kKt = T::kBN / M::M;      // 32-key sub-tiles per K/V tile
  constexpr int kPk = T::kBN / M::K;      // k-steps of P V per K/V tile
  const WorkRows w = prefill_rows(a, p, q_major, T::kBM);
  if (!w.active) return;
  const int tid = a.thread(), wave = tid / kWaveSize, lane = tid % kWaveSize;
  uint16_t* k_lds = reinterpret_cast<uint16_t*>(lds);
  uint16_t* vt_lds = k_lds + T::kKBuffers * T::kBN * T::kKPitch;

  // Q^T fragments of the query this lane feeds (B operand: column b.col, 4 consecutive d from b.row).
  const Coord qb = M::b(lane, 0);
  const int q_row = w.r0 + wave * M::N + qb.col;
  Frag qf[D / M::K];
  HIP_UNROLL
  for (int ks = 0; ks < D / M::K; ++ks)
    qf[ks] = q_row < w.rows.count()
                 ? load_frag(static_cast<const uint16_t*>(p.q) + row_offset(w.rows, q_row, p.q_stride_token,
                                                                            p.q_stride_head) + ks * M::K + qb.row)
                 : 0;
  // The query of this lane's accumulators (one per lane in the hardware layout).
  const int my_row = w.r0 + wave * M::N + M::acc(lane, 0).col;
  const int my_end = w.visible_end(my_row);

  typename A::f32x16 o[D / M::M];
  HIP_UNROLL
  for (int db = 0; db < D / M::M; ++db)
    HIP_UNROLL
    for (int r = 0; r < M::kAcc; ++r) o[db][r] = 0.f;
  float m = kNegInf, l = 0.f;
  const float c = p.scale * kLog2e;

  const auto k_buffer = [&](int t) { return k_lds + (t % T::kKBuffers) * T::kBN * T::kKPitch; };
  if (T::kKBuffers == 2 && w.n_tiles > 0)
    load_kv_tile<D, T::kThreads>(a, p, w.table_row, w.rows.kvh, 0, w.rows.kv_len, k_lds, nullptr);
  for (int t = 0; t < w.n_tiles; ++t) {
    const int n0 = t * T::kBN;
    uint16_t* kb = k_buffer(t);
    // Single-buffered: this tile's K with its V. Double: the next tile's K into the other buffer (free since the
    // last barrier), this tile's K loaded one step earlier.
    uint16_t* k_dst = T::kKBuffers == 1 ? kb : t + 1 < w.n_tiles ? k_buffer(t + 1) : nullptr;
    load_kv_tile<D, T::kThreads>(a, p, w.table_row, w.rows.kvh, T::kKBuffers == 1 ? n0 : n0 + T::kBN, w.rows.kv_len,
                                 k_dst, nullptr);
    load_kv_tile<D, T::kThreads>(a, p, w.table_row, w.rows.kvh, n0, w.rows.kv_len, nullptr, vt_lds);
    a.barrier();

    typename A::f32x16 s[kKt];
    HIP_UNROLL
    for (int kt = 0; kt < kKt; ++kt) s[kt] = flash_scores<A, M, DT, D>(a, qf, kb, kt, lane);
    if (n0 + T::kBN > w.mask_from)
      HIP_UNROLL
      for (int kt = 0; kt < kKt; ++kt)
        HIP_UNROLL
        for (int r = 0; r < M::kAcc; ++r)
          if (n0 + kt * M::M + M::acc(lane, r).row >= my_end) s[kt][r] = kNegInf;

    // Online softmax of this lane's query: its 32 keys here, the other 32 in lane ^ 32.
    float mx = m;
    HIP_UNROLL
    for (int kt = 0; kt < kKt; ++kt)
      HIP_UNROLL
      for (int r = 0; r < M::kAcc; ++r) mx = mx < s[kt][r] ? s[kt][r] : mx;
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
    HIP_UNROLL
    for (int db = 0; db < D / M::M; ++db)
      HIP_UNROLL
      for (int r = 0; r < M::kAcc; ++r) o[db][r] *= alpha;

    // P^T as the B operand: k-step ks covers keys 8 ks.. of the tile, registers 4 (ks % 4).. of sub-tile ks / 4.
    Frag pf[kPk];
    HIP_UNROLL
    for (int ks = 0; ks < kPk; ++ks) {
      const int kt = ks / (M::kAcc / M::kOperand), r = (ks % (M::kAcc / M::kOperand)) * M::kOperand;
      pf[ks] = pack4<DT>(s[kt][r], s[kt][r + 1], s[kt][r + 2], s[kt][r + 3]);
    }
    const Coord va = M::a(lane, 0);
    HIP_UNROLL
    for (int db = 0; db < D / M::M; ++db)
      HIP_UNROLL
      for (int ks = 0; ks < kPk; ++ks)
        o[db] = a.template mfma32<DT>(load_frag(vt_lds + (db * M::M + va.row) * T::kVtPitch + ks * M::K + va.col),
                                      pf[ks], o[db]);
    a.barrier();  // every wave is done with K and V^T before the next loads
  }

  // Epilogue: O^T / l into the LDS staging tile (aliasing K/V, dead now), then 16-byte row stores.
  const float lsum = l + a.shfl_xor(l, 32);
  const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
  uint16_t* o_lds = reinterpret_cast<uint16_t*>(lds);
  HIP_UNROLL
  for (int db = 0; db < D / M::M; ++db)
    HIP_UNROLL
    for (int r = 0; r < M::kAcc; ++r) {
      const Coord e = M::acc(lane, r);  // row: d within the 32-d block, col: the query
      o_lds[(wave * M::N + e.col) * T::kOPitch + db * M::M + e.row] = float_to_half<DT>(o[db][r] * inv);
    }
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
