// The wide prefill kernel's shapes and shared memory (prefill_wide.cuh): threads and register budgets per role, the
// 128B-swizzled tile layout, and where Q, the K and V rings, their barriers and the scratch slots sit.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/heuristics.hpp"
#include "cuda/mbarrier.cuh"
#include "cuda/mma_sm80.cuh"
#include "cuda/wide_work.cuh"

namespace attnbench::cuda {

template <int D, int WG, bool TMA>
struct WideTile {
  static_assert(wide_block_n(D) > 0, "the wide kernel exists for head sizes 64, 128, 256");
  static_assert(WG >= 1 && WG <= wide_max_wgs(D), "consumer warpgroups: 1..wide_max_wgs(D)");
  static constexpr int kThreads = 128 * (WG + 1);
  static constexpr int kBM = kWideRowsPerWg * WG;
  static constexpr int kBN = wide_block_n(D);
  // Every tile is [D/64][rows][64] 16-bit elements (128-byte rows, 16-byte chunks XOR-swizzled with row % 8) on a
  // 1024-byte boundary: what a 128B-swizzle descriptor with base offset 0 reads, and what a SWIZZLE_128B TMA box
  // of 64 x 64 writes. Shared memory: Q | K ring | V ring | barriers | scratch (heuristics.hpp, wide_smem_bytes).
  static constexpr int kQBytesPerWg = kWideRowsPerWg * D * 2;
  static constexpr int kTileBytes = kBN * D * 2;
  static constexpr int kQBytes = kQBytesPerWg * WG;
};

// Register budgets per role (setmaxnreg, WG >= 2), set by the kernel for both roles. setmaxnreg moves registers
// within the CTA's pool, what the launch gave it (its threads x the kernel's count, 168 at 384 threads), so the roles'
// budgets must sum within that pool or an increase waits forever. The producer keeps 56: an 8-bit cache's producer
// widens codes in all 128 threads, and the 16-bit kernels were measured with this split (their schedules move with
// it). Beside 3 consumer warpgroups it gets 32. A d256 features consumer holds O (128 fp32 registers), S, the P of
// the tile before it and the features' row state: at 224 (or 232) it spills in its main loop, so the 16-bit producer
// gives it 240 and keeps 24, where the gather and the one TMA warp fit (gather_kv_tile, block_table_row_offset,
// WideGeom).
template <int D, int WG, bool F, bool Codes>
struct WideRegs {
  static constexpr int kThreads = 128 * (WG + 1);
  static constexpr int kPool = kThreads * (65536 / kThreads / 8 * 8);  // __launch_bounds__(kThreads, 1)
  static constexpr int kProducer = WG == 3 ? 32 : D == 256 && F && !Codes ? 24 : 56;
  static constexpr int kConsumer = std::min(240, (kPool - 128 * kProducer) / (128 * WG) / 8 * 8);
  static_assert(128 * (kProducer + WG * kConsumer) <= kPool, "the roles' budgets fit the CTA's register pool");
};

namespace dev {

// Byte offset of 16-byte chunk `ch` (of D/8) in row `row` of a [D/64][rows][64] swizzled tile.
template <int ROWS>
__device__ __forceinline__ uint32_t wide_swz(int row, int ch) {
  return static_cast<uint32_t>((ch >> 3) * (ROWS * 128) + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
}

// One CTA's shared memory from the first 1024-byte boundary of the dynamic allocation: q_bufs Q tiles of WG
// warpgroups, the K and V rings of `stages` slots, FULL / EMPTY barriers per slot and ring, 8 scratch bytes per warp
// (the kernel lays it out: computed in a function of its own, the addresses come out of nvcc in another order and
// ptxas allocates some kernels differently). K8: K's slots hold the 8-bit codes the FP8 SDPA's wgmma reads, half a
// 16-bit tile (wide_k_slot_bytes); V's slots keep a 16-bit tile's bytes (V^T and the codes it is made from).
template <int D, int WG, bool TMA, bool K8 = false>
struct WideSmem {
  using Tile = WideTile<D, WG, TMA>;
  static constexpr int kKSlotBytes = wide_k_slot_bytes(D, K8);
  static_assert(kKSlotBytes % 1024 == 0, "every slot on a 1024-byte boundary (the 128-byte swizzle's period)");
  uint32_t base;        // shared-memory address of Q tile 0
  unsigned char* smem;  // the same byte, generic (TMA destinations)
  uint32_t k_ring, v_ring;
  uint64_t* full_k;
  uint64_t* full_v;
  uint64_t* empty_k;
  uint64_t* empty_v;
  uint64_t* q_full;  // Q by TMA: Q tile qb of warpgroup wg landed (q_bar)
  uint32_t scratch;  // kWideScratchBytes

  __device__ __forceinline__ uint32_t k_slot(int slot) const { return k_ring + slot * kKSlotBytes; }
  __device__ __forceinline__ uint32_t v_slot(int slot) const { return v_ring + slot * Tile::kTileBytes; }
  // Consumer warpgroup wg's 64 rows of Q tile qb.
  __device__ __forceinline__ uint32_t q_tile(int qb, int wg) const {
    return base + qb * Tile::kQBytes + wg * Tile::kQBytesPerWg;
  }

  __device__ __forceinline__ uint64_t* q_bar(int qb, int wg) const { return &q_full[qb * WG + wg]; }

  // Thread 0 initialises the ring and Q barriers; every thread waits for it.
  __device__ __forceinline__ void init_barriers(int stages) const {
    if (threadIdx.x == 0) {
      for (int i = 0; i < 2 * WG; ++i) mbar_init(&q_full[i], 1);  // the one arrive.expect_tx of its TMA boxes
      for (int s = 0; s < stages; ++s) {
        // TMA: one arrive.expect_tx (or the tail tile's one arrival); cp.async: every producer thread once its data landed
        mbar_init(&full_k[s], TMA ? 1 : 128);
        mbar_init(&full_v[s], TMA ? 1 : 128);
        mbar_init(&empty_k[s], WG);  // one thread per consumer warpgroup, after its wgmmas finished reading
        mbar_init(&empty_v[s], WG);
      }
      mbar_fence_init();
    }
    __syncthreads();
  }
};

}  // namespace dev
}  // namespace attnbench::cuda
