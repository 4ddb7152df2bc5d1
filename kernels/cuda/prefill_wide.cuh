// 2D prefill, wide regime (sm_90a). A CTA = one producer warpgroup + WG consumer warpgroups of 64 query rows each. The
// producer (wide_producer.cuh) fills separate K and V rings (`stages` slots each, 128B-swizzled tiles, wide_layout.cuh)
// through the block table: one thread issuing TMA boxes (wide_kv_tma: 16-bit pages of 16, 32 or a multiple of 64
// tokens; V one tile behind K) or 128 threads gathering with cp.async (other block sizes). Consumers
// (wide_consumer.cuh): per unit, Q into their tile (one TMA box per 64-column slab where a warpgroup's rows are one,
// else the threads' cp.async), then the main loop
// (wide_mainloop.cuh): S = Q K^T by SS wgmma into registers, base-2 online softmax in registers, P converted to 16-bit
// in registers as the RS A operand of O += P V (V MN-major, trans-b); iteration t issues S(t) with P(t-1) V(t-1) (FA3's
// intra-warpgroup overlap); with WG >= 2 the warpgroups take turns issuing (named barriers), so one's softmax runs
// under another's wgmmas. K(t) is released as soon as S(t) is done, V(t-1) after P(t-1) V(t-1). Then the epilogue
// (wide_epilogue.cuh) through shared memory. Work (wide_work.cuh): one CTA per (q-tile, head tile, sequence), heaviest
// q-tiles first, or (persistent) one CTA per SM walking the same order in a snake or its list of the host's L2 walk
// (wide_walk.hpp), the rings and turn-taking running on across its tiles, the next unit's Q loaded into a second Q tile
// while the current one computes (where it fits). A head tile is one query head, or (GQA packing) several heads of one
// KV group sharing the tile's rows. An optional Q prologue (q_prologue.cuh) normalises and rotates Q in shared memory
// before the first wgmma reads it. Two things ptxas needs told, checked in the SASS (kernels/NOTES.md, the wide
// kernel): the warpgroup index is made warp-uniform (descriptors in uniform registers) and a shared store pins the P V
// wait after the softmax. A features instance (F) applies the attention features: a sliding window's first tile starts
// each unit's tiles, the scores are made final before the softmax (feature_tile.cuh), a sink scales the finished rows.
// An 8-bit cache (KV, d128, TMA) lands its codes in the slots and the producer warpgroup widens them there
// (wide_widen.cuh); the consumers are the 16-bit kernel's. With Q8 (the FP8 SDPA) Q is in the cache's codes too (d128
// and d256): S = Q K^T and O += P V run as 8-bit wgmma (K landed swizzled, V transposed by the producer, P rounded to
// e4m3 in registers).
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "attnbench/attention.hpp"
#include "cuda/heuristics.hpp"
#include "cuda/launch.hpp"
#include "cuda/runtime.hpp"
#include "cuda/tensor_map.hpp"
#include "cuda/wide_consumer.cuh"
#include "cuda/wide_layout.cuh"
#include "cuda/wide_producer.cuh"
#include "cuda/wide_widen.cuh"
#include "cuda/wide_work.cuh"

namespace attnbench::cuda {
namespace dev {

// Producer warpgroup: threads [0, 128); consumer warpgroup wg: threads [128 (wg + 1), 128 (wg + 2)).
template <DType DT, int D, int WG, bool TMA, bool F, DType KV, bool Q8>
__global__ void __launch_bounds__(128 * (WG + 1), 1)
    prefill_wide_kernel(const __grid_constant__ AttentionParams p, const WideLaunch w,
                        const __grid_constant__ CUtensorMap tmk, const __grid_constant__ CUtensorMap tmv,
                        const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmo) {
  using Tile = WideTile<D, WG, TMA>;
  constexpr bool kCodes = !is_16bit(KV);
  static_assert(!kCodes || (TMA && F), "an 8-bit cache lands by TMA and has scales: a features instance");
  static_assert(!Q8 || kCodes, "an 8-bit Q is in the cache's codes");
  const int S = w.stages;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  using Smem = WideSmem<D, WG, TMA, Q8>;
  const uint32_t k_ring = base + w.q_bufs * Tile::kQBytes;
  const uint32_t v_ring = k_ring + S * Smem::kKSlotBytes;
  uint64_t* full_k =
      reinterpret_cast<uint64_t*>(smem + w.q_bufs * Tile::kQBytes + S * (Smem::kKSlotBytes + Tile::kTileBytes));
  uint64_t* full_v = full_k + kWideMaxStages;
  uint64_t* empty_k = full_v + kWideMaxStages;
  uint64_t* empty_v = empty_k + kWideMaxStages;
  uint64_t* landed = empty_v + kWideMaxStages;  // 8-bit caches: a slot's codes landed
  uint64_t* q_full = landed + (kCodes ? kWideMaxStages : 0);
  const uint32_t scratch = smem_u32(q_full + 2 * WG);
  const Smem sm{base, smem, k_ring, v_ring, full_k, full_v, empty_k, empty_v, q_full, scratch};
  if constexpr (kCodes) {
    if (threadIdx.x == 0)
      for (int s = 0; s < S; ++s) mbar_init(&landed[s], 1);  // fenced and published by init_barriers
  }
  sm.init_barriers(S);
  const int32_t* block_table = p.block_table;
  using Regs = WideRegs<D, WG, F, kCodes>;
  if (threadIdx.x < 128) {
    if constexpr (WG >= 2) setmaxnreg_dec<Regs::kProducer>();
    if constexpr (kCodes) {
      wide_producer_codes<DT, KV, D, WG, F, Q8>(p, w, sm, landed, S, block_table, tmk, tmv);
    } else {
      wide_producer<D, WG, TMA, F>(p, w, sm, S, block_table, tmk, tmv);
    }
    return;
  }
  if constexpr (WG >= 2) setmaxnreg_inc<Regs::kConsumer>();
  wide_consumer<DT, D, WG, TMA, F, Q8 ? KV : DT>(p, w, sm, S, &tmq, &tmo);
}

}  // namespace dev

template <DType DT, int D, int WG, DType KV, bool F, bool Q8>
void launch_prefill_wide(const AttentionParams& p, const UnifiedLaunchPlan& lp, const KvTensorMaps* kv,
                         const QoTensorMaps* qo, cudaStream_t stream) {
  if (lp.wide_stages < 2 || lp.wide_stages > kWideMaxStages)
    throw std::invalid_argument("cuda.unified wide: " + std::to_string(lp.wide_stages) + " ring slots (2.." +
                                std::to_string(kWideMaxStages) + ")");
  const int smem = wide_smem_bytes(D, WG, lp.wide_stages, lp.wide_q_bufs, Q8);
  if (smem > kWideSmemLimit)
    throw std::invalid_argument("cuda.unified wide: " + std::to_string(smem) + " bytes of shared memory");
  if ((lp.wide_kv_tma && kv == nullptr) || (lp.wide_qo_tma && qo == nullptr))
    throw std::invalid_argument("cuda.unified wide: TMA plan without tensor maps");
  if (lp.wide_qo_tma && (!is_16bit(p.types.q) || !wide_qo_boxes(lp.wide_tq)))
    throw std::invalid_argument("cuda.unified wide: Q and O by TMA need a 16-bit Q in boxes of whole rows");
  const dim3 grid(lp.grid_x, lp.grid_y, lp.grid_z);
  const WideLaunch w{lp.wide_stages, lp.wide_q_bufs, lp.q_major ? 1 : 0, lp.persistent ? 1 : 0,
                     lp.wide_qo_tma ? 1 : 0, p.num_seqs,
                     static_cast<int>(lp.work_tiles), lp.wide_pack, lp.wide_tq, wide_pack_magic(lp.wide_tq),
                     p.heads / lp.wide_pack,
                     device::FastDiv(p.num_seqs * (p.heads / lp.wide_pack)), device::FastDiv(p.heads / lp.wide_pack),
                     device::FastDiv(lp.wide_tq), device::FastDiv(p.heads / p.kv_heads),
                     lp.wide_walk_section_bytes > 0 ? static_cast<const int32_t*>(p.workspace) : nullptr};
  auto go = [&](auto tma) {
    constexpr bool kTma = decltype(tma)::value;
    auto* kernel = &dev::prefill_wide_kernel<DT, D, WG, kTma, F, KV, Q8>;
    static const bool configured = [&] {
      ATTNBENCH_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kWideSmemLimit));
      // The roles' setmaxnreg budgets must fit the pool the launch gives the CTA, or a consumer's increase waits
      // forever: a compile that gave the kernel fewer registers than WideRegs assumes is refused, not launched.
      using Regs = WideRegs<D, WG, F, !is_16bit(KV)>;
      cudaFuncAttributes fa{};
      ATTNBENCH_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
      if (WG >= 2 && fa.numRegs * Regs::kThreads < Regs::kPool)
        throw std::logic_error("cuda.unified wide: the kernel has " + std::to_string(fa.numRegs) +
                               " registers a thread, below the " + std::to_string(Regs::kPool / Regs::kThreads) +
                               " its register budgets assume");
      return true;
    }();
    (void)configured;
    static const KvTensorMaps no_kv{};  // zeros: parameters of a path that does not read them
    static const QoTensorMaps no_qo{};
    const KvTensorMaps& m = kTma ? *kv : no_kv;
    const QoTensorMaps& r = lp.wide_qo_tma ? *qo : no_qo;
    kernel<<<grid, WideTile<D, WG, kTma>::kThreads, smem, stream>>>(p, w, m.k, m.v, r.q, r.o);
  };
  if constexpr (!is_16bit(KV)) {
    if (!lp.wide_kv_tma) throw std::invalid_argument("cuda.unified wide: an 8-bit K/V cache lands by TMA only");
    go(std::true_type{});
  } else if (lp.wide_kv_tma) {
    go(std::true_type{});
  } else {
    go(std::false_type{});
  }
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
}

// One .cu per (dtype, head size): every consumer-warpgroup count that head size allows.
#define ATTNBENCH_INSTANTIATE_PREFILL_WIDE_WG(DT, D, WG, KV, F, Q8) \
  template void launch_prefill_wide<DT, D, WG, KV, F, Q8>(const AttentionParams&, const UnifiedLaunchPlan&, \
                                                   const KvTensorMaps*, const QoTensorMaps*, cudaStream_t);

}  // namespace attnbench::cuda
