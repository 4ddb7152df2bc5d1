// cuda.unified_bwd, first version: FlashAttention-2's backward with mma.sync m16n8k16 (sm_80 instructions on
// sm_90a). One CTA of 4 warps per (sequence, kv head, 64-key tile, column chunk) keeps its tile's dK and dV columns
// in registers (a warp 16 keys) while it walks every query tile of every head of the group that sees the keys:
// S^T = K Q^T and dP^T = V dO^T over all of the head, P^T = exp(S^T - LSE) masked, dS^T = P^T o (dP^T - D),
// dV += P^T dO and dK += dS^T Q on the chunk's columns from the accumulators' registers, then dS^T through shared
// memory for the chunk's columns of dQ = dS K, added to an fp32 dQ by atomics. d64 and d128 are one chunk; d256
// is two of 128 (bwd_tile). A preprocess computes D = rowsum(dO o O) and zeroes dQ; a postprocess scales and
// rounds it.
#include <cuda_runtime.h>

#include "common/device/visibility.hpp"
#include "cuda/mma_sm80.cuh"
#include "cuda/bwd_workspace.hpp"
#include "cuda/runtime.hpp"
#include "cuda/unified_bwd.hpp"

namespace attnbench::cuda {

namespace {

using dev::cp_async_16;
using dev::cp_async_commit;
using dev::cp_async_wait;
using dev::ldmatrix_x4;
using dev::ldmatrix_x4_trans;
using dev::mma_16816;
using dev::pack2;
using dev::smem_u32;

constexpr int kBN = 64, kWarps = 4, kThreads = 32 * kWarps;

// bwd_tile(D) as compile-time constants, and the shared memory they take: K, V (kBN rows), Q, dO (kBM rows),
// dS^T (kBN x kBM), LSE and D (kBM each).
template <int D> struct BwdSmem {
  static constexpr BwdTile kT = bwd_tile(D);
  static_assert(kT.key_rows == kBN && kBN == 16 * kWarps, "a warp owns 16 keys of the tile");
  static constexpr int kBM = kT.query_rows, kCols = kT.cols, kChunks = kT.chunks;
  static_assert(kCols * kChunks == D && kBM % 16 == 0, "chunks cover the head; query tiles are whole mma rows");
  static constexpr int kQWarps = kBM / 16;                     // warps along dQ's rows ...
  static constexpr int kDqCols = kCols / (kWarps / kQWarps);   // ... and the chunk's dQ columns each owns
  static constexpr int kRow = D + 8;   // elements per row: 16 bytes of padding keep ldmatrix conflict-free
  static constexpr int kSRow = kBM + 8;
  static constexpr int kKTile = kBN * kRow, kQTile = kBM * kRow;
  static constexpr std::size_t bytes = (2 * kKTile + 2 * kQTile + kBN * kSRow) * 2 + 2 * kBM * 4;
};

// Rows [r0, r0 + ROWS) of a packed tensor's head into shared memory (kRow elements a row), zero past `rows`.
template <int D, int ROWS>
__device__ void load_tile(uint16_t* smem, const uint16_t* src, int64_t r0, int rows, int64_t st_tok, int tid) {
  constexpr int kChunks = D / 8;  // 16-byte chunks a row
  for (int c = tid; c < ROWS * kChunks; c += kThreads) {
    const int r = c / kChunks, k = c % kChunks;
    const bool ok = r < rows;
    cp_async_16(smem_u32(smem + r * BwdSmem<D>::kRow + k * 8), src + (ok ? (r0 + r) * st_tok : 0) + k * 8, ok);
  }
}

// C (16 x 8*NT) += A (16 rows at a_row of row-major `a`) * B^T (8*NT rows of row-major `b`), over all D.
template <DType DT, int D, int NT>
__device__ void mma_abt(float (&c)[NT][4], const uint16_t* a, int a_row, const uint16_t* b, int lane) {
  constexpr int R = BwdSmem<D>::kRow;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t fa[4];
    ldmatrix_x4(fa, smem_u32(a + (a_row + lane % 8 + (lane / 8) % 2 * 8) * R + kk * 16 + lane / 16 * 8));
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t fb[4];
      ldmatrix_x4(fb, smem_u32(b + (np * 16 + lane % 8 + lane / 16 * 8) * R + kk * 16 + (lane / 8) % 2 * 8));
      mma_16816<DT>(c[2 * np], fa, fb[0], fb[1]);
      mma_16816<DT>(c[2 * np + 1], fa, fb[2], fb[3]);
    }
  }
}

// acc (16 x 8*NT) += A (16 x 8*KT from the registers of a C tile, rounded) * B (8*KT x 8*NT, row-major `b`, its
// first column where `b` points: a chunk's columns of a kRow-wide tile).
template <DType DT, int D, int NT, int KT>
__device__ void mma_cb(float (&acc)[NT][4], const float (&a)[KT][4], const uint16_t* b, int lane) {
  constexpr int R = BwdSmem<D>::kRow;
#pragma unroll
  for (int kk = 0; kk < KT / 2; ++kk) {
    const uint32_t fa[4] = {pack2<DT>(a[2 * kk][0], a[2 * kk][1]), pack2<DT>(a[2 * kk][2], a[2 * kk][3]),
                            pack2<DT>(a[2 * kk + 1][0], a[2 * kk + 1][1]), pack2<DT>(a[2 * kk + 1][2], a[2 * kk + 1][3])};
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t fb[4];
      ldmatrix_x4_trans(fb, smem_u32(b + (kk * 16 + lane % 8 + (lane / 8) % 2 * 8) * R + np * 16 + lane / 16 * 8));
      mma_16816<DT>(acc[2 * np], fa, fb[0], fb[1]);
      mma_16816<DT>(acc[2 * np + 1], fa, fb[2], fb[3]);
    }
  }
}

// In place, a warp's keys jw + [0, nkw) (of its 16) against the step's queries i0 + [0, nq): s (S^T) becomes P^T =
// exp(scale S^T - LSE) and dp (dP^T) becomes dS^T = P^T o (dP^T - D), times tanh's derivative under a softcap;
// pairs outside or masked read 0 unless the whole tile is visible (`full`). Bounds test offsets from i0 and jw:
// they fold to constants per element (fewer live registers than absolute bounds).
template <int NT>
__device__ void scores_to_grads(float (&s)[NT][4], float (&dp)[NT][4], const AttentionBwdParams& p,
                                const device::Visibility& vis, bool full, int jw, int nkw, int i0, int nq,
                                const float* sL, const float* sD, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = jw + g + (e / 2) * 8, i = i0 + n * 8 + 2 * t + e % 2;
      float x = s[n][e] * p.scale, capd = 1.f;
      if (p.softcap > 0.f) {
        const float th = tanhf(x / p.softcap);
        x = p.softcap * th;
        capd = 1.f - th * th;
      }
      const bool on = full || (i - i0 < nq && j - jw < nkw && vis.visible(i, j));
      const float pr = on ? exp2f(x * kLog2e - sL[i - i0]) : 0.f;
      s[n][e] = pr;
      dp[n][e] = pr * (dp[n][e] - sD[i - i0]) * capd;
    }
}

// A warp's dS^T (16 keys from row w * 16, 8*NT queries) into sS, rounded, for dQ = dS K.
template <DType DT, int D, int NT>
__device__ void store_ds_t(uint16_t* sS, const float (&ds)[NT][4], int w, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const uint32_t v2 = pack2<DT>(ds[n][2 * hh], ds[n][2 * hh + 1]);
      *reinterpret_cast<uint32_t*>(sS + (w * 16 + g + hh * 8) * BwdSmem<D>::kSRow + n * 8 + 2 * t) = v2;
    }
}

// dQ (the step's nq rows, the chunk's columns) += dS K by fp32 atomics into dst (row 0, the chunk's first column;
// rows `row_stride` apart): dS read transposed from sS (keys x queries), K from sKc (sK at the chunk's first
// column). A warp owns 16 query rows and kDqCols columns: 4 x 1 warps at a 64-row step, 2 x 2 at a 32-row one.
template <DType DT, int D>
__device__ void add_dq(float* dst, int64_t row_stride, int nq, const uint16_t* sS, const uint16_t* sKc, int w,
                       int lane) {
  using SM = BwdSmem<D>;
  constexpr int NW = SM::kDqCols;
  __builtin_assume(w >= 0 && w < kWarps);  // folds w % and w / (ptxas: d256 spills 16 bytes with it, 88 without)
  const int r0 = w % SM::kQWarps * 16, col = w / SM::kQWarps * NW;
  float dq[NW / 8][4] = {};
#pragma unroll
  for (int kk = 0; kk < kBN / 16; ++kk) {  // keys, 16 at a time
    uint32_t fa[4];
    ldmatrix_x4_trans(fa, smem_u32(sS + (kk * 16 + lane % 8 + lane / 16 * 8) * SM::kSRow + r0 + (lane / 8) % 2 * 8));
#pragma unroll
    for (int np = 0; np < NW / 16; ++np) {
      uint32_t fb[4];
      ldmatrix_x4_trans(fb, smem_u32(sKc + (kk * 16 + lane % 8 + (lane / 8) % 2 * 8) * SM::kRow + col + np * 16 +
                                     lane / 16 * 8));
      mma_16816<DT>(dq[2 * np], fa, fb[0], fb[1]);
      mma_16816<DT>(dq[2 * np + 1], fa, fb[2], fb[3]);
    }
  }
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = r0 + g + hh * 8;
    if (r >= nq) continue;
    float* d = dst + r * row_stride + col;
#pragma unroll
    for (int n = 0; n < NW / 8; ++n)
      atomicAdd(reinterpret_cast<float2*>(d + n * 8 + 2 * t), make_float2(dq[n][2 * hh], dq[n][2 * hh + 1]));
  }
}

// dK (times scale) and dV of a warp's 16 keys, the chunk's columns, rows past nk not written.
template <DType DT, int NT>
__device__ void store_dkdv(const AttentionBwdParams& p, int kvh, int64_t key0, int nk, int c0, const float (&dk)[NT][4],
                           const float (&dv)[NT][4], int w, int lane) {
  using T = typename StorageOf<DT>::type;
  auto* dkb = static_cast<T*>(p.dk) + kvh * p.k_stride_head + c0;
  auto* dvb = static_cast<T*>(p.dv) + kvh * p.k_stride_head + c0;
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = w * 16 + g + hh * 8;
    if (r >= nk) continue;
    const int64_t off = (key0 + r) * p.k_stride_token;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      *reinterpret_cast<uint32_t*>(dkb + off + n * 8 + 2 * t) =
          pack2<DT>(dk[n][2 * hh] * p.scale, dk[n][2 * hh + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(dvb + off + n * 8 + 2 * t) = pack2<DT>(dv[n][2 * hh], dv[n][2 * hh + 1]);
    }
  }
}

// A split group's partial dK, dV (unscaled) added into the fp32 accumulators; the postprocess scales and casts.
template <int NT>
__device__ void add_dkdv(const AttentionBwdParams& p, const BwdWorkspace& ws, int kvh, int64_t key0, int nk, int c0,
                         const float (&dk)[NT][4], const float (&dv)[NT][4], int w, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = w * 16 + g + hh * 8;
    if (r >= nk) continue;
    const int64_t off = ((key0 + r) * p.kv_heads + kvh) * p.head_size + c0;
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        atomicAdd(ws.dk_acc + off + n * 8 + 2 * t + e, dk[n][2 * hh + e]);
        atomicAdd(ws.dv_acc + off + n * 8 + 2 * t + e, dv[n][2 * hh + e]);
      }
  }
}

template <DType DT, int D>
__global__ void __launch_bounds__(kThreads, 1) bwd_dkdv(AttentionBwdParams p, BwdWorkspace ws) {
  using SM = BwdSmem<D>;
  constexpr int BM = SM::kBM;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t* sK = reinterpret_cast<uint16_t*>(smem_raw);
  uint16_t *sV = sK + SM::kKTile, *sQ = sV + SM::kKTile, *sO = sQ + SM::kQTile, *sS = sO + SM::kQTile;
  float* sL = reinterpret_cast<float*>(sS + kBN * SM::kSRow);
  float* sD = sL + BM;
  // A key tile's chunks are neighbours in x: they walk the same Q and dO tiles at about the same time, from L2.
  const int seq = blockIdx.z, kvh = blockIdx.y / ws.splits, part = blockIdx.y % ws.splits;
  const int j0 = blockIdx.x / SM::kChunks * kBN;
  const int c0 = blockIdx.x % SM::kChunks * SM::kCols;
  const int64_t q0 = p.cu_seqlens_q[seq], k0 = p.cu_seqlens_k[seq];
  const int q_len = p.cu_seqlens_q[seq + 1] - q0, kv_len = p.cu_seqlens_k[seq + 1] - k0;
  if (j0 >= kv_len) return;
  const int tid = threadIdx.x, lane = tid % 32, w = tid / 32;
  const int group = p.heads / p.kv_heads, nk = min(kBN, kv_len - j0);
  const device::Visibility vis(q_len, kv_len, p.causal, p.top_left, p.window_left, p.window_right);
  const auto* kbase = static_cast<const uint16_t*>(p.k) + kvh * p.k_stride_head;
  const auto* vbase = static_cast<const uint16_t*>(p.v) + kvh * p.k_stride_head;
  load_tile<D, kBN>(sK, kbase, k0 + j0, nk, p.k_stride_token, tid);
  load_tile<D, kBN>(sV, vbase, k0 + j0, nk, p.k_stride_token, tid);
  cp_async_commit();
  float dk[SM::kCols / 8][4] = {}, dv[SM::kCols / 8][4] = {};
  const int per_cta = group / ws.splits, h0 = kvh * group + part * per_cta;
  for (int h = h0; h < h0 + per_cta; ++h) {
    for (int i0 = 0; i0 < q_len; i0 += BM) {
      const int nq = min(BM, q_len - i0);
      if (vis.tile_fully_masked(j0, j0 + nk, i0, i0 + nq - 1)) continue;
      __syncthreads();  // the previous tile's sQ, sO (dO), sS, sL, sD are read
      const auto* qb = static_cast<const uint16_t*>(p.q) + h * p.q_stride_head;
      const auto* gb = static_cast<const uint16_t*>(p.d_o) + h * p.q_stride_head;
      load_tile<D, BM>(sQ, qb, q0 + i0, nq, p.q_stride_token, tid);
      load_tile<D, BM>(sO, gb, q0 + i0, nq, p.q_stride_token, tid);
      cp_async_commit();
      if (tid < BM) {
        const bool ok = tid < nq;
        const int64_t row = h * ws.row_stride + bwd_seq_row(seq, q0) + i0 + tid;
        sL[tid] = ok ? ws.lse2[row] : 0.f;
        sD[tid] = ok ? ws.dsum[row] : 0.f;
      }
      cp_async_wait<0>();
      __syncthreads();
      float s[BM / 8][4] = {}, dp[BM / 8][4] = {};
      mma_abt<DT, D>(s, sK, w * 16, sQ, lane);   // S^T: keys x queries, over all of the head
      mma_abt<DT, D>(dp, sV, w * 16, sO, lane);  // dP^T
      const bool full = vis.tile_fully_visible(j0, j0 + nk, i0, i0 + nq - 1) && nk == kBN && nq == BM;
      scores_to_grads(s, dp, p, vis, full, j0 + w * 16, nk - w * 16, i0, nq, sL, sD, lane);
      mma_cb<DT, D>(dv, s, sO + c0, lane);  // dV += P^T dO, the chunk's columns
      mma_cb<DT, D>(dk, dp, sQ + c0, lane);  // dK += dS^T Q
      store_ds_t<DT, D>(sS, dp, w, lane);
      __syncthreads();
      add_dq<DT, D>(ws.dq_acc + (h * ws.row_stride + bwd_seq_row(seq, q0) + i0) * D + c0, D, nq, sS, sK + c0, w,
                    lane);
    }
  }
  cp_async_wait<0>();  // the K/V loads of a tile no query sees
  if (ws.splits == 1) store_dkdv<DT>(p, kvh, k0 + j0, nk, c0, dk, dv, w, lane);
  else add_dkdv(p, ws, kvh, k0 + j0, nk, c0, dk, dv, w, lane);
}

}  // namespace

template <DType DT, int D>
void launch_attention_bwd(const AttentionBwdParams& p, int splits, cudaStream_t stream) {
  const BwdWorkspace ws = bwd_workspace(p, splits);
  launch_bwd_preprocess<DT>(p, ws, stream);
  const std::size_t smem = BwdSmem<D>::bytes;
  static const bool attribute_set = [smem] {  // once per instance, outside any capture's stream work
    ATTNBENCH_CUDA_CHECK(cudaFuncSetAttribute(bwd_dkdv<DT, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(smem)));
    return true;
  }();
  (void)attribute_set;
  const dim3 grid((p.max_seqlen_k + kBN - 1) / kBN * BwdSmem<D>::kChunks, p.kv_heads * ws.splits, p.num_seqs);
  bwd_dkdv<DT, D><<<grid, kThreads, smem, stream>>>(p, ws);
  check_last_launch("cuda.unified_bwd dK/dV");
  launch_bwd_postprocess<DT>(p, ws, stream);
}

template void launch_attention_bwd<DType::bf16, 64>(const AttentionBwdParams&, int, cudaStream_t);
template void launch_attention_bwd<DType::bf16, 128>(const AttentionBwdParams&, int, cudaStream_t);
template void launch_attention_bwd<DType::f16, 64>(const AttentionBwdParams&, int, cudaStream_t);
template void launch_attention_bwd<DType::f16, 128>(const AttentionBwdParams&, int, cudaStream_t);
template void launch_attention_bwd<DType::bf16, 256>(const AttentionBwdParams&, int, cudaStream_t);
template void launch_attention_bwd<DType::f16, 256>(const AttentionBwdParams&, int, cudaStream_t);

}  // namespace attnbench::cuda
