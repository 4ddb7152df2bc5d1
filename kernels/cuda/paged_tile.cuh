// cp.async loaders of the narrow regime: a K/V tile gathered through the block table and a tile of Q rows, both
// into swizzled shared memory (see swz). Rows past the sequence are zero-filled, never read.
#pragma once
#include <cstdint>

#include "attnbench/attention.hpp"
#include "cuda/mma_sm80.cuh"

namespace attnbench::cuda::dev {

// Keys [n0, n0 + BN) of one (sequence, kv head) into sk / sv ([BN][D] swizzled). K and V share the address math.
template <typename T, int D, int BN, int NT>
__device__ __forceinline__ void load_kv_tile(uint32_t sk, uint32_t sv, const AttentionParams& p,
                                             const int32_t* table_row, int kvh, int n0, int kv_len) {
  constexpr int kCpr = D / 8;  // 16-byte chunks per row
  static_assert(NT % kCpr == 0 && (BN * kCpr) % NT == 0, "threads must tile the K/V tile evenly");
  constexpr int kRowStep = NT / kCpr;
  const T* k = static_cast<const T*>(p.k_cache);
  const T* v = static_cast<const T*>(p.v_cache);
  const int ch = threadIdx.x % kCpr;
  const int64_t head_off = static_cast<int64_t>(kvh) * p.kv_stride_head + ch * 8;
#pragma unroll
  for (int i = 0; i < BN / kRowStep; ++i) {
    const int row = threadIdx.x / kCpr + i * kRowStep;
    const int tok = n0 + row;
    const bool valid = tok < kv_len;
    int64_t off = 0;
    if (valid) {
      const int blk = tok / p.block_size;
      const int in_blk = tok - blk * p.block_size;
      off = static_cast<int64_t>(__ldg(table_row + blk)) * p.kv_stride_block +
            static_cast<int64_t>(in_blk) * p.kv_stride_token + head_off;
    }
    const uint32_t dst = swz<D>(row, ch);
    cp_async_16(sk + dst, k + off, valid);
    cp_async_16(sv + dst, v + off, valid);
  }
}

// ROWS query rows into sq ([ROWS][D] swizzled). row_src(r) returns the element offset of row r in Q or -1 for a
// padding row (zero-filled).
template <typename T, int D, int ROWS, int NT, typename RowSrc>
__device__ __forceinline__ void load_q_tile(uint32_t sq, const AttentionParams& p, RowSrc row_src) {
  constexpr int kCpr = D / 8;
  static_assert((ROWS * kCpr) % NT == 0, "threads must tile the Q tile evenly");
  const T* q = static_cast<const T*>(p.q);
#pragma unroll
  for (int i = 0; i < ROWS * kCpr / NT; ++i) {
    const int c = threadIdx.x + i * NT;
    const int row = c / kCpr, ch = c % kCpr;
    const int64_t off = row_src(row);
    cp_async_16(sq + swz<D>(row, ch), q + (off < 0 ? 0 : off + ch * 8), off >= 0);
  }
}

}  // namespace attnbench::cuda::dev
