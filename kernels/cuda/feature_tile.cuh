// The attention features in the mma.sync kernels (narrow prefill, decode): the score mods and visible key range of
// a thread's two rows of a score tile, the finished row's factor (sinks, v_scale), and the widening of an 8-bit K/V
// tile into the swizzled 16-bit layout the mma fragments read. The rules are the shared ones
// (common/device/score_mods.hpp, visibility.hpp); this file only places them in the mma.sync register layout.
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "attnbench/attention.hpp"
#include "common/device/score_mods.hpp"
#include "common/device/visibility.hpp"
#include "cuda/ld_st.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/storage.cuh"

namespace attnbench::cuda::dev {

constexpr float kLog2e = 1.4426950408889634f;

// A features kernel keeps its scores in raw units (q.k of K codes) as the plain kernels do: the mods are applied in
// those units (divided by sc = softmax scale * k_scale * q_scale), so the softmax's base-2 scale is sc * log2(e).
template <bool F>
__device__ __forceinline__ float softmax_c(const AttentionParams& p) {
  return (F ? p.scale * p.features.k_scale * p.features.q_scale : p.scale) * kLog2e;
}

// One thread's two rows (r = 0, 1) of an mma.sync score tile: query row row[r] of the sequence (-1: a padding row,
// which sees no key) of query head head[r]. The shared mods (device::score_mods) in raw units: softcap
// c tanh(sc s / c) / sc, the ALiBi slope / sc, the qq-bias / sc; each applied only where the problem has it (the
// tests are uniform across the kernel), and the mask only on tiles not wholly visible to both rows.
// The softcap's tanh is 1 - 2 / (e^2x + 1) by ex2.approx and rcp.approx (two MUFU ops, not tanhf's ~20
// instructions): its error in the scaled score is below c 2^-21 (1e-5 at c = 50), absolute, which is what the
// softmax sees, and far under the 2^-9 relative rounding of P to 16 bits; tanh.approx's 2^-11 relative is not.
struct RowFeatures {
  float cap_out = 0.f, cap_e = 0.f;   // softcap: s <- cap_out tanh(x), e^(2 x) = 2^(s cap_e); cap_out = 0: none
  float inv_sc = 1.f;
  float slope[2];                     // ALiBi slope / sc per key of distance
  int pos[2];                         // i' of each row
  const float* qq[2];                 // the row's qq-bias row (null: none)
  int new_from = 0;                   // kv_len - q_len
  int first[2], end[2];               // the visible keys [first, end) of each row
  bool alibi = false;

  __device__ __forceinline__ RowFeatures(const AttentionParams& p, const device::Visibility& vis, const int (&row)[2],
                                         const int (&head)[2]) {
    const AttentionFeatureParams& f = p.features;
    const float sc = p.scale * f.k_scale * f.q_scale;
    inv_sc = 1.f / sc;
    if (f.softcap > 0.f) cap_out = f.softcap / sc, cap_e = 2.f * kLog2e * sc / f.softcap;
    alibi = f.alibi_slopes != nullptr;
    new_from = vis.kv_len - vis.q_len;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const bool real = row[r] >= 0;
      const device::ScoreMods m = device::score_mods(f.softcap, f.alibi_slopes, real ? f.qq_bias : nullptr,
                                                     f.qq_bias_len, real ? row[r] : 0, vis.q_len, vis.kv_len, vis.diag,
                                                     head[r]);
      slope[r] = m.slope * inv_sc;
      pos[r] = m.pos;
      qq[r] = m.qq_row;
      first[r] = real ? vis.first_visible(row[r]) : 0;
      end[r] = real ? vis.visible_end(row[r]) : 0;
    }
  }

  // s: raw q.k of keys n0 + the accumulator columns (8 NT8 keys from n0) -> raw final scores less off[r], -inf where a
  // row does not see the key. off[r] (for softmax_tile's OFF): ALiBi's slope times the distance of this thread's
  // first column c0 from the row, one value per row and tile; s keeps the slope times the column's offset from c0,
  // one FFMA per score.
  template <int NT8>
  __device__ __forceinline__ void apply(float (&s)[NT8][4], int n0, int lane, float (&off)[2]) const {
    apply_mods<true>(s, n0, lane, off);
  }
  // The scores made whole: the mma.sync kernels' form (the narrow prefill's two m-tiles per warp spilled 20 bytes
  // more carrying off into the softmax; the decode kernel's 16-key warp tiles have too few scores per row to pay for
  // it: 2-3% slower on the speculative qq-bias row).
  template <int NT8>
  __device__ __forceinline__ void apply(float (&s)[NT8][4], int n0, int lane) const {
    float off[2];
    apply_mods<false>(s, n0, lane, off);
  }

 private:
  // SPLIT: ALiBi's distance to c0 left in off (apply's first form); else added to the scores, off 0.
  template <bool SPLIT, int NT8>
  __device__ __forceinline__ void apply_mods(float (&s)[NT8][4], int n0, int lane, float (&off)[2]) const {
    const int c0 = n0 + 2 * (lane % 4);  // the column of element (n, e): c0 + 8 n + (e & 1)
    off[0] = off[1] = 0.f;
    if (cap_out != 0.f) {
#pragma unroll
      for (int n = 0; n < NT8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[n][e] = fmaf(-2.f * cap_out, rcp_approx(exp2_approx(s[n][e] * cap_e) + 1.f), cap_out);
    }
    if (alibi) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float base = slope[r] * static_cast<float>(c0 - pos[r]);
        if constexpr (SPLIT) off[r] = base;
#pragma unroll
        for (int n = 0; n < NT8; ++n)
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            const float k = static_cast<float>(8 * n + (e & 1));
            if constexpr (SPLIT) s[n][e] = fmaf(slope[r], k, s[n][e]);
            else s[n][e] += fmaf(slope[r], k, base);
          }
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (qq[r] == nullptr) continue;
#pragma unroll
      for (int n = 0; n < NT8; ++n)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          const int col = c0 + 8 * n + (e & 1);
          if (col >= new_from) s[n][e] += qq[r][col - new_from] * inv_sc;
        }
    }
    if (n0 >= max(first[0], first[1]) && n0 + 8 * NT8 <= min(end[0], end[1])) return;  // wholly visible
#pragma unroll
    for (int n = 0; n < NT8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = c0 + 8 * n + (e & 1), r = e >> 1;
        if (col < first[r] || col >= end[r]) s[n][e] = -INFINITY;
      }
  }
};

// The factor of a finished, normalised row whose scores' base-2 log-sum-exp is lse2: v_scale (V codes to values)
// times the keys' share of a denominator that also holds the head's sink.
__device__ __forceinline__ float row_out_factor(const AttentionParams& p, int head, float lse2) {
  return p.features.v_scale * device::sink_share(p.features.sinks, head, lse2);
}

// Two 8-bit codes (the low 16 bits of codes2) -> two 16-bit values of DT, exactly (e4m3 and e5m2 values are fp16
// and bf16 values).
template <DType DT, DType KV>
__device__ __forceinline__ uint32_t widen2(uint32_t codes2) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes2 & 0xffffu),
                                                   StorageOf<KV>::kind);
  if constexpr (DT == DType::f16) {
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  } else {
    const float2 f = __half22float2(__half2(h));
    return pack2<DT>(f.x, f.y);
  }
}

// 16 codes (one 16-byte chunk) -> their 16 values of DT as two 16-byte chunks, lo (the first 8) and hi.
template <DType DT, DType KV>
__device__ __forceinline__ void widen16(uint4 v, uint4& lo, uint4& hi) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t h[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    h[2 * i] = widen2<DT, KV>(w[i]);
    h[2 * i + 1] = widen2<DT, KV>(w[i] >> 16);
  }
  lo = make_uint4(h[0], h[1], h[2], h[3]);
  hi = make_uint4(h[4], h[5], h[6], h[7]);
}

// The [BN][D] codes at src (swz8, as KvTileRows lands them) -> the swizzled [BN][D] DT tile at dst; NT threads, 16
// codes (one 16-byte chunk in, two out) per step.
template <DType DT, DType KV, int D, int BN, int NT>
__device__ __forceinline__ void widen_kv_tile(uint32_t dst, uint32_t src) {
  constexpr int kCpr = D / 16;
#pragma unroll
  for (int c = threadIdx.x; c < BN * kCpr; c += NT) {
    const int row = c / kCpr, ch = c % kCpr;
    uint4 lo, hi;
    widen16<DT, KV>(ld_shared_v4(src + swz8<D>(row, ch)), lo, hi);
    st_shared_v4(dst + swz<D>(row, 2 * ch), lo);
    st_shared_v4(dst + swz<D>(row, 2 * ch + 1), hi);
  }
}

}  // namespace attnbench::cuda::dev
