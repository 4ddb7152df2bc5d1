// 3D split-KV decode: one CTA per (KV split, kv head x row tile, sequence). The query rows of a whole GQA group
// (q_len x group, packed token-major) form the 16 M rows of mma.sync, so each K/V byte is read once per row tile.
// Key warps each take a slice of a K/V tile (4 x 16 keys of 64, or of an 8-bit cache 8 x 16 of 128; their own
// online-softmax state, merged through shared memory at the end), and with a 16-bit cache at d >= 128 a second warp
// per key slice takes the other half of the head's columns of P.V; tiles stream through a cp.async ring of 3 slots (6
// under ATTNBENCH_3D_STAGES=6; every slot in flight while a tile is awaited) whose block-table reads run a tile
// ahead. With one split the CTA writes the output; otherwise it writes a base-2 LSE and a normalised fp32 partial,
// and the splits are merged either in the same launch by the last CTAs to arrive, in groups (decode_merge.cuh), or
// by a separate merge kernel launched as this one's programmatic dependent (decode_merge_kernel.cuh). The output
// gate (p.epilogue.gate) is applied at the write (decode_out.cuh).
// A features instance (F) applies the attention features (feature_tile.cuh): a sliding window's first tile starts
// the split range, the mods and the mask act on every score, and a sink and v_scale scale the finished row; an
// 8-bit cache (KV) streams its codes in tiles of twice the keys and widens them in registers into fp16 mma
// (warp_tile8.cuh). With Q8 (the FP8 SDPA) Q's codes land in the Q tile's upper half and are widened to fp16 in
// place before the fragments are taken (every e4m3 / e5m2 value is exact in fp16).
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "attnbench/attention.hpp"
#include "common/device/visibility.hpp"
#include "cuda/decode_merge.cuh"
#include "cuda/decode_merge_kernel.cuh"
#include "cuda/decode_out.cuh"
#include "cuda/feature_tile.cuh"
#include "cuda/heuristics.hpp"
#include "cuda/launch.hpp"
#include "cuda/paged_tile.cuh"
#include "cuda/runtime.hpp"
#include "cuda/warp_tile.cuh"
#include "cuda/warp_tile8.cuh"

namespace attnbench::cuda {

template <int D, int KVB = 2, int S = kDecodeStages>  // KVB: bytes of a K/V element in the cache; S: ring slots
struct DecodeTile {
  static constexpr int kKeyWarps = decode_key_warps(KVB);
  static constexpr int kDSplit = decode_d_split(D, KVB);
  static constexpr int kWarps = decode_warps(D, KVB);
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kDS = D / kDSplit;  // O columns per warp
  static constexpr int kBM = kDecodeRowsPerCta;
  static constexpr int kBN = decode_block_n(KVB);
  static constexpr int kKeysPerWarp = kBN / kKeyWarps;
  static constexpr bool kQInRegs = D <= 128;
  static constexpr int kStages = S;
  static constexpr int kQBytes = kBM * D * 2;
  static constexpr int kTileBytes = kBN * D * KVB;  // one K (V) tile of the ring
  static constexpr int kPipeBytes = kStages * 2 * kTileBytes;
  // fp32 merge buffer row pitch: rows off bank alignment, so a warp's store (8 rows x 4 quad lanes) is at most
  // 2-way conflicted; 16-bit columns step by 2 per quad lane, 8-bit ones (o_col8) by 4.
  static constexpr int kOPitch = D + (KVB == 1 ? 2 : 4);
  static constexpr int kMergeBytes = kKeyWarps * kBM * kOPitch * 4 + 2 * kKeyWarps * kBM * 4;
  static_assert(kMergeBytes <= kPipeBytes, "the merge buffer reuses the pipeline stages");
  static constexpr int kSmemBytes = kQBytes + kPipeBytes;
  static_assert(kSmemBytes == decode_smem_bytes(D, KVB, S), "the host's occupancy model sizes the same buffers");
  static_assert(decode_ctas_per_sm(D, KVB, S) * (kSmemBytes + 1024) <= 228 * 1024,
                "the CTAs per SM the launch bounds ask for fit the SM's shared memory (1 KB reserved per CTA)");
};

namespace dev {

// At least the CTAs per SM that shared memory allows: the host's split model fills that many slots per SM.
template <DType DT, int D, DType KV, bool F, bool Q8, int RING>
__global__ void __launch_bounds__(DecodeTile<D, static_cast<int>(dtype_bytes(KV)), RING>::kThreads,
                                  decode_ctas_per_sm(D, static_cast<int>(dtype_bytes(KV)), RING))
    decode_kernel(const __grid_constant__ AttentionParams p, int splits, int merge_group, DecodeMerge merge) {
  asm volatile("griddepcontrol.launch_dependents;");  // a separate merge's CTAs may take their slots now
  using T = typename StorageOf<DT>::type;
  using TK = typename StorageOf<KV>::type;
  constexpr bool kWiden = sizeof(TK) == 1;
  static_assert(F || !kWiden, "an 8-bit cache has scales: a features instance");
  static_assert(!Q8 || kWiden, "an 8-bit Q is in the cache's codes");
  using Tile = DecodeTile<D, sizeof(TK), RING>;
  static_assert(!kWiden || Tile::kQInRegs, "load_q_frags8 fills a register array of D / 16 fragments");
  constexpr int BM = Tile::kBM, BN = Tile::kBN, NT = Tile::kThreads, S = Tile::kStages, KPW = Tile::kKeysPerWarp;
  extern __shared__ __align__(128) unsigned char smem[];

  constexpr int DS = Tile::kDS;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kw = warp % Tile::kKeyWarps, ds = warp / Tile::kKeyWarps;  // key slice, column half
  const int split = blockIdx.x;
  const int kvh = blockIdx.y % p.kv_heads;
  const int mt = blockIdx.y / p.kv_heads;
  const int seq = blockIdx.z;
  const int group = p.heads / p.kv_heads;
  const int q_start = p.cu_seqlens_q[seq];
  const int q_len = p.cu_seqlens_q[seq + 1] - q_start;
  const int kv_len = p.seqused_k[seq];
  const int rows_valid = q_len * group;
  const int r0 = mt * BM;
  if (r0 >= rows_valid) return;
  // Keys each row sees, built where used: p.causal is then read at each use (held in a register, it changes the
  // kernel's schedule).
  auto vis = [&] {
    return F ? device::Visibility(q_len, kv_len, p.causal, p.top_left, p.features.window_left,
                                  p.features.window_right)
             : device::Visibility(q_len, kv_len, p.causal, p.top_left, -1, -1);
  };
  const int32_t* table_row = p.block_table + device::block_table_row_offset(seq, p.block_table_stride);

  // Keys the tile's rows can see (from a sliding window's first tile); this split's share of the tiles.
  const int last_q = (min(r0 + BM, rows_valid) - 1) / group;
  const int n_end = vis().visible_end(last_q);
  const int mask_from = vis().visible_end_packed(r0, group);
  const int n_tiles = (n_end + BN - 1) / BN;
  const int t_first = F ? vis().first_visible(r0 / group) / BN : 0;
  const int per_split = (max(0, n_tiles - t_first) + splits - 1) / splits;
  const int t_begin = t_first + split * per_split;
  const int t_end = min(n_tiles, t_begin + per_split);

  const uint32_t sq = smem_u32(smem);
  auto stage_k = [&](int st) { return sq + Tile::kQBytes + st * 2 * Tile::kTileBytes; };
  auto q_row = [&](int r) -> int64_t {
    const int pr = r0 + r;
    if (pr >= rows_valid) return -1;
    return (q_start + pr / group) * p.q_stride_token + (kvh * group + pr % group) * p.q_stride_head;
  };
  if constexpr (Q8) load_q_codes<D, BM, NT>(sq + Tile::kQBytes / 2, p, q_row);
  else load_q_tile<T, D, BM, NT>(sq, p, q_row);
  cp_async_commit();
  const device::PageDivisor pd(p.block_size);
  KvTileRows<TK, D, BN, NT> rows;  // the table entries of the next tile to load
  rows.fetch(table_row, pd, t_begin * BN, kv_len);
#pragma unroll
  for (int st = 0; st < S - 1; ++st) {
    if (t_begin + st < t_end) {
      rows.load(stage_k(st), stage_k(st) + Tile::kTileBytes, p, pd, kvh, (t_begin + st) * BN, kv_len);
      rows.fetch(table_row, pd, (t_begin + st + 1) * BN, kv_len);
    }
    cp_async_commit();
  }

  const float c = softmax_c<F>(p);
  const int my_row[2] = {r0 + lane / 4, r0 + lane / 4 + 8};
  const RowFeatures feats(p, vis(), {my_row[0] < rows_valid ? my_row[0] / group : -1,
                                     my_row[1] < rows_valid ? my_row[1] / group : -1},
                          {kvh * group + my_row[0] % group, kvh * group + my_row[1] % group});
  float o[DS / 8][4];
#pragma unroll
  for (int d = 0; d < DS / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  uint32_t qf[Tile::kQInRegs ? D / 16 : 1][4];

  for (int t = t_begin; t < t_end; ++t) {
    const int j = t - t_begin;
    // Tile t + S - 1 is issued before tile t is waited for, into tile t - 1's stage: S tiles in flight during the
    // wait, not S - 1, for one more barrier per tile.
    if (j > 0) __syncthreads();  // every warp is done with tile t - 1
    if (t + S - 1 < t_end) {
      const uint32_t k_next = stage_k((j + S - 1) % S);
      rows.load(k_next, k_next + Tile::kTileBytes, p, pd, kvh, (t + S - 1) * BN, kv_len);
      if (t + S < t_end) rows.fetch(table_row, pd, (t + S) * BN, kv_len);
    }
    cp_async_commit();
    cp_async_wait<S - 1>();
    __syncthreads();  // tile t (and Q) visible
    if constexpr (kWiden) {
      if (j == 0) {  // the Q tile becomes the image of its fp16 fragments (every warp's are the same)
        if constexpr (Q8) widen_q_codes<KV, D, BM, NT>(sq);
        load_q_frags8<Q8 ? DType::f16 : DT, D>(qf, sq, 0, lane);
        __syncthreads();
        if (warp == 0) store_q_frags8<D>(sq, qf, lane);
        __syncthreads();
      }
    } else if constexpr (Tile::kQInRegs) {
      if (j == 0) load_q_frags<D>(qf, sq, 0, lane);
    }
    const uint32_t sk = stage_k(j % S), sv = sk + Tile::kTileBytes;
    const int n0 = t * BN + kw * KPW;  // this warp's keys

    float s[KPW / 8][4];
    if constexpr (kWiden) {
      qk_tile8<KV, D, KPW / 8>(s, sq, sk, kw * KPW, lane);
    } else {
      qk_tile<DT, D, KPW / 8, Tile::kQInRegs>(s, qf, sq, 0, sk, kw * KPW, lane);
    }
    if constexpr (F) {
      feats.apply(s, n0, lane);
    } else if (n0 + KPW > mask_from) {
#pragma unroll
      for (int n = 0; n < KPW / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = n0 + n * 8 + 2 * (lane % 4) + (e & 1);
          const int qi = (r0 + lane / 4 + 8 * (e >> 1)) / group;
          if (col >= vis().visible_end(qi)) s[n][e] = -INFINITY;
        }
      }
    }
    online_softmax<KPW / 8, DS / 8>(s, m, l, o, c);
    if constexpr (kWiden) {
      pv_tile8<KV, D, KPW / 8, DS>(o, s, sv, kw * KPW, lane, ds * DS / 16);
    } else {
      pv_tile<DT, D, KPW / 8, DS>(o, s, sv, kw * KPW, lane, ds * DS / 8);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline stages become the merge buffer

  // Merge the key slices' states: per row max M, sum L = sum_w l_w 2^((m_w - M) c), O = sum_w o_w 2^((m_w - M) c).
  // Both column halves of a slice hold the same m and l; the first publishes them.
  constexpr int KW = Tile::kKeyWarps;
  float* so = reinterpret_cast<float*>(smem + Tile::kQBytes);  // [key warps][BM][kOPitch]
  float* sm = so + KW * BM * Tile::kOPitch;                     // [key warps][BM]
  float* sl = sm + KW * BM;                                     // [key warps][BM]
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float lsum = quad_sum(l[r]);
    if (lane % 4 == 0 && ds == 0) {
      sm[kw * BM + lane / 4 + 8 * r] = m[r];
      sl[kw * BM + lane / 4 + 8 * r] = lsum;
    }
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = lane / 4 + 8 * r;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < KW; ++w) mx = fmaxf(mx, sm[w * BM + row]);
    const float f = m[r] == -INFINITY ? 0.f : exp2_approx((m[r] - mx) * c);
    float* dst = so + (kw * BM + row) * Tile::kOPitch + ds * DS;
#pragma unroll
    for (int d = 0; d < DS / 8; ++d) {
#pragma unroll
      for (int e = 0; e < 2; ++e) dst[kWiden ? o_col8(d, e, lane) : d * 8 + 2 * (lane % 4) + e] = o[d][2 * r + e] * f;
    }
  }
  __syncthreads();

  // NT threads x (BM rows x D columns): thread -> row tid / kTpr, kCols consecutive columns.
  constexpr int kTpr = NT / BM;  // threads per row
  constexpr int kCols = D / kTpr;
  const int row = threadIdx.x / kTpr;
  const int col0 = (threadIdx.x % kTpr) * kCols;
  const int pr = r0 + row;
  const bool row_ok = pr < rows_valid;
  float mx = -INFINITY;
#pragma unroll
  for (int w = 0; w < KW; ++w) mx = fmaxf(mx, sm[w * BM + row]);
  float lsum = 0.f;
#pragma unroll
  for (int w = 0; w < KW; ++w) {
    const float mw = sm[w * BM + row];
    // An empty slice has l == 0; a NaN score left m at -inf and l NaN, which must reach the output.
    if (sl[w * BM + row] != 0.f) lsum += sl[w * BM + row] * exp2_approx((mw - mx) * c);
  }
  const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
  const DecodeRow out_row(q_start, row_ok ? pr : 0, group, kvh);
  float acc[kCols];
#pragma unroll
  for (int i = 0; i < kCols; ++i) {
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < KW; ++w) v += so[(w * BM + row) * Tile::kOPitch + col0 + i];
    acc[i] = v * inv;
  }
  // Base 2, the row's (merged) scores; -inf only for a row that saw no key, so a NaN reaches the merge.
  float lse2 = lsum == 0.f ? -INFINITY : mx * c + __log2f(lsum);
  if (splits > 1) {
    // Publish; the separate merge kernel takes it from there, else merge by groups of splits
    // (decode_merge.cuh) and the CTA that merges last writes the output.
    const SplitSlots<D> w(p, splits, merge_group, seq * gridDim.y + blockIdx.y);
    const int64_t grow = static_cast<int64_t>(out_row.token()) * p.heads + out_row.head;
    auto row_g = [&](int r) -> int64_t {
      if (r0 + r >= rows_valid) return -1;
      const DecodeRow g(q_start, r0 + r, group, kvh);
      return static_cast<int64_t>(g.token()) * p.heads + g.head;
    };
    const bool first_of_row = row_ok && threadIdx.x % kTpr == 0;
    if (row_ok) w.publish(split, grow, col0, first_of_row, acc, lse2);
    if (merge == DecodeMerge::separate) return;
    const int G = merge_group;
    const int groups = decode_merge_groups(splits, G);
    const int gfirst = split / G * G, gcount = min(G, splits - gfirst);
    if (!last_to_arrive(w.counters + split / G, gcount)) return;
    float* s_lse = so;  // the merge buffer is free: acc is in registers
    lse2 = merge_slots<D, BM, NT>(w, gfirst, gcount, 1, s_lse, row, col0, row_g, acc);
    if (groups > 1) {
      if (row_ok) w.publish(gfirst, grow, col0, first_of_row, acc, lse2);
      if (!last_to_arrive(w.counters + groups, groups)) return;
      lse2 = merge_slots<D, BM, NT>(w, 0, groups, G, s_lse, row, col0, row_g, acc);
    }
  }
  if (!row_ok) return;
  if (threadIdx.x % kTpr == 0) store_decode_lse(p, out_row, lse2);
  store_decode_row<DT, F>(p, out_row, col0, acc, lse2);
}

}  // namespace dev

template <DType DT, int D, DType KV, bool F, bool Q8, int RING>
void launch_decode_ring(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream) {
  using Tile = DecodeTile<D, static_cast<int>(dtype_bytes(KV)), RING>;
  auto* kernel = &dev::decode_kernel<DT, D, KV, F, Q8, RING>;
  static const bool configured = [&] {
    ATTNBENCH_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes));
    return true;
  }();
  (void)configured;
  const dim3 grid(lp.grid_x, lp.grid_y, lp.grid_z);
  kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(p, lp.splits, lp.merge_group, lp.merge);
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
  if (lp.splits > 1 && lp.merge == DecodeMerge::separate) launch_decode_merge<DT, D, F>(p, lp, stream);
}

// The plan's ring (decode_stages): the deep one is compiled where it fits (decode_ring_fits).
template <DType DT, int D, DType KV, bool F, bool Q8>
void launch_decode(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream) {
  constexpr int kvb = static_cast<int>(dtype_bytes(KV));
  if constexpr (decode_ring_fits(D, kvb, kDecodeDeepStages)) {
    if (lp.decode_stages == kDecodeDeepStages)
      return launch_decode_ring<DT, D, KV, F, Q8, kDecodeDeepStages>(p, lp, stream);
  }
  if (lp.decode_stages != kDecodeStages)
    throw std::invalid_argument("cuda.unified 3D: no ring of " + std::to_string(lp.decode_stages) +
                                " slots at head size " + std::to_string(D));
  launch_decode_ring<DT, D, KV, F, Q8, kDecodeStages>(p, lp, stream);
}

#define ATTNBENCH_INSTANTIATE_DECODE(DT, D, KV, F, Q8) \
  template void launch_decode<DT, D, KV, F, Q8>(const AttentionParams&, const UnifiedLaunchPlan&, cudaStream_t);

}  // namespace attnbench::cuda
