// The 3D decode's separate split merge (ATTNBENCH_3D_MERGE=separate): a second launch, a programmatic dependent of
// the decode launch, so its CTAs are resident while the splits run and are released (griddepcontrol.wait) once
// the decode grid has finished and its partials are visible. Thread (x, y, z) of a block takes four columns of
// packed row z and splits y, y + Ts, ...: kDecodeMergeLoads of them loaded at once, each LSE-weighted into a running
// state (max m, weight w, sum a); the Ts states of a column meet in shared memory. Every partial byte is read once,
// by many CTAs at once, where the fused merge (decode_merge.cuh) reads a column's partials in the one CTA that
// finishes last. A NaN LSE sticks, as there; an empty split (LSE -inf) weighs nothing.
#pragma once
#include <cuda_runtime.h>

#include "attnbench/attention.hpp"
#include "cuda/decode_merge.cuh"
#include "cuda/decode_out.cuh"
#include "cuda/heuristics.hpp"
#include "cuda/mma_sm80.cuh"
#include "cuda/runtime.hpp"

namespace attnbench::cuda {
namespace dev {

// A running merge state: the largest LSE m (NaN sticks), w = sum of 2^(lse - m), a = sum of 2^(lse - m) o.
struct MergeState {
  float m = -INFINITY, w = 0.f;
  float4 a = make_float4(0.f, 0.f, 0.f, 0.f);

  // Folds in n partials (lse[u], o[u]); lse -inf is an empty split.
  template <int N>
  __device__ __forceinline__ void fold(const float (&lse)[N], const float4 (&o)[N]) {
    float nm = m;
#pragma unroll
    for (int u = 0; u < N; ++u) nm = isnan(lse[u]) || lse[u] > nm ? lse[u] : nm;
    if (nm == -INFINITY) return;  // nothing seen yet
    const float f = exp2_approx(m - nm);  // 0 from an empty state
    w *= f;
    a = make_float4(a.x * f, a.y * f, a.z * f, a.w * f);
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const float e = exp2_approx(lse[u] - nm);  // 0 for an empty split
      w += e;
      a = make_float4(a.x + e * o[u].x, a.y + e * o[u].y, a.z + e * o[u].z, a.w + e * o[u].w);
    }
    m = nm;
  }
  // Folds in another thread's state.
  __device__ __forceinline__ void merge(const MergeState& o) {
    const float nm = isnan(o.m) || o.m > m ? o.m : m;
    if (nm == -INFINITY) return;  // both empty
    const float f = exp2_approx(m - nm), g = exp2_approx(o.m - nm);
    w = w * f + o.w * g;
    a = make_float4(a.x * f + o.a.x * g, a.y * f + o.a.y * g, a.z * f + o.a.z * g, a.w * f + o.a.w * g);
    m = nm;
  }
};

template <DType DT, int D, bool F>
__global__ void __launch_bounds__(kDecodeMergeThreads) decode_merge_kernel(const __grid_constant__ AttentionParams p,
                                                                           int splits) {
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the decode grid's partials are written and visible
  const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z, TS = blockDim.y;
  const int kvh = blockIdx.y % p.kv_heads, mt = blockIdx.y / p.kv_heads, seq = blockIdx.z;
  const int group = p.heads / p.kv_heads;
  const int q_start = p.cu_seqlens_q[seq];
  const int tile_row = blockIdx.x * blockDim.z + tz;  // of the 16-row tile mt
  const int pr = mt * kDecodeRowsPerCta + tile_row;   // packed row of the CTA column
  // No early return: a barrier follows.
  const bool valid = tile_row < kDecodeRowsPerCta && pr < (p.cu_seqlens_q[seq + 1] - q_start) * group;
  const DecodeRow row(q_start, pr, group, kvh);
  const SplitSlots<D> w(p, splits, splits, 0);
  const int64_t grow = static_cast<int64_t>(row.token()) * p.heads + row.head;

  MergeState st;
  for (int s0 = ty; valid && s0 < splits; s0 += kDecodeMergeLoads * TS) {
    float lse[kDecodeMergeLoads];
    float4 o[kDecodeMergeLoads];
#pragma unroll
    for (int u = 0; u < kDecodeMergeLoads; ++u) {
      const int s = s0 + u * TS;
      lse[u] = s < splits ? __ldcg(w.lse + s * w.rows_total + grow) : -INFINITY;
      o[u] = s < splits ? __ldcg(reinterpret_cast<const float4*>(w.o + (s * w.rows_total + grow) * D) + tx)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    st.fold(lse, o);
  }

  // The Ts states of each (row, four columns) meet: thread y == 0 folds the others into its own.
  __shared__ MergeState s_st[kDecodeMergeThreads];
  s_st[(tz * TS + ty) * blockDim.x + tx] = st;
  __syncthreads();
  if (!valid || ty != 0) return;
  for (int y = 1; y < TS; ++y) st.merge(s_st[(tz * TS + y) * blockDim.x + tx]);
  float acc[4] = {0.f, 0.f, 0.f, 0.f}, lse2 = -INFINITY;
  if (st.m != -INFINITY) {  // a row whose splits all saw no key keeps 0 and -inf
    const float inv = 1.f / st.w;  // w >= 1 unless NaN: the largest split's weight
    acc[0] = st.a.x * inv, acc[1] = st.a.y * inv, acc[2] = st.a.z * inv, acc[3] = st.a.w * inv;
    lse2 = st.m + __log2f(st.w);
  }
  if (tx == 0) store_decode_lse(p, row, lse2);
  store_decode_row<DT, F>(p, row, 4 * tx, acc, lse2);
}

}  // namespace dev

// After launch_decode's kernel with lp.merge == separate: the merge as its programmatic dependent.
template <DType DT, int D, bool F>
void launch_decode_merge(const AttentionParams& p, const UnifiedLaunchPlan& lp, cudaStream_t stream) {
  const DecodeMergeBlock b = decode_merge_block(D, lp.splits);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((kDecodeRowsPerCta + b.rows - 1) / b.rows, lp.grid_y, lp.grid_z);
  cfg.blockDim = dim3(D / 4, b.split_threads, b.rows);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  ATTNBENCH_CUDA_CHECK(cudaLaunchKernelEx(&cfg, &dev::decode_merge_kernel<DT, D, F>, p, lp.splits));
}

}  // namespace attnbench::cuda
