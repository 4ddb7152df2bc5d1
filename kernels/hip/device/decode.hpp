// 3D split-KV decode and its combine. A decode workgroup takes 16 packed rows (a decode token's GQA group, or a
// few tokens of it) of one kv head and one split's run of K/V tiles; its 4 waves each run the narrow wave over 16
// keys of every tile, then merge their (max, sum, O) through LDS. One split writes the output; more write a base-2
// LSE and the normalised fp32 O per row into the workspace, and the combine kernel weighs the splits by their LSE.
// Workspace layout: decode_lse_floats (geometry.hpp).
#pragma once

#include "hip/device/narrow.hpp"

namespace attnbench::hip {

template <int D>
struct DecodeTile {
  static_assert(D == 64 || D == 128, "the decode kernel has head sizes 64 and 128");
  static constexpr int kThreads = kWaveSize * kDecodeWaves;
  static constexpr int kLdsBytes = decode_lds_bytes(D);
  static constexpr int kMergePitch = decode_merge_pitch(D);
  static_assert(kLdsBytes <= kLdsLimit, "LDS per workgroup");
};

// The 4 waves' states merged for row `row` (0..15), columns [col0, col0 + n): O / L into out_row, the base-2 LSE
// returned (-inf for a row that saw no key).
template <class A, int D>
ATTNBENCH_HD_INLINE float merge_waves(const A& a, const float* o_m, const float* m_m, const float* l_m, int row,
                                      int col0, int n, float c, float* out_row) {
  float mx = kNegInf;
  for (int wv = 0; wv < kDecodeWaves; ++wv) mx = max2(mx, m_m[wv * kDecodeRows + row]);
  float lsum = 0.f, f[kDecodeWaves];
  for (int wv = 0; wv < kDecodeWaves; ++wv) {
    const float mw = m_m[wv * kDecodeRows + row];
    f[wv] = mw == kNegInf ? 0.f : a.exp2((mw - mx) * c);
    lsum += l_m[wv * kDecodeRows + row] * f[wv];
  }
  const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
  for (int i = 0; i < n; ++i) {
    float v = 0.f;
    for (int wv = 0; wv < kDecodeWaves; ++wv)
      v += o_m[(wv * kDecodeRows + row) * DecodeTile<D>::kMergePitch + col0 + i] * f[wv];
    out_row[i] = v * inv;
  }
  return lsum == 0.f ? kNegInf : mx * c + a.log2(lsum);  // a NaN row's LSE stays NaN for the combine
}

// The merge area (aliasing K/V): each wave's unnormalised O rows, then its m and l per row.
struct MergeArea {
  float *o, *m, *l;
  template <int D>
  ATTNBENCH_HD_INLINE static MergeArea at(unsigned char* lds) {
    float* o = reinterpret_cast<float*>(lds);
    float* m = o + kDecodeWaves * kDecodeRows * DecodeTile<D>::kMergePitch;
    return {o, m, m + kDecodeWaves * kDecodeRows};
  }
};

// A wave's (m, l, O) of its 16 rows into the merge area.
template <class M, int D, class Wave>
ATTNBENCH_HD_INLINE void stage_wave_state(const Wave& wv, const MergeArea& g, int wave, int lane) {
  HIP_UNROLL
  for (int r = 0; r < M::kAcc; ++r) {
    const Coord e = M::acc(lane, r);
    const int row = wave * kDecodeRows + e.row;
    if (e.col == 0) g.m[row] = wv.m[0][r], g.l[row] = wv.l[0][r];
    HIP_UNROLL
    for (int dn = 0; dn < D / M::N; ++dn) g.o[row * DecodeTile<D>::kMergePitch + dn * M::N + e.col] = wv.o[0][dn][r];
  }
}

// Row `row` (0..15) of the workgroup, columns [col0, col0 + 8): the output itself (one split) or this split's
// LSE and normalised partial in the workspace.
template <class A, DType DT, int D>
ATTNBENCH_HD_INLINE void write_decode_row(const A& a, const AttentionParams& p, const WorkRows& w, const MergeArea& g,
                                          int splits, int row, int col0, float c) {
  const int r = w.r0 + row;
  float acc[8];
  const float lse = merge_waves<A, D>(a, g.o, g.m, g.l, row, col0, 8, c, acc);
  if (splits == 1) {
    uint16_t* dst = static_cast<uint16_t*>(p.out) + row_offset(w.rows, r, p.o_stride_token, p.o_stride_head) + col0;
    store_chunk(dst, Chunk{pack4<DT>(acc[0], acc[1], acc[2], acc[3]), pack4<DT>(acc[4], acc[5], acc[6], acc[7])});
    return;
  }
  const int64_t rows_total = p.total_q * p.heads;
  const int64_t grow = (w.rows.q_start + static_cast<int64_t>(w.rows.token(r))) * p.heads + w.rows.head(r);
  float* ws = static_cast<float*>(p.workspace);
  if (col0 == 0) ws[a.block_x() * rows_total + grow] = lse;
  float* dst = ws + decode_lse_floats(splits, rows_total) + (a.block_x() * rows_total + grow) * D + col0;
  for (int i = 0; i < 8; ++i) dst[i] = acc[i];
}

template <class A, class L, DType DT, int D>
ATTNBENCH_HD void decode_block(const A& a, const AttentionParams& p, int splits, unsigned char* lds) {
  using T = DecodeTile<D>;
  using Wave = NarrowWave<A, L, DT, D, 1, 1>;
  const int kvh = a.block_y() % p.kv_heads, rt = a.block_y() / p.kv_heads;
  const WorkRows w = work_rows(p, a.block_z(), kvh, rt * kDecodeRows, kDecodeRows);
  if (!w.active) return;
  const int tid = a.thread(), wave = tid / kWaveSize, lane = tid % kWaveSize;
  const SplitTiles tiles = split_tiles(w.n_tiles, splits, a.block_x());
  uint16_t* k_lds = reinterpret_cast<uint16_t*>(lds);
  uint16_t* vt_lds = k_lds + kBlockN * (D + kPad);
  uint16_t* p_lds = vt_lds + D * (kBlockN + kPad) + wave * kDecodeRows * Wave::kPPitch;
  const float c = p.scale * kLog2e;
  Wave wv;
  wv.init(p, w, w.r0, lane);
  for (int t = tiles.begin; t < tiles.end; ++t) {
    load_kv_tile<D, T::kThreads>(a, p, w.table_row, kvh, t * kBlockN, w.rows.kv_len, k_lds, vt_lds);
    a.barrier();
    wv.step(a, w, w.r0, k_lds, vt_lds, p_lds, wave * kDecodeKeysPerWave, t * kBlockN, c, lane);
    a.barrier();
  }
  wv.finish(a);
  const MergeArea g = MergeArea::at<D>(lds);  // the loop's last barrier passed: K/V are dead
  stage_wave_state<typename L::Narrow, D>(wv, g, wave, lane);
  a.barrier();
  // Thread -> (row, 8 columns): D / 8 threads per row, 16 rows.
  constexpr int kTpr = D / 8;
  if (tid < kDecodeRows * kTpr && w.r0 + tid / kTpr < w.rows.count())
    write_decode_row<A, DT, D>(a, p, w, g, splits, tid / kTpr, (tid % kTpr) * 8, c);
}

// The split combine: one row (token, head) per D / 8 threads, weights 2^(lse_s - max lse).
template <class A, DType DT, int D>
ATTNBENCH_HD void combine_block(const A& a, const AttentionParams& p, int splits) {
  constexpr int kTpr = D / 8;
  const int64_t rows_total = p.total_q * p.heads;
  const int64_t grow = static_cast<int64_t>(a.block_x()) * combine_rows_per_block(D) + a.thread() / kTpr;
  if (grow >= rows_total) return;
  const int col0 = (a.thread() % kTpr) * 8;
  const float* ws = static_cast<const float*>(p.workspace);
  const float* ws_o = ws + decode_lse_floats(splits, rows_total);
  float lmax = kNegInf;
  for (int s = 0; s < splits; ++s) {
    const float x = ws[s * rows_total + grow];
    lmax = x != x || x > lmax ? x : lmax;  // a NaN split sticks: its row's output is NaN
  }
  if (lmax == kNegInf) lmax = 0.f;
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}, wsum = 0.f;
  for (int s = 0; s < splits; ++s) {
    const float wgt = a.exp2(ws[s * rows_total + grow] - lmax);
    wsum += wgt;
    const float* src = ws_o + (s * rows_total + grow) * D + col0;
    HIP_UNROLL
    for (int i = 0; i < 8; ++i) acc[i] += wgt * src[i];
  }
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  const int64_t token = grow / p.heads;
  const int head = static_cast<int>(grow % p.heads);
  uint16_t* dst = static_cast<uint16_t*>(p.out) + token * p.o_stride_token + head * p.o_stride_head + col0;
  store_chunk(dst, Chunk{pack4<DT>(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv),
                         pack4<DT>(acc[4] * inv, acc[5] * inv, acc[6] * inv, acc[7] * inv)});
}

}  // namespace attnbench::hip
