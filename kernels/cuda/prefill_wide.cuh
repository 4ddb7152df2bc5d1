// 2D prefill, wide regime (sm_90a): one CTA per (q-tile, query head, sequence); warpgroup 0 is a cp.async producer
// that gathers K/V tiles through the block table into a 3-stage ring of 128B-swizzled tiles; WG consumer warpgroups
// each own 64 query rows: S = Q K^T by SS wgmma into registers, base-2 online softmax in registers, P converted to
// 16-bit in registers as the RS A operand of O += P V (V MN-major, trans-b). Full/empty mbarriers per stage.
// Layouts and the register facts used here: /work/shared/HOPPER-ATTENTION.md sections 1-3, 5.
#pragma once
#include <cuda_runtime.h>

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
  static constexpr int kSmemBytes = kBarOffset + 2 * kStages * 8 + 1024;  // + 1024: runtime alignment of the base
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

template <DType DT, int D, int WG>
__global__ void __launch_bounds__(128 * (WG + 1), 1) prefill_wide_kernel(const __grid_constant__ AttentionParams p,
                                                                         int q_major) {
  using T = typename StorageOf<DT>::type;
  using Tile = WideTile<D, WG>;
  constexpr int BM = Tile::kBM, BN = Tile::kBN, S = Tile::kStages, RW = kWideRowsPerWg;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + Tile::kBarOffset);
  uint64_t* empty = full + S;

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
      mbar_init(&full[s], 128);       // every producer thread arrives once its cp.async data landed
      mbar_init(&empty[s], 128 * WG);  // every consumer thread arrives once its wgmmas finished reading
    }
  }
  __syncthreads();
  auto stage_k = [&](int st) { return base + Tile::kQBytes + st * 2 * Tile::kTileBytes; };

  if (threadIdx.x < 128) {  // ---- producer warpgroup
    if constexpr (WG == 2) setmaxnreg_dec<Tile::kProducerRegs>();
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
        mbar_arrive(&full[(t - 1) % S]);
      }
    }
    if (n_tiles > 0) {
      cp_async_wait<0>();
      fence_proxy_async_smem();
      mbar_arrive(&full[(n_tiles - 1) % S]);
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
    mbar_wait(&full[st], (t / S) & 1);
    const uint32_t sk = stage_k(st);
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
      wgmma_wait<1>();  // S(t) done; P(t-1) V(t-1) may still run
    } else {
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
      mbar_arrive(&empty[(t - 1) % S]);
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
    wgmma_fence();
    issue_pv(stage_k((wg_tiles - 1) % S) + Tile::kTileBytes);
    wgmma_wait<0>();
    fence_regs(o);
    mbar_arrive(&empty[(wg_tiles - 1) % S]);
  }
  // The CTA's later tiles are all masked for this warpgroup's rows: wait and release, in tile order.
  for (int t = wg_tiles; t < n_tiles; ++t) {
    mbar_wait(&full[t % S], (t / S) & 1);
    mbar_arrive(&empty[t % S]);
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

template <DType DT, int D, int WG>
void launch_prefill_wide(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream) {
  using Tile = WideTile<D, WG>;
  auto* kernel = &dev::prefill_wide_kernel<DT, D, WG>;
  static const bool configured = [&] {
    ATTNBENCH_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes));
    return true;
  }();
  (void)configured;
  const dim3 grid(lp.grid_x, lp.grid_y, lp.grid_z);
  kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(p, lp.q_major ? 1 : 0);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

#define ATTNBENCH_INSTANTIATE_PREFILL_WIDE(DT, D)                                                            \
  template void launch_prefill_wide<DT, D, 1>(const AttentionParams&, const UnifiedLaunchPlan&, cudaStream_t); \
  template void launch_prefill_wide<DT, D, 2>(const AttentionParams&, const UnifiedLaunchPlan&, cudaStream_t);

}  // namespace attnbench::cuda
