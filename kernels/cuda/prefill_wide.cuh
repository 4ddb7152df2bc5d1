// 2D prefill, wide regime (sm_90a): one CTA per (q-tile, query head, sequence); warpgroup 0 is the producer that
// fills a 3-stage ring of 128B-swizzled K/V tiles through the block table: one thread issuing TMA boxes (block_size
// % 64 == 0; V one tile behind K) or 128 threads gathering with cp.async (other block sizes). WG consumer
// warpgroups each own 64 query rows: S = Q K^T by SS wgmma into registers, base-2 online softmax in registers, P
// converted to 16-bit in registers as the RS A operand of O += P V (V MN-major, trans-b); with WG = 2 they
// ping-pong their GEMM issue through named barriers. FULL_K / FULL_V / EMPTY mbarriers per stage.
// Layouts and the register facts used here: /work/shared/HOPPER-ATTENTION.md sections 1-3, 5.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "attnbench/attention.hpp"
#include "cuda/heuristics.hpp"
#include "cuda/launch.hpp"
#include "cuda/mbarrier.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/runtime.hpp"
#include "cuda/warp_tile.cuh"
#include "cuda/wgmma.cuh"

namespace attnbench::cuda {

template <int D, int WG>
struct WideTile {
  static_assert(D == 128, "the wide kernel exists for head size 128 only (one wgmma N = 128 for both GEMMs)");
  static_assert(WG == 1 || WG == 2, "1 or 2 consumer warpgroups");
  static constexpr int kWG = WG;
  static constexpr int kThreads = 128 * (WG + 1);
  static constexpr int kBM = kWideRowsPerWg * WG;
  static constexpr int kBN = wide_block_n(D);
  // 3 stages: with the overlap a stage is released one iteration later (after P V of the next iteration).
  static constexpr int kStages = 3;
  // Every tile is [D/64][rows][64] 16-bit elements (128-byte rows, 16-byte chunks XOR-swizzled with row % 8) on a
  // 1024-byte boundary: what a 128B-swizzle descriptor with base offset 0 reads.
  static constexpr int kQBytesPerWg = kWideRowsPerWg * D * 2;
  static constexpr int kTileBytes = kBN * D * 2;
  static constexpr int kQBytes = kQBytesPerWg * WG;
  static constexpr int kBarOffset = kQBytes + kStages * 2 * kTileBytes;
  // Barriers per stage: FULL_K, FULL_V (V is loaded one tile behind K), EMPTY.
  static constexpr int kSmemBytes = kBarOffset + 3 * kStages * 8 + 1024;  // + 1024: runtime alignment of the base
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per CTA");
  // Register budgets per role (setmaxnreg, 2 consumer warpgroups only): 128 x 56 + 256 x 224 <= 64K.
  static constexpr int kProducerRegs = 56;
  static constexpr int kConsumerRegs = 224;
};

namespace dev {

// Byte offset of 16-byte chunk `ch` (of D/8) in row `row` of a [D/64][rows][64] swizzled tile.
template <int ROWS>
__device__ __forceinline__ uint32_t wide_swz(int row, int ch) {
  return static_cast<uint32_t>((ch >> 3) * (ROWS * 128) + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
}

// Base-2 online softmax of one score tile (masked with -inf) without touching O: updates the running max m (raw
// score units) and thread-partial sums l, turns s into probabilities, returns the O rescale factors alpha.
template <int NT8>
__device__ __forceinline__ void softmax_tile(float (&s)[NT8][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             float c) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = m[r];
#pragma unroll
    for (int n = 0; n < NT8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
    mx = quad_max(mx);
    const float m_use = mx == -INFINITY ? 0.f : mx;  // a row with nothing visible yet stays at p = 0
    alpha[r] = exp2_approx((m[r] - m_use) * c);
    m[r] = mx;
    const float ms = m_use * c;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < NT8; ++n) {
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        const float pr = exp2_approx(fmaf(s[n][e], c, -ms));
        s[n][e] = pr;
        sum += pr;
      }
    }
    l[r] = l[r] * alpha[r] + sum;
  }
}

// TMA: K/V tiles by cp.async.bulk.tensor from one elected producer thread (block_size % 64 == 0; one 64-token page
// of one kv head is a {64 d, 1, 64 tokens, 1} box of the 4D maps tmk/tmv, HOPPER-ATTENTION.md section 4), V one tile
// behind K; a tile holding tokens past kv_len is gathered by the producer warp with zero-filling cp.async instead
// (stale slots of the last page may hold NaN; 0 * NaN would poison P V). !TMA: the 128-thread cp.async gather.
template <DType DT, int D, int WG, bool TMA>
__global__ void __launch_bounds__(128 * (WG + 1), 1)
    prefill_wide_kernel(const __grid_constant__ AttentionParams p, int q_major, const __grid_constant__ CUtensorMap tmk,
                        const __grid_constant__ CUtensorMap tmv) {
  using T = typename StorageOf<DT>::type;
  using Tile = WideTile<D, WG>;
  constexpr int BM = Tile::kBM, BN = Tile::kBN, S = Tile::kStages, RW = kWideRowsPerWg;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  uint64_t* full_k = reinterpret_cast<uint64_t*>(smem + Tile::kBarOffset);
  uint64_t* full_v = full_k + S;
  uint64_t* empty = full_v + S;

  const int m_idx = q_major ? blockIdx.x : blockIdx.y;
  const int head = q_major ? blockIdx.y : blockIdx.x;
  const int seq = blockIdx.z;
  const int q_start = p.cu_seqlens_q[seq];
  const int q_len = p.cu_seqlens_q[seq + 1] - q_start;
  const int kv_len = p.seqused_k[seq];
  const int n_m = (q_len + BM - 1) / BM;
  if (m_idx >= n_m) return;
  const int m0 = (n_m - 1 - m_idx) * BM;  // longest (last, for causal) q-tiles first
  const int kvh = head / (p.heads / p.kv_heads);
  const int diag = kv_len - q_len;  // bottom-right alignment: row i sees keys [0, i + diag]
  const int n_end = max(0, p.causal ? min(kv_len, min(m0 + BM, q_len) + diag) : kv_len);
  const int n_tiles = (n_end + BN - 1) / BN;

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      // TMA: one arrive.expect_tx (or the tail tile's one arrival); cp.async: every producer thread once its data landed
      mbar_init(&full_k[s], TMA ? 1 : 128);
      mbar_init(&full_v[s], TMA ? 1 : 128);
      mbar_init(&empty[s], WG);  // one thread per consumer warpgroup, after its wgmmas finished reading
    }
  }
  __syncthreads();
  auto stage_k = [&](int st) { return base + Tile::kQBytes + st * 2 * Tile::kTileBytes; };

  if (threadIdx.x < 128) {  // ---- producer warpgroup
    if constexpr (WG == 2) setmaxnreg_dec<Tile::kProducerRegs>();
    if constexpr (TMA) {
      if (threadIdx.x >= 32) return;  // one warp: lane 0 issues TMA; the warp gathers the tail tile
      const int lane = threadIdx.x;
      const T* kc = static_cast<const T*>(p.k_cache);
      const T* vc = static_cast<const T*>(p.v_cache);
      const int32_t* table_row = p.block_table + static_cast<int64_t>(seq) * p.block_table_stride;
      const int full_tiles = min(n_tiles, kv_len / BN);  // tiles whose BN tokens are all < kv_len
      auto issue = [&](const CUtensorMap* tm, uint64_t* bar, uint32_t dst, int t) {
        mbar_arrive_expect_tx(bar, Tile::kTileBytes);
#pragma unroll
        for (int h = 0; h < BN / 64; ++h) {
          const int tok0 = t * BN + h * 64;
          const int page = tok0 / p.block_size;
          const int blk = __ldg(table_row + page);
#pragma unroll
          for (int c = 0; c < D / 64; ++c)
            tma_load_4d(smem + (dst - base) + c * (BN * 128) + h * 8192, tm, c * 64, kvh, tok0 - page * p.block_size,
                        blk, bar);
        }
      };
      for (int t = 0; t <= n_tiles; ++t) {
        if (t < n_tiles) {
          const int st = t % S;
          mbar_wait(&empty[st], ((t / S) & 1) ^ 1);
          const uint32_t sk = stage_k(st);
          if (t < full_tiles) {
            if (lane == 0) issue(&tmk, &full_k[st], sk, t);
          } else {  // the tail tile: K and V together, zero-filled past kv_len
            const int64_t head_off = static_cast<int64_t>(kvh) * p.kv_stride_head;
#pragma unroll 4
            for (int i = 0; i < BN * (D / 8) / 32; ++i) {
              const int cidx = lane + 32 * i;
              const int row = cidx / (D / 8), ch = cidx % (D / 8);
              const int tok = t * BN + row;
              const bool valid = tok < kv_len;
              int64_t off = 0;
              if (valid) {
                const int blk = tok / p.block_size;
                off = static_cast<int64_t>(__ldg(table_row + blk)) * p.kv_stride_block +
                      static_cast<int64_t>(tok - blk * p.block_size) * p.kv_stride_token + head_off + ch * 8;
              }
              const uint32_t dst = wide_swz<BN>(row, ch);
              cp_async_16(sk + dst, kc + off, valid);
              cp_async_16(sk + Tile::kTileBytes + dst, vc + off, valid);
            }
            cp_async_commit();
            cp_async_wait<0>();
            fence_proxy_async_smem();
            __syncwarp();
            if (lane == 0) {
              mbar_arrive(&full_k[st]);
              mbar_arrive(&full_v[st]);
            }
          }
        }
        if (t > 0 && t - 1 < full_tiles && lane == 0) {  // V one tile behind K
          const int st = (t - 1) % S;
          issue(&tmv, &full_v[st], stage_k(st) + Tile::kTileBytes, t - 1);
        }
      }
      return;
    }
    const T* kc = static_cast<const T*>(p.k_cache);
    const T* vc = static_cast<const T*>(p.v_cache);
    const int32_t* table_row = p.block_table + static_cast<int64_t>(seq) * p.block_table_stride;
    constexpr int kCpr = D / 8;
    const int ch = threadIdx.x % kCpr;
    const int64_t head_off = static_cast<int64_t>(kvh) * p.kv_stride_head + ch * 8;
    for (int t = 0; t < n_tiles; ++t) {
      const int st = t % S;
      mbar_wait(&empty[st], ((t / S) & 1) ^ 1);
      const uint32_t sk = stage_k(st), sv = sk + Tile::kTileBytes;
#pragma unroll 4
      for (int i = 0; i < BN / (128 / kCpr); ++i) {
        const int row = threadIdx.x / kCpr + i * (128 / kCpr);
        const int tok = t * BN + row;
        const bool valid = tok < kv_len;
        int64_t off = 0;
        if (valid) {
          const int blk = tok / p.block_size;
          off = static_cast<int64_t>(__ldg(table_row + blk)) * p.kv_stride_block +
                static_cast<int64_t>(tok - blk * p.block_size) * p.kv_stride_token + head_off;
        }
        const uint32_t dst = wide_swz<BN>(row, ch);
        cp_async_16(sk + dst, kc + off, valid);
        cp_async_16(sv + dst, vc + off, valid);
      }
      cp_async_commit();
      if (t > 0) {  // tile t-1 landed: publish it while tile t is in flight
        cp_async_wait<1>();
        fence_proxy_async_smem();
        mbar_arrive(&full_k[(t - 1) % S]);
        mbar_arrive(&full_v[(t - 1) % S]);
      }
    }
    if (n_tiles > 0) {
      cp_async_wait<0>();
      fence_proxy_async_smem();
      mbar_arrive(&full_k[(n_tiles - 1) % S]);
      mbar_arrive(&full_v[(n_tiles - 1) % S]);
    }
    return;
  }

  // ---- consumer warpgroups
  if constexpr (WG == 2) setmaxnreg_inc<Tile::kConsumerRegs>();
  const int wg = threadIdx.x / 128 - 1;
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const int r0 = m0 + wg * RW;  // this warpgroup's first query row
  const uint32_t sq = base + wg * Tile::kQBytesPerWg;
  {
    const T* q = static_cast<const T*>(p.q);
    constexpr int kCpr = D / 8;
#pragma unroll
    for (int i = 0; i < RW * kCpr / 128; ++i) {
      const int c = tid + i * 128;
      const int row = c / kCpr, ch = c % kCpr;
      const int tok = r0 + row;
      const bool valid = tok < q_len;
      const int64_t off = valid ? (q_start + tok) * p.q_stride_token + head * p.q_stride_head + ch * 8 : 0;
      cp_async_16(sq + wide_swz<RW>(row, ch), q + off, valid);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async_smem();
    named_bar_sync(1 + wg, 128);
  }
  // Ping-pong (WG = 2, FA3's warp scheduler barriers): a warpgroup issues its GEMMs of a round only after the other
  // issued its own (bar.sync on its id, then bar.arrive on the other's), so one's softmax runs under the other's
  // wgmmas. Both warpgroups run exactly n_tiles rounds (no-math rounds for tiles their rows cannot see); warpgroup 1
  // opens with one arrive on warpgroup 0's barrier and warpgroup 0 closes with one sync, so the counts balance.
  constexpr int kSchedBar = 3;  // ids 3, 4 (0: __syncthreads, 1-2: the Q loads above)
  auto sched_sync = [&] {
    if constexpr (WG == 2) named_bar_sync(kSchedBar + wg, 256);
  };
  auto sched_arrive = [&] {
    if constexpr (WG == 2) named_bar_arrive(kSchedBar + (1 - wg), 256);
  };
  if constexpr (WG == 2) {
    if (wg == 1) named_bar_arrive(kSchedBar + 0, 256);
  }
  auto release = [&](int t) {
    if (tid == 0) mbar_arrive(&empty[t % S]);
  };
  // Tiles this warpgroup's rows can see (others of the CTA's tiles: wait, release, no math).
  const int wg_end = max(0, p.causal ? min(kv_len, min(r0 + RW, q_len) + diag) : kv_len);
  const int wg_tiles = r0 < q_len ? (wg_end + BN - 1) / BN : 0;
  const int mask_from = p.causal ? min(kv_len, r0 + 1 + diag) : kv_len;

  const float c = p.scale * 1.4426950408889634f;
  float o[D / 8][4];
#pragma unroll
  for (int d = 0; d < D / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int row_a = r0 + warp * 16 + lane / 4;  // this thread's rows: row_a + {0, 8}

  // FA3's intra-warpgroup overlap: iteration t issues S(t) = Q K(t)^T and O += P(t-1) V(t-1), waits for S only,
  // runs the softmax of S(t) while the P V wgmmas still run, then waits for them, releases stage t-1, rescales O.
  uint32_t pa[BN / 16][4];  // P(t-1) in the RS A layout: k-block j = S values 8j..8j+7 (n8 tiles 2j, 2j+1)
#pragma unroll
  for (int j = 0; j < BN / 16; ++j) pa[j][0] = pa[j][1] = pa[j][2] = pa[j][3] = 0u;
  auto issue_pv = [&](uint32_t sv) {
    // O += P V: V MN-major (trans-b); LBO = next 64-wide d slab (BN rows x 128 B), SBO = 8 tokens (1024 B),
    // each k16 step over tokens +2048 B.
#pragma unroll
    for (int j = 0; j < BN / 16; ++j)
      wgmma_m64n128k16_rs<DT>(o, pa[j], smem_desc_sw128(sv + j * 2048, BN * 128, 1024), 1);
    wgmma_commit();
  };
  // One iteration; kFirst (no P V to overlap) is a compile-time branch: a run-time one around the wgmma issue makes
  // ptxas serialise every wgmma (C7520).
  auto step = [&](int t, auto first) {
    constexpr bool kFirst = decltype(first)::value;
    const int st = t % S;
    mbar_wait(&full_k[st], (t / S) & 1);
    if constexpr (!kFirst) mbar_wait(&full_v[(t - 1) % S], ((t - 1) / S) & 1);
    const uint32_t sk = stage_k(st);
    sched_sync();
    const int n0 = t * BN;
    float s[BN / 8][4];
    fence_regs(s);
    fence_regs(o);
    fence_regs(pa);
    wgmma_fence();
    // S = Q K^T: both K-major; k-step kk over d: +(kk/4) 64-wide d slabs, +(kk%4) 32 bytes; SBO 1024 (8 rows).
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t koff = (kk % 4) * 32;
      const uint64_t da = smem_desc_sw128(sq + (kk / 4) * (RW * 128) + koff, 16, 1024);
      const uint64_t db = smem_desc_sw128(sk + (kk / 4) * (BN * 128) + koff, 16, 1024);
      wgmma_m64n128k16_ss<DT>(s, da, db, kk > 0);
    }
    wgmma_commit();
    if constexpr (!kFirst) {
      issue_pv(stage_k((t - 1) % S) + Tile::kTileBytes);
      sched_arrive();
      wgmma_wait<1>();  // S(t) done; P(t-1) V(t-1) may still run
    } else {
      sched_arrive();
      wgmma_wait<0>();
    }
    fence_regs(s);
    if (n0 + BN > mask_from) {
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = n0 + n * 8 + 2 * (lane % 4) + (e & 1);
          const int row = row_a + 8 * (e >> 1);
          const int limit = p.causal ? min(kv_len, row + 1 + diag) : kv_len;
          if (col >= limit) s[n][e] = -INFINITY;
        }
      }
    }
    float alpha[2];
    softmax_tile<BN / 8>(s, m, l, alpha, c);
    if constexpr (!kFirst) {
      wgmma_wait<0>();
      fence_regs(o);
      fence_regs(pa);
      release(t - 1);
    }
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
      o[d][0] *= alpha[0];
      o[d][1] *= alpha[0];
      o[d][2] *= alpha[1];
      o[d][3] *= alpha[1];
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
  for (int t = 1; t < wg_tiles; ++t) step(t, std::false_type{});
  if (wg_tiles > 0) {  // the last tile's P V
    fence_regs(o);
    fence_regs(pa);
    mbar_wait(&full_v[(wg_tiles - 1) % S], ((wg_tiles - 1) / S) & 1);
    wgmma_fence();
    issue_pv(stage_k((wg_tiles - 1) % S) + Tile::kTileBytes);
    wgmma_wait<0>();
    fence_regs(o);
    release(wg_tiles - 1);
  }
  // The CTA's later tiles are all masked for this warpgroup's rows: wait (K: the producer has claimed the stage,
  // so this arrival lands on the tile's own EMPTY phase), take the round, release, in tile order.
  for (int t = wg_tiles; t < n_tiles; ++t) {
    mbar_wait(&full_k[t % S], (t / S) & 1);
    sched_sync();
    sched_arrive();
    release(t);
  }
  if constexpr (WG == 2) {
    if (wg == 0) named_bar_sync(kSchedBar + 0, 256);
  }

  // Epilogue: O / l, times sigmoid(gate) when the problem has an output gate (p.gate non-null), fp32 math.
  T* out = static_cast<T*>(p.out);
  const T* gate = static_cast<const T*>(p.gate);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = quad_sum(l[r]);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int row = row_a + 8 * r;
    if (row < q_len) {
      const int64_t tok = q_start + row;
      T* dst = out + tok * p.o_stride_token + head * p.o_stride_head + 2 * (lane % 4);
      if (gate != nullptr) {
        const T* g = gate + tok * p.gate_stride_token + head * p.gate_stride_head + 2 * (lane % 4);
#pragma unroll
        for (int d = 0; d < D / 8; ++d) {
          const float2 sg = sigmoid2<DT>(*reinterpret_cast<const uint32_t*>(g + d * 8));
          *reinterpret_cast<uint32_t*>(dst + d * 8) = pack2<DT>(o[d][2 * r] * inv * sg.x, o[d][2 * r + 1] * inv * sg.y);
        }
      } else {
#pragma unroll
        for (int d = 0; d < D / 8; ++d)
          *reinterpret_cast<uint32_t*>(dst + d * 8) = pack2<DT>(o[d][2 * r] * inv, o[d][2 * r + 1] * inv);
      }
    }
  }
}

}  // namespace dev

namespace detail {
// cuTensorMapEncodeTiled through the runtime's driver entry point (no libcuda link); null when unavailable.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// The paged cache [num_blocks][block_size][kv_heads][head_size] (element strides from p) as a 4D map, innermost
// first {d, kv head, token in page, page}, box {64, 1, 64, 1}, 128-byte swizzle: one box = one 8 KB d-slab of 64
// tokens of one kv head, the [d/64][token][64] smem layout. The page count is not known here: the map's page
// extent is INT32_MAX (coordinates come from the block table; no page is out of bounds). Host only, no allocation.
inline CUtensorMap encode_kv_map(const void* base, DType dt, const AttentionParams& p) {
  CUtensorMap m;
  std::memset(&m, 0, sizeof(m));
  const PFN_cuTensorMapEncodeTiled_v12000 enc = tensor_map_encoder();
  if (enc == nullptr) throw std::runtime_error("cuda.unified wide: cuTensorMapEncodeTiled unavailable");
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.head_size), static_cast<cuuint64_t>(p.kv_heads),
                              static_cast<cuuint64_t>(p.block_size), 0x7fffffffull};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(p.kv_stride_head) * 2,
                                 static_cast<cuuint64_t>(p.kv_stride_token) * 2,
                                 static_cast<cuuint64_t>(p.kv_stride_block) * 2};
  const cuuint32_t box[4] = {64, 1, 64, 1};
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  const CUresult r = enc(&m, dt == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                         const_cast<void*>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                         CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("cuda.unified wide: cuTensorMapEncodeTiled failed (CUresult " + std::to_string(r) + ")");
  return m;
}
}  // namespace detail

template <DType DT, int D, int WG>
void launch_prefill_wide(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream) {
  using Tile = WideTile<D, WG>;
  const dim3 grid(lp.grid_x, lp.grid_y, lp.grid_z);
  auto go = [&](auto tma) {
    constexpr bool kTma = decltype(tma)::value;
    auto* kernel = &dev::prefill_wide_kernel<DT, D, WG, kTma>;
    static const bool configured = [&] {
      ATTNBENCH_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes));
      return true;
    }();
    (void)configured;
    CUtensorMap tmk, tmv;
    if constexpr (kTma) {
      tmk = detail::encode_kv_map(p.k_cache, DT, p);
      tmv = detail::encode_kv_map(p.v_cache, DT, p);
    } else {
      std::memset(&tmk, 0, sizeof(tmk));
      std::memset(&tmv, 0, sizeof(tmv));
    }
    kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(p, lp.q_major ? 1 : 0, tmk, tmv);
  };
  if (lp.wide_kv_tma) go(std::true_type{});
  else go(std::false_type{});
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

#define ATTNBENCH_INSTANTIATE_PREFILL_WIDE(DT, D)                                                            \
  template void launch_prefill_wide<DT, D, 1>(const AttentionParams&, const UnifiedLaunchPlan&, cudaStream_t); \
  template void launch_prefill_wide<DT, D, 2>(const AttentionParams&, const UnifiedLaunchPlan&, cudaStream_t);

}  // namespace attnbench::cuda
