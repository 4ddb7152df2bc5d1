// The 3D decode's split merge, in the kernel that computes the splits. Each split CTA publishes its normalised
// fp32 partial and base-2 LSE; the last CTA of each group of `merge_group` consecutive splits to arrive (an atomic
// counter, the threadFenceReduction pattern) merges the group; with more than one group it publishes the merged
// partial in the group's first slot and the last group to arrive merges the groups. Two levels keep any one CTA
// from reading every split's bytes alone where the partials are large (d256 B1: 64 of 16 KB; decode_merge_group).
// ATTNBENCH_3D_MERGE=fused; the separate merge kernel (decode_merge_kernel.cuh) reuses SplitSlots' layout.
#pragma once
#include <cuda_runtime.h>

#include "attnbench/attention.hpp"
#include "cuda/heuristics.hpp"
#include "cuda/mma_sm80.cuh"

namespace attnbench::cuda::dev {

// The workspace of one (sequence, kv head x row tile) CTA column: decode_workspace_bytes' layout.
template <int D>
struct SplitSlots {
  float* lse;     // [splits][rows_total]
  float* o;       // [splits][rows_total][D]
  int* counters;  // decode_merge_counters(splits, group) of this CTA column
  int64_t rows_total;

  __device__ SplitSlots(const AttentionParams& p, int splits, int group, int column) {
    rows_total = static_cast<int64_t>(p.total_q) * p.heads;
    lse = static_cast<float*>(p.workspace);
    o = lse + decode_lse_floats(splits, rows_total);
    counters = reinterpret_cast<int*>(o + splits * rows_total * D) +
               static_cast<int64_t>(column) * decode_merge_counters(splits, group);
  }
  // Row grow's KC columns from col0 of slot `slot`, and its LSE (written by the row's first thread).
  template <int KC>
  __device__ void publish(int slot, int64_t grow, int col0, bool first_of_row, const float (&acc)[KC],
                          float row_lse) const {
    if (first_of_row) lse[slot * rows_total + grow] = row_lse;
    float* dst = o + (slot * rows_total + grow) * D + col0;
#pragma unroll
    for (int i = 0; i < KC; i += 4)
      *reinterpret_cast<float4*>(dst + i) = make_float4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3]);
  }
};

// Counts this CTA's arrival at counter (after its published writes are fenced); true for the last of n, which
// resets the counter to 0 for the next call (graph replays) and sees every other arrival's writes.
__device__ __forceinline__ bool last_to_arrive(int* counter, int n) {
  __shared__ int s_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    s_last = atomicAdd(counter, 1) == n - 1;
    if (s_last) *counter = 0;
  }
  __syncthreads();
  if (!s_last) return false;
  __threadfence();
  return true;
}

// acc (KC columns from col0 of this thread's row) = the LSE-weighted merge of slots first + k * step, k < count;
// returns the merged row's LSE. s_lse: BM x count floats of shared memory (not read by anyone else meanwhile).
// row_g(r) is the global row of CTA row r, or -1 for a padding row. Partials are read through L2 (__ldcg: other
// CTAs wrote them), kBatch slots' loads in flight at once.
template <int D, int BM, int NT, int KC, typename RowG>
__device__ float merge_slots(const SplitSlots<D>& w, int first, int count, int step, float* s_lse, int row,
                             int col0, RowG row_g, float (&acc)[KC]) {
  __syncthreads();  // s_lse's last readers are done
  for (int i = threadIdx.x; i < BM * count; i += NT) {
    const int r = i / count, k = i - r * count;
    const int64_t g = row_g(r);
    s_lse[i] = g < 0 ? -INFINITY : __ldcg(w.lse + (first + k * step) * w.rows_total + g);
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < KC; ++i) acc[i] = 0.f;
  const int64_t grow = row_g(row);
  if (grow < 0) return -INFINITY;
  const float* my_lse = s_lse + row * count;
  float lmax = -INFINITY;
  for (int k = 0; k < count; ++k) lmax = isnan(my_lse[k]) || my_lse[k] > lmax ? my_lse[k] : lmax;  // NaN sticks
  if (lmax == -INFINITY) return -INFINITY;
  constexpr int kVec = KC / 4;
  constexpr int kBatch = kVec >= 4 ? 4 : 8;
  float wsum = 0.f;
  for (int k0 = 0; k0 < count; k0 += kBatch) {
    float4 v[kBatch][kVec];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (k0 + u >= count) break;
      const float4* src =
          reinterpret_cast<const float4*>(w.o + ((first + (k0 + u) * step) * w.rows_total + grow) * D + col0);
#pragma unroll
      for (int i = 0; i < kVec; ++i) v[u][i] = __ldcg(src + i);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (k0 + u >= count) break;
      const float wt = exp2_approx(my_lse[k0 + u] - lmax);
      wsum += wt;
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        acc[4 * i] += wt * v[u][i].x;
        acc[4 * i + 1] += wt * v[u][i].y;
        acc[4 * i + 2] += wt * v[u][i].z;
        acc[4 * i + 3] += wt * v[u][i].w;
      }
    }
  }
  const float winv = wsum > 0.f ? 1.f / wsum : 0.f;
#pragma unroll
  for (int i = 0; i < KC; ++i) acc[i] *= winv;
  return lmax + __log2f(wsum);  // wsum >= 1 (the largest slot's weight) unless NaN
}

}  // namespace attnbench::cuda::dev
