// 2D prefill, wide regime (sm_90a). A CTA = one producer warpgroup + WG consumer warpgroups of 64 query rows each.
// The producer fills separate K and V rings (`stages` slots each, 128B-swizzled tiles) through the block table:
// one thread issuing TMA boxes (block_size % 64 == 0; V one tile behind K) or 128 threads gathering with cp.async
// (other block sizes). Consumers: S = Q K^T by SS wgmma into registers, base-2 online softmax in registers, P
// converted to 16-bit in registers as the RS A operand of O += P V (V MN-major, trans-b); iteration t issues S(t)
// with P(t-1) V(t-1) (FA3's intra-warpgroup overlap); with WG >= 2 the warpgroups take turns issuing (named
// barriers), so one's softmax runs under another's wgmmas. K(t) is released as soon as S(t) is done, V(t-1) after
// P(t-1) V(t-1). Work: one CTA per (q-tile, head tile, sequence), heaviest q-tiles first, or (persistent) one CTA
// per SM walking the same order in a snake, the rings and turn-taking running on across its tiles, the next unit's
// Q loaded into a second Q tile while the current one computes (where it fits). A head tile is one query head, or
// (GQA packing, wide_work.cuh) several heads of one KV group sharing the tile's rows. An optional Q prologue
// (q_prologue.cuh) normalises and rotates Q in shared memory before the first wgmma reads it. Two things ptxas
// needs told, checked in the SASS (kernels/NOTES.md, wide v5): the warpgroup index is made warp-uniform
// (descriptors in uniform registers) and a shared store pins the P V wait after the softmax.
// Layouts and the register facts used here: /work/shared/HOPPER-ATTENTION.md sections 1-6.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "attnbench/attention.hpp"
#include "cuda/heuristics.hpp"
#include "cuda/launch.hpp"
#include "cuda/ld_st.cuh"
#include "cuda/mbarrier.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/q_prologue.cuh"
#include "cuda/runtime.hpp"
#include "cuda/tensor_map.hpp"
#include "cuda/warp_tile.cuh"
#include "cuda/wgmma.cuh"
#include "cuda/wide_work.cuh"

namespace attnbench::cuda {

template <int D, int WG, bool TMA>
struct WideTile {
  static_assert(wide_block_n(D) > 0, "the wide kernel exists for head sizes 64, 128, 256");
  static_assert(WG >= 1 && WG <= wide_max_wgs(D), "consumer warpgroups: 1..wide_max_wgs(D)");
  static constexpr int kThreads = 128 * (WG + 1);
  static constexpr int kBM = kWideRowsPerWg * WG;
  static constexpr int kBN = wide_block_n(D);
  // Every tile is [D/64][rows][64] 16-bit elements (128-byte rows, 16-byte chunks XOR-swizzled with row % 8) on a
  // 1024-byte boundary: what a 128B-swizzle descriptor with base offset 0 reads, and what a SWIZZLE_128B TMA box
  // of 64 x 64 writes. Shared memory: Q | K ring | V ring | barriers | scratch (heuristics.hpp, wide_smem_bytes).
  static constexpr int kQBytesPerWg = kWideRowsPerWg * D * 2;
  static constexpr int kTileBytes = kBN * D * 2;
  static constexpr int kQBytes = kQBytesPerWg * WG;
  // Register budgets per role (setmaxnreg, WG >= 2): the producer keeps 56 (the cp.async gather's address math),
  // 32 beside 3 consumer warpgroups; the consumers share the rest of the 64K-register file.
  static constexpr int kProducerRegs = WG == 3 ? 32 : 56;
  static constexpr int kConsumerRegs = std::min(240, (65536 - 128 * kProducerRegs) / (128 * WG) / 8 * 8);
};

namespace dev {

// Byte offset of 16-byte chunk `ch` (of D/8) in row `row` of a [D/64][rows][64] swizzled tile.
template <int ROWS>
__device__ __forceinline__ uint32_t wide_swz(int row, int ch) {
  return static_cast<uint32_t>((ch >> 3) * (ROWS * 128) + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
}

// Two 16-bit outputs times sigmoid of two 16-bit gate values, fp32 math, rounded once more to 16 bit.
template <DType DT> __device__ __forceinline__ uint32_t gate_pair(uint32_t o2, uint32_t g2) {
  const float2 sg = sigmoid2<DT>(g2), o = unpack2<DT>(o2);
  return pack2<DT>(o.x * sg.x, o.y * sg.y);
}

// K and V rows [t BN, t BN + BN) of one kv head (element offset head_off) into the swizzled tiles at sk / sv with
// 16-byte cp.async through the block table, by THREADS threads (this one: tid), zero-filling tokens >= kv_len;
// the caller commits and waits. The one-warp tail gather of the TMA producer stays rolled (its register budget).
template <int D, int BN, int THREADS>
__device__ __forceinline__ void gather_kv_tile(const AttentionParams& p, const int32_t* table_row, int64_t head_off,
                                               int kv_len, int t, uint32_t sk, uint32_t sv, int tid) {
  constexpr int kCpr = D / 8;  // 16-byte chunks per row
  constexpr int kUnroll = THREADS >= 128 ? 4 : 1;
  const char* kc = static_cast<const char*>(p.k_cache);
  const char* vc = static_cast<const char*>(p.v_cache);
#pragma unroll kUnroll
  for (int i = 0; i < BN * kCpr / THREADS; ++i) {
    const int cidx = tid + THREADS * i;
    const int row = cidx / kCpr, ch = cidx % kCpr;
    const int tok = t * BN + row;
    const bool valid = tok < kv_len;
    int64_t off = 0;
    if (valid) {
      const int blk = tok / p.block_size;
      off = static_cast<int64_t>(__ldg(table_row + blk)) * p.kv_stride_block +
            static_cast<int64_t>(tok - blk * p.block_size) * p.kv_stride_token + head_off + ch * 8;
    }
    const uint32_t dst = wide_swz<BN>(row, ch);
    cp_async_16(sk + dst, kc + 2 * off, valid);
    cp_async_16(sv + dst, vc + 2 * off, valid);
  }
}

// TMA: K/V tiles by cp.async.bulk.tensor from one elected producer thread (block_size % 64 == 0; one 64-token page
// of one kv head is a {64 d, 1, 64 tokens, 1} box of the 4D maps tmk/tmv, HOPPER-ATTENTION.md section 4), V one tile
// behind K; a tile holding tokens past kv_len is gathered by the producer warp with zero-filling cp.async instead
// (stale slots of the last page may hold NaN; 0 * NaN would poison P V). !TMA: the 128-thread cp.async gather.
template <DType DT, int D, int WG, bool TMA>
__global__ void __launch_bounds__(128 * (WG + 1), 1)
    prefill_wide_kernel(const __grid_constant__ AttentionParams p, const WideLaunch w,
                        const __grid_constant__ CUtensorMap tmk, const __grid_constant__ CUtensorMap tmv) {
  using T = typename StorageOf<DT>::type;
  using Tile = WideTile<D, WG, TMA>;
  constexpr int BN = Tile::kBN, RW = kWideRowsPerWg;
  const int S = w.stages;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  const uint32_t k_ring = base + w.q_bufs * Tile::kQBytes;
  const uint32_t v_ring = k_ring + S * Tile::kTileBytes;
  uint64_t* full_k = reinterpret_cast<uint64_t*>(smem + w.q_bufs * Tile::kQBytes + 2 * S * Tile::kTileBytes);
  uint64_t* full_v = full_k + kWideMaxStages;
  uint64_t* empty_k = full_v + kWideMaxStages;
  uint64_t* empty_v = empty_k + kWideMaxStages;
  const uint32_t scratch = smem_u32(empty_v + kWideMaxStages);  // 8 bytes per warp (kWideScratchBytes)
  auto k_slot = [&](int slot) { return k_ring + slot * Tile::kTileBytes; };
  auto v_slot = [&](int slot) { return v_ring + slot * Tile::kTileBytes; };

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      // TMA: one arrive.expect_tx (or the tail tile's one arrival); cp.async: every producer thread once its data landed
      mbar_init(&full_k[s], TMA ? 1 : 128);
      mbar_init(&full_v[s], TMA ? 1 : 128);
      mbar_init(&empty_k[s], WG);  // one thread per consumer warpgroup, after its wgmmas finished reading
      mbar_init(&empty_v[s], WG);
    }
    mbar_fence_init();
  }
  __syncthreads();
  const int32_t* block_table = p.block_table;

  if (threadIdx.x < 128) {  // ---- producer warpgroup
    if constexpr (WG >= 2) setmaxnreg_dec<Tile::kProducerRegs>();
    if constexpr (TMA) {
      if (threadIdx.x >= 32) return;  // one warp: lane 0 issues TMA; the warp gathers the tail tile
    }
    const int lane = threadIdx.x % 32;
    RingPos kp;  // ring position of the next K tile, across this CTA's units
    WideWork u;
    WideGeom<BN> g;
    int k = 0;
    for (bool have = wide_next_unit(p, w, k, u, g); have; have = wide_next_unit(p, w, ++k, u, g)) {
      const int32_t* table_row = block_table + static_cast<int64_t>(u.seq) * p.block_table_stride;
      const int64_t head_off = static_cast<int64_t>(g.kvh) * p.kv_stride_head;
      if constexpr (TMA) {
        const int full_tiles = min(g.n_tiles, g.kv_len / BN);  // tiles whose BN tokens are all < kv_len
        auto issue = [&](const CUtensorMap* tm, uint64_t* bar, uint32_t dst, int t) {
          mbar_arrive_expect_tx(bar, Tile::kTileBytes);
#pragma unroll
          for (int h = 0; h < BN / 64; ++h) {
            const int tok0 = t * BN + h * 64;
            const int page = tok0 / p.block_size;
            const int blk = __ldg(table_row + page);
#pragma unroll
            for (int c = 0; c < D / 64; ++c)
              tma_load_4d(smem + (dst - base) + c * (BN * 128) + h * 8192, tm, c * 64, g.kvh,
                          tok0 - page * p.block_size, blk, bar);
          }
        };
        for (int t = 0; t <= g.n_tiles; ++t) {
          const RingPos r = kp;  // tile t's position; tile t-1's is the one before
          if (t < g.n_tiles) {
            kp.advance(S);
            mbar_wait(&empty_k[r.slot()], r.phase() ^ 1);
            if (t < full_tiles) {
              if (lane == 0) issue(&tmk, &full_k[r.slot()], k_slot(r.slot()), t);
            } else {  // the tail tile: K and V together, zero-filled past kv_len
              mbar_wait(&empty_v[r.slot()], r.phase() ^ 1);
              gather_kv_tile<D, BN, 32>(p, table_row, head_off, g.kv_len, t, k_slot(r.slot()), v_slot(r.slot()), lane);
              cp_async_commit();
              cp_async_wait<0>();
              fence_proxy_async_smem();
              __syncwarp();
              if (lane == 0) {
                mbar_arrive(&full_k[r.slot()]);
                mbar_arrive(&full_v[r.slot()]);
              }
            }
          }
          if (t > 0 && t - 1 < full_tiles) {  // V one tile behind K (the tail tile's V went with its K)
            const RingPos v = r.before(S);
            mbar_wait(&empty_v[v.slot()], v.phase() ^ 1);
            if (lane == 0) issue(&tmv, &full_v[v.slot()], v_slot(v.slot()), t - 1);
          }
        }
      } else {
        // Tile t is published `lag` tiles later, so that many gathers stay in flight. A slot's V is released one
        // round after its K is consumed, so publishing t-1 only after claiming slot t needs 3 slots: with 2 the
        // producer would wait for the release of V(t-2), which needs full K(t-1), which it has not published.
        const int lag = S >= 3 ? 1 : 0;
        auto publish = [&](const RingPos& q) {
          fence_proxy_async_smem();
          mbar_arrive(&full_k[q.slot()]);
          mbar_arrive(&full_v[q.slot()]);
        };
        RingPos prev;  // the tile gathered one step earlier
        for (int t = 0; t < g.n_tiles; ++t) {
          const RingPos r = kp;
          kp.advance(S);
          mbar_wait(&empty_k[r.slot()], r.phase() ^ 1);
          mbar_wait(&empty_v[r.slot()], r.phase() ^ 1);
          gather_kv_tile<D, BN, 128>(p, table_row, head_off, g.kv_len, t, k_slot(r.slot()), v_slot(r.slot()),
                                     threadIdx.x);
          cp_async_commit();
          if (lag == 0) {
            cp_async_wait<0>();
            publish(r);
          } else if (t > 0) {  // tile t-1 landed: publish it while tile t is in flight
            cp_async_wait<1>();
            publish(prev);
          }
          prev = r;
        }
        if (lag == 1 && g.n_tiles > 0) {
          cp_async_wait<0>();
          publish(prev);
        }
      }
    }
    return;
  }

  // ---- consumer warpgroups
  if constexpr (WG >= 2) setmaxnreg_inc<Tile::kConsumerRegs>();
  // The warpgroup index through a lane-0 shuffle: ptxas then knows it is warp-uniform, so the shared-memory
  // descriptors of every wgmma are built in uniform registers (no per-wgmma R2UR moves in the issue loop).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128) - 1, 0);
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  // Turn-taking (WG >= 2, FA3's warp scheduler barriers): a warpgroup issues its GEMMs of a round only after the
  // previous one (wg - 1, cyclically) issued its own: bar.sync on its id, then bar.arrive on the next's. Every
  // warpgroup runs exactly n_tiles rounds per unit (no-math rounds for tiles its rows cannot see); the last
  // warpgroup opens with one arrive on warpgroup 0's barrier and warpgroup 0 closes with one sync at the very end,
  // so the counts balance over the CTA's whole walk.
  constexpr int kSchedBar = 1 + WG;  // ids 1..WG: the Q loads; then WG scheduler barriers (<= 7 of 16)
  auto sched_sync = [&] {
    if constexpr (WG >= 2) named_bar_sync(kSchedBar + wg, 256);
  };
  auto sched_arrive = [&] {
    if constexpr (WG >= 2) named_bar_arrive(kSchedBar + (wg + 1) % WG, 256);
  };
  if constexpr (WG >= 2) {
    if (wg == WG - 1) named_bar_arrive(kSchedBar + 0, 256);
  }
  auto release = [&](uint64_t* bars, int slot) {
    if (tid == 0) mbar_arrive(&bars[slot]);
  };
  const float c = p.scale * 1.4426950408889634f;
  T* out = static_cast<T*>(p.out);
  const T* gate = static_cast<const T*>(p.gate);
  const T* q = static_cast<const T*>(p.q);
  // This warpgroup's 64 Q rows of a unit into the swizzled tile at dst (zero past q_len), one cp.async group.
  // (Stepping one head's rows by a fixed address stride instead measured 1-4% slower, wide v6.)
  auto load_q = [&](uint32_t dst, const WideGeom<BN>& gg) {
    constexpr int kCpr = D / 8;
#pragma unroll
    for (int i = 0; i < RW * kCpr / 128; ++i) {
      const int cidx = tid + i * 128;
      const int row = cidx / kCpr, ch = cidx % kCpr;
      const WideRow rr = wide_row(w, gg, wg * RW + row);
      const int64_t off =
          rr.valid ? (gg.q_start + rr.tok) * p.q_stride_token + rr.head * p.q_stride_head + ch * 8 : 0;
      cp_async_16(dst + wide_swz<RW>(row, ch), q + off, rr.valid);
    }
    cp_async_commit();
  };
  RingPos cur;  // ring position of the next K tile (V of a tile sits at the same position)
  // With two Q tiles, unit n uses tile n % 2 and every unit after the first had its Q loaded during the one before.
  int k = 0, n_done = 0;
  WideWork u;
  WideGeom<BN> g;
  for (bool have = wide_next_unit(p, w, k, u, g); have; have = wide_next_unit(p, w, ++k, u, g), ++n_done) {
    const int qb = w.q_bufs == 2 ? n_done & 1 : 0;
    const uint32_t sq = base + qb * Tile::kQBytes + wg * Tile::kQBytesPerWg;
    // Q: own 64 rows (every earlier wgmma reading this tile has been waited for, and its epilogue reads are done)
    if (w.q_bufs == 1 || n_done == 0) load_q(sq, g);
    cp_async_wait<0>();
    fence_proxy_async_smem();
    named_bar_sync(1 + wg, 128);
    // The Q prologue, in place, before any wgmma reads Q (not compiled beside 3 consumer warpgroups: its code cost
    // that kernel's tile loop a spill; the plan keeps Q-prologue problems at <= kWideMaxWgsQPrologue).
    if constexpr (WG <= kWideMaxWgsQPrologue) {
      if (p.q_norm_weight != nullptr || p.q_rope_dim > 0) {
        q_prologue<DT, D, RW>(p, w, g, sq, wg * RW, tid, [](int row, int ch) { return wide_swz<RW>(row, ch); });
        fence_proxy_async_smem();
        named_bar_sync(1 + wg, 128);
      }
    }
    // This warpgroup's tile rows hold tokens [t_lo, t_hi] of the unit: a slice of one head's tokens, or (rows of
    // two heads or more, GQA packing) all of them. Tiles its rows can see (the CTA's later tiles: wait, release,
    // no math).
    // (Only `any` stays live through the tiles; the epilogue finds the rows again: registers.)
    bool any_rows;
    int wg_tiles, mask_from;
    {
      const WgRows rows(w, g, wg * RW, RW);
      const int wg_end = max(0, p.causal ? min(g.kv_len, rows.t_hi + 1 + g.diag) : g.kv_len);
      any_rows = rows.any;
      wg_tiles = rows.any ? (wg_end + BN - 1) / BN : 0;
      mask_from = p.causal ? min(g.kv_len, rows.t_lo + 1 + g.diag) : g.kv_len;
    }

    float o[D / 8][4];
#pragma unroll
    for (int d = 0; d < D / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    int limit[2];  // this thread's two rows (tile rows wg RW + warp 16 + lane / 4 + {0, 8}) see keys [0, limit)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const WideRow rr = wide_row(w, g, wg * RW + warp * 16 + lane / 4 + 8 * r);
      limit[r] = p.causal ? min(g.kv_len, rr.tok + 1 + g.diag) : g.kv_len;
    }

    // Iteration t issues S(t) = Q K(t)^T and O += P(t-1) V(t-1), waits for S only (then K(t) is released), runs
    // the softmax of S(t) while the P V wgmmas still run, waits for them (V(t-1) released), rescales O and converts
    // P(t) (FA3's intra-warpgroup overlap).
    uint32_t pa[BN / 16][4];  // P(t-1) in the RS A layout: k-block j = S values 8j..8j+7 (n8 tiles 2j, 2j+1)
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) pa[j][0] = pa[j][1] = pa[j][2] = pa[j][3] = 0u;
    const Sw128Desc<> dq(sq, 16);  // Q, K-major: SBO 1024 (8 rows)
    auto issue_pv = [&](uint32_t sv) {
      // O += P V: V MN-major (trans-b); LBO = next 64-wide d slab (BN rows x 128 B), SBO = 8 tokens (1024 B),
      // each k16 step over tokens +2048 B.
      const Sw128Desc<> dv(sv, BN * 128);
#pragma unroll
      for (int j = 0; j < BN / 16; ++j) wgmma_rs<DT, D>(o, pa[j], dv.at(j * 2048), 1);
      wgmma_commit();
    };
    // One iteration; kFirst (no P V to overlap) is a compile-time branch: a run-time one around the wgmma issue
    // makes ptxas serialise every wgmma (C7520).
    auto step = [&](int t, auto first) {
      constexpr bool kFirst = decltype(first)::value;
      const RingPos rk = cur, rv = cur.before(S);  // tiles t and t-1
      cur.advance(S);
      mbar_wait(&full_k[rk.slot()], rk.phase());
      if constexpr (!kFirst) mbar_wait(&full_v[rv.slot()], rv.phase());
      const uint32_t sk = k_slot(rk.slot());
      sched_sync();
      const int n0 = t * BN;
      float s[BN / 8][4];
      fence_regs(s);
      fence_regs(o);
      fence_regs(pa);
      wgmma_fence();
      // S = Q K^T: both K-major; k-step kk over d: +(kk/4) 64-wide d slabs, +(kk%4) 32 bytes; SBO 1024 (8 rows).
      const Sw128Desc<> dk(sk, 16);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t koff = (kk % 4) * 32;
        wgmma_ss<DT, BN>(s, dq.at((kk / 4) * (RW * 128) + koff), dk.at((kk / 4) * (BN * 128) + koff), kk > 0);
      }
      wgmma_commit();
      if constexpr (!kFirst) {
        issue_pv(v_slot(rv.slot()));
        sched_arrive();
        wgmma_wait<1>();  // S(t) done; P(t-1) V(t-1) may still run
      } else {
        sched_arrive();
        wgmma_wait<0>();
      }
      fence_regs(s);
      release(empty_k, rk.slot());
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
      float alpha[2];
      softmax_tile<BN / 8, 4>(s, m, l, c, [&](int r, float a) { alpha[r] = a; });
      if constexpr (!kFirst) {
        // ptxas hoists a wgmma wait above independent ALU work (here: the whole softmax, which then no longer
        // overlaps P V) but keeps it after a shared-memory store: lane 0 of each warp stores its row sums, which
        // depend on every exponential, to the warp's scratch slot just before the wait.
        if (lane == 0) st_shared_v2(scratch + 8 * (threadIdx.x / 32), l[0], l[1]);
        wgmma_wait<0>();
        fence_regs(o);
        fence_regs(pa);
        release(empty_v, rv.slot());
      }
      // O rescale, skipped by a warp whose rows' maxima all stayed (alpha exactly 1: most tiles past the first few)
      if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
        for (int d = 0; d < D / 8; ++d) {
          o[d][0] *= alpha[0];
          o[d][1] *= alpha[0];
          o[d][2] *= alpha[1];
          o[d][3] *= alpha[1];
        }
      }
#pragma unroll
      for (int j = 0; j < BN / 16; ++j) {
        pa[j][0] = pack2<DT>(s[2 * j][0], s[2 * j][1]);
        pa[j][1] = pack2<DT>(s[2 * j][2], s[2 * j][3]);
        pa[j][2] = pack2<DT>(s[2 * j + 1][0], s[2 * j + 1][1]);
        pa[j][3] = pack2<DT>(s[2 * j + 1][2], s[2 * j + 1][3]);
      }
    };
    if (wg_tiles > 0) step(0, std::true_type{});
    // The next unit's Q into the other tile while this unit computes (its last reader, the epilogue of the unit
    // before, finished with the named barrier at its end). The loop's step finds that unit again rather than
    // keeping it: held across the unit, its geometry cost the d64 and d256 consumers spills.
    if (w.q_bufs == 2) {
      int k_next = k + 1;
      WideWork u_next;
      WideGeom<BN> g_next;
      if (wide_next_unit(p, w, k_next, u_next, g_next))
        load_q(base + (qb ^ 1) * Tile::kQBytes + wg * Tile::kQBytesPerWg, g_next);
    }
    for (int t = 1; t < wg_tiles; ++t) step(t, std::false_type{});
    if (wg_tiles > 0) {  // the last tile's P V
      const RingPos rv = cur.before(S);
      fence_regs(o);
      fence_regs(pa);
      mbar_wait(&full_v[rv.slot()], rv.phase());
      wgmma_fence();
      issue_pv(v_slot(rv.slot()));
      wgmma_wait<0>();
      fence_regs(o);
      release(empty_v, rv.slot());
    }
    // The CTA's later tiles are all masked for this warpgroup's rows: wait for each (the producer has claimed the
    // slot, so the arrival lands on the tile's own EMPTY phase), take the round, release, in tile order.
    for (int t = wg_tiles; t < g.n_tiles; ++t) {
      const RingPos r = cur;
      cur.advance(S);
      mbar_wait(&full_k[r.slot()], r.phase());
      sched_sync();
      sched_arrive();
      release(empty_k, r.slot());
      mbar_wait(&full_v[r.slot()], r.phase());
      release(empty_v, r.slot());
    }

    // Epilogue through shared memory: O / l rounded to 16 bit into this warpgroup's Q tile (free: its last S
    // wgmma has been waited for; swizzled, so the 4-byte writes of a warp hit 32 distinct banks), then 16-byte
    // row-contiguous reads and global stores, times sigmoid(gate) when the problem has an output gate (p.gate
    // non-null; O is rounded before the gate, as an unfused O-then-gate chain rounds it).
    if (any_rows) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float sum = quad_sum(l[r]);
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        const int lrow = warp * 16 + lane / 4 + 8 * r;
#pragma unroll
        for (int d = 0; d < D / 8; ++d)
          st_shared_u32(sq + wide_swz<RW>(lrow, d) + (lane % 4) * 4, pack2<DT>(o[d][2 * r] * inv, o[d][2 * r + 1] * inv));
      }
      named_bar_sync(1 + wg, 128);
      // Gate values: 16-byte loads where the gate's base and strides allow them (the gated block's fused
      // projection layout does), issued for a batch of chunks ahead of their tile reads; otherwise 4-byte loads
      // per chunk (gate strides are only known to be even).
      const bool gate16 =
          gate != nullptr &&
          ((reinterpret_cast<uintptr_t>(gate) | static_cast<uintptr_t>(p.gate_stride_token | p.gate_stride_head) * 2) &
           15) == 0;
      constexpr int kCpr = D / 8, kChunks = RW * kCpr / 128, kBatch = 2;
      // The batch loop stays rolled: unrolled, the epilogue's copies (one per gate variant) were half the kernel's
      // code and missed the instruction cache on every short unit.
#pragma unroll 1
      for (int i0 = 0; i0 < kChunks; i0 += kBatch) {
        WideRow rows[kBatch];
        uint4 gv[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int cidx = tid + (i0 + b) * 128;
          rows[b] = wide_row(w, g, wg * RW + cidx / kCpr);
          if (gate16 && rows[b].valid)
            gv[b] = __ldg(reinterpret_cast<const uint4*>(gate + (g.q_start + rows[b].tok) * p.gate_stride_token +
                                                          rows[b].head * p.gate_stride_head + (cidx % kCpr) * 8));
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
          } else if (gate != nullptr) {
            const uint32_t* gp = reinterpret_cast<const uint32_t*>(gate + tok * p.gate_stride_token +
                                                                   rr.head * p.gate_stride_head + ch * 8);
            v.x = gate_pair<DT>(v.x, __ldg(gp + 0));
            v.y = gate_pair<DT>(v.y, __ldg(gp + 1));
            v.z = gate_pair<DT>(v.z, __ldg(gp + 2));
            v.w = gate_pair<DT>(v.w, __ldg(gp + 3));
          }
          st_global_v4(out + tok * p.o_stride_token + rr.head * p.o_stride_head + ch * 8, v);
        }
      }
      named_bar_sync(1 + wg, 128);  // the tile is read before a later unit's Q overwrites it
    }
  }
  if constexpr (WG >= 2) {
    if (wg == 0) named_bar_sync(kSchedBar + 0, 256);
  }
}

}  // namespace dev

template <DType DT, int D, int WG>
void launch_prefill_wide(const AttentionParams& p, const UnifiedLaunchPlan& lp, const KvTensorMaps* maps,
                         cudaStream_t stream) {
  if (lp.wide_stages < 2 || lp.wide_stages > kWideMaxStages)
    throw std::invalid_argument("cuda.unified wide: " + std::to_string(lp.wide_stages) + " ring slots (2.." +
                                std::to_string(kWideMaxStages) + ")");
  const int smem = wide_smem_bytes(D, WG, lp.wide_stages, lp.wide_q_bufs);
  if (smem > kWideSmemLimit)
    throw std::invalid_argument("cuda.unified wide: " + std::to_string(smem) + " bytes of shared memory");
  if (lp.wide_kv_tma && maps == nullptr) throw std::invalid_argument("cuda.unified wide: TMA plan without tensor maps");
  const dim3 grid(lp.grid_x, lp.grid_y, lp.grid_z);
  const WideLaunch w{lp.wide_stages, lp.wide_q_bufs, lp.q_major ? 1 : 0, lp.persistent ? 1 : 0, p.num_seqs,
                     static_cast<int>(lp.work_tiles), lp.wide_pack, lp.wide_tq, wide_pack_magic(lp.wide_tq),
                     p.heads / lp.wide_pack};
  auto go = [&](auto tma) {
    constexpr bool kTma = decltype(tma)::value;
    auto* kernel = &dev::prefill_wide_kernel<DT, D, WG, kTma>;
    static const bool configured = [&] {
      ATTNBENCH_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kWideSmemLimit));
      return true;
    }();
    (void)configured;
    KvTensorMaps none;
    if constexpr (!kTma) std::memset(&none, 0, sizeof(none));
    const KvTensorMaps& m = kTma ? *maps : none;
    kernel<<<grid, WideTile<D, WG, kTma>::kThreads, smem, stream>>>(p, w, m.k, m.v);
  };
  if (lp.wide_kv_tma) go(std::true_type{});
  else go(std::false_type{});
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

// One .cu per (dtype, head size): every consumer-warpgroup count that head size allows.
#define ATTNBENCH_INSTANTIATE_PREFILL_WIDE_WG(DT, D, WG) \
  template void launch_prefill_wide<DT, D, WG>(const AttentionParams&, const UnifiedLaunchPlan&, \
                                               const KvTensorMaps*, cudaStream_t);

}  // namespace attnbench::cuda
