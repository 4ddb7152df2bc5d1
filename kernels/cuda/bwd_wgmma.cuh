// The device rules both wgmma dK/dV kernels share (bwd_wgmma.cu: d64, d128; bwd_wgmma256.cu: d256): a CTA's tile and
// its walk over query tiles, a consumer thread's key rows and mask, the softmax backward's elementwise steps on a
// keys x queries accumulator (S^T, dP^T: 64 keys of a warpgroup x 64 queries), dQ's staging and TMA reduction, and
// the split group's fp32 dK/dV partials.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include "common/device/visibility.hpp"
#include "cuda/bwd_wgmma.hpp"
#include "cuda/bwd_workspace.hpp"
#include "cuda/mbarrier.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/storage.cuh"
#include "cuda/wgmma.cuh"

namespace attnbench::cuda::wgbwd {

using namespace dev;

constexpr int kBM = kWgBwdQueries;

// What every role of a CTA of BN keys knows: its tile, the sequence's extents and mask, and the walk over query
// tiles of its heads of the group (all of them, or its part of a split: grid y is kv head x part).
template <int BN> struct Cta {
  int seq, kvh, j0, nk, q_len, kv_len, group, g_begin, g_end, n_qt;
  int64_t q0, k0;
  device::Visibility vis;

  __device__ Cta(const AttentionBwdParams& p, int splits)
      : seq(blockIdx.z), kvh(blockIdx.y / splits), j0(blockIdx.x * BN), q0(p.cu_seqlens_q[blockIdx.z]),
        k0(p.cu_seqlens_k[blockIdx.z]),
        vis(p.cu_seqlens_q[seq + 1] - p.cu_seqlens_q[seq], p.cu_seqlens_k[seq + 1] - p.cu_seqlens_k[seq], p.causal,
            p.top_left, p.window_left, p.window_right) {
    q_len = p.cu_seqlens_q[seq + 1] - static_cast<int>(q0);
    kv_len = p.cu_seqlens_k[seq + 1] - static_cast<int>(k0);
    nk = min(BN, kv_len - j0);
    group = p.heads / p.kv_heads;
    g_begin = blockIdx.y % splits * (group / splits);
    g_end = g_begin + group / splits;
    n_qt = (q_len + kBM - 1) / kBM;
  }
  // From (head g of the group, query tile qt) on, the next pair whose tile sees a key of the tile; false past the
  // last. (A division per step cost ~40 instructions of every tile.)
  __device__ bool next(int& g, int& qt) const {
    for (; g < g_end; ++g, qt = 0)
      for (; qt < n_qt; ++qt)
        if (!vis.tile_fully_masked(j0, j0 + nk, qt * kBM, min(q_len, qt * kBM + kBM) - 1)) return true;
    return false;
  }
  // Every element of query tile i0 (nq rows) sees every key of the tile: no mask code runs.
  __device__ bool full(int i0, int nq) const {
    return nq == kBM && nk == BN && vis.tile_fully_visible(j0, j0 + BN, i0, i0 + kBM - 1);
  }
};

struct Maps {
  const CUtensorMap *q, *k, *v, *d_o, *lse2, *dsum;
};

// A consumer thread's place: warpgroup cw, its thread, warp and lane in it.
struct Thread {
  int cw, tid, warp, lane;
};

// The mask of a query tile over this thread's key rows kr0 and kr0 + 8 (of the tile): the query columns [lo, hi) of
// the tile that see each (Visibility::rows_seeing, bounded by the tile's rows), so an element costs two compares.
struct Mask {
  int lo[2], hi[2], qc0;
  template <int BN>
  __device__ __forceinline__ Mask(const Cta<BN>& c, int kr0, int qc0_, int i0, int nq) : qc0(qc0_) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      c.vis.rows_seeing(c.j0 + kr0 + 8 * r, lo[r], hi[r]);  // keys past the sequence: empty
      lo[r] = max(lo[r] - i0, 0);
      hi[r] = min(hi[r] - i0, nq);
    }
  }
  __device__ __forceinline__ bool on(int j, int e) const {
    const int qc = 8 * j + qc0 + e % 2;
    return qc >= lo[e / 2] && qc < hi[e / 2];
  }
};

// P^T = exp2(S^T scale log2e - LSE2) in place; MASKED: 0 where masked (a select: a NaN of a row past the sequence
// stays out). Unmasked tiles (most of them) run no mask code at all.
template <bool MASKED>
__device__ __forceinline__ void probs(float (&s)[8][4], const Mask& m, float sc2, const float* sL) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 l2 = *reinterpret_cast<const float2*>(sL + 8 * j + m.qc0);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float pr = exp2_approx(fmaf(s[j][e], sc2, -(e % 2 ? l2.y : l2.x)));
      s[j][e] = !MASKED || m.on(j, e) ? pr : 0.f;
    }
  }
}

// dS^T = X o (dP^T - D) in place of dP^T, X = P^T (or, under a softcap, P^T times tanh's derivative); MASKED: 0
// wherever X is (dP^T - D of a padding row may be NaN).
template <bool MASKED>
__device__ __forceinline__ void dsoft(const float (&x)[8][4], float (&dp)[8][4], int qc0, const float* sD) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 dd = *reinterpret_cast<const float2*>(sD + 8 * j + qc0);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float ds = x[j][e] * (dp[j][e] - (e % 2 ? dd.y : dd.x));
      dp[j][e] = MASKED && x[j][e] == 0.f ? 0.f : ds;
    }
  }
}

// Under a softcap (s <- c tanh(s / c)): tanh(s scale / c) of a raw score, cap_e = 2 log2e scale / c. tanh is
// 1 - 2 / (e^2x + 1) by ex2.approx and rcp.approx, as in the forward (feature_tile.cuh says why that is accurate).
__device__ __forceinline__ float capped_tanh(float s, float cap_e) {
  return fmaf(-2.f, rcp_approx(exp2_approx(s * cap_e) + 1.f), 1.f);
}

// An S^T-shaped fragment rounded into the RS A layout (k-block j = query columns 16 j..16 j + 15).
template <DType DT>
__device__ __forceinline__ void pack(const float (&x)[8][4], uint32_t (&a)[4][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    a[j][0] = pack2<DT>(x[2 * j][0], x[2 * j][1]);
    a[j][1] = pack2<DT>(x[2 * j][2], x[2 * j][3]);
    a[j][2] = pack2<DT>(x[2 * j + 1][0], x[2 * j + 1][1]);
    a[j][3] = pack2<DT>(x[2 * j + 1][2], x[2 * j + 1][3]);
  }
}

// This thread's dS^T values (key rows kr0, kr0 + 8) into buffer `sds` ([keys][64 queries], 128-byte rows, chunks
// XOR row % 8): dQ's A operand, MN-major.
__device__ __forceinline__ void store_ds(uint32_t sds, const uint32_t (&da)[4][4], int kr0, int lane) {
  const int t = lane % 4;
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int kr = kr0 + 8 * hh;
      const uint32_t addr = sds + kr * 128 + ((j ^ (kr & 7)) << 4) + 4 * t;
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(da[j / 2][(j % 2) * 2 + hh]) : "memory");
    }
}

// acc += A B over the tile's 64 queries, A from registers (P^T or dS^T), B = dO or Q MN-major (LBO the next d slab,
// k16 steps of 2048 bytes); one commit group.
template <DType DT, int D>
__device__ __forceinline__ void issue_rs(float (&acc)[D / 8][4], const uint32_t (&a)[4][4], uint32_t sb) {
  const Sw128Desc<> b(sb, kBM * 128);
  fence_regs(acc);
  wgmma_fence();
#pragma unroll
  for (int j = 0; j < 4; ++j) wgmma_rs<DT, D>(acc, a[j], b.at(j * 2048), 1);
  wgmma_commit();
}

// This thread's 64-column dQ part into its warpgroup's buffer `sdq`: two slabs of 32 columns, [64 rows][128 B],
// 16-byte chunks XOR row % 8 (what the reducing map's 128B-swizzled box reads).
__device__ __forceinline__ void stage_dq(uint32_t sdq, const float (&dq)[8][4], const Thread& th) {
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

// A 64-column dQ part (columns col..col + 63 of query tile i0 of head h) added into the fp32 accumulator by one TMA
// reduction per 32-column slab, from the warpgroup's staging buffer (`sdq` its shared address, `buf` the same
// bytes); the buffer is free (the reduction before read it). Rows past the sequence add zeros (their dS is 0) to
// rows the postprocess never reads or another sequence's, or fall past the map.
template <int BN>
__device__ __forceinline__ void reduce_dq(const float (&dq)[8][4], const Cta<BN>& c, const Thread& th, uint32_t sdq,
                                          unsigned char* buf, const BwdWorkspace& ws, const void* m_dq, int h, int i0,
                                          int col) {
  stage_dq(sdq, dq, th);
  fence_proxy_async_smem();
  named_bar_sync(3 + th.cw, 128);
  if (th.tid == 0) {
    const int row = static_cast<int>(h * ws.row_stride + bwd_seq_row(c.seq, c.q0) + i0);
    tma_reduce_add_2d(m_dq, col, row, buf);
    tma_reduce_add_2d(m_dq, col + 32, row, buf + kBM * 128);
    bulk_commit();
  }
}

// A gradient's rows kr0, kr0 + 8 of the tile (D columns, fragment acc, times `scale`) into dst ([tokens] rows of
// `stride`, the kv head's columns), rows past nk not written.
template <DType DT, int D, int BN>
__device__ void store_rows(void* dst, float scale, const AttentionBwdParams& p, const Cta<BN>& c,
                           const float (&acc)[D / 8][4], int kr0, int lane) {
  using T = typename StorageOf<DT>::type;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int kr = kr0 + 8 * hh;
    if (kr >= c.nk) continue;
    T* row = static_cast<T*>(dst) + (c.k0 + c.j0 + kr) * p.k_stride_token + c.kvh * p.k_stride_head + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      *reinterpret_cast<uint32_t*>(row + 8 * j) = pack2<DT>(acc[j][2 * hh] * scale, acc[j][2 * hh + 1] * scale);
  }
}

// A split group's partial of a gradient's rows kr0, kr0 + 8 (unscaled) added into its fp32 accumulator `acc_out`
// ([total_k][kv_heads][D]) by vector reductions; the postprocess scales and casts.
template <int D, int BN>
__device__ void add_rows(float* acc_out, const AttentionBwdParams& p, const Cta<BN>& c, const float (&acc)[D / 8][4],
                         int kr0, int lane) {
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int kr = kr0 + 8 * hh;
    if (kr >= c.nk) continue;
    float* row = acc_out + ((c.k0 + c.j0 + kr) * p.kv_heads + c.kvh) * D + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      atomicAdd(reinterpret_cast<float2*>(row + 8 * j), make_float2(acc[j][2 * hh], acc[j][2 * hh + 1]));
  }
}

}  // namespace attnbench::cuda::wgbwd
