// cuda.unified_bwd's Hopper dK/dV kernel (d64, d128): wgmma and TMA. One CTA of three warpgroups per (sequence,
// kv head, 128-key tile). The producer's one thread loads the tile's K and V once and, through a ring of two
// slots, each query tile's Q, dO and its rows' LSE (base 2) and D, by TMA; the two consumer warpgroups own 64 keys
// each and keep their dK and dV in registers over every query tile of every head of the group that sees the keys:
//   S^T = K Q^T, dP^T = V dO^T          SS wgmma, both K-major, into registers (keys x queries)
//   P^T = exp2(S^T scale log2e - LSE2)  masked; dS^T = P^T o (dP^T - D)
//   dV += P^T dO, dK += dS^T Q          RS wgmma: P^T and dS^T as A from their accumulators, Q and dO MN-major
//   dQ  = dS K                          dS^T through shared memory, SS wgmma with both operands MN-major
// dQ: at d128 a warpgroup takes 64 of its columns over all 128 keys, at d64 all of them over its own 64 keys, and
// stages its part in shared memory for a TMA reduction (add) into the fp32 accumulator. The preprocess and
// postprocess are bwd_prepost.cu's.
#include <cuda.h>
#include <cuda_runtime.h>

#include "common/device/visibility.hpp"
#include "cuda/bwd_wgmma.hpp"
#include "cuda/bwd_workspace.hpp"
#include "cuda/mbarrier.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/runtime.hpp"
#include "cuda/tensor_map.hpp"
#include "cuda/wgmma.cuh"

namespace attnbench::cuda {
namespace {

using namespace dev;

constexpr int kBN = kWgBwdKeys, kBM = kWgBwdQueries, kStages = 2, kThreads = 384;
constexpr int kProducerRegs = 24, kConsumerRegs = 240;  // 128 x (24 + 2 x 240) <= 384 x 168, the CTA's pool
constexpr float kLog2e = 1.4426950408889634f;

// Shared memory from its first 1024-byte boundary: K, V ([D/64][128][64], 128-byte swizzled rows), the ring's Q and
// dO tiles ([D/64][64][64]) and LSE2 and D rows (64 floats), two dS^T buffers ([128 keys][64 queries], one
// swizzled slab), a dQ buffer per consumer warpgroup ([2][64 rows][32 fp32], swizzled), then the barriers.
template <int D> struct WgBwdSmem {
  static constexpr int kKV = kBN * D * 2, kQ = kBM * D * 2, kDS = kBN * kBM * 2, kRow = kBM * 4, kDQ = kBM * 64 * 4;
  static constexpr int kK = 0, kV = kKV, kQ0 = 2 * kKV, kDO0 = kQ0 + kStages * kQ, kDS0 = kDO0 + kStages * kQ;
  static constexpr int kL0 = kDS0 + 2 * kDS, kD0 = kL0 + kStages * kRow, kDQ0 = kD0 + kStages * kRow;
  static constexpr int kBar = kDQ0 + 2 * kDQ;
  static_assert(kDQ0 % 1024 == 0, "the dQ buffers' swizzle needs 1024-byte boundaries");
  static constexpr int kBarriers = 1 + 2 * kStages;  // K/V landed; per slot full and empty
  static constexpr int bytes = kBar + 8 * kBarriers + 1024;
};

// What every role of a CTA knows: its tile, the sequence's extents and mask, and the walk over query tiles.
struct WgBwdCta {
  int seq, kvh, j0, nk, q_len, kv_len, group, n_qt;
  int64_t q0, k0;
  device::Visibility vis;

  __device__ WgBwdCta(const AttentionBwdParams& p)
      : seq(blockIdx.z), kvh(blockIdx.y), j0(blockIdx.x * kBN), q0(p.cu_seqlens_q[blockIdx.z]),
        k0(p.cu_seqlens_k[blockIdx.z]),
        vis(p.cu_seqlens_q[seq + 1] - p.cu_seqlens_q[seq], p.cu_seqlens_k[seq + 1] - p.cu_seqlens_k[seq], p.causal,
            p.top_left, p.window_left, p.window_right) {
    q_len = p.cu_seqlens_q[seq + 1] - static_cast<int>(q0);
    kv_len = p.cu_seqlens_k[seq + 1] - static_cast<int>(k0);
    nk = min(kBN, kv_len - j0);
    group = p.heads / p.kv_heads;
    n_qt = (q_len + kBM - 1) / kBM;
  }
  // From walk position t on, the next (head, query tile) that sees a key of the tile; false past the last.
  __device__ bool next(int& t, int& h, int& i0) const {
    for (; t < group * n_qt; ++t) {
      h = kvh * group + t / n_qt;
      i0 = t % n_qt * kBM;
      if (!vis.tile_fully_masked(j0, j0 + nk, i0, min(q_len, i0 + kBM) - 1)) return true;
    }
    return false;
  }
};

struct WgBwdMaps {
  const CUtensorMap *q, *k, *v, *d_o, *lse2, *dsum;
};

// The producer's one thread: K and V, then per query tile its slot's Q, dO, LSE2 and D once the slot is free.
template <int D>
__device__ void wg_bwd_produce(const WgBwdCta& c, const WgBwdMaps& m, unsigned char* smem, uint64_t* bars) {
  using SM = WgBwdSmem<D>;
  mbar_arrive_expect_tx(&bars[0], 2 * SM::kKV);
#pragma unroll
  for (int s = 0; s < D / 64; ++s) {
    tma_load_3d(smem + SM::kK + s * kBN * 128, m.k, s * 64, static_cast<int>(c.k0) + c.j0, c.kvh, &bars[0]);
    tma_load_3d(smem + SM::kV + s * kBN * 128, m.v, s * 64, static_cast<int>(c.k0) + c.j0, c.kvh, &bars[0]);
  }
  int t = 0, h, i0, n = 0;
  for (; c.next(t, h, i0); ++t, ++n) {
    const int slot = n % kStages;
    uint64_t* full = &bars[1 + slot];
    if (n >= kStages) mbar_wait(&bars[1 + kStages + slot], ((n / kStages) & 1) ^ 1);
    mbar_arrive_expect_tx(full, 2 * SM::kQ + 2 * SM::kRow);
    const int row = static_cast<int>(c.q0) + i0;
#pragma unroll
    for (int s = 0; s < D / 64; ++s) {
      tma_load_3d(smem + SM::kQ0 + slot * SM::kQ + s * kBM * 128, m.q, s * 64, row, h, full);
      tma_load_3d(smem + SM::kDO0 + slot * SM::kQ + s * kBM * 128, m.d_o, s * 64, row, h, full);
    }
    const int lrow = static_cast<int>(bwd_seq_row(c.seq, c.q0)) + i0;  // 16-byte aligned (bwd_workspace.hpp)
    tma_load_2d(smem + SM::kL0 + slot * SM::kRow, m.lse2, lrow, h, full);
    tma_load_2d(smem + SM::kD0 + slot * SM::kRow, m.dsum, lrow, h, full);
  }
}

// A consumer thread's place: warpgroup cw (keys 64 cw.. of the tile), its thread, warp and lane in it.
struct WgBwdThread {
  int cw, tid, warp, lane;
};

// The mask of a query tile, element (j, e) of this thread's S^T fragment: key row kr (of the tile), query qc.
struct WgBwdMask {
  const WgBwdCta& c;
  int kr0, qc0, i0, nq;
  bool full;
  __device__ __forceinline__ bool on(int j, int e) const {
    const int kr = kr0 + 8 * (e / 2), qc = 8 * j + qc0 + e % 2;
    return full || (qc < nq && kr < c.nk && c.vis.visible(i0 + qc, c.j0 + kr));
  }
};

// P^T = exp2(S^T scale log2e - LSE2) in place, 0 where masked (a select: a NaN of a row past the sequence stays out).
__device__ __forceinline__ void wg_bwd_probs(float (&s)[8][4], const WgBwdMask& m, float sc2, const float* sL) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 l2 = *reinterpret_cast<const float2*>(sL + 8 * j + m.qc0);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float pr = exp2f(fmaf(s[j][e], sc2, -(e % 2 ? l2.y : l2.x)));
      s[j][e] = m.on(j, e) ? pr : 0.f;
    }
  }
}

// dS^T = P^T o (dP^T - D) in place of dP^T, 0 wherever P^T is.
__device__ __forceinline__ void wg_bwd_dsoft(const float (&s)[8][4], float (&dp)[8][4], int qc0, const float* sD) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 dd = *reinterpret_cast<const float2*>(sD + 8 * j + qc0);
#pragma unroll
    for (int e = 0; e < 4; ++e) dp[j][e] = s[j][e] == 0.f ? 0.f : s[j][e] * (dp[j][e] - (e % 2 ? dd.y : dd.x));
  }
}

// Under a softcap (s <- c tanh(s / c)) both at once: dS^T takes tanh's derivative 1 - tanh^2 of each score.
__device__ __forceinline__ void wg_bwd_softcap(float (&s)[8][4], float (&dp)[8][4], const WgBwdMask& m,
                                               const AttentionBwdParams& p, const float* sL, const float* sD) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 l2 = *reinterpret_cast<const float2*>(sL + 8 * j + m.qc0);
    const float2 dd = *reinterpret_cast<const float2*>(sD + 8 * j + m.qc0);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float t = tanhf(s[j][e] * p.scale / p.softcap);
      const float pr = m.on(j, e) ? exp2f(p.softcap * t * kLog2e - (e % 2 ? l2.y : l2.x)) : 0.f;
      s[j][e] = pr;
      dp[j][e] = pr == 0.f ? 0.f : pr * (dp[j][e] - (e % 2 ? dd.y : dd.x)) * (1.f - t * t);
    }
  }
}

// An S^T-shaped fragment rounded into the RS A layout (k-block j = query columns 16 j..16 j + 15).
template <DType DT>
__device__ __forceinline__ void wg_bwd_pack(const float (&x)[8][4], uint32_t (&a)[4][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    a[j][0] = pack2<DT>(x[2 * j][0], x[2 * j][1]);
    a[j][1] = pack2<DT>(x[2 * j][2], x[2 * j][3]);
    a[j][2] = pack2<DT>(x[2 * j + 1][0], x[2 * j + 1][1]);
    a[j][3] = pack2<DT>(x[2 * j + 1][2], x[2 * j + 1][3]);
  }
}

// This thread's dS^T values into buffer `sds` ([128 keys][64 queries], 128-byte rows, chunks XOR row % 8).
__device__ __forceinline__ void wg_bwd_store_ds(uint32_t sds, const uint32_t (&da)[4][4], const WgBwdThread& th) {
  const int t = th.lane % 4;
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int kr = th.cw * 64 + th.warp * 16 + th.lane / 4 + 8 * hh;
      const uint32_t addr = sds + kr * 128 + ((j ^ (kr & 7)) << 4) + 4 * t;
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(da[j / 2][(j % 2) * 2 + hh]) : "memory");
    }
}

// dQ's part of this warpgroup (dS K; A = dS^T, B = K, both MN-major; k16 steps of 16 keys, 2048 bytes): d128 its
// 64 columns over the tile's 128 keys, d64 every column over its own 64.
template <DType DT, int D>
__device__ __forceinline__ void wg_bwd_issue_dq(float (&dq)[8][4], uint32_t sds, uint32_t sk, int cw) {
  constexpr int kSteps = D == 128 ? kBN / 16 : 64 / 16;
  const int k_first = D == 128 ? 0 : cw * kSteps;
  const Sw128Desc<> a(sds, kBN * 128), b(sk + (D == 128 ? cw * kBN * 128 : 0), kBN * 128);
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk)
    wgmma_ss_mn<DT>(dq, a.at((k_first + kk) * 2048), b.at((k_first + kk) * 2048), kk > 0);
  wgmma_commit();
}

// This thread's dQ part into its warpgroup's buffer `sdq`: two slabs of 32 columns, [64 rows][128 B], 16-byte
// chunks XOR row % 8 (what the reducing map's 128B-swizzled box reads).
__device__ __forceinline__ void wg_bwd_stage_dq(uint32_t sdq, const float (&dq)[8][4], const WgBwdThread& th) {
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = th.warp * 16 + th.lane / 4 + 8 * hh, col = 8 * j + 2 * (th.lane % 4);
      const uint32_t addr = sdq + (col / 32) * (kBM * 128) + r * 128 + ((((col % 32) / 4) ^ (r & 7)) << 4) + (col % 4) * 4;
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(dq[j][2 * hh]), "f"(dq[j][2 * hh + 1])
                   : "memory");
    }
}

// dK (times scale) and dV of this warpgroup's keys, rows past nk not written.
template <DType DT, int D>
__device__ void wg_bwd_store_dkdv(const AttentionBwdParams& p, const WgBwdCta& c, const float (&dk)[D / 8][4],
                                  const float (&dv)[D / 8][4], const WgBwdThread& th) {
  using T = typename StorageOf<DT>::type;
  const int64_t head = c.kvh * p.k_stride_head;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int kr = th.cw * 64 + th.warp * 16 + th.lane / 4 + 8 * hh;
    if (kr >= c.nk) continue;
    const int64_t off = (c.k0 + c.j0 + kr) * p.k_stride_token + head + 2 * (th.lane % 4);
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      *reinterpret_cast<uint32_t*>(static_cast<T*>(p.dk) + off + 8 * j) =
          pack2<DT>(dk[j][2 * hh] * p.scale, dk[j][2 * hh + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(static_cast<T*>(p.dv) + off + 8 * j) = pack2<DT>(dv[j][2 * hh], dv[j][2 * hh + 1]);
    }
  }
}

// One query tile (the n-th of the walk: ring slot n % kStages, dS^T buffer n % 2) of a consumer warpgroup. wgmma
// groups in issue order: S, dP (P^T computed under it), dV and dK, dQ after both warpgroups stored dS^T; then the
// slot is released and dQ added. (dQ's part kept over the next tile's S and dP, 32 more live registers, made
// ptxas serialize the wgmmas and, at d128, spill 632 bytes.)
template <DType DT, int D, bool SOFTCAP>
__device__ __forceinline__ void wg_bwd_step(const AttentionBwdParams& p, const WgBwdCta& c, const WgBwdThread& th,
                                            uint32_t base, unsigned char* smem, uint64_t* bars,
                                            const BwdWorkspace& ws, const void* m_dq, int h, int i0, int n,
                                            float (&dk)[D / 8][4],
                                            float (&dv)[D / 8][4]) {
  using SM = WgBwdSmem<D>;
  const int slot = n % kStages, nq = min(kBM, c.q_len - i0);
  const uint32_t sq = base + SM::kQ0 + slot * SM::kQ, sdo = base + SM::kDO0 + slot * SM::kQ, sk = base + SM::kK;
  const float* sL = reinterpret_cast<const float*>(smem + SM::kL0 + slot * SM::kRow);
  const float* sD = reinterpret_cast<const float*>(smem + SM::kD0 + slot * SM::kRow);
  mbar_wait(&bars[1 + slot], (n / kStages) & 1);
  __syncwarp();  // the tile before's per-row atomics diverged: wgmma is .aligned
  float s[8][4], dp[8][4];
  wgmma_fence();
  {  // K-major k16 steps over d: +(kk/4) 64-column slabs (rows x 128 B), +(kk%4) 32 bytes
    const Sw128Desc<> ak(sk + th.cw * 64 * 128, 16), av(base + SM::kV + th.cw * 64 * 128, 16), bq(sq, 16), bo(sdo, 16);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss<DT, 64>(s, ak.at((kk / 4) * (kBN * 128) + (kk % 4) * 32), bq.at((kk / 4) * (kBM * 128) + (kk % 4) * 32),
                       kk > 0);
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss<DT, 64>(dp, av.at((kk / 4) * (kBN * 128) + (kk % 4) * 32), bo.at((kk / 4) * (kBM * 128) + (kk % 4) * 32),
                       kk > 0);
    wgmma_commit();
  }
  const WgBwdMask m{c, th.cw * 64 + th.warp * 16 + th.lane / 4, 2 * (th.lane % 4), i0, nq,
                    nq == kBM && c.nk == kBN && c.vis.tile_fully_visible(c.j0, c.j0 + kBN, i0, i0 + kBM - 1)};
  const Sw128Desc<> bo(sdo, kBM * 128), bq(sq, kBM * 128);  // MN-major B: LBO the next d slab, k16 steps 2048 B
  uint32_t pa[4][4], da[4][4];
  if constexpr (SOFTCAP) {
    wgmma_wait<0>();
    fence_regs(s);
    fence_regs(dp);
    wg_bwd_softcap(s, dp, m, p, sL, sD);
  } else {  // P^T under dP's GEMM
    wgmma_wait<1>();
    fence_regs(s);
    wg_bwd_probs(s, m, p.scale * kLog2e, sL);
    wgmma_wait<0>();
    fence_regs(dp);
    wg_bwd_dsoft(s, dp, m.qc0, sD);
  }
  wg_bwd_pack<DT>(s, pa);
  wg_bwd_pack<DT>(dp, da);
  fence_regs(dk);
  fence_regs(dv);
  wgmma_fence();
#pragma unroll
  for (int j = 0; j < 4; ++j) wgmma_rs<DT, D>(dv, pa[j], bo.at(j * 2048), 1);
#pragma unroll
  for (int j = 0; j < 4; ++j) wgmma_rs<DT, D>(dk, da[j], bq.at(j * 2048), 1);
  wgmma_commit();
  const uint32_t sds = base + SM::kDS0 + (n & 1) * SM::kDS;
  wg_bwd_store_ds(sds, da, th);
  fence_proxy_async_smem();
  if (th.tid == 0) bulk_wait_read<0>();  // the tile before's dQ reduction read the buffer: free after the barrier
  // d128 reads both warpgroups' dS^T; d64 its own. The other buffer's last readers finished a tile ago.
  if constexpr (D == 128) named_bar_sync(1, 256);
  else named_bar_sync(1 + th.cw, 128);
  float dq[8][4];
  wgmma_fence();
  wg_bwd_issue_dq<DT, D>(dq, sds, sk, th.cw);
  wgmma_wait<0>();  // dV, dK and dQ finished: the slot's Q and dO are read
  fence_regs(dk);
  fence_regs(dv);
  fence_regs(dq);
  if (th.tid == 0) mbar_arrive(&bars[1 + kStages + slot]);
  // dQ by one TMA reduction per 32-column slab: rows past the sequence add zeros (their dS is 0) to rows the
  // postprocess never reads or another sequence's, or fall past the map.
  const uint32_t sdq = base + SM::kDQ0 + th.cw * SM::kDQ;
  wg_bwd_stage_dq(sdq, dq, th);
  fence_proxy_async_smem();
  named_bar_sync(3 + th.cw, 128);
  if (th.tid == 0) {
    const int row = static_cast<int>(h * ws.row_stride + bwd_seq_row(c.seq, c.q0) + i0);
    const int col = D == 128 ? th.cw * 64 : 0;
    tma_reduce_add_2d(m_dq, col, row, smem + SM::kDQ0 + th.cw * SM::kDQ);
    tma_reduce_add_2d(m_dq, col + 32, row, smem + SM::kDQ0 + th.cw * SM::kDQ + kBM * 128);
    bulk_commit();
  }
}

template <DType DT, int D, bool SOFTCAP>
__device__ void wg_bwd_consume(const AttentionBwdParams& p, const WgBwdCta& c, const WgBwdThread& th, uint32_t base,
                               unsigned char* smem, uint64_t* bars, const BwdWorkspace& ws, const void* m_dq) {
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[j][e] = dv[j][e] = 0.f;
  mbar_wait(&bars[0], 0);
  int t = 0, h, i0, n = 0;
  for (; c.next(t, h, i0); ++t, ++n)
    wg_bwd_step<DT, D, SOFTCAP>(p, c, th, base, smem, bars, ws, m_dq, h, i0, n, dk, dv);
  wg_bwd_store_dkdv<DT, D>(p, c, dk, dv, th);
  if (th.tid == 0) bulk_wait<0>();  // the last reduction wrote
}

// SOFTCAP is the kernel's own: compiled beside the plain path in one kernel, its tanh made ptxas serialize every
// wgmma of both (C7511, insufficient registers for the wgmma pipeline).
template <DType DT, int D, bool SOFTCAP>
__global__ void __launch_bounds__(kThreads, 1)
    bwd_dkdv_wgmma(const AttentionBwdParams p, const BwdWorkspace ws, const __grid_constant__ CUtensorMap tm_q,
                   const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v,
                   const __grid_constant__ CUtensorMap tm_do, const __grid_constant__ CUtensorMap tm_lse2,
                   const __grid_constant__ CUtensorMap tm_dsum, const __grid_constant__ CUtensorMap tm_dq) {
  using SM = WgBwdSmem<D>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + SM::kBar);
  const WgBwdCta c(p);
  if (c.j0 >= c.kv_len) return;
  if (threadIdx.x == 0) {
    for (int i = 0; i < SM::kBarriers; ++i) mbar_init(&bars[i], i <= kStages ? 1 : 2);  // empty: a thread per consumer
    mbar_fence_init();
  }
  __syncthreads();
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  if (wg == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) wg_bwd_produce<D>(c, {&tm_q, &tm_k, &tm_v, &tm_do, &tm_lse2, &tm_dsum}, smem, bars);
    return;
  }
  setmaxnreg_inc<kConsumerRegs>();
  const int tid = threadIdx.x % 128;
  const WgBwdThread th{wg - 1, tid, tid / 32, tid % 32};
  wg_bwd_consume<DT, D, SOFTCAP>(p, c, th, base, smem, bars, ws, &tm_dq);
}

struct WgBwdMapSet {
  CUtensorMap q, k, v, d_o, lse2, dsum, dq;
};

template <DType DT, int D, bool SOFTCAP>
void launch_dkdv(dim3 grid, const AttentionBwdParams& p, const BwdWorkspace& ws, const WgBwdMapSet& m,
                 cudaStream_t stream) {
  constexpr int smem = WgBwdSmem<D>::bytes;
  static const bool attribute_set = [] {  // once per instance, outside any capture's stream work
    ATTNBENCH_CUDA_CHECK(
        cudaFuncSetAttribute(bwd_dkdv_wgmma<DT, D, SOFTCAP>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)attribute_set;
  bwd_dkdv_wgmma<DT, D, SOFTCAP><<<grid, kThreads, smem, stream>>>(p, ws, m.q, m.k, m.v, m.d_o, m.lse2, m.dsum, m.dq);
  check_last_launch("cuda.unified_bwd dK/dV (wgmma)");
}

}  // namespace

template <DType DT, int D>
void launch_attention_bwd_wgmma(const AttentionBwdParams& p, cudaStream_t stream) {
  static_assert(D == 64 || D == 128, "the wgmma backward's instances: head sizes 64 and 128");
  const BwdWorkspace ws = bwd_workspace(p);
  launch_bwd_preprocess<DT>(p, ws, stream);
  const CUtensorMap tq = encode_rows_map(p.q, DT, D, p.total_q, p.heads, p.q_stride_token, p.q_stride_head, kBM, 1);
  const CUtensorMap tdo = encode_rows_map(p.d_o, DT, D, p.total_q, p.heads, p.q_stride_token, p.q_stride_head, kBM, 1);
  const CUtensorMap tk = encode_rows_map(p.k, DT, D, p.total_k, p.kv_heads, p.k_stride_token, p.k_stride_head, kBN, 1);
  const CUtensorMap tv = encode_rows_map(p.v, DT, D, p.total_k, p.kv_heads, p.k_stride_token, p.k_stride_head, kBN, 1);
  const CUtensorMap tl = encode_f32_map(ws.lse2, ws.row_stride, p.heads, ws.row_stride, kBM, 1, false);
  const CUtensorMap td = encode_f32_map(ws.dsum, ws.row_stride, p.heads, ws.row_stride, kBM, 1, false);
  const CUtensorMap tdq = encode_f32_map(ws.dq_acc, D, p.heads * ws.row_stride, D, 32, kBM, true);
  const dim3 grid((p.max_seqlen_k + kBN - 1) / kBN, p.kv_heads, p.num_seqs);
  if (p.softcap > 0.f) launch_dkdv<DT, D, true>(grid, p, ws, {tq, tk, tv, tdo, tl, td, tdq}, stream);
  else launch_dkdv<DT, D, false>(grid, p, ws, {tq, tk, tv, tdo, tl, td, tdq}, stream);
  launch_bwd_postprocess<DT>(p, ws, stream);
}

template void launch_attention_bwd_wgmma<DType::bf16, 64>(const AttentionBwdParams&, cudaStream_t);
template void launch_attention_bwd_wgmma<DType::bf16, 128>(const AttentionBwdParams&, cudaStream_t);
template void launch_attention_bwd_wgmma<DType::f16, 64>(const AttentionBwdParams&, cudaStream_t);
template void launch_attention_bwd_wgmma<DType::f16, 128>(const AttentionBwdParams&, cudaStream_t);

}  // namespace attnbench::cuda
