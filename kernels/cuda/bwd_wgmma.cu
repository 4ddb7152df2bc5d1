// cuda.unified_bwd's Hopper dK/dV kernel for d64 and d128: wgmma and TMA. One CTA of three warpgroups per
// (sequence, kv head, 128-key tile, part of the GQA group). The producer's one thread loads the tile's K and V once
// and, through a ring of two slots, each query tile's Q, dO and its rows' LSE (base 2) and D, by TMA; the two
// consumer warpgroups own 64 keys each and keep their dK and dV in registers over every query tile of every head of
// the part that sees the keys (a part of a split group adds them into fp32 accumulators):
//   S^T = K Q^T, dP^T = V dO^T          SS wgmma, both K-major, into registers (keys x queries)
//   P^T = exp2(S^T scale log2e - LSE2)  masked; dS^T = P^T o (dP^T - D)
//   dV += P^T dO, dK += dS^T Q          RS wgmma: P^T and dS^T as A from their accumulators, Q and dO MN-major
//   dQ  = dS K                          dS^T through shared memory, SS wgmma with both operands MN-major
// dQ: at d128 a warpgroup takes 64 of its columns over all 128 keys, at d64 all of them over its own 64 keys, and
// stages its part in shared memory for a TMA reduction (add) into the fp32 accumulator. The host side here serves
// d256's kernel too (bwd_wgmma256.cu): the maps, the preprocess and postprocess (bwd_prepost.cu).
#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda/bwd_wgmma.cuh"
#include "cuda/runtime.hpp"
#include "cuda/tensor_map.hpp"

namespace attnbench::cuda {
namespace {

using namespace dev;
using namespace wgbwd;

constexpr int kBN = 128, kStages = 2, kThreads = 384;
constexpr int kProducerRegs = 24, kConsumerRegs = 240;  // 128 x (24 + 2 x 240) <= 384 x 168, the CTA's pool

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

// The producer's one thread: K and V, then per query tile its slot's Q, dO, LSE2 and D once the slot is free.
template <int D>
__device__ void wg_bwd_produce(const Cta<kBN>& c, const Maps& m, unsigned char* smem, uint64_t* bars) {
  using SM = WgBwdSmem<D>;
  mbar_arrive_expect_tx(&bars[0], 2 * SM::kKV);
#pragma unroll
  for (int s = 0; s < D / 64; ++s) {
    tma_load_3d(smem + SM::kK + s * kBN * 128, m.k, s * 64, static_cast<int>(c.k0) + c.j0, c.kvh, &bars[0]);
    tma_load_3d(smem + SM::kV + s * kBN * 128, m.v, s * 64, static_cast<int>(c.k0) + c.j0, c.kvh, &bars[0]);
  }
  int g = c.g_begin, qt = 0, n = 0;
  for (; c.next(g, qt); ++qt, ++n) {
    const int slot = n % kStages, h = c.kvh * c.group + g, i0 = qt * kBM;
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

// Under a softcap (s <- c tanh(s / c)) both at once: dS^T takes tanh's derivative 1 - tanh^2 of each score.
__device__ __forceinline__ void wg_bwd_softcap(float (&s)[8][4], float (&dp)[8][4], const Mask& m,
                                               const AttentionBwdParams& p, const float* sL, const float* sD) {
  const float cap_e = 2.f * kLog2e * p.scale / p.softcap, cap2 = p.softcap * kLog2e;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 l2 = *reinterpret_cast<const float2*>(sL + 8 * j + m.qc0);
    const float2 dd = *reinterpret_cast<const float2*>(sD + 8 * j + m.qc0);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float t = capped_tanh(s[j][e], cap_e);
      const float pr = m.on(j, e) ? exp2_approx(fmaf(cap2, t, -(e % 2 ? l2.y : l2.x))) : 0.f;
      s[j][e] = pr;
      dp[j][e] = pr == 0.f ? 0.f : pr * (dp[j][e] - (e % 2 ? dd.y : dd.x)) * (1.f - t * t);
    }
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

// S^T = K Q^T and dP^T = V dO^T of this warpgroup's keys, one commit group each. K-major k16 steps over d:
// +(kk/4) 64-column slabs (rows x 128 B), +(kk%4) 32 bytes.
template <DType DT, int D>
__device__ __forceinline__ void wg_bwd_issue_sdp(float (&s)[8][4], float (&dp)[8][4], uint32_t sk, uint32_t sv,
                                                 uint32_t sq, uint32_t sdo) {
  const Sw128Desc<> ak(sk, 16), av(sv, 16), bq(sq, 16), bo(sdo, 16);
  wgmma_fence();
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

// One query tile (the n-th of the walk: ring slot n % kStages, dS^T buffer n % 2) of a consumer warpgroup, ordered
// so that the tensor cores have queued work through each elementwise phase. wgmma groups in issue order: S, dP
// (P^T computed under it), dV (dS^T computed under it), dQ once both warpgroups stored dS^T, dK (dQ staged and
// reduced under it); then the slot is released. (dQ's part kept over the next tile's S and dP, 32 more live
// registers, made ptxas serialize the wgmmas and, at d128, spill 632 bytes.)
template <DType DT, int D, bool SOFTCAP>
__device__ __forceinline__ void wg_bwd_step(const AttentionBwdParams& p, const Cta<kBN>& c, const Thread& th,
                                            uint32_t base, unsigned char* smem, uint64_t* bars,
                                            const BwdWorkspace& ws, const void* m_dq, int h, int i0, int n,
                                            float (&dk)[D / 8][4], float (&dv)[D / 8][4]) {
  using SM = WgBwdSmem<D>;
  const int slot = n % kStages, nq = min(kBM, c.q_len - i0);
  const uint32_t sq = base + SM::kQ0 + slot * SM::kQ, sdo = base + SM::kDO0 + slot * SM::kQ, sk = base + SM::kK;
  const float* sL = reinterpret_cast<const float*>(smem + SM::kL0 + slot * SM::kRow);
  const float* sD = reinterpret_cast<const float*>(smem + SM::kD0 + slot * SM::kRow);
  mbar_wait(&bars[1 + slot], (n / kStages) & 1);
  __syncwarp();  // the tile before's per-row atomics diverged: wgmma is .aligned
  float s[8][4], dp[8][4];
  wg_bwd_issue_sdp<DT, D>(s, dp, sk + th.cw * 64 * 128, base + SM::kV + th.cw * 64 * 128, sq, sdo);
  const int kr0 = th.cw * 64 + th.warp * 16 + th.lane / 4;
  const Mask m(c, kr0, 2 * (th.lane % 4), i0, nq);
  const bool full = c.full(i0, nq);
  uint32_t pa[4][4], da[4][4];
  if constexpr (SOFTCAP) {  // P^T and dS^T at once: both need the capped score's tanh
    wgmma_wait<0>();
    fence_regs(s);
    fence_regs(dp);
    wg_bwd_softcap(s, dp, m, p, sL, sD);
  } else {
    wgmma_wait<1>();
    fence_regs(s);
    if (full) probs<false>(s, m, p.scale * kLog2e, sL);
    else probs<true>(s, m, p.scale * kLog2e, sL);
  }
  pack<DT>(s, pa);
  issue_rs<DT, D>(dv, pa, sdo);
  if constexpr (!SOFTCAP) {
    wgmma_wait<1>();  // dP
    fence_regs(dp);
    if (full) dsoft<false>(s, dp, m.qc0, sD);
    else dsoft<true>(s, dp, m.qc0, sD);
  }
  pack<DT>(dp, da);
  const uint32_t sds = base + SM::kDS0 + (n & 1) * SM::kDS;
  store_ds(sds, da, kr0, th.lane);
  fence_proxy_async_smem();
  if (th.tid == 0) bulk_wait_read<0>();  // the tile before's dQ reduction read the buffer: free after the barrier
  __syncwarp();  // bar.sync is .aligned: thread 0's wait reconverges first
  // d128 reads both warpgroups' dS^T; d64 its own. The other buffer's last readers finished a tile ago.
  if constexpr (D == 128) named_bar_sync(1, 256);
  else named_bar_sync(1 + th.cw, 128);
  float dq[8][4];
  wgmma_fence();
  wg_bwd_issue_dq<DT, D>(dq, sds, sk, th.cw);
  issue_rs<DT, D>(dk, da, sq);
  wgmma_wait<1>();  // dV and dQ
  fence_regs(dq);
  const int dq_buf = SM::kDQ0 + th.cw * SM::kDQ;
  reduce_dq(dq, c, th, base + dq_buf, smem + dq_buf, ws, m_dq, h, i0, D == 128 ? th.cw * 64 : 0);
  __syncwarp();  // thread 0's reduction diverged: wgmma.wait_group is .aligned
  wgmma_wait<0>();  // dK: the slot's Q and dO are read
  fence_regs(dk);
  fence_regs(dv);
  if (th.tid == 0) mbar_arrive(&bars[1 + kStages + slot]);
}

template <DType DT, int D, bool SOFTCAP>
__device__ void wg_bwd_consume(const AttentionBwdParams& p, const Cta<kBN>& c, const Thread& th, uint32_t base,
                               unsigned char* smem, uint64_t* bars, const BwdWorkspace& ws, const void* m_dq) {
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[j][e] = dv[j][e] = 0.f;
  mbar_wait(&bars[0], 0);
  int g = c.g_begin, qt = 0, n = 0;
  for (; c.next(g, qt); ++qt, ++n)
    wg_bwd_step<DT, D, SOFTCAP>(p, c, th, base, smem, bars, ws, m_dq, c.kvh * c.group + g, qt * kBM, n, dk, dv);
  const int kr0 = th.cw * 64 + th.warp * 16 + th.lane / 4;
  if (ws.splits == 1) {
    store_rows<DT, D>(p.dk, p.scale, p, c, dk, kr0, th.lane);
    store_rows<DT, D>(p.dv, 1.f, p, c, dv, kr0, th.lane);
  } else {
    add_rows<D>(ws.dk_acc, p, c, dk, kr0, th.lane);
    add_rows<D>(ws.dv_acc, p, c, dv, kr0, th.lane);
  }
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
  const Cta<kBN> c(p, ws.splits);
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
  const Thread th{wg - 1, tid, tid / 32, tid % 32};
  wg_bwd_consume<DT, D, SOFTCAP>(p, c, th, base, smem, bars, ws, &tm_dq);
}

template <DType DT, int D, bool SOFTCAP>
void launch_dkdv(dim3 grid, const AttentionBwdParams& p, const BwdWorkspace& ws, const WgBwdMapCache& m,
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

WgBwdMapCache::Key map_key(const AttentionBwdParams& p) {
  return {p.q,        p.k,        p.v,           p.d_o,           p.workspace,       p.total_q,
          p.total_k,  p.q_stride_token, p.q_stride_head, p.k_stride_token, p.k_stride_head, p.heads,
          p.kv_heads, p.num_seqs, p.head_size, static_cast<int>(p.dtype)};
}

// Into a fresh set, assigned whole: an encode that throws leaves the cache as it was. K and V boxes: the key tile.
void encode_maps(const AttentionBwdParams& p, const BwdWorkspace& ws, WgBwdMapCache& cache) {
  const int keys = wg_bwd_key_rows(p.head_size);
  WgBwdMapCache m;
  const DType dt = p.dtype;
  const int d = p.head_size;
  m.q = encode_rows_map(p.q, dt, d, p.total_q, p.heads, p.q_stride_token, p.q_stride_head, kBM, 1);
  m.d_o = encode_rows_map(p.d_o, dt, d, p.total_q, p.heads, p.q_stride_token, p.q_stride_head, kBM, 1);
  m.k = encode_rows_map(p.k, dt, d, p.total_k, p.kv_heads, p.k_stride_token, p.k_stride_head, keys, 1);
  m.v = encode_rows_map(p.v, dt, d, p.total_k, p.kv_heads, p.k_stride_token, p.k_stride_head, keys, 1);
  m.lse2 = encode_f32_map(ws.lse2, ws.row_stride, p.heads, ws.row_stride, kBM, 1, false);
  m.dsum = encode_f32_map(ws.dsum, ws.row_stride, p.heads, ws.row_stride, kBM, 1, false);
  m.dq = encode_f32_map(ws.dq_acc, d, p.heads * ws.row_stride, d, 32, kBM, true);
  m.key = map_key(p);
  m.valid = true;
  cache = m;
}

}  // namespace

bool WgBwdMapCache::Key::operator==(const Key& o) const {
  return q == o.q && k == o.k && v == o.v && d_o == o.d_o && workspace == o.workspace && total_q == o.total_q &&
         total_k == o.total_k && q_stride_token == o.q_stride_token && q_stride_head == o.q_stride_head &&
         k_stride_token == o.k_stride_token && k_stride_head == o.k_stride_head && heads == o.heads &&
         kv_heads == o.kv_heads && num_seqs == o.num_seqs && head_size == o.head_size && dtype == o.dtype;
}

template <DType DT, int D>
void launch_attention_bwd_wgmma(const AttentionBwdParams& p, int splits, WgBwdMapCache& maps, cudaStream_t stream) {
  static_assert(wg_bwd_head_size(D), "the wgmma backward's instances: head sizes 64, 128 and 256");
  const BwdWorkspace ws = bwd_workspace(p, splits);
  if (!maps.valid || !(maps.key == map_key(p))) encode_maps(p, ws, maps);
  launch_bwd_preprocess<DT>(p, ws, stream);
  constexpr int keys = wg_bwd_key_rows(D);
  const dim3 grid((p.max_seqlen_k + keys - 1) / keys, p.kv_heads * splits, p.num_seqs);
  if constexpr (D == 256) launch_dkdv_wgmma256<DT>(grid, p, ws, maps, stream);
  else if (p.softcap > 0.f) launch_dkdv<DT, D, true>(grid, p, ws, maps, stream);
  else launch_dkdv<DT, D, false>(grid, p, ws, maps, stream);
  launch_bwd_postprocess<DT>(p, ws, stream);
}

template void launch_attention_bwd_wgmma<DType::bf16, 64>(const AttentionBwdParams&, int, WgBwdMapCache&,
                                                           cudaStream_t);
template void launch_attention_bwd_wgmma<DType::bf16, 128>(const AttentionBwdParams&, int, WgBwdMapCache&,
                                                           cudaStream_t);
template void launch_attention_bwd_wgmma<DType::bf16, 256>(const AttentionBwdParams&, int, WgBwdMapCache&,
                                                           cudaStream_t);
template void launch_attention_bwd_wgmma<DType::f16, 64>(const AttentionBwdParams&, int, WgBwdMapCache&,
                                                           cudaStream_t);
template void launch_attention_bwd_wgmma<DType::f16, 128>(const AttentionBwdParams&, int, WgBwdMapCache&,
                                                           cudaStream_t);
template void launch_attention_bwd_wgmma<DType::f16, 256>(const AttentionBwdParams&, int, WgBwdMapCache&,
                                                           cudaStream_t);

}  // namespace attnbench::cuda
