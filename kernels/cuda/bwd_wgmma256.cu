// cuda.unified_bwd's Hopper dK/dV kernel for d256: wgmma and TMA. One CTA of three warpgroups per (sequence, kv
// head, 64-key tile, part of the GQA group). A warpgroup's dK and dV over 64 keys at d256 would take 256 registers a
// thread, so the two consumer warpgroups split the work by gradient instead of by keys, each over all 64 keys:
//   warpgroup 0: S^T = K Q^T, P^T, dV += P^T dO       (dV, 128 registers, in its accumulators)
//   warpgroup 1: dP^T = V dO^T, dS^T, dK += dS^T Q    (dK likewise)
// Warpgroup 1 takes P^T (under a softcap, P^T times tanh's derivative) from warpgroup 0 through shared memory in
// fp32, in the accumulator's own layout; dS^T goes to shared memory for dQ = dS K, whose 256 columns the two split
// (128 each, in two 64-column passes staged for TMA reductions into the fp32 dQ). Each warpgroup issues the same
// tensor work: one 64 x 64 x 256 score GEMM, one 64 x 256 x 64 gradient GEMM and half of dQ. The producer's one
// thread loads K and V once, Q (with its rows' LSE and D) through a ring of two slots and dO through one: dO's
// readers (dP^T, dV) finish mid-tile, Q's last (dK) at its end, and shared memory holds no second dO slot.
#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda/bwd_wgmma.cuh"
#include "cuda/runtime.hpp"

namespace attnbench::cuda {
namespace {

using namespace dev;
using namespace wgbwd;

constexpr int kD = 256, kBN = 64, kThreads = 384;
constexpr int kProducerRegs = 24, kConsumerRegs = 240;  // 128 x (24 + 2 x 240) <= 384 x 168, the CTA's pool
// Named barriers (0 is __syncthreads; 3 and 4 the warpgroups' dQ staging, reduce_dq): P^T landed (warpgroup 0
// arrives, 1 waits), dS^T landed (both wait: it orders warpgroup 1's own warps too).
constexpr int kBarX = 1, kBarDs = 2;

// Shared memory from its first 1024-byte boundary: K, V ([4][64 keys][64], 128-byte swizzled rows), the Q ring's
// two slots and the dO slot ([4][64][64]), X (P^T for warpgroup 1: [8][128 threads] float4), two dS^T buffers
// ([64 keys][64 queries], one swizzled slab), a dQ buffer per consumer warpgroup ([2][64 rows][32 fp32]), the Q
// slots' LSE2 and D rows, then the barriers: K/V landed, Q full and empty per slot, dO full and empty.
struct Smem {
  static constexpr int kKV = kBN * kD * 2, kQ = kBM * kD * 2, kX = kBN * kBM * 4, kDS = kBN * kBM * 2;
  static constexpr int kDQ = kBM * 64 * 4, kRow = kBM * 4;
  static constexpr int kK = 0, kV = kKV, kQ0 = 2 * kKV, kDO = kQ0 + 2 * kQ, kX0 = kDO + kQ, kDS0 = kX0 + kX;
  static constexpr int kDQ0 = kDS0 + 2 * kDS, kL0 = kDQ0 + 2 * kDQ, kD0 = kL0 + 2 * kRow, kBar = kD0 + 2 * kRow;
  static constexpr int kKvFull = 0, kQFull = 1, kQEmpty = 3, kDoFull = 5, kDoEmpty = 6, kBarriers = 7;
  static constexpr int bytes = kBar + 8 * kBarriers + 1024;
  static_assert(kDS0 % 1024 == 0 && kDQ0 % 1024 == 0, "swizzled buffers need 1024-byte boundaries");
  static_assert(bytes <= 227 * 1024, "an SM's shared memory");
};

// The producer's one thread: K and V, then per query tile its Q slot (Q, LSE2, D) once free, and dO once the tile
// before released it.
__device__ void produce(const Cta<kBN>& c, const Maps& m, unsigned char* smem, uint64_t* bars) {
  using SM = Smem;
  const int key = static_cast<int>(c.k0) + c.j0;
  mbar_arrive_expect_tx(&bars[SM::kKvFull], 2 * SM::kKV);
#pragma unroll
  for (int s = 0; s < kD / 64; ++s) {
    tma_load_3d(smem + SM::kK + s * kBN * 128, m.k, s * 64, key, c.kvh, &bars[SM::kKvFull]);
    tma_load_3d(smem + SM::kV + s * kBN * 128, m.v, s * 64, key, c.kvh, &bars[SM::kKvFull]);
  }
  int g = c.g_begin, qt = 0, n = 0;
  for (; c.next(g, qt); ++qt, ++n) {
    const int slot = n % 2, h = c.kvh * c.group + g, row = static_cast<int>(c.q0) + qt * kBM;
    uint64_t* q_full = &bars[SM::kQFull + slot];
    if (n >= 2) mbar_wait(&bars[SM::kQEmpty + slot], ((n / 2) & 1) ^ 1);
    mbar_arrive_expect_tx(q_full, SM::kQ + 2 * SM::kRow);
#pragma unroll
    for (int s = 0; s < kD / 64; ++s)
      tma_load_3d(smem + SM::kQ0 + slot * SM::kQ + s * kBM * 128, m.q, s * 64, row, h, q_full);
    const int lrow = static_cast<int>(bwd_seq_row(c.seq, c.q0)) + qt * kBM;  // 16-byte aligned (bwd_workspace.hpp)
    tma_load_2d(smem + SM::kL0 + slot * SM::kRow, m.lse2, lrow, h, q_full);
    tma_load_2d(smem + SM::kD0 + slot * SM::kRow, m.dsum, lrow, h, q_full);
    if (n >= 1) mbar_wait(&bars[SM::kDoEmpty], (n - 1) & 1);
    mbar_arrive_expect_tx(&bars[SM::kDoFull], SM::kQ);
#pragma unroll
    for (int s = 0; s < kD / 64; ++s)
      tma_load_3d(smem + SM::kDO + s * kBM * 128, m.d_o, s * 64, row, h, &bars[SM::kDoFull]);
  }
}

// A score-shaped product of the tile's 64 keys and the query tile's 64 rows over all 256 columns (S^T = K Q^T or
// dP^T = V dO^T), SS, both K-major: k16 steps +(kk/4) 64-column slabs, +(kk%4) 32 bytes; one commit group.
template <DType DT>
__device__ __forceinline__ void issue_scores(float (&acc)[8][4], uint32_t sa, uint32_t sb) {
  const Sw128Desc<> a(sa, 16), b(sb, 16);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk)
    wgmma_ss<DT, 64>(acc, a.at((kk / 4) * (kBN * 128) + (kk % 4) * 32), b.at((kk / 4) * (kBM * 128) + (kk % 4) * 32),
                     kk > 0);
  wgmma_commit();
}

// 64 columns of dQ (dS K over the tile's 64 keys; A = dS^T, B = K's 64-column slab `slab`, both MN-major; k16 steps
// of 16 keys, 2048 bytes); one commit group.
template <DType DT>
__device__ __forceinline__ void issue_dq(float (&dq)[8][4], uint32_t sds, uint32_t sk, int slab) {
  const Sw128Desc<> a(sds, kBN * 128), b(sk + slab * kBN * 128, kBN * 128);
  fence_regs(dq);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBN / 16; ++kk) wgmma_ss_mn<DT>(dq, a.at(kk * 2048), b.at(kk * 2048), kk > 0);
  wgmma_commit();
}

// The tile's per-tile context for both consumer roles.
struct Step {
  int n, slot, h, i0, nq;
  bool full;
  uint32_t sq, sds;
  const float *sL, *sD;
  float4* x;  // this thread's X column: x[j * 128]
};

__device__ __forceinline__ Step step_of(const Cta<kBN>& c, const Thread& th, uint32_t base, unsigned char* smem,
                                        int n, int g, int qt) {
  Step s;
  s.n = n;
  s.slot = n % 2;
  s.h = c.kvh * c.group + g;
  s.i0 = qt * kBM;
  s.nq = min(kBM, c.q_len - s.i0);
  s.full = c.full(s.i0, s.nq);
  s.sq = base + Smem::kQ0 + s.slot * Smem::kQ;
  s.sds = base + Smem::kDS0 + (n & 1) * Smem::kDS;
  s.sL = reinterpret_cast<const float*>(smem + Smem::kL0 + s.slot * Smem::kRow);
  s.sD = reinterpret_cast<const float*>(smem + Smem::kD0 + s.slot * Smem::kRow);
  s.x = reinterpret_cast<float4*>(smem + Smem::kX0) + th.tid;
  return s;
}

// This warpgroup's 128 dQ columns (from `col`) of the tile in two 64-column passes, each staged and reduced: `dq`
// holds the first pass's product (waited for), the second is issued here and waited for with every group still
// pending (warpgroup 1's dK). Before each staging the buffer's last reduction must have read it.
template <DType DT>
__device__ __forceinline__ void finish_dq(float (&dq)[8][4], const Cta<kBN>& c, const Thread& th, uint32_t base,
                                          unsigned char* smem, const BwdWorkspace& ws, const void* m_dq,
                                          const Step& t, int col) {
  const int buf = Smem::kDQ0 + th.cw * Smem::kDQ;
  reduce_dq(dq, c, th, base + buf, smem + buf, ws, m_dq, t.h, t.i0, col);
  __syncwarp();  // thread 0's reduction diverged: wgmma is .aligned
  issue_dq<DT>(dq, t.sds, base + Smem::kK, col / 64 + 1);
  wgmma_wait<0>();
  fence_regs(dq);
  if (th.tid == 0) bulk_wait_read<0>();
  __syncwarp();
  named_bar_sync(3 + th.cw, 128);
  reduce_dq(dq, c, th, base + buf, smem + buf, ws, m_dq, t.h, t.i0, col + 64);
  __syncwarp();
}

// Warpgroup 0's tile: S^T, P^T (X to warpgroup 1), dV += P^T dO; then dQ's first 128 columns once dS^T landed.
template <DType DT, bool SOFTCAP>
__device__ __forceinline__ void step_p(const AttentionBwdParams& p, const Cta<kBN>& c, const Thread& th,
                                       uint32_t base, unsigned char* smem, uint64_t* bars, const BwdWorkspace& ws,
                                       const void* m_dq, const Step& t, float (&dv)[kD / 8][4]) {
  mbar_wait(&bars[Smem::kQFull + t.slot], (t.n / 2) & 1);
  __syncwarp();
  float s[8][4];
  issue_scores<DT>(s, base + Smem::kK, t.sq);
  const Mask m(c, th.warp * 16 + th.lane / 4, 2 * (th.lane % 4), t.i0, t.nq);
  wgmma_wait<0>();
  fence_regs(s);
  if constexpr (SOFTCAP) {
    float dt[8][4];
    const float cap_e = 2.f * kLog2e * p.scale / p.softcap, cap2 = p.softcap * kLog2e;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 l2 = *reinterpret_cast<const float2*>(t.sL + 8 * j + m.qc0);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float tc = capped_tanh(s[j][e], cap_e);
        s[j][e] = m.on(j, e) ? exp2_approx(fmaf(cap2, tc, -(e % 2 ? l2.y : l2.x))) : 0.f;
        dt[j][e] = s[j][e] * (1.f - tc * tc);
      }
      t.x[j * 128] = make_float4(dt[j][0], dt[j][1], dt[j][2], dt[j][3]);
    }
  } else {
    if (t.full) probs<false>(s, m, p.scale * kLog2e, t.sL);
    else probs<true>(s, m, p.scale * kLog2e, t.sL);
#pragma unroll
    for (int j = 0; j < 8; ++j) t.x[j * 128] = make_float4(s[j][0], s[j][1], s[j][2], s[j][3]);
  }
  named_bar_arrive(kBarX, 256);
  uint32_t pa[4][4];
  pack<DT>(s, pa);
  mbar_wait(&bars[Smem::kDoFull], t.n & 1);
  __syncwarp();
  issue_rs<DT, kD>(dv, pa, base + Smem::kDO);
  wgmma_wait<0>();  // dV, under warpgroup 1's dS^T: dO is read, and the next one loads while dS^T is computed
  fence_regs(dv);
  if (th.tid == 0) {
    mbar_arrive(&bars[Smem::kDoEmpty]);
    bulk_wait_read<0>();  // the tile before's last dQ reduction read the buffer
  }
  __syncwarp();  // bar.sync is .aligned: thread 0's branch reconverges first
  named_bar_sync(kBarDs, 256);
  if (th.tid == 0) mbar_arrive(&bars[Smem::kQEmpty + t.slot]);  // every thread of this warpgroup read LSE2, S^T ran
  __syncwarp();  // wgmma is .aligned
  float dq[8][4];
  issue_dq<DT>(dq, t.sds, base + Smem::kK, 0);
  wgmma_wait<0>();
  fence_regs(dq);
  finish_dq<DT>(dq, c, th, base, smem, ws, m_dq, t, 0);
}

// Warpgroup 1's tile: dP^T, dS^T from warpgroup 0's X (to shared memory), dK += dS^T Q and dQ's last 128 columns.
template <DType DT>
__device__ __forceinline__ void step_ds(const Cta<kBN>& c, const Thread& th, uint32_t base, unsigned char* smem,
                                        uint64_t* bars, const BwdWorkspace& ws, const void* m_dq, const Step& t,
                                        float (&dk)[kD / 8][4]) {
  mbar_wait(&bars[Smem::kQFull + t.slot], (t.n / 2) & 1);
  mbar_wait(&bars[Smem::kDoFull], t.n & 1);
  __syncwarp();
  float dp[8][4];
  issue_scores<DT>(dp, base + Smem::kV, base + Smem::kDO);
  wgmma_wait<0>();
  fence_regs(dp);
  if (th.tid == 0) mbar_arrive(&bars[Smem::kDoEmpty]);
  __syncwarp();
  named_bar_sync(kBarX, 256);
  float x[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float4 v = t.x[j * 128];
    x[j][0] = v.x, x[j][1] = v.y, x[j][2] = v.z, x[j][3] = v.w;
  }
  const int qc0 = 2 * (th.lane % 4);
  if (t.full) dsoft<false>(x, dp, qc0, t.sD);
  else dsoft<true>(x, dp, qc0, t.sD);
  uint32_t da[4][4];
  pack<DT>(dp, da);
  store_ds(t.sds, da, th.warp * 16 + th.lane / 4, th.lane);
  fence_proxy_async_smem();
  if (th.tid == 0) bulk_wait_read<0>();  // the tile before's last dQ reduction read the buffer
  __syncwarp();  // bar.sync and wgmma are .aligned: thread 0's wait reconverges first
  named_bar_sync(kBarDs, 256);
  float dq[8][4];
  issue_dq<DT>(dq, t.sds, base + Smem::kK, 2);
  issue_rs<DT, kD>(dk, da, t.sq);
  wgmma_wait<1>();  // dQ's first pass
  fence_regs(dq);
  finish_dq<DT>(dq, c, th, base, smem, ws, m_dq, t, 128);  // waits for dK too: Q is read
  fence_regs(dk);
  if (th.tid == 0) mbar_arrive(&bars[Smem::kQEmpty + t.slot]);
}

template <DType DT, bool SOFTCAP>
__device__ void consume(const AttentionBwdParams& p, const Cta<kBN>& c, const Thread& th, uint32_t base,
                        unsigned char* smem, uint64_t* bars, const BwdWorkspace& ws, const void* m_dq) {
  float acc[kD / 8][4];  // dV in warpgroup 0, dK in warpgroup 1
#pragma unroll
  for (int j = 0; j < kD / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  mbar_wait(&bars[Smem::kKvFull], 0);
  int g = c.g_begin, qt = 0, n = 0;
  for (; c.next(g, qt); ++qt, ++n) {
    const Step t = step_of(c, th, base, smem, n, g, qt);
    if (th.cw == 0) step_p<DT, SOFTCAP>(p, c, th, base, smem, bars, ws, m_dq, t, acc);
    else step_ds<DT>(c, th, base, smem, bars, ws, m_dq, t, acc);
  }
  const int kr0 = th.warp * 16 + th.lane / 4;
  if (ws.splits == 1) store_rows<DT, kD>(th.cw == 0 ? p.dv : p.dk, th.cw == 0 ? 1.f : p.scale, p, c, acc, kr0, th.lane);
  else add_rows<kD>(th.cw == 0 ? ws.dv_acc : ws.dk_acc, p, c, acc, kr0, th.lane);
  if (th.tid == 0) bulk_wait<0>();  // the last reduction wrote
}

template <DType DT, bool SOFTCAP>
__global__ void __launch_bounds__(kThreads, 1)
    bwd_dkdv_wgmma256(const AttentionBwdParams p, const BwdWorkspace ws, const __grid_constant__ CUtensorMap tm_q,
                      const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v,
                      const __grid_constant__ CUtensorMap tm_do, const __grid_constant__ CUtensorMap tm_lse2,
                      const __grid_constant__ CUtensorMap tm_dsum, const __grid_constant__ CUtensorMap tm_dq) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + Smem::kBar);
  const Cta<kBN> c(p, ws.splits);
  if (c.j0 >= c.kv_len) return;
  if (threadIdx.x == 0) {
    // Full barriers: the producer's one arrival; empty ones: a thread of each warpgroup that reads the slot.
    for (int i = 0; i < Smem::kBarriers; ++i)
      mbar_init(&bars[i], i == Smem::kQEmpty || i == Smem::kQEmpty + 1 || i == Smem::kDoEmpty ? 2 : 1);
    mbar_fence_init();
  }
  __syncthreads();
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  if (wg == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) produce(c, {&tm_q, &tm_k, &tm_v, &tm_do, &tm_lse2, &tm_dsum}, smem, bars);
    return;
  }
  setmaxnreg_inc<kConsumerRegs>();
  const int tid = threadIdx.x % 128;
  const Thread th{wg - 1, tid, tid / 32, tid % 32};
  consume<DT, SOFTCAP>(p, c, th, base, smem, bars, ws, &tm_dq);
}

template <DType DT, bool SOFTCAP>
void launch(dim3 grid, const AttentionBwdParams& p, const BwdWorkspace& ws, const WgBwdMapCache& m,
            cudaStream_t stream) {
  static const bool attribute_set = [] {  // once per instance, outside any capture's stream work
    ATTNBENCH_CUDA_CHECK(cudaFuncSetAttribute(bwd_dkdv_wgmma256<DT, SOFTCAP>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize, Smem::bytes));
    return true;
  }();
  (void)attribute_set;
  bwd_dkdv_wgmma256<DT, SOFTCAP>
      <<<grid, kThreads, Smem::bytes, stream>>>(p, ws, m.q, m.k, m.v, m.d_o, m.lse2, m.dsum, m.dq);
  check_last_launch("cuda.unified_bwd dK/dV (wgmma, d256)");
}

}  // namespace

template <DType DT>
void launch_dkdv_wgmma256(dim3 grid, const AttentionBwdParams& p, const BwdWorkspace& ws, const WgBwdMapCache& maps,
                          cudaStream_t stream) {
  if (p.softcap > 0.f) launch<DT, true>(grid, p, ws, maps, stream);
  else launch<DT, false>(grid, p, ws, maps, stream);
}

template void launch_dkdv_wgmma256<DType::bf16>(dim3, const AttentionBwdParams&, const BwdWorkspace&,
                                                const WgBwdMapCache&, cudaStream_t);
template void launch_dkdv_wgmma256<DType::f16>(dim3, const AttentionBwdParams&, const BwdWorkspace&,
                                               const WgBwdMapCache&, cudaStream_t);

}  // namespace attnbench::cuda
