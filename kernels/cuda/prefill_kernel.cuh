// 2D prefill, narrow regime: one CTA per (q-tile, query head, sequence); W warps x RW (16 or 32) query rows; K/V tiles
// gathered through the block table by cp.async into a multi-stage swizzled pipeline; S and P stay in
// registers (P is the A operand of the PV mma); base-2 online softmax; fully-future KV tiles are skipped.
// A features instance (F) applies the attention features (feature_tile.cuh): tiles before a sliding window's first
// visible key are skipped too, the mods and the mask act on every score, a sink and v_scale scale the finished
// rows; an 8-bit cache (KV) streams codes and widens each tile in shared memory before the mma.
#pragma once
#include <cuda_runtime.h>

#include "attnbench/attention.hpp"
#include "common/device/visibility.hpp"
#include "cuda/feature_tile.cuh"
#include "cuda/heuristics.hpp"
#include "cuda/launch.hpp"
#include "cuda/paged_tile.cuh"
#include "cuda/runtime.hpp"
#include "cuda/warp_tile.cuh"

namespace attnbench::cuda {

template <int D, int W, int RW = 16, int KVB = 2>  // KVB: bytes of a K/V element in the cache
struct PrefillTile {
  static_assert(RW == 16 || RW == 32, "16 or 32 query rows per warp");
  static constexpr int kWarps = W;
  static constexpr int kThreads = 32 * W;
  static constexpr int kMT = RW / 16;  // m16 tiles per warp
  static constexpr int kBM = RW * W;
  static constexpr int kBN = prefill_block_n(D);
  // Keys per score pass. The 32-row d128 tile's O takes 128 registers: S of a whole 64-key tile beside them spilled
  // (92 B), so it scores each K/V tile in passes of 32 keys, 16 with the features' row state (the tile, its barriers
  // and the keys in flight unchanged); the passes' O rescales are skipped by the max's slack (softmax_tile).
  static constexpr int score_keys(bool features) { return D == 128 && kMT == 2 ? (features ? 16 : 32) : kBN; }
  // d256 re-reads Q from smem (64 more registers would spill); so does the 32-row variant (its 2 x D/8 fp32
  // accumulators take the registers Q would need).
  static constexpr bool kQInRegs = D <= 128 && kMT == 1;
  static constexpr int kQBytes = kBM * D * 2;
  static constexpr int kTileBytes = kBN * D * KVB;  // one K (V) tile of the ring
  static constexpr int kWideBytes = KVB == 1 ? kBN * D * 2 : 0;  // one widened K (V) tile, after the ring
  // 2 stages measured faster than 3 on the H200 (d128 S8192: 232 vs 196 TFLOP/s at 8 warps; kernels/NOTES.md).
  static constexpr int kStages = 2;
  static constexpr int kSmemBytes = kQBytes + kStages * 2 * kTileBytes + 2 * kWideBytes;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per CTA");
};

namespace dev {

template <DType DT, int D, int W, int RW, DType KV, bool F>
__global__ void __launch_bounds__(32 * W) prefill_kernel(const __grid_constant__ AttentionParams p, int q_major) {
  using T = typename StorageOf<DT>::type;
  using TK = typename StorageOf<KV>::type;
  constexpr bool kWiden = sizeof(TK) == 1;
  static_assert(F || !kWiden, "an 8-bit cache has scales: a features instance");
  using Tile = PrefillTile<D, W, RW, sizeof(TK)>;
  constexpr int BM = Tile::kBM, BN = Tile::kBN, NT = Tile::kThreads, S = Tile::kStages, MT = Tile::kMT;
  constexpr int CN = Tile::score_keys(F);  // keys per score pass
  // The passes' rescales skipped by the max's slack; one-pass instances keep the softmax they were measured with.
  constexpr int kSlackLog2 = CN < BN ? kSlackLog2P16 : 0;
  static_assert(BN % CN == 0, "passes tile the K/V tile");
  extern __shared__ __align__(128) unsigned char smem[];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
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
  const int32_t* table_row = p.block_table + device::block_table_row_offset(seq, p.block_table_stride);
  // Keys each row sees, built where used: p.causal is then read at each use (held in a register, it changes the
  // kernel's schedule).
  auto vis = [&] {
    return F ? device::Visibility(q_len, kv_len, p.causal, p.top_left, p.features.window_left,
                                  p.features.window_right)
             : device::Visibility(q_len, kv_len, p.causal, p.top_left, -1, -1);
  };

  const uint32_t sq = dev::smem_u32(smem);
  auto stage_k = [&](int st) { return sq + Tile::kQBytes + st * 2 * Tile::kTileBytes; };

  load_q_tile<T, D, BM, NT>(sq, p, [&](int r) -> int64_t {
    const int tok = m0 + r;
    return tok < q_len ? (q_start + tok) * p.q_stride_token + head * p.q_stride_head : -1;
  });
  // Keys this q-tile can see at all; from mask_from on, tiles need a per-element mask.
  const int n_end = vis().rows_end(m0 + BM);
  const int mask_from = vis().visible_end(m0);
  const int n_tiles = (n_end + BN - 1) / BN;
  const int t_first = F ? min(n_tiles, vis().first_visible(m0) / BN) : 0;  // tiles before a window's start: none
  cp_async_commit();
#pragma unroll
  for (int st = 0; st < S - 1; ++st) {
    if (t_first + st < n_tiles)
      load_kv_tile<TK, D, BN, NT>(stage_k(st), stage_k(st) + Tile::kTileBytes, p, table_row, kvh,
                                  (t_first + st) * BN, kv_len);
    cp_async_commit();
  }
  uint32_t qf[Tile::kQInRegs ? D / 16 : 1][4];
  if constexpr (Tile::kQInRegs) {
    cp_async_wait<S - 2>();
    __syncthreads();
    load_q_frags<D>(qf, sq, warp * RW, lane);
  }

  const float c = softmax_c<F>(p);
  float o[MT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int d = 0; d < D / 8; ++d) o[mt][d][0] = o[mt][d][1] = o[mt][d][2] = o[mt][d][3] = 0.f;
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;
  const int row_a = m0 + warp * RW + lane / 4;  // this thread's rows: row_a + 16 mt + {0, 8}
  auto row_features = [&](int mt) {
    const int r0 = row_a + 16 * mt, r1 = r0 + 8;
    return RowFeatures(p, vis(), {r0 < q_len ? r0 : -1, r1 < q_len ? r1 : -1}, {head, head});
  };
  const RowFeatures feats[2] = {row_features(0), row_features(MT - 1)};  // per m16 tile (MT <= 2)

  for (int it = t_first; it < n_tiles; ++it) {
    const int j = it - t_first;
    cp_async_wait<S - 2>();
    __syncthreads();  // tile `it` (and Q) visible; every warp is done with the stage refilled below
    if (it + S - 1 < n_tiles) {
      const uint32_t k_next = stage_k((j + S - 1) % S);
      load_kv_tile<TK, D, BN, NT>(k_next, k_next + Tile::kTileBytes, p, table_row, kvh, (it + S - 1) * BN, kv_len);
    }
    cp_async_commit();
    uint32_t sk = stage_k(j % S), sv = sk + Tile::kTileBytes;
    if constexpr (kWiden) {  // codes -> the 16-bit tiles after the ring; the barrier above guards their reuse
      const uint32_t wk = stage_k(S), wv = wk + Tile::kWideBytes;
      widen_kv_tile<DT, KV, D, BN, NT>(wk, sk);
      widen_kv_tile<DT, KV, D, BN, NT>(wv, sv);
      __syncthreads();
      sk = wk, sv = wv;
    }
    // Scored in passes of CN keys (k0 in the tile, n0 in the sequence); rolled: unrolled, ptxas interleaves two
    // passes' scores and spills.
#pragma unroll 1
    for (int k0 = 0; k0 < BN; k0 += CN) {
      const int n0 = it * BN + k0;
      float s[MT][CN / 8][4];
      if constexpr (MT == 1) {
        qk_tile<DT, D, CN / 8, Tile::kQInRegs>(s[0], qf, sq, warp * RW, sk, k0, lane);
      } else {
        qk_tile_mt<DT, D, CN / 8, MT>(s, sq, warp * RW, sk, k0, lane);
      }
      if constexpr (F) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) feats[mt].apply(s[mt], n0, lane);
      } else if (n0 + CN > mask_from) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
          for (int n = 0; n < CN / 8; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int col = n0 + n * 8 + 2 * (lane % 4) + (e & 1);
              const int row = row_a + 16 * mt + 8 * (e >> 1);
              if (col >= vis().visible_end(row)) s[mt][n][e] = -INFINITY;
            }
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) online_softmax<CN / 8, D / 8, kSlackLog2>(s[mt], m[mt], l[mt], o[mt], c);
      if constexpr (MT == 1) {
        pv_tile<DT, D, CN / 8>(o[0], s[0], sv, k0, lane);
      } else {
        pv_tile_mt<DT, D, CN / 8, MT>(o, s, sv, k0, lane);
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: O / l, times sigmoid(gate) when the problem has an output gate (p.epilogue.gate non-null), fp32 math.
  T* out = static_cast<T*>(p.out);
  const T* gate = static_cast<const T*>(p.epilogue.gate);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = quad_sum(l[mt][r]);
      float inv = sum > 0.f ? 1.f / sum : 0.f;
      if constexpr (F) inv *= row_out_factor(p, head, sum > 0.f ? m[mt][r] * c + __log2f(sum) : -INFINITY);
      const int row = row_a + 16 * mt + 8 * r;
      if (row < q_len) {
        const int64_t tok = q_start + row;
        T* dst = out + tok * p.o_stride_token + head * p.o_stride_head + 2 * (lane % 4);
        if (gate != nullptr) {
          const T* g = gate + tok * p.epilogue.gate_stride_token + head * p.epilogue.gate_stride_head + 2 * (lane % 4);
#pragma unroll
          for (int d = 0; d < D / 8; ++d) {
            const float2 sg = sigmoid2<DT>(*reinterpret_cast<const uint32_t*>(g + d * 8));
            *reinterpret_cast<uint32_t*>(dst + d * 8) =
                pack2<DT>(o[mt][d][2 * r] * inv * sg.x, o[mt][d][2 * r + 1] * inv * sg.y);
          }
        } else {
#pragma unroll
          for (int d = 0; d < D / 8; ++d)
            *reinterpret_cast<uint32_t*>(dst + d * 8) =
                pack2<DT>(o[mt][d][2 * r] * inv, o[mt][d][2 * r + 1] * inv);
        }
      }
    }
  }
  if (p.lse == nullptr) return;  // return_lse, after the O stores (a call without it runs their code unchanged)
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = quad_sum(l[mt][r]);
      const int row = row_a + 16 * mt + 8 * r;
      if (row < q_len && lane % 4 == 0)  // a NaN sum stays NaN
        p.lse[device::lse_offset(p.lse_stride_start, p.lse_stride_row, p.lse_stride_head, q_start, row, head)] =
            device::row_lse(p.features.sinks, head, sum == 0.f ? -INFINITY : m[mt][r] * c + __log2f(sum));
    }
}

}  // namespace dev

template <DType DT, int D, int W, int RW, DType KV, bool F>
void launch_prefill(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream) {
  using Tile = PrefillTile<D, W, RW, static_cast<int>(dtype_bytes(KV))>;
  auto* kernel = &dev::prefill_kernel<DT, D, W, RW, KV, F>;
  // Once per instantiation; legal while the caller captures (not a stream operation).
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

#define ATTNBENCH_INSTANTIATE_PREFILL_RW(DT, D, W, RW, KV, F) \
  template void launch_prefill<DT, D, W, RW, KV, F>(const AttentionParams&, const UnifiedLaunchPlan&, cudaStream_t);

}  // namespace attnbench::cuda
