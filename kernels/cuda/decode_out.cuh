// The 3D decode's output row, from its merged (or only) split: the row's LSE to AttentionParams::lse, the
// features' row factor (a sink's share, v_scale), the output gate and the 16-bit store. One rule for the decode
// kernel (one split, or its fused merge) and the separate merge kernel (decode_merge_kernel.cuh).
#pragma once
#include <cuda_runtime.h>

#include "attnbench/attention.hpp"
#include "common/device/score_mods.hpp"
#include "cuda/feature_tile.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/storage.cuh"
#include "cuda/warp_tile.cuh"

namespace attnbench::cuda::dev {

// Packed row pr of a (sequence, kv head) CTA column: query qi = pr / group of the sequence that starts at packed
// token q_start, query head kvh * group + pr % group.
struct DecodeRow {
  int q_start, qi, head;
  __device__ __forceinline__ DecodeRow(int q_start_, int pr, int group, int kvh)
      : q_start(q_start_), qi(pr / group), head(kvh * group + pr % group) {}
  __device__ __forceinline__ int token() const { return q_start + qi; }
};

// The row's LSE to AttentionParams::lse (lse2: base 2, of its keys' scores); one thread of the row calls it.
__device__ __forceinline__ void store_decode_lse(const AttentionParams& p, const DecodeRow& r, float lse2) {
  if (p.lse != nullptr)
    p.lse[device::lse_offset(p.lse_stride_start, p.lse_stride_row, p.lse_stride_head, r.q_start, r.qi, r.head)] =
        device::row_lse(p.features.sinks, r.head, lse2);
}

// KC normalised columns from col0 of the row (KC even), scaled by the features' row factor, gated, stored.
template <DType DT, bool F, int KC>
__device__ __forceinline__ void store_decode_row(const AttentionParams& p, const DecodeRow& r, int col0,
                                                 float (&acc)[KC], float lse2) {
  using T = typename StorageOf<DT>::type;
  if constexpr (F) {
    const float f = row_out_factor(p, r.head, lse2);
#pragma unroll
    for (int i = 0; i < KC; ++i) acc[i] *= f;
  }
  T* dst = static_cast<T*>(p.out) + r.token() * p.o_stride_token + r.head * p.o_stride_head + col0;
  if (p.epilogue.gate != nullptr) {
    const T* g = static_cast<const T*>(p.epilogue.gate) + r.token() * p.epilogue.gate_stride_token +
                 r.head * p.epilogue.gate_stride_head + col0;
#pragma unroll
    for (int i = 0; i < KC; i += 2) {
      const float2 sg = sigmoid2<DT>(*reinterpret_cast<const uint32_t*>(g + i));
      *reinterpret_cast<uint32_t*>(dst + i) = pack2<DT>(acc[i] * sg.x, acc[i + 1] * sg.y);
    }
  } else {
#pragma unroll
    for (int i = 0; i < KC; i += 2) *reinterpret_cast<uint32_t*>(dst + i) = pack2<DT>(acc[i], acc[i + 1]);
  }
}

}  // namespace attnbench::cuda::dev
