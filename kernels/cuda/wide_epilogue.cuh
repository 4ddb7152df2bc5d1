// The wide prefill kernel's epilogue (prefill_wide.cuh): O / l rounded to 16 bit into the warpgroup's Q tile, then
// out by TMA stores where the warpgroup's rows are all in their sequence (w.qo_tma, no output gate), else 16-byte
// row-contiguous reads and global stores, times sigmoid(gate) when the problem has an output gate.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attnbench/attention.hpp"
#include "cuda/ld_st.cuh"
#include "cuda/mbarrier.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/warp_tile.cuh"
#include "cuda/wide_layout.cuh"
#include "cuda/wide_mainloop.cuh"
#include "cuda/wide_work.cuh"

namespace attnbench::cuda::dev {

// Two 16-bit outputs times sigmoid of two 16-bit gate values, fp32 math, rounded once more to 16 bit.
template <DType DT> __device__ __forceinline__ uint32_t gate_pair(uint32_t o2, uint32_t g2) {
  const float2 sg = sigmoid2<DT>(g2), o = unpack2<DT>(o2);
  return pack2<DT>(o.x * sg.x, o.y * sg.y);
}

// params.lse of this thread's two rows (return_lse), apart from the O stores: inside their loop it cost short prefill
// 2% (kernels/NOTES.md). A NaN sum stays NaN.
template <DType DT, int D, int WG, bool TMA, bool F, DType QT>
__device__ __forceinline__ void wide_store_lse(const WideCtx<DT, D, WG, TMA, F, QT>& cx,
                                               const WideGeom<WideTile<D, WG, TMA>::kBN>& g,
                                               const typename WideCtx<DT, D, WG, TMA, F, QT>::Acc& a) {
  const AttentionParams& p = cx.p;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = quad_sum(a.l[r]);
    const WideRow rr = wide_row(cx.w, g, cx.wg * kWideRowsPerWg + cx.warp * 16 + cx.lane / 4 + 8 * r);
    if (rr.valid && cx.lane % 4 == 0)
      p.lse[device::lse_offset(p.lse_stride_start, p.lse_stride_row, p.lse_stride_head, g.q_start, rr.tok, rr.head)] =
          device::row_lse(p.features.sinks, rr.head, sum == 0.f ? -INFINITY : a.m[r] * cx.c + __log2f(sum));
  }
}

// One unit's output rows of this warpgroup. The Q tile at sq is free: its last S wgmma has been waited for. It is
// swizzled, so the 4-byte writes of a warp hit 32 distinct banks. O is rounded before the gate, as an unfused
// O-then-gate chain rounds it.
template <DType DT, int D, int WG, bool TMA, bool F, DType QT>
__device__ __forceinline__ void wide_epilogue(const WideCtx<DT, D, WG, TMA, F, QT>& cx,
                                              const WideGeom<WideTile<D, WG, TMA>::kBN>& g, uint32_t sq,
                                              const typename WideCtx<DT, D, WG, TMA, F, QT>::Acc& a) {
  constexpr int RW = kWideRowsPerWg;
  const AttentionParams& p = cx.p;
  const int tid = cx.tid, warp = cx.warp, lane = cx.lane;
  const auto* gate = cx.gate;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = quad_sum(a.l[r]);
    float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int lrow = warp * 16 + lane / 4 + 8 * r;
    if constexpr (F)
      inv *= row_out_factor(p, wide_row(cx.w, g, cx.wg * RW + lrow).head,
                            sum > 0.f ? a.m[r] * cx.c + __log2f(sum) : -INFINITY);
    inv *= 1.f / static_cast<float>(1 << WideCtx<DT, D, WG, TMA, F, QT>::kPLog2);  // O holds 2^kPLog2 P V
#pragma unroll
    for (int d = 0; d < D / 8; ++d)
      st_shared_u32(sq + wide_swz<RW>(lrow, d) + (lane % 4) * 4,
                    pack2<DT>(a.o[d][2 * r] * inv, a.o[d][2 * r + 1] * inv));
  }
  constexpr bool kQoTma = WideCtx<DT, D, WG, TMA, F, QT>::kQoTma;
  if (kQoTma && cx.w.qo_tma) fence_proxy_async_smem();  // O's rows before a TMA store reads or a Q load overwrites them
  if (p.lse != nullptr) wide_store_lse(cx, g, a);
  named_bar_sync(1 + cx.wg, 128);
  constexpr int kCpr = D / 8, kChunks = RW * kCpr / 128;
  if (gate == nullptr) {
    if (kQoTma && cx.w.qo_tma && wide_rows_full(cx.w, g, cx.wg * RW)) {
      // One TMA store per 64-column slab; the tile's next Q load waits for it to have read the tile (wide_load_q).
      // Inside the no-gate branch: as a branch of its own before it, it cost the d256 features kernel 56 more spill
      // bytes (kernels/NOTES.md, Q and O by TMA).
      if (tid == 0) {
        const WideRow r0 = wide_row(cx.w, g, cx.wg * RW);
#pragma unroll
        for (int c = 0; c < D / 64; ++c)
          tma_store_3d(cx.tmo, c * 64, g.q_start + r0.tok, r0.head, cx.sm.smem + (sq - cx.sm.base) + c * (RW * 128));
        bulk_commit();
      }
      return;
    }
    // Unrolled (a thread's chunks share a column): rolled, the per-chunk row and address work took 14% of a short
    // prefill's stall samples (kernels/NOTES.md, short units).
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int cidx = tid + i * 128, row = cidx / kCpr, ch = cidx % kCpr;
      const WideRow rr = wide_row(cx.w, g, cx.wg * RW + row);
      if (rr.valid)
        st_global_v4(cx.out + (g.q_start + rr.tok) * p.o_stride_token + rr.head * p.o_stride_head + ch * 8,
                     ld_shared_v4(sq + wide_swz<RW>(row, ch)));
    }
    named_bar_sync(1 + cx.wg, 128);  // the tile is read before a later unit's Q overwrites it
    return;
  }
  // Gate values: 16-byte loads where the gate's base and strides allow them (the gated block's fused projection
  // layout does), issued for a batch of chunks ahead of their tile reads; otherwise 4-byte loads per chunk (gate
  // strides are only known to be even).
  const bool gate16 =
      ((reinterpret_cast<uintptr_t>(gate) | static_cast<uintptr_t>(p.epilogue.gate_stride_token | p.epilogue.gate_stride_head) * 2) &
       15) == 0;
  constexpr int kBatch = 2;
  // Rolled: unrolled, the copies of the two gate variants would be most of the kernel's code and miss the
  // instruction cache on short units.
#pragma unroll 1
  for (int i0 = 0; i0 < kChunks; i0 += kBatch) {
    WideRow rows[kBatch];
    uint4 gv[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int cidx = tid + (i0 + b) * 128;
      rows[b] = wide_row(cx.w, g, cx.wg * RW + cidx / kCpr);
      if (gate16 && rows[b].valid)
        gv[b] = __ldg(reinterpret_cast<const uint4*>(gate + (g.q_start + rows[b].tok) * p.epilogue.gate_stride_token +
                                                      rows[b].head * p.epilogue.gate_stride_head + (cidx % kCpr) * 8));
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int cidx = tid + (i0 + b) * 128;
      const int row = cidx / kCpr, ch = cidx % kCpr;
      const WideRow rr = rows[b];
      if (!rr.valid) continue;
      const int64_t tok = g.q_start + rr.tok;
      uint4 v = ld_shared_v4(sq + wide_swz<RW>(row, ch));
      if (gate16) {
        v.x = gate_pair<DT>(v.x, gv[b].x);
        v.y = gate_pair<DT>(v.y, gv[b].y);
        v.z = gate_pair<DT>(v.z, gv[b].z);
        v.w = gate_pair<DT>(v.w, gv[b].w);
      } else {
        const uint32_t* gp = reinterpret_cast<const uint32_t*>(gate + tok * p.epilogue.gate_stride_token +
                                                               rr.head * p.epilogue.gate_stride_head + ch * 8);
        v.x = gate_pair<DT>(v.x, __ldg(gp + 0));
        v.y = gate_pair<DT>(v.y, __ldg(gp + 1));
        v.z = gate_pair<DT>(v.z, __ldg(gp + 2));
        v.w = gate_pair<DT>(v.w, __ldg(gp + 3));
      }
      st_global_v4(cx.out + tok * p.o_stride_token + rr.head * p.o_stride_head + ch * 8, v);
    }
  }
  named_bar_sync(1 + cx.wg, 128);  // the tile is read before a later unit's Q overwrites it
}

}  // namespace attnbench::cuda::dev
