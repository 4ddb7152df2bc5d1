// The wide kernel's producer for an 8-bit K/V cache (d128, block_size % 64 == 0): one thread lands tile t's codes
// by TMA in the upper half of its K and V slots ([BN][D] bytes, plain rows; completing on the slot's `landed`
// barrier), and the warpgroup widens them in place into the [D/64][BN][64] swizzled 16-bit tiles the consumers read
// (e4m3 and e5m2 values are exact in fp16 and bf16; rows past kv_len become zeros), tile t - 1 while tile t's codes
// are in flight. The consumers are the 16-bit kernel's: k_scale is in the softmax scale, v_scale in the finished
// rows (a features instance).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "attnbench/attention.hpp"
#include "common/device/paged.hpp"
#include "cuda/feature_tile.cuh"
#include "cuda/ld_st.cuh"
#include "cuda/mbarrier.cuh"
#include "cuda/wide_layout.cuh"
#include "cuda/wide_work.cuh"

namespace attnbench::cuda::dev {

constexpr int kWideProducerBar = 15;  // the producer warpgroup's own named barrier (consumers use 1 .. 2 WG)

// Where a slot's codes land: its second d-slab, which the widening writes last.
template <int BN>
constexpr uint32_t wide_codes_offset() { return BN * 128; }

// 16 codes (one 16-byte chunk of row `row`, d = 16 c .. 16 c + 15) -> 16-bit chunks 2 c and 2 c + 1 of the tile.
template <DType DT, DType KV, int BN>
__device__ __forceinline__ void store_widened(uint32_t tile, int row, int c, uint4 v) {
  uint4 lo, hi;
  widen16<DT, KV>(v, lo, hi);
  st_shared_v4(tile + wide_swz<BN>(row, 2 * c), lo);
  st_shared_v4(tile + wide_swz<BN>(row, 2 * c + 1), hi);
}

// The codes in the upper half of the slot at `tile` -> the whole 16-bit tile, by the 128 producer threads; rows
// from `valid` on are zeros. The first slab's writes miss the codes; the second's overwrite them, so every
// thread reads its share of them before a barrier.
template <DType DT, DType KV, int D, int BN>
__device__ __forceinline__ void widen_slot(uint32_t tile, int valid, int tid) {
  static_assert(D == 128, "the codes of a tile fill exactly its second d-slab at head size 128");
  constexpr int kRows = BN / 32;  // rows per thread: tid / 4 + 32 j, code chunk tid % 4 (+ 4)
  const uint32_t codes = tile + wide_codes_offset<BN>();
  const int c = tid % 4;
  uint4 upper[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int row = tid / 4 + 32 * j;
    const bool ok = row < valid;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    const uint4 lower = ok ? ld_shared_v4(codes + row * D + c * 16) : zero;
    upper[j] = ok ? ld_shared_v4(codes + row * D + (c + 4) * 16) : zero;
    store_widened<DT, KV, BN>(tile, row, c, lower);
  }
  named_bar_sync(kWideProducerBar, 128);
#pragma unroll
  for (int j = 0; j < kRows; ++j) store_widened<DT, KV, BN>(tile, tid / 4 + 32 * j, c + 4, upper[j]);
}

// Tile t's codes of kv head kvh, K and V, by TMA into the upper halves of the slots at dk / dv, completing on bar:
// one {D bytes, 1, 64 tokens, 1} box per 64-token page that holds a token of the sequence.
template <int D, int BN, typename Smem>
__device__ __forceinline__ void tma_code_tiles(const AttentionParams& p, const Smem& sm, const int32_t* table_row,
                                               const CUtensorMap* tmk, const CUtensorMap* tmv, uint64_t* bar,
                                               uint32_t dk, uint32_t dv, int kvh, int t, int kv_len) {
  const int boxes = min(BN / 64, (kv_len - t * BN + 63) / 64);
  mbar_arrive_expect_tx(bar, static_cast<uint32_t>(boxes * 2 * 64 * D));
  for (int h = 0; h < boxes; ++h) {
    const device::PagedPos pg = device::PageDivisor(p.block_size).pos(t * BN + h * 64);
    const int blk = __ldg(table_row + pg.page);
    tma_load_4d(sm.smem + (dk - sm.base) + h * 64 * D, tmk, 0, kvh, pg.offset, blk, bar);
    tma_load_4d(sm.smem + (dv - sm.base) + h * 64 * D, tmv, 0, kvh, pg.offset, blk, bar);
  }
}

// One unit's tiles: step t claims slot t and lands its codes, then widens tile t - 1 (landed) and publishes its K,
// then its V.
template <DType DT, DType KV, int D, int WG, bool F>
__device__ __forceinline__ void produce_unit_codes(const AttentionParams& p, const WideSmem<D, WG, true>& sm,
                                                   uint64_t* landed, int S, const CUtensorMap& tmk,
                                                   const CUtensorMap& tmv,
                                                   const WideGeom<WideTile<D, WG, true>::kBN>& g,
                                                   const int32_t* table_row, RingPos& kp, int tid) {
  constexpr int BN = WideTile<D, WG, true>::kBN;
  constexpr uint32_t kCodes = wide_codes_offset<BN>();
  const int t0 = wide_first_tile<BN, F>(p, g);
  RingPos prev;
  for (int t = t0; t <= g.n_tiles; ++t) {
    const RingPos r = kp;
    if (t < g.n_tiles) {
      kp.advance(S);
      mbar_wait(&sm.empty_k[r.slot()], r.phase() ^ 1);
      mbar_wait(&sm.empty_v[r.slot()], r.phase() ^ 1);
      if (tid == 0)
        tma_code_tiles<D, BN>(p, sm, table_row, &tmk, &tmv, &landed[r.slot()], sm.k_slot(r.slot()) + kCodes,
                              sm.v_slot(r.slot()) + kCodes, g.kvh, t, g.kv_len);
    }
    if (t > t0) {
      const int valid = g.kv_len - (t - 1) * BN;
      mbar_wait(&landed[prev.slot()], prev.phase());
      widen_slot<DT, KV, D, BN>(sm.k_slot(prev.slot()), valid, tid);
      fence_proxy_async_smem();  // the generic writes, before the consumers' wgmma (async proxy) reads them
      named_bar_sync(kWideProducerBar, 128);
      if (tid == 0) mbar_arrive(&sm.full_k[prev.slot()]);
      widen_slot<DT, KV, D, BN>(sm.v_slot(prev.slot()), valid, tid);
      fence_proxy_async_smem();
      named_bar_sync(kWideProducerBar, 128);
      if (tid == 0) mbar_arrive(&sm.full_v[prev.slot()]);
    }
    prev = r;
  }
}

// The producer warpgroup of an 8-bit cache: its register budget, then every unit of the CTA's walk.
template <DType DT, DType KV, int D, int WG, bool F>
__device__ __forceinline__ void wide_producer_codes(const AttentionParams& p, const WideLaunch& w,
                                                    const WideSmem<D, WG, true>& sm, uint64_t* landed, int S,
                                                    const int32_t* block_table, const CUtensorMap& tmk,
                                                    const CUtensorMap& tmv) {
  using Tile = WideTile<D, WG, true>;
  if constexpr (WG >= 2) setmaxnreg_dec<Tile::kProducerRegs>();
  RingPos kp;
  WideWork u;
  WideGeom<Tile::kBN> g;
  int k = 0;
  for (bool have = wide_next_unit(p, w, k, u, g); have; have = wide_next_unit(p, w, ++k, u, g)) {
    const int32_t* table_row = block_table + static_cast<int64_t>(u.seq) * p.block_table_stride;
    produce_unit_codes<DT, KV, D, WG, F>(p, sm, landed, S, tmk, tmv, g, table_row, kp, threadIdx.x);
  }
}

}  // namespace attnbench::cuda::dev
