// The wide prefill kernel's consumer warpgroups (prefill_wide.cuh): each walks the CTA's units and, per unit, gets
// its 64 Q rows ready (loaded, or loaded during the unit before; the optional Q prologue), runs the main loop over
// the unit's KV tiles (wide_mainloop.cuh) and writes its rows (wide_epilogue.cuh).
#pragma once
#include <cuda_runtime.h>

#include <type_traits>

#include "attnbench/attention.hpp"
#include "cuda/heuristics.hpp"
#include "cuda/mbarrier.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/q_prologue.cuh"
#include "cuda/wgmma.cuh"
#include "cuda/wide_epilogue.cuh"
#include "cuda/wide_layout.cuh"
#include "cuda/wide_mainloop.cuh"
#include "cuda/wide_work.cuh"

namespace attnbench::cuda::dev {

// The unit's Q in Q tile qb, its `use`-th load there: by TMA, its barrier's phase of that parity (a warpgroup or
// turn-taking barrier in every unit, the epilogue's or the tiles', keeps a warp from falling a phase behind the next
// load into the tile); by cp.async, this thread's group waited for, made visible to the async proxy and met by the
// warpgroup. Then the Q prologue in place before any wgmma reads it. The prologue is not compiled beside 3 consumer
// warpgroups (it would make that kernel's tile loop spill); the plan keeps Q-prologue problems at
// <= kWideMaxWgsQPrologue.
template <DType DT, int D, int WG, bool TMA, bool F, DType QT>
__device__ __forceinline__ void wide_q_ready(const WideCtx<DT, D, WG, TMA, F, QT>& cx,
                                             const WideGeom<WideTile<D, WG, TMA>::kBN>& g, int qb, int use) {
  constexpr int RW = kWideRowsPerWg;
  const uint32_t sq = cx.sm.q_tile(qb, cx.wg);
  if (WideCtx<DT, D, WG, TMA, F, QT>::kQoTma && cx.w.qo_tma) {
    mbar_wait(cx.sm.q_bar(qb, cx.wg), static_cast<uint32_t>(use) & 1u);
  } else {
    cp_async_wait<0>();
    fence_proxy_async_smem();
    named_bar_sync(1 + cx.wg, 128);
  }
  if constexpr (WG <= kWideMaxWgsQPrologue && is_16bit(QT)) {  // an 8-bit Q has no prologue (validate)
    if (cx.p.prologue.q_norm_weight != nullptr || cx.p.prologue.q_rope_dim > 0) {
      q_prologue<DT, D, RW>(cx.p, cx.w, g, sq, cx.wg * RW, cx.tid, [](int row, int ch) { return wide_swz<RW>(row, ch); });
      fence_proxy_async_smem();
      named_bar_sync(1 + cx.wg, 128);
    }
  }
}

// The next unit's Q into the other tile while this unit computes (its last readers: the threads of the unit
// before's epilogue, done at its closing named barrier, or its TMA store, whose read wide_load_q waits for). The
// next unit is found again by the loop rather than kept: held across the unit, its geometry makes the d64 and d256
// consumers spill.
template <DType DT, int D, int WG, bool TMA, bool F, DType QT>
__device__ __forceinline__ void wide_load_next_q(const WideCtx<DT, D, WG, TMA, F, QT>& cx, int k, int qb) {
  int k_next = k + 1;
  WideWork u_next;
  WideGeom<WideTile<D, WG, TMA>::kBN> g_next;
  if (wide_next_unit(cx.p, cx.w, k_next, u_next, g_next)) wide_load_q(cx, qb ^ 1, g_next);
}

// Unit k (n_done-th of this CTA): with two Q tiles, unit n uses tile n % 2.
template <DType DT, int D, int WG, bool TMA, bool F, DType QT>
__device__ __forceinline__ void wide_consume_unit(const WideCtx<DT, D, WG, TMA, F, QT>& cx,
                                                  const WideGeom<WideTile<D, WG, TMA>::kBN>& g, int k, int n_done,
                                                  RingPos& cur) {
  constexpr int BN = WideTile<D, WG, TMA>::kBN, RW = kWideRowsPerWg;
  const WideLaunch& w = cx.w;
  const int qb = w.q_bufs == 2 ? n_done & 1 : 0;
  const uint32_t sq = cx.sm.q_tile(qb, cx.wg);
  // Q: own 64 rows (every earlier wgmma reading this tile has been waited for, and its epilogue reads are done)
  if (w.q_bufs == 1 || n_done == 0) wide_load_q(cx, qb, g);
  wide_q_ready(cx, g, qb, w.q_bufs == 2 ? n_done >> 1 : n_done);
  // This warpgroup's rows hold tokens [t_lo, t_hi] of the unit: a slice of one head's tokens, or (rows of two heads
  // or more, GQA packing) all of them. It computes the tiles its rows can see; the CTA's later tiles it waits for
  // and releases without math. Only `any_rows` stays live through the tiles (the epilogue finds the rows again).
  // With F, a sliding window: the unit's tiles start at t_first (the producer's first) and this warpgroup's at
  // wg_first; the tiles between are taken without math too.
  const device::Visibility vis = wide_vis<F>(cx.p, g);
  bool any_rows;
  int wg_tiles, mask_from, t_first = 0, wg_first = 0;
  {
    const WgRows rows(w, g, cx.wg * RW, RW);
    const int wg_end = max(0, vis.visible_end(rows.t_hi));
    any_rows = rows.any;
    wg_tiles = rows.any ? (wg_end + BN - 1) / BN : 0;
    mask_from = vis.visible_end(rows.t_lo);
    if constexpr (F) {
      t_first = wide_first_tile<BN, F>(cx.p, g);
      wg_first = max(t_first, min(wg_tiles, vis.first_visible(rows.t_lo) / BN));
      wg_tiles = max(wg_tiles, wg_first);
    }
  }

  typename WideCtx<DT, D, WG, TMA, F, QT>::Acc a;
#pragma unroll
  for (int d = 0; d < D / 8; ++d) a.o[d][0] = a.o[d][1] = a.o[d][2] = a.o[d][3] = 0.f;
  a.m[0] = a.m[1] = -INFINITY;
  a.l[0] = a.l[1] = 0.f;
  // This thread's two rows (tile rows wg RW + warp 16 + lane / 4 + {0, 8}) see keys [0, limit); with F, their
  // tokens (-1: none) and heads.
  int limit[2], tok[2], head[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const WideRow rr = wide_row(w, g, cx.wg * RW + cx.warp * 16 + cx.lane / 4 + 8 * r);
    limit[r] = vis.visible_end(rr.tok);
    tok[r] = rr.valid ? rr.tok : -1;
    head[r] = rr.head;
  }
  const WideRowFeatures<F> rf = wide_row_features<F>(cx.p, vis, tok, head);
  for (auto& pj : a.pa) pj[0] = pj[1] = pj[2] = pj[3] = 0u;
  const Sw128Desc<> dq(sq, 16);  // Q, K-major: SBO 1024 (8 rows)

  wide_skip_tiles(cx, cur, t_first, wg_first);
  if (wg_tiles > wg_first) wide_step<true>(cx, a, cur, dq, wg_first, mask_from, limit, rf);
  if (w.q_bufs == 2) wide_load_next_q(cx, k, qb);
  for (int t = wg_first + 1; t < wg_tiles; ++t) wide_step<false>(cx, a, cur, dq, t, mask_from, limit, rf);
  if (wg_tiles > wg_first) wide_last_pv(cx, a, cur);
  wide_skip_tiles(cx, cur, wg_tiles, g.n_tiles);
  if (any_rows) wide_epilogue(cx, g, sq, a);
}

// A consumer warpgroup (budget set by the kernel): its warpgroup index, then every unit of the CTA's walk.
template <DType DT, int D, int WG, bool TMA, bool F, DType QT>
__device__ __forceinline__ void wide_consumer(const AttentionParams& p, const WideLaunch& w,
                                              const WideSmem<D, WG, TMA, !is_16bit(QT)>& sm, int S, const void* tmq,
                                              const void* tmo) {
  using Tile = WideTile<D, WG, TMA>;
  using T = typename StorageOf<DT>::type;
  using Ctx = WideCtx<DT, D, WG, TMA, F, QT>;
  using QS = typename Ctx::QS;
  // The warpgroup index through a lane-0 shuffle: ptxas then knows it is warp-uniform, so the shared-memory
  // descriptors of every wgmma are built in uniform registers (no per-wgmma R2UR moves in the issue loop).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128) - 1, 0);
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  if constexpr (WG >= 2) {
    if (wg == WG - 1) named_bar_arrive(Ctx::kSchedBar + 0, 256);
  }
  const Ctx cx{p,    w,    sm,   S,
               wg,   tid,  warp, lane,
               softmax_c<F>(p), static_cast<T*>(p.out), static_cast<const T*>(p.epilogue.gate),
               static_cast<const QS*>(p.q), tmq, tmo};
  RingPos cur;  // ring position of the next K tile (V of a tile sits at the same position)
  int k = 0, n_done = 0;
  WideWork u;
  WideGeom<Tile::kBN> g;
  for (bool have = wide_next_unit(p, w, k, u, g); have; have = wide_next_unit(p, w, ++k, u, g), ++n_done)
    wide_consume_unit(cx, g, k, n_done, cur);
  if constexpr (WG >= 2) {
    if (wg == 0) named_bar_sync(Ctx::kSchedBar + 0, 256);
  }
  if (Ctx::kQoTma && w.qo_tma && tid == 0) bulk_wait<0>();  // the last O store read its tile and wrote
}

}  // namespace attnbench::cuda::dev
