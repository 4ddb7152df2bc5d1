// The wide prefill kernel's consumer main loop (prefill_wide.cuh): per KV tile of a unit, S = Q K^T by SS wgmma
// into registers, the base-2 online softmax in registers and O += P V by RS wgmma, P as its 16-bit A operand.
// Iteration t issues S(t) with P(t-1) V(t-1) (FA3's intra-warpgroup overlap); with WG >= 2 the warpgroups take
// turns issuing, so one's softmax runs under another's wgmmas.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "attnbench/attention.hpp"
#include "cuda/feature_tile.cuh"
#include "cuda/mbarrier.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/q_prologue.cuh"
#include "cuda/warp_tile.cuh"
#include "cuda/wgmma.cuh"
#include "cuda/wide_layout.cuh"
#include "cuda/wide_work.cuh"

namespace attnbench::cuda::dev {

// A consumer thread's running state of one unit: O, the row maxima and sums of its two rows, and P(t-1) in the RS
// A layout: 16-bit, k-block j = S values 8j..8j+7 (n8 tiles 2j, 2j+1); P8 (e4m3), k32-block j = n8 tiles 4j..4j+3,
// register r = rows lane/4 (+8 for odd r) and keys 2t, 2t+1, 2t+8, 2t+9 (+16 for r >= 2), t = lane % 4, in the
// byte order the A operand reads as k = 4t..4t+3: V's rows are laid out in that key order (wide_widen.cuh, transpose_slot_vt).
template <int D, int BN, bool P8 = false>
struct WideAcc {
  float o[D / 8][4];
  float m[2], l[2];
  uint32_t pa[P8 ? BN / 32 : BN / 16][4];
};

// A consumer thread's fixed context: the kernel's inputs, the ring depth, its warpgroup (warp-uniform), its thread,
// warp and lane in the warpgroup, the softmax scale in base 2, the Q / O / gate pointers and Q's and O's maps; F:
// the attention features are applied (feature_tile.cuh); QT: Q's storage, DT or (the FP8 SDPA) the cache's 8-bit
// code, K's too.
// Values read from the parameters once, before the unit loop: read inside it, the asm statements' memory clobbers
// make nvcc reload them.
template <DType DT, int D, int WG, bool TMA, bool F, DType QT>
struct WideCtx {
  using Tile = WideTile<D, WG, TMA>;
  static constexpr int BN = Tile::kBN, RW = kWideRowsPerWg;
  // Turn-taking (WG >= 2, FA3's warp scheduler barriers): a warpgroup issues its GEMMs of a round only after the
  // previous one (wg - 1, cyclically) issued its own: bar.sync on its id, then bar.arrive on the next's. Every
  // warpgroup runs exactly n_tiles rounds per unit (no-math rounds for tiles its rows cannot see); the last
  // warpgroup opens with one arrive on warpgroup 0's barrier and warpgroup 0 closes with one sync at the very end,
  // so the counts balance over the CTA's whole walk.
  static constexpr int kSchedBar = 1 + WG;  // ids 1..WG: the Q loads; then WG scheduler barriers (<= 7 of 16)

  using T = typename StorageOf<DT>::type;
  using QS = std::conditional_t<is_16bit(QT), T, uint8_t>;  // Q's elements
  static constexpr bool P8 = !is_16bit(QT);                  // the FP8 SDPA: P in e4m3 against V^T codes
  // A row's max moves only when a tile's exceeds it by more than 2^kSlackLog2 (softmax_tile): p <= 2^kSlackLog2.
  // An 8-bit P is scaled by 2^kPLog2 into e4m3's range: p 2^kPLog2 <= 2^8 < 448.
  static constexpr int kSlackLog2 = P8 ? 3 : kSlackLog2P16;
  static constexpr int kPLog2 = P8 ? 8 - kSlackLog2 : 0;
  static constexpr bool kQoTma = !P8;  // Q and O may move by TMA (w.qo_tma): a 16-bit Q's rows
  using Acc = WideAcc<D, BN, P8>;
  const AttentionParams& p;
  const WideLaunch& w;
  const WideSmem<D, WG, TMA, P8>& sm;
  int S;
  int wg, tid, warp, lane;
  float c;
  T* out;
  const T* gate;
  const QS* q;
  const void* tmq;  // Q's and O's tensor maps (w.qo_tma): the kernel's __grid_constant__ parameters
  const void* tmo;

  __device__ __forceinline__ void sched_sync() const {
    if constexpr (WG >= 2) named_bar_sync(kSchedBar + wg, 256);
  }
  __device__ __forceinline__ void sched_arrive() const {
    if constexpr (WG >= 2) named_bar_arrive(kSchedBar + (wg + 1) % WG, 256);
  }
  __device__ __forceinline__ void release(uint64_t* bars, int slot) const {
    if (tid == 0) mbar_arrive(&bars[slot]);
  }
};

// This warpgroup's 64 Q rows of a unit into its Q tile qb. By TMA (w.qo_tma): thread 0, once the tile's last O
// store has read it, puts one box per 64-column slab on the tile's barrier (rows past q_len hold the next
// sequence's tokens or zeros, never stored). Otherwise the threads' cp.async, zero past q_len, one group; 8-bit
// codes: one 128-byte row per query and d slab (one at d128, two at d256), the 16-bit tile's first slabs' swizzle.
template <DType DT, int D, int WG, bool TMA, bool F, DType QT>
__device__ __forceinline__ void wide_load_q(const WideCtx<DT, D, WG, TMA, F, QT>& cx, int qb,
                                            const WideGeom<WideTile<D, WG, TMA>::kBN>& gg) {
  using Ctx = WideCtx<DT, D, WG, TMA, F, QT>;
  constexpr int kEl = 16 / sizeof(typename Ctx::QS);  // elements per 16-byte chunk
  constexpr int kCpr = D / kEl, RW = kWideRowsPerWg;
  const uint32_t dst = cx.sm.q_tile(qb, cx.wg);
  if (Ctx::kQoTma && cx.w.qo_tma) {
    if (cx.tid == 0) {
      bulk_wait_read<0>();
      uint64_t* bar = cx.sm.q_bar(qb, cx.wg);
      const WideRow r0 = wide_row(cx.w, gg, cx.wg * RW);
      mbar_arrive_expect_tx(bar, RW * D * 2);
#pragma unroll
      for (int c = 0; c < D / 64; ++c)
        tma_load_3d(cx.sm.smem + (dst - cx.sm.base) + c * (RW * 128), cx.tmq, c * 64, gg.q_start + r0.tok, r0.head,
                    bar);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < RW * kCpr / 128; ++i) {
    const int cidx = cx.tid + i * 128;
    const int row = cidx / kCpr, ch = cidx % kCpr;
    const WideRow rr = wide_row(cx.w, gg, cx.wg * RW + row);
    const int64_t off =
        rr.valid ? (gg.q_start + rr.tok) * cx.p.q_stride_token + rr.head * cx.p.q_stride_head + ch * kEl : 0;
    cp_async_16(dst + wide_swz<RW>(row, ch), cx.q + off, rr.valid);
  }
  cp_async_commit();
}

// O += P V: V MN-major (trans-b); LBO = next 64-wide d slab (BN rows x 128 B), SBO = 8 tokens (1024 B), each k16
// step over tokens +2048 B. 8-bit (QT a code, P8): V^T K-major, [D][BN keys] bytes, each k32 step +32 B; rows of
// 128 keys in the 128-byte swizzle (SBO 1024: 8 d rows), of d256's 64 keys in the 64-byte one (SBO 512).
template <DType DT, DType QT, int D, int BN>
__device__ __forceinline__ void wide_issue_pv(WideAcc<D, BN, !is_16bit(QT)>& a, uint32_t sv) {
  if constexpr (is_16bit(QT)) {
    const Sw128Desc<> dv(sv, BN * 128);
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) wgmma_rs<DT, D>(a.o, a.pa[j], dv.at(j * 2048), 1);
  } else {
    static_assert(BN == 128 || BN == 64, "V^T rows of 128 or 64 key bytes");
    const std::conditional_t<BN == 128, Sw128Desc<>, Sw64Desc> dv(sv, 16);
#pragma unroll
    for (int j = 0; j < BN / 32; ++j) wgmma_rs8<QT, D>(a.o, a.pa[j], dv.at(j * 32), 1);
  }
  wgmma_commit();
}

// Keys of tile [n0, n0 + BN) at or past a row's limit are masked; only tiles reaching past mask_from have any.
template <int BN>
__device__ __forceinline__ void wide_mask(float (&s)[BN / 8][4], int n0, int mask_from, const int (&limit)[2],
                                          int lane) {
  if (n0 + BN > mask_from) {
#pragma unroll
    for (int n = 0; n < BN / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = n0 + n * 8 + 2 * (lane % 4) + (e & 1);
        if (col >= limit[e >> 1]) s[n][e] = -INFINITY;
      }
    }
  }
}

// O rescaled by the tile's alpha, then P(t) = S(t) converted to the RS A layout.
template <DType DT, DType QT, int D, int BN>
__device__ __forceinline__ void wide_rescale_pack(WideAcc<D, BN, !is_16bit(QT)>& a, const float (&s)[BN / 8][4],
                                                  const float (&alpha)[2]) {
  // Skipped by a warp whose rows' maxima all stayed (alpha exactly 1: most tiles past the first few).
  if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
      a.o[d][0] *= alpha[0];
      a.o[d][1] *= alpha[0];
      a.o[d][2] *= alpha[1];
      a.o[d][3] *= alpha[1];
    }
  }
  if constexpr (is_16bit(QT)) {
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) {
      a.pa[j][0] = pack2<DT>(s[2 * j][0], s[2 * j][1]);
      a.pa[j][1] = pack2<DT>(s[2 * j][2], s[2 * j][3]);
      a.pa[j][2] = pack2<DT>(s[2 * j + 1][0], s[2 * j + 1][1]);
      a.pa[j][3] = pack2<DT>(s[2 * j + 1][2], s[2 * j + 1][3]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < BN / 32; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {  // n8 tiles 4j + 2 (r / 2) and + 1, row r % 2
        const int n = 4 * j + 2 * (r / 2), e = 2 * (r % 2);
        a.pa[j][r] = pack4_e4m3(s[n][e], s[n][e + 1], s[n + 1][e], s[n + 1][e + 1]);
      }
  }
}

// The features of a thread's two rows in a features kernel (F), nothing otherwise.
template <bool F>
using WideRowFeatures = std::conditional_t<F, RowFeatures, int>;
template <bool F>
__device__ __forceinline__ WideRowFeatures<F> wide_row_features(const AttentionParams& p, const device::Visibility& vis,
                                                                const int (&tok)[2], const int (&head)[2]) {
  if constexpr (F) return RowFeatures(p, vis, tok, head);
  else return 0;
}

// Iteration t: issues S(t) = Q K^T and O += P(t-1) V(t-1), waits for S only (then K(t) is released), runs the
// softmax of S(t) while the P V wgmmas still run, waits for them (V(t-1) released), rescales O and converts P(t).
// With F the scores are made final (mods, window and mask: rf) instead of masked.
// kFirst (no P V to overlap) is a compile-time branch: a run-time one around the wgmma issue makes ptxas serialise
// every wgmma (C7520).
template <bool kFirst, DType DT, int D, int WG, bool TMA, bool F, DType QT>
__device__ __forceinline__ void wide_step(const WideCtx<DT, D, WG, TMA, F, QT>& cx,
                                          typename WideCtx<DT, D, WG, TMA, F, QT>::Acc& a, RingPos& cur,
                                          const Sw128Desc<>& dq, int t, int mask_from, const int (&limit)[2],
                                          const WideRowFeatures<F>& rf) {
  constexpr int BN = WideTile<D, WG, TMA>::kBN, RW = kWideRowsPerWg;
  const int S = cx.S;
  const RingPos rk = cur, rv = cur.before(S);  // tiles t and t-1
  cur.advance(S);
  mbar_wait(&cx.sm.full_k[rk.slot()], rk.phase());
  if constexpr (!kFirst) mbar_wait(&cx.sm.full_v[rv.slot()], rv.phase());
  const uint32_t sk = cx.sm.k_slot(rk.slot());
  cx.sched_sync();
  const int n0 = t * BN;
  float s[BN / 8][4];
  fence_regs(s);
  fence_regs(a.o);
  fence_regs(a.pa);
  wgmma_fence();
  // S = Q K^T: both K-major; k-step kk over d: +(kk/4) 128-byte d slabs (64 elements, or 128 codes), +(kk%4) 32
  // bytes; SBO 1024 (8 rows). 16-bit: k16 steps; 8-bit codes: k32 steps (one slab at d128, two at d256).
  const Sw128Desc<> dk(sk, 16);
  constexpr int kKSteps = is_16bit(QT) ? D / 16 : D / 32;
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
    const uint32_t qoff = (kk / 4) * (RW * 128) + (kk % 4) * 32, koff = (kk / 4) * (BN * 128) + (kk % 4) * 32;
    if constexpr (is_16bit(QT)) wgmma_ss<DT, BN>(s, dq.at(qoff), dk.at(koff), kk > 0);
    else wgmma_ss8<QT, BN>(s, dq.at(qoff), dk.at(koff), kk > 0);
  }
  wgmma_commit();
  if constexpr (!kFirst) {
    wide_issue_pv<DT, QT, D, BN>(a, cx.sm.v_slot(rv.slot()));
    cx.sched_arrive();
    wgmma_wait<1>();  // S(t) done; P(t-1) V(t-1) may still run
  } else {
    cx.sched_arrive();
    wgmma_wait<0>();
  }
  fence_regs(s);
  cx.release(cx.sm.empty_k, rk.slot());
  float off[2];  // with F, what the scores lack per row (softmax_tile's OFF)
  if constexpr (F) {
    rf.apply(s, n0, cx.lane, off);
  } else {
    wide_mask<BN>(s, n0, mask_from, limit, cx.lane);
  }
  float alpha[2];
  using Ctx = WideCtx<DT, D, WG, TMA, F, QT>;
  softmax_tile<BN / 8, 4, Ctx::kPLog2, Ctx::kSlackLog2, F>(
      s, a.m, a.l, cx.c, [&](int r, float al) { alpha[r] = al; }, off);
  if constexpr (!kFirst) {
    // ptxas hoists a wgmma wait above independent ALU work (here: the whole softmax, which then no longer
    // overlaps P V) but keeps it after a shared-memory store: lane 0 of each warp stores its row sums, which
    // depend on every exponential, to the warp's scratch slot just before the wait.
    if (cx.lane == 0) st_shared_v2(cx.sm.scratch + 8 * (threadIdx.x / 32), a.l[0], a.l[1]);
    wgmma_wait<0>();
    fence_regs(a.o);
    fence_regs(a.pa);
    cx.release(cx.sm.empty_v, rv.slot());
  }
  wide_rescale_pack<DT, QT, D, BN>(a, s, alpha);
}

// The last tile's P V, after the loop.
template <DType DT, int D, int WG, bool TMA, bool F, DType QT>
__device__ __forceinline__ void wide_last_pv(const WideCtx<DT, D, WG, TMA, F, QT>& cx,
                                             typename WideCtx<DT, D, WG, TMA, F, QT>::Acc& a, const RingPos& cur) {
  const RingPos rv = cur.before(cx.S);
  fence_regs(a.o);
  fence_regs(a.pa);
  mbar_wait(&cx.sm.full_v[rv.slot()], rv.phase());
  wgmma_fence();
  wide_issue_pv<DT, QT, D, WideTile<D, WG, TMA>::kBN>(a, cx.sm.v_slot(rv.slot()));
  wgmma_wait<0>();
  fence_regs(a.o);
  cx.release(cx.sm.empty_v, rv.slot());
}

// Tiles [from, n_tiles) of the CTA are all masked for this warpgroup's rows: wait for each (the producer has
// claimed the slot, so the arrival lands on the tile's own EMPTY phase), take the round, release, in tile order.
template <DType DT, int D, int WG, bool TMA, bool F, DType QT>
__device__ __forceinline__ void wide_skip_tiles(const WideCtx<DT, D, WG, TMA, F, QT>& cx, RingPos& cur, int from,
                                                int n_tiles) {
  const int S = cx.S;
  for (int t = from; t < n_tiles; ++t) {
    const RingPos r = cur;
    cur.advance(S);
    mbar_wait(&cx.sm.full_k[r.slot()], r.phase());
    cx.sched_sync();
    cx.sched_arrive();
    cx.release(cx.sm.empty_k, r.slot());
    mbar_wait(&cx.sm.full_v[r.slot()], r.phase());
    cx.release(cx.sm.empty_v, r.slot());
  }
}

}  // namespace attnbench::cuda::dev
