// cp.async loaders of the narrow regime: a K/V tile gathered through the block table and a tile of Q rows, both
// into swizzled shared memory (see swz). Rows past the sequence are zero-filled, never read.
#pragma once
#include <cstdint>

#include "attnbench/attention.hpp"
#include "common/device/paged.hpp"
#include "cuda/mma_sm80.cuh"

namespace attnbench::cuda::dev {

// One thread's rows of a K/V tile of BN keys gathered by NT threads (16-byte chunks, kRowStep rows apart) and the
// physical blocks the block table gives them: fetch() reads the table entries of a tile, load() issues the tile's
// cp.async from the entries fetched. A pipeline fetches a tile ahead, so no cp.async waits on a table read.
// Tokens at or past kv_len are zero-filled and read no table entry past the sequence's. 16-bit rows land swizzled
// (swz), 8-bit codes as swizzled [BN][D] bytes (swz8).
template <typename T, int D, int BN, int NT>
struct KvTileRows {
  static constexpr int kElems = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte chunk
  static constexpr int kCpr = D / kElems;                           // 16-byte chunks per row
  static_assert(NT % kCpr == 0 && (BN * kCpr) % NT == 0, "threads must tile the K/V tile evenly");
  static constexpr int kRowStep = NT / kCpr;
  static constexpr int kRows = BN / kRowStep;
  int32_t blk[kRows];

  __device__ __forceinline__ static int row(int i) { return static_cast<int>(threadIdx.x) / kCpr + i * kRowStep; }

  __device__ __forceinline__ void fetch(const int32_t* table_row, const device::PageDivisor& pd, int n0, int kv_len) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) blk[i] = __ldg(table_row + pd.page(max(0, min(n0 + row(i), kv_len - 1))));
  }

  // Keys [n0, n0 + BN) of kv head kvh into sk / sv ([BN][D] swizzled). K and V share the address math.
  __device__ __forceinline__ void load(uint32_t sk, uint32_t sv, const AttentionParams& p,
                                       const device::PageDivisor& pd, int kvh, int n0, int kv_len) const {
    const T* k = static_cast<const T*>(p.k_cache);
    const T* v = static_cast<const T*>(p.v_cache);
    const int ch = static_cast<int>(threadIdx.x) % kCpr;
    const int64_t head_off = static_cast<int64_t>(kvh) * p.kv_stride_head + ch * kElems;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int tok = n0 + row(i);
      const bool valid = tok < kv_len;
      const int64_t off = valid ? device::paged_offset(blk[i], pd.pos(tok).offset, p.kv_stride_block,
                                                       p.kv_stride_token) + head_off
                                : 0;
      uint32_t dst;
      if constexpr (sizeof(T) == 1) {
        dst = swz8<D>(row(i), ch);
      } else {
        dst = swz<D>(row(i), ch);
      }
      cp_async_16(sk + dst, k + off, valid);
      cp_async_16(sv + dst, v + off, valid);
    }
  }
};

// Keys [n0, n0 + BN) of one (sequence, kv head) into sk / sv, the table read and the loads at once.
template <typename T, int D, int BN, int NT>
__device__ __forceinline__ void load_kv_tile(uint32_t sk, uint32_t sv, const AttentionParams& p,
                                             const int32_t* table_row, int kvh, int n0, int kv_len) {
  const device::PageDivisor pd(p.block_size);
  KvTileRows<T, D, BN, NT> rows;
  rows.fetch(table_row, pd, n0, kv_len);
  rows.load(sk, sv, p, pd, kvh, n0, kv_len);
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

// An 8-bit Q's ROWS x D codes (the FP8 SDPA) as plain rows at dst, one cp.async per 16 codes (zeros past the rows
// row_src gives -1).
template <int D, int ROWS, int NT, typename RowSrc>
__device__ __forceinline__ void load_q_codes(uint32_t dst, const AttentionParams& p, RowSrc row_src) {
  constexpr int kCpr = D / 16;
  const uint8_t* q = static_cast<const uint8_t*>(p.q);
  for (int c = threadIdx.x; c < ROWS * kCpr; c += NT) {
    const int row = c / kCpr, ch = c % kCpr;
    const int64_t off = row_src(row);
    cp_async_16(dst + row * D + ch * 16, q + (off < 0 ? 0 : off + ch * 16), off >= 0);
  }
}

}  // namespace attnbench::cuda::dev
