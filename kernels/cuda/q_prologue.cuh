// The wide kernel's Q prologue (AttentionParams: per-head RMSNorm, then rotate-half RoPE over the first q_rope_dim
// dims), applied in place to a consumer warpgroup's RW Q rows in their 128B-swizzled shared-memory tile after the
// rows landed. D/8 threads per row, one 16-byte chunk each: the row's RMS by shuffles within those lanes
// (row_norm.cuh, as gated_norm_rope.cu), the RoPE partner chunk q_rope_dim/16 lanes away (q_rope_dim % 16 == 0,
// checked by supports()), fp32 throughout, rounded once. Each pass loads its cos/sin first (a prefetch one
// pass ahead cost the d64 kernel spills).
#pragma once
#include <cuda_runtime.h>

#include "attnbench/attention.hpp"
#include "cuda/ld_st.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/row_norm.cuh"
#include "cuda/wide_work.cuh"

namespace attnbench::cuda::dev {

template <DType DT>
__device__ __forceinline__ void unpack8(uint4 raw, float (&x)[8]) {
  const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = unpack2<DT>(u[j]);
    x[2 * j] = f.x;
    x[2 * j + 1] = f.y;
  }
}

// sq: the warpgroup's Q tile, swz(r, ch): the byte offset of chunk ch of its row r, row0: its first tile row.
template <DType DT, int D, int RW, int BN, typename Swz>
__device__ __forceinline__ void q_prologue(const AttentionParams& p, const WideLaunch& w, const WideGeom<BN>& g,
                                           uint32_t sq, int row0, int tid, Swz swz) {
  constexpr int kTpr = D / 8, kRowsPerPass = 128 / kTpr, kPasses = RW / kRowsPerPass;
  const int ch = tid % kTpr;
  const bool norm = p.prologue.q_norm_weight != nullptr;
  const int hc = p.prologue.q_rope_dim / 16;  // partner distance in chunks
  const bool roped = ch < 2 * hc;
  const int partner = ch < hc ? ch + hc : ch - hc;
  // cos / sin chunk of a pass's row (zero for rows past the sequence and chunks past the rotated dims)
  auto trig = [&](int pass, uint4& c, uint4& s) {
    c = s = make_uint4(0, 0, 0, 0);
    const WideRow rr = wide_row(w, g, row0 + pass * kRowsPerPass + tid / kTpr);
    if (roped && rr.valid) {
      const int64_t off = (g.q_start + rr.tok) * static_cast<int64_t>(p.prologue.q_rope_dim) + ch * 8;
      c = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.prologue.rope_cos) + off));
      s = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.prologue.rope_sin) + off));
    }
  };
#pragma unroll 1
  for (int pass = 0; pass < kPasses; ++pass) {
    uint4 c_raw, s_raw;
    if (hc > 0) trig(pass, c_raw, s_raw);
    const uint32_t addr = sq + swz(pass * kRowsPerPass + tid / kTpr, ch);
    float x[8];
    unpack8<DT>(ld_shared_v4(addr), x);
    if (norm) {
      const float inv = row_inv_rms<D>(x, p.prologue.q_norm_eps);
      float wt[8];  // read again each pass (an L1 hit): kept across passes it cost the d64 kernel spills
      unpack8<DT>(__ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.prologue.q_norm_weight) + ch * 8)), wt);
#pragma unroll
      for (int j = 0; j < 8; ++j) x[j] = x[j] * inv * (p.prologue.q_norm_offset + wt[j]);
    }
    if (hc > 0) {
      float y[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) y[j] = __shfl_sync(0xffffffffu, x[j], partner, kTpr);
      if (roped) {
        const uint32_t cw[4] = {c_raw.x, c_raw.y, c_raw.z, c_raw.w}, sw[4] = {s_raw.x, s_raw.y, s_raw.z, s_raw.w};
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
          const float2 c = unpack2<DT>(cw[j / 2]), s = unpack2<DT>(sw[j / 2]);
          x[j] = ch < hc ? x[j] * c.x - y[j] * s.x : x[j] * c.x + y[j] * s.x;
          x[j + 1] = ch < hc ? x[j + 1] * c.y - y[j + 1] * s.y : x[j + 1] * c.y + y[j + 1] * s.y;
        }
      }
    }
    st_shared_v4(addr, make_uint4(pack2<DT>(x[0], x[1]), pack2<DT>(x[2], x[3]), pack2<DT>(x[4], x[5]),
                                  pack2<DT>(x[6], x[7])));
  }
}

}  // namespace attnbench::cuda::dev
