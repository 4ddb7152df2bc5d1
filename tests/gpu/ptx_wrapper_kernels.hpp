// Host-callable launchers of the tiny kernels that exercise the sm_90a PTX wrappers (kernels/cuda/wgmma.cuh,
// mbarrier.cuh) one at a time. Host code only: the kernels live in ptx_wrapper_kernels.cu. Every launcher copies
// its inputs to the device, runs one CTA, synchronises and returns what the kernel wrote; CUDA errors throw.
// Matrices are row-major 16-bit bit patterns (bf16 or fp16 as `dt` says).
#pragma once
#include <cstdint>
#include <vector>

#include "attnbench/dtype.hpp"

namespace attnbench::gputest {

// The reduction depth of the wgmma tests: 8 k16 steps, two 64-wide K slabs of the swizzled tiles.
constexpr int kWgmmaK = 128;
// The accumulator value the wgmma kernels hold before the first (accumulate = 0) step: it must not survive.
constexpr float kStaleAcc = 1000.f;

// C[64][n] = A[64][K] B^T through wgmma_ss<dt, n> (n = 64, 128, 256): A [64][K], B [n][K] (K-major both), each
// stored in shared memory as [K/64][rows][64] 128B-swizzled tiles; fill by generic stores, or by cp.async when
// `cp_async_fill` (then fence_proxy_async_smem is what makes the data visible to wgmma).
std::vector<float> run_wgmma_ss(DType dt, int n, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                                bool cp_async_fill = false);
// Two commit groups (N = 64, SS): lo = A[:, 0:64] B[:, 0:64]^T stored after wgmma_wait<1>, hi = A[:, 64:128]
// B[:, 64:128]^T after wgmma_wait<0>. Returns [2][64][64] (lo then hi).
std::vector<float> run_wgmma_wait_groups(DType dt, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b);
// C[64][n] = A[64][K] B through wgmma_rs<dt, n>: A [64][K] loaded straight into the m16n8k16 A fragments, B [K][n]
// stored MN-major as the attention kernel stores V ([n/64][K rows][64], 128B-swizzled).
std::vector<float> run_wgmma_rs(DType dt, int n, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b);

// smem_desc_sw128(addr, lbo, sbo) evaluated on the device.
uint64_t run_smem_desc_sw128(uint32_t addr, uint32_t lbo_bytes, uint32_t sbo_bytes);
// Sw128Desc<1024>(base, lbo).at(off): the split descriptor the wide kernel steps its k-steps with.
uint64_t run_sw128_desc_at(uint32_t base, uint32_t lbo_bytes, uint32_t off_bytes);

// mbar_init(32) / mbar_arrive / mbar_wait over two phases; each value is written late, just before the arrival
// that completes its phase.
struct MbarPhaseResult {
  int done_after_31 = -1;  // phase 0 complete with 31 of 32 arrivals in (test_wait.parity 0): must be 0
  int seen_phase0 = -1;    // value the waiter read after mbar_wait(parity 0): must be 1
  int seen_phase1 = -1;    // value the waiter read after mbar_wait(parity 1): must be 2
  int phase2_open = -1;    // exactly two phases completed (phase 2 not complete): must be 1
};
MbarPhaseResult run_mbar_phases();

// The paged cache [blocks][block_size tokens][kv_heads][head_size] (bit patterns) as the wide kernel's 4D map
// (cuda/tensor_map.hpp); 64 tokens land in one 8 KB tile under mbar_arrive_expect_tx(8192): 64 / block_size boxes of
// {64, 1, block_size, 1} (block_size 16, 32 or 64) by tma_load_4d, box i at {d0, head, 0, pages[i]} into the tile's
// rows from i block_size, as the producer's tma_kv_tile places them. Returns the 8192 raw shared-memory bytes as 4096
// 16-bit words.
std::vector<uint16_t> run_tma_load_box(DType dt, const std::vector<uint16_t>& cache, int blocks, int block_size,
                                       int kv_heads, int head_size, int d0, int head, const std::vector<int>& pages);

// Warp 1 produces `rounds` 32-word buffers, warp 0 consumes them through named_bar_arrive / named_bar_sync
// (FULL id 1, EMPTY id 2, 64 threads). Returns, per round, the sum the consumer read.
std::vector<int> run_named_barrier_handoff(int rounds);

// A 384-thread CTA (__launch_bounds__(384, 1)): warpgroup 0 drops to 40 registers (setmaxnreg_dec) and loads the
// tiles by cp.async, warpgroups 1-2 rise to 232 (setmaxnreg_inc) and each computes 64 rows of
// C[128][256] = A[128][64] B^T with wgmma_ss<bf16, 256> after an mbarrier hand-off. A [128][64], B [256][64].
std::vector<float> run_setmaxnreg_roles(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b);

}  // namespace attnbench::gputest
