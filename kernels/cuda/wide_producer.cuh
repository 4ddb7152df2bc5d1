// The wide prefill kernel's producer warpgroup (prefill_wide.cuh): it walks the CTA's units as the consumers do and
// fills the K and V rings through the block table, tile by tile in ring order. TMA (wide_kv_tma): lane 0 issues
// 64-token boxes, or each lane the boxes of a page of 16 or 32 tokens, V one tile behind K; a tile holding tokens past
// kv_len is gathered by the producer warp with zero-filling cp.async instead (stale slots of the last page may hold
// NaN; 0 * NaN would poison P V). Other block sizes: 128 threads gather every tile with cp.async.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "attnbench/attention.hpp"
#include "common/device/paged.hpp"
#include "cuda/mbarrier.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/wide_layout.cuh"
#include "cuda/wide_work.cuh"

namespace attnbench::cuda::dev {

// K and V rows [t BN, t BN + BN) of one kv head (element offset head_off) into the swizzled tiles at sk / sv with
// 16-byte cp.async through the block table, by THREADS threads (this one: tid), zero-filling tokens >= kv_len;
// the caller commits and waits. The one-warp tail gather of the TMA producer stays rolled (its register budget);
// where its step is one row (d256), the row and its page are the warp's, in uniform registers (a tid-derived row
// needs vector registers the producer's 24 lack).
template <int D, int BN, int THREADS>
__device__ __forceinline__ void gather_kv_tile(const AttentionParams& p, const int32_t* table_row, int64_t head_off,
                                               int kv_len, int t, uint32_t sk, uint32_t sv, int tid) {
  constexpr int kCpr = D / 8;  // 16-byte chunks per row
  constexpr bool kRowPerStep = THREADS == kCpr;
  constexpr int kUnroll = THREADS >= 128 ? 4 : 1;
  const char* kc = static_cast<const char*>(p.k_cache);
  const char* vc = static_cast<const char*>(p.v_cache);
#pragma unroll kUnroll
  for (int i = 0; i < BN * kCpr / THREADS; ++i) {
    const int cidx = tid + THREADS * i;
    const int row = kRowPerStep ? i : cidx / kCpr, ch = kRowPerStep ? tid : cidx % kCpr;
    const int tok = t * BN + row;
    const bool valid = tok < kv_len;
    int64_t off = 0;
    if (valid) {
      const device::PagedPos pp = device::PageDivisor(p.block_size).pos(tok);
      off = device::paged_offset(__ldg(table_row + pp.page), pp.offset, p.kv_stride_block, p.kv_stride_token) +
            head_off + ch * 8;
    }
    const uint32_t dst = wide_swz<BN>(row, ch);
    cp_async_16(sk + dst, kc + 2 * off, valid);
    cp_async_16(sv + dst, vc + 2 * off, valid);
  }
}

// KV tile t of kv head kvh by TMA into the slot at dst, completing on bar, called by the producer warp (lane: this
// thread's): per 64-wide d slab (BN rows of 128 bytes), a {64 d, 1, 64 tokens, 1} box of the 4D map tm per 64 tokens
// from lane 0, or one {64 d, 1, block_size, 1} box per page of 16 or 32 tokens (wide_kv_box_tokens) at its rows of
// the slab, a page per lane: each lane reads its own table entry, so no page waits on another's read or issue. TMA
// swizzles by the absolute address and the slot is 1024-byte aligned, so a box starting at a row that is a multiple of
// 8 lands in the slab's 128-byte swizzle.
template <int D, int BN, typename Smem>
__device__ __forceinline__ void tma_kv_tile(const AttentionParams& p, const Smem& sm, const int32_t* table_row,
                                            const CUtensorMap* tm, uint64_t* bar, uint32_t dst, int kvh, int t,
                                            int lane) {
  static_assert(BN / 16 <= 32, "a page of 16 tokens per lane");
  if (lane == 0) mbar_arrive_expect_tx(bar, Smem::Tile::kTileBytes);
  const device::PageDivisor pages(p.block_size);
  if (p.block_size < 64) {  // the tile starts a page: every box at a page's first token
    __syncwarp();           // the barrier expects the tile's bytes before any box can complete
    if (lane < pages.page(BN)) {
      const int blk = __ldg(table_row + pages.page(t * BN) + lane), r = lane * p.block_size;
#pragma unroll
      for (int c = 0; c < D / 64; ++c)
        tma_load_4d(sm.smem + (dst - sm.base) + c * (BN * 128) + r * 128, tm, c * 64, kvh, 0, blk, bar);
    }
    return;
  }
  if (lane != 0) return;
#pragma unroll
  for (int h = 0; h < BN / 64; ++h) {
    const int tok0 = t * BN + h * 64;
    const device::PagedPos pg = pages.pos(tok0);
    const int blk = __ldg(table_row + pg.page);
#pragma unroll
    for (int c = 0; c < D / 64; ++c)
      tma_load_4d(sm.smem + (dst - sm.base) + c * (BN * 128) + h * 8192, tm, c * 64, kvh, pg.offset, blk, bar);
  }
}

// One unit's tiles by TMA: step t claims K(t)'s slot and issues it, then V(t - 1)'s; the tail tile (tokens past
// kv_len) goes K and V together through the warp's cp.async gather.
template <int D, int WG, bool F>
__device__ __forceinline__ void produce_unit_tma(const AttentionParams& p, const WideLaunch& w,
                                                 const WideSmem<D, WG, true>& sm, int S, const CUtensorMap& tmk,
                                                 const CUtensorMap& tmv, const WideGeom<WideTile<D, WG, true>::kBN>& g,
                                                 const int32_t* table_row, int64_t head_off, RingPos& kp, int lane) {
  constexpr int BN = WideTile<D, WG, true>::kBN;
  const int full_tiles = min(g.n_tiles, g.kv_len / BN);  // tiles whose BN tokens are all < kv_len
  const int t0 = wide_first_tile<BN, F>(p, g);
  for (int t = t0; t <= g.n_tiles; ++t) {
    const RingPos r = kp;  // tile t's position; tile t-1's is the one before
    if (t < g.n_tiles) {
      kp.advance(S);
      mbar_wait(&sm.empty_k[r.slot()], r.phase() ^ 1);
      if (t < full_tiles) {
        tma_kv_tile<D, BN>(p, sm, table_row, &tmk, &sm.full_k[r.slot()], sm.k_slot(r.slot()), g.kvh, t, lane);
      } else {  // the tail tile: K and V together, zero-filled past kv_len
        mbar_wait(&sm.empty_v[r.slot()], r.phase() ^ 1);
        gather_kv_tile<D, BN, 32>(p, table_row, head_off, g.kv_len, t, sm.k_slot(r.slot()), sm.v_slot(r.slot()), lane);
        cp_async_commit();
        cp_async_wait<0>();
        fence_proxy_async_smem();
        __syncwarp();
        if (lane == 0) {
          mbar_arrive(&sm.full_k[r.slot()]);
          mbar_arrive(&sm.full_v[r.slot()]);
        }
      }
    }
    if (t > t0 && t - 1 < full_tiles) {  // V one tile behind K (the tail tile's V went with its K)
      const RingPos v = r.before(S);
      mbar_wait(&sm.empty_v[v.slot()], v.phase() ^ 1);
      tma_kv_tile<D, BN>(p, sm, table_row, &tmv, &sm.full_v[v.slot()], sm.v_slot(v.slot()), g.kvh, t - 1, lane);
    }
  }
}

// One unit's tiles by the 128-thread cp.async gather. Tile t is published `lag` tiles later, so that many gathers
// stay in flight. A slot's V is released one round after its K is consumed, so publishing t-1 only after claiming
// slot t needs 3 slots: with 2 the producer would wait for the release of V(t-2), which needs full K(t-1), which it
// has not published.
template <int D, int WG, bool F>
__device__ __forceinline__ void produce_unit_gather(const AttentionParams& p, const WideLaunch& w,
                                                    const WideSmem<D, WG, false>& sm, int S,
                                                    const WideGeom<WideTile<D, WG, false>::kBN>& g,
                                                    const int32_t* table_row, int64_t head_off, RingPos& kp) {
  constexpr int BN = WideTile<D, WG, false>::kBN;
  const int lag = S >= 3 ? 1 : 0;
  auto publish = [&](const RingPos& q) {
    fence_proxy_async_smem();
    mbar_arrive(&sm.full_k[q.slot()]);
    mbar_arrive(&sm.full_v[q.slot()]);
  };
  RingPos prev;  // the tile gathered one step earlier
  const int t0 = wide_first_tile<BN, F>(p, g);
  for (int t = t0; t < g.n_tiles; ++t) {
    const RingPos r = kp;
    kp.advance(S);
    mbar_wait(&sm.empty_k[r.slot()], r.phase() ^ 1);
    mbar_wait(&sm.empty_v[r.slot()], r.phase() ^ 1);
    gather_kv_tile<D, BN, 128>(p, table_row, head_off, g.kv_len, t, sm.k_slot(r.slot()), sm.v_slot(r.slot()),
                               threadIdx.x);
    cp_async_commit();
    if (lag == 0) {
      cp_async_wait<0>();
      publish(r);
    } else if (t > t0) {  // tile t-1 landed: publish it while tile t is in flight
      cp_async_wait<1>();
      publish(prev);
    }
    prev = r;
  }
  if (lag == 1 && g.n_tiles > t0) {
    cp_async_wait<0>();
    publish(prev);
  }
}

// The producer warpgroup (budget set by the kernel): every unit of the CTA's walk (TMA: one warp; the rest exit).
template <int D, int WG, bool TMA, bool F>
__device__ __forceinline__ void wide_producer(const AttentionParams& p, const WideLaunch& w,
                                              const WideSmem<D, WG, TMA>& sm, int S, const int32_t* block_table,
                                              const CUtensorMap& tmk, const CUtensorMap& tmv) {
  using Tile = WideTile<D, WG, TMA>;
  if constexpr (TMA) {
    if (threadIdx.x >= 32) return;  // one warp: lane 0 issues TMA; the warp gathers the tail tile
  }
  const int lane = threadIdx.x % 32;
  RingPos kp;  // ring position of the next K tile, across this CTA's units
  WideWork u;
  WideGeom<Tile::kBN> g;
  int k = 0;
  for (bool have = wide_next_unit(p, w, k, u, g); have; have = wide_next_unit(p, w, ++k, u, g)) {
    const int32_t* table_row = block_table + device::block_table_row_offset(u.seq, p.block_table_stride);
    const int64_t head_off = static_cast<int64_t>(g.kvh) * p.kv_stride_head;
    if constexpr (TMA) {
      produce_unit_tma<D, WG, F>(p, w, sm, S, tmk, tmv, g, table_row, head_off, kp, lane);
    } else {
      (void)lane;
      produce_unit_gather<D, WG, F>(p, w, sm, S, g, table_row, head_off, kp);
    }
  }
}

}  // namespace attnbench::cuda::dev
