// The wide kernel's producer for an 8-bit K/V cache (d128, block_size % 64 == 0): one thread lands tile t's codes
// by TMA in the upper half of its K and V slots ([BN][D] bytes, plain rows; completing on the slot's `landed`
// barrier), and the warpgroup widens them in place into the [D/64][BN][64] swizzled 16-bit tiles the consumers read
// (e4m3 and e5m2 values are exact in fp16 and bf16; rows past kv_len become zeros), tile t - 1 while tile t's codes
// are in flight. The consumers are the 16-bit kernel's: k_scale is in the softmax scale, v_scale in the finished
// rows (a features instance). With an 8-bit Q (Q8, the FP8 SDPA; d128 or d256) the consumers multiply codes: K
// lands by swizzled TMA boxes straight into the [D/128][BN][128 B] tile they read (on the slot's FULL barrier); V's
// codes land swizzled too and are transposed into the V^T tile an 8-bit P V reads (keys in wide_rescale_pack's
// order).
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

// Where a slot's codes land: its second half (its second d-slab at d128, which the widening writes last; at d256
// the half past the V^T tile).
template <int BN, int D>
constexpr uint32_t wide_codes_offset() { return BN * D; }

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
  const uint32_t codes = tile + wide_codes_offset<BN, D>();
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

// The key at position pos of a V^T row: within each 16, position 4 t + i holds key 2 t + (i & 1) + 8 (i >> 1), the
// order in which a thread's e4m3 P fragment holds its scores (WideAcc).
__device__ __forceinline__ int vt_key(int pos) {
  return (pos & ~15) + 2 * ((pos & 15) >> 2) + (pos & 1) + 8 * ((pos >> 1) & 1);
}

// Rows r of four words (byte r of each, in order): a 4 x 4 byte transpose in 8 byte permutes.
__device__ __forceinline__ void transpose4x4(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, uint32_t (&out)[4]) {
  const uint32_t t0 = __byte_perm(w0, w1, 0x5140), t1 = __byte_perm(w0, w1, 0x7362);
  const uint32_t t2 = __byte_perm(w2, w3, 0x5140), t3 = __byte_perm(w2, w3, 0x7362);
  out[0] = __byte_perm(t0, t2, 0x5410);
  out[1] = __byte_perm(t0, t2, 0x7632);
  out[2] = __byte_perm(t1, t3, 0x5410);
  out[3] = __byte_perm(t1, t3, 0x7632);
}

// Byte offset of V^T row d, key position pos (a multiple of 4) in the tile: rows of BN bytes, 16-byte chunks
// XOR-swizzled as the descriptor of wide_issue_pv reads them (128-byte rows: with d % 8; 64-byte: with d / 2 % 4).
template <int BN>
__device__ __forceinline__ uint32_t vt_offset(int d, int pos) {
  const int swz = BN == 128 ? (d & 7) : ((d >> 1) & 3);
  return static_cast<uint32_t>(d * BN + (((pos >> 4) ^ swz) << 4) + (pos & 15));
}

// The swizzled V codes in the upper half of the slot at `tile` ([D/128][BN][128 B], landed by TMA) -> the swizzled
// V^T tile [D][BN positions] at its start, keys from `valid` on zero. Thread tid: positions 4 q .. 4 q + 3
// (q = tid % (BN/4)) of d chunks 2 (tid / (BN/4)) and + 1 (16 d each); at d128 its reads are 2-way bank conflicts,
// its 4-byte writes none.
template <int D, int BN>
__device__ __forceinline__ void transpose_slot_vt(uint32_t tile, int valid, int tid) {
  static_assert((D == 128 && BN == 128) || (D == 256 && BN == 64), "V^T of a d128 tile (128 keys) or a d256 one (64)");
  static_assert((D / 16) * (BN / 4) == 256, "two (d chunk, 4 positions) items per producer thread");
  const uint32_t codes = tile + wide_codes_offset<BN, D>();
  const int p0 = 4 * (tid % (BN / 4));
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int c = 2 * (tid / (BN / 4)) + h;
    const uint32_t slab = codes + (c >> 3) * (BN * 128);
    uint4 w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int key = vt_key(p0 + i);
      w[i] = key < valid ? ld_shared_v4(slab + key * 128 + (((c & 7) ^ (key & 7)) << 4)) : make_uint4(0u, 0u, 0u, 0u);
    }
    const uint32_t words[4][4] = {{w[0].x, w[1].x, w[2].x, w[3].x}, {w[0].y, w[1].y, w[2].y, w[3].y},
                                  {w[0].z, w[1].z, w[2].z, w[3].z}, {w[0].w, w[1].w, w[2].w, w[3].w}};
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      uint32_t rows[4];
      transpose4x4(words[m][0], words[m][1], words[m][2], words[m][3], rows);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        st_shared_u32(tile + vt_offset<BN>(16 * c + 4 * m + r, p0), rows[r]);
      }
    }
  }
}

// The 64-token pages of tile t that hold a token of the sequence: one TMA box each per tensor.
template <int BN>
__device__ __forceinline__ int code_boxes(int t, int kv_len) { return min(BN / 64, (kv_len - t * BN + 63) / 64); }

// Tile t's codes of kv head kvh in one tensor (tm) by TMA to dst, completing on bar (whose expect_tx the caller
// set): per page of code_boxes, one {128 bytes, 1, 64 tokens, 1} box per 128-byte d slab (plain rows at d128, or
// swizzled by the map into [D/128][BN][128 B]).
template <int D, int BN, typename Smem>
__device__ __forceinline__ void tma_codes(const AttentionParams& p, const Smem& sm, const int32_t* table_row,
                                          const CUtensorMap* tm, uint64_t* bar, uint32_t dst, int kvh, int t,
                                          int boxes) {
  for (int h = 0; h < boxes; ++h) {
    const device::PagedPos pg = device::PageDivisor(p.block_size).pos(t * BN + h * 64);
    const int page = __ldg(table_row + pg.page);
#pragma unroll
    for (int slab = 0; slab < D / 128; ++slab)
      tma_load_4d(sm.smem + (dst - sm.base) + slab * (BN * 128) + h * (64 * 128), tm, slab * 128, kvh, pg.offset, page,
                  bar);
  }
}

// One unit's tiles: step t claims slot t and lands its codes, then widens tile t - 1 (landed) and publishes its K,
// then its V. Q8: K lands ready on its FULL barrier; only V is widened.
template <DType DT, DType KV, int D, int WG, bool F, bool Q8>
__device__ __forceinline__ void produce_unit_codes(const AttentionParams& p, const WideSmem<D, WG, true, Q8>& sm,
                                                   uint64_t* landed, int S, const CUtensorMap& tmk,
                                                   const CUtensorMap& tmv,
                                                   const WideGeom<WideTile<D, WG, true>::kBN>& g,
                                                   const int32_t* table_row, RingPos& kp, int tid) {
  constexpr int BN = WideTile<D, WG, true>::kBN;
  constexpr uint32_t kCodes = wide_codes_offset<BN, D>();
  const int t0 = wide_first_tile<BN, F>(p, g);
  RingPos prev;
  for (int t = t0; t <= g.n_tiles; ++t) {
    const RingPos r = kp;
    if (t < g.n_tiles) {
      kp.advance(S);
      mbar_wait(&sm.empty_k[r.slot()], r.phase() ^ 1);
      mbar_wait(&sm.empty_v[r.slot()], r.phase() ^ 1);
      if (tid == 0) {  // landed[] counts V's codes, and K's unless K lands on its FULL barrier (Q8)
        const int boxes = code_boxes<BN>(t, g.kv_len);
        const uint32_t tile_bytes = static_cast<uint32_t>(boxes * 64 * D);
        uint64_t* k_bar = Q8 ? &sm.full_k[r.slot()] : &landed[r.slot()];
        const uint32_t dk = Q8 ? sm.k_slot(r.slot()) : sm.k_slot(r.slot()) + kCodes;
        if constexpr (Q8) mbar_arrive_expect_tx(k_bar, tile_bytes);
        mbar_arrive_expect_tx(&landed[r.slot()], Q8 ? tile_bytes : 2 * tile_bytes);
        tma_codes<D, BN>(p, sm, table_row, &tmk, k_bar, dk, g.kvh, t, boxes);
        tma_codes<D, BN>(p, sm, table_row, &tmv, &landed[r.slot()], sm.v_slot(r.slot()) + kCodes, g.kvh, t, boxes);
      }
    }
    if (t > t0) {
      const int valid = g.kv_len - (t - 1) * BN;
      mbar_wait(&landed[prev.slot()], prev.phase());
      if constexpr (!Q8) {
        widen_slot<DT, KV, D, BN>(sm.k_slot(prev.slot()), valid, tid);
        fence_proxy_async_smem();  // the generic writes, before the consumers' wgmma (async proxy) reads them
        named_bar_sync(kWideProducerBar, 128);
        if (tid == 0) mbar_arrive(&sm.full_k[prev.slot()]);
      }
      if constexpr (Q8) transpose_slot_vt<D, BN>(sm.v_slot(prev.slot()), valid, tid);
      else widen_slot<DT, KV, D, BN>(sm.v_slot(prev.slot()), valid, tid);
      fence_proxy_async_smem();
      named_bar_sync(kWideProducerBar, 128);
      if (tid == 0) mbar_arrive(&sm.full_v[prev.slot()]);
    }
    prev = r;
  }
}

// The producer warpgroup of an 8-bit cache (budget set by the kernel): every unit of the CTA's walk.
template <DType DT, DType KV, int D, int WG, bool F, bool Q8>
__device__ __forceinline__ void wide_producer_codes(const AttentionParams& p, const WideLaunch& w,
                                                    const WideSmem<D, WG, true, Q8>& sm, uint64_t* landed, int S,
                                                    const int32_t* block_table, const CUtensorMap& tmk,
                                                    const CUtensorMap& tmv) {
  using Tile = WideTile<D, WG, true>;
  RingPos kp;
  WideWork u;
  WideGeom<Tile::kBN> g;
  int k = 0;
  for (bool have = wide_next_unit(p, w, k, u, g); have; have = wide_next_unit(p, w, ++k, u, g)) {
    const int32_t* table_row = block_table + device::block_table_row_offset(u.seq, p.block_table_stride);
    produce_unit_codes<DT, KV, D, WG, F, Q8>(p, sm, landed, S, tmk, tmv, g, table_row, kp, threadIdx.x);
  }
}

}  // namespace attnbench::cuda::dev
