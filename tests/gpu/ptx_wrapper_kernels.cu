// Tiny kernels that exercise the sm_90a PTX wrappers (kernels/cuda/wgmma.cuh, mbarrier.cuh) in the layouts the wide
// attention kernel uses (prefill_wide.cuh), and their host launchers. Layout facts: the PTX ISA's wgmma,
// TMA and mbarrier sections. Every kernel runs one CTA; every output buffer starts poisoned (NaN / 0xFF bytes), so each element must be
// written by the kernel.
#include "ptx_wrapper_kernels.hpp"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda/mbarrier.cuh"
#include "cuda/mma_sm80.cuh"  // smem_u32, cp_async_16 / commit / wait
#include "cuda/runtime.hpp"
#include "cuda/tensor_map.hpp"
#include "cuda/wgmma.cuh"

namespace attnbench::gputest {
namespace {

namespace dev = attnbench::cuda::dev;
using cuda::DeviceBuffer;

// Byte offset of 16-byte chunk `ch` of row `row` in a [cols/64][rows][64] 16-bit tile: 64-wide slab, 128-byte
// row, chunk index XOR row % 8 (prefill_wide.cuh's wide_swz with ROWS a run-time value).
__device__ __forceinline__ uint32_t swz(int rows, int row, int ch) {
  return static_cast<uint32_t>((ch >> 3) * (rows * 128) + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
}

// The dynamic shared memory rounded up to a 1024-byte boundary (128B-swizzle atoms; base offset 0 in descriptors).
__device__ __forceinline__ unsigned char* aligned_smem(unsigned char* raw) {
  const uint32_t a = dev::smem_u32(raw);
  return raw + (((a + 1023) & ~1023u) - a);
}

// Row-major [rows][cols] 16-bit matrix -> swizzled tile, 16 bytes per copy, threads tid, tid + nthreads, ...:
// generic st.shared, or cp.async (the caller commits and waits).
template <bool kCpAsync>
__device__ void fill_tile(unsigned char* tile, const uint16_t* g, int rows, int cols, int tid, int nthreads) {
  const int cpr = cols / 8;
  for (int i = tid; i < rows * cpr; i += nthreads) {
    const int row = i / cpr, ch = i % cpr;
    const uint16_t* src = g + row * cols + ch * 8;
    unsigned char* dst = tile + swz(rows, row, ch);
    if constexpr (kCpAsync) dev::cp_async_16(dev::smem_u32(dst), src, true);
    else *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  }
}

template <int N>
__device__ __forceinline__ void fill_acc(float (&d)[N / 8][4], float v) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j) d[j][0] = d[j][1] = d[j][2] = d[j][3] = v;
}

// d[j][e] -> c[row][col] (row-major, N columns): row = row0 + 16 warp + lane/4 + 8 (e/2), col = 8 j + 2 (lane%4) +
// e%2, the accumulator layout wgmma.cuh documents. `tid` is the thread's index in its warpgroup.
template <int N>
__device__ void store_acc(const float (&d)[N / 8][4], float* c, int row0, int tid) {
  const int warp = tid / 32, lane = tid % 32;
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      c[(row0 + 16 * warp + lane / 4 + 8 * (e / 2)) * N + 8 * j + 2 * (lane % 4) + (e % 2)] = d[j][e];
}

// ---- wgmma

// C = A B^T, A [64][K], B [N][K], both K-major tiles. The accumulator starts at kStaleAcc: step 0 runs with
// accumulate = 0 and must drop it, later steps accumulate. k16 step kk: +(kk/4) 64-wide K slabs (rows x 128 B),
// +(kk%4) x 32 bytes inside a slab; SBO 1024 = one 8-row group, LBO 16 (unused for swizzled K-major).
template <DType DT, int N, bool kCpAsync>
__global__ void __launch_bounds__(128) wgmma_ss_kernel(const uint16_t* a, const uint16_t* b, float* c) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* sa = aligned_smem(smem_raw);
  unsigned char* sb = sa + 64 * kWgmmaK * 2;  // 16 KB: still 1024-aligned
  const int tid = threadIdx.x;
  fill_tile<kCpAsync>(sa, a, 64, kWgmmaK, tid, 128);
  fill_tile<kCpAsync>(sb, b, N, kWgmmaK, tid, 128);
  if constexpr (kCpAsync) {
    dev::cp_async_commit();
    dev::cp_async_wait<0>();
  }
  dev::fence_proxy_async_smem();  // this thread's generic / cp.async writes -> the async proxy wgmma reads through
  __syncthreads();
  const uint32_t a0 = dev::smem_u32(sa), b0 = dev::smem_u32(sb);
  float d[N / 8][4];
  fill_acc<N>(d, kStaleAcc);
  dev::fence_regs(d);
  dev::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kWgmmaK / 16; ++kk) {
    const uint32_t koff = (kk % 4) * 32;
    const uint64_t da = dev::smem_desc_sw128(a0 + (kk / 4) * (64 * 128) + koff, 16, 1024);
    const uint64_t db = dev::smem_desc_sw128(b0 + (kk / 4) * (N * 128) + koff, 16, 1024);
    dev::wgmma_ss<DT, N>(d, da, db, kk > 0);
  }
  dev::wgmma_commit();
  dev::wgmma_wait<0>();
  dev::fence_regs(d);
  store_acc<N>(d, c, 0, tid);
}

// Two commit groups into two accumulators (N = 64): lo = K columns 0-63, hi = 64-127. After wait<1> only the
// older group is guaranteed done: lo is stored then, hi after wait<0> (FA3's S-while-P V overlap pattern).
template <DType DT>
__global__ void __launch_bounds__(128) wgmma_wait_groups_kernel(const uint16_t* a, const uint16_t* b, float* c) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* sa = aligned_smem(smem_raw);
  unsigned char* sb = sa + 64 * kWgmmaK * 2;
  const int tid = threadIdx.x;
  fill_tile<false>(sa, a, 64, kWgmmaK, tid, 128);
  fill_tile<false>(sb, b, 64, kWgmmaK, tid, 128);
  dev::fence_proxy_async_smem();
  __syncthreads();
  const uint32_t a0 = dev::smem_u32(sa), b0 = dev::smem_u32(sb);
  float lo[8][4], hi[8][4];
  fill_acc<64>(lo, kStaleAcc);
  fill_acc<64>(hi, kStaleAcc);
  dev::fence_regs(lo);
  dev::fence_regs(hi);
  dev::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    dev::wgmma_ss<DT, 64>(lo, dev::smem_desc_sw128(a0 + kk * 32, 16, 1024), dev::smem_desc_sw128(b0 + kk * 32, 16, 1024),
                          kk > 0);
  dev::wgmma_commit();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    dev::wgmma_ss<DT, 64>(hi, dev::smem_desc_sw128(a0 + 64 * 128 + kk * 32, 16, 1024),
                          dev::smem_desc_sw128(b0 + 64 * 128 + kk * 32, 16, 1024), kk > 0);
  dev::wgmma_commit();
  dev::wgmma_wait<1>();
  dev::fence_regs(lo);
  store_acc<64>(lo, c, 0, tid);
  dev::wgmma_wait<0>();
  dev::fence_regs(hi);
  store_acc<64>(hi, c + 64 * 64, 0, tid);
}

// C = A B, A [64][K] straight from global into the m16n8k16 A fragments (16-bit pairs, low = first), B [K][N]
// stored MN-major like V: [N/64][K rows][64] swizzled. Descriptor: LBO = K x 128 B (next 64-wide N slab), SBO =
// 1024 B (next 8 k rows), each k16 step +2048 B.
template <DType DT, int N>
__global__ void __launch_bounds__(128) wgmma_rs_kernel(const uint16_t* a, const uint16_t* b, float* c) {
  constexpr int kSteps = kWgmmaK / 16;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* sb = aligned_smem(smem_raw);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  fill_tile<false>(sb, b, kWgmmaK, N, tid, 128);
  dev::fence_proxy_async_smem();
  __syncthreads();
  // All A fragments are loaded before the wgmma.fence: no register write between the fence and the wgmmas.
  const int r = 16 * warp + lane / 4;
  auto pair = [&](int row, int k) {
    return static_cast<uint32_t>(a[row * kWgmmaK + k]) | (static_cast<uint32_t>(a[row * kWgmmaK + k + 1]) << 16);
  };
  uint32_t af[kSteps][4];
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    const int k = 16 * kk + 2 * (lane % 4);
    af[kk][0] = pair(r, k);
    af[kk][1] = pair(r + 8, k);
    af[kk][2] = pair(r, k + 8);
    af[kk][3] = pair(r + 8, k + 8);
  }
  const uint32_t b0 = dev::smem_u32(sb);
  float d[N / 8][4];
  fill_acc<N>(d, kStaleAcc);
  dev::fence_regs(d);
  dev::fence_regs(af);
  dev::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk)
    dev::wgmma_rs<DT, N>(d, af[kk], dev::smem_desc_sw128(b0 + kk * 2048, kWgmmaK * 128, 1024), kk > 0);
  dev::wgmma_commit();
  dev::wgmma_wait<0>();
  dev::fence_regs(d);
  dev::fence_regs(af);
  store_acc<N>(d, c, 0, tid);
}

__global__ void smem_desc_kernel(uint32_t addr, uint32_t lbo, uint32_t sbo, uint64_t* out) {
  *out = dev::smem_desc_sw128(addr, lbo, sbo);
}

__global__ void sw128_desc_at_kernel(uint32_t base, uint32_t lbo, uint32_t off, uint64_t* out) {
  *out = dev::Sw128Desc<1024>(base, lbo).at(off);
}

// ---- mbarrier, TMA, named barriers, setmaxnreg

// Warp 1 arrives (32 lanes per phase), lane 0 of warp 0 waits. A value written late (after __nanosleep) just before
// the completing arrival must be what the waiter reads: a wait that returns early reads the old value.
__global__ void mbar_phase_kernel(int* out) {
  __shared__ uint64_t full, back;
  __shared__ volatile int value;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    dev::mbar_init(&full, 32);
    dev::mbar_init(&back, 1);
    value = 0;
  }
  __syncthreads();
  if (warp == 1) {
    // Phase 0: 31 arrivals leave it open; lane 31 writes 1 late and completes it.
    if (lane < 31) dev::mbar_arrive(&full);
    __syncwarp();
    if (lane == 0) out[0] = ::cuda::ptx::mbarrier_test_wait_parity(&full, 0u) ? 1 : 0;
    __syncwarp();
    if (lane == 31) {
      __nanosleep(20000);
      value = 1;
      dev::mbar_arrive(&full);
    }
    // Phase 1: after the waiter read phase 0's value, write 2 late, then all 32 lanes arrive.
    if (lane == 0) {
      dev::mbar_wait(&back, 0);
      __nanosleep(20000);
      value = 2;
    }
    __syncwarp();
    dev::mbar_arrive(&full);
  } else if (lane == 0) {
    dev::mbar_wait(&full, 0);
    out[1] = value;
    dev::mbar_arrive(&back);
    dev::mbar_wait(&full, 1);
    out[2] = value;
    // Exactly two phases completed: the current one (2, parity 0) is open.
    out[3] = ::cuda::ptx::mbarrier_test_wait_parity(&full, 0u) ? 0 : 1;
  }
}

// 64 tokens into a poisoned, 1024-aligned 8 KB tile, a {64, 1, rows, 1} box per page (pages.x, .y, ... in turn);
// every thread waits on the barrier's phase 0, then the raw bytes go out.
__global__ void __launch_bounds__(128) tma_box_kernel(const __grid_constant__ CUtensorMap map, int d0, int head,
                                                     int rows, int4 pages, uint16_t* out) {
  constexpr int kBytes = 64 * 64 * 2;
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t bar;
  unsigned char* tile = aligned_smem(smem_raw);
  for (int i = threadIdx.x; i < kBytes / 4; i += blockDim.x) reinterpret_cast<uint32_t*>(tile)[i] = 0xFFFFFFFFu;
  if (threadIdx.x == 0) dev::mbar_init(&bar, 1);
  dev::fence_proxy_async_smem();  // the poison and the initialised barrier, before the async-proxy TMA writes
  __syncthreads();
  if (threadIdx.x == 0) {
    dev::mbar_arrive_expect_tx(&bar, kBytes);
    const int page[4] = {pages.x, pages.y, pages.z, pages.w};
    for (int i = 0; i < 64 / rows; ++i) dev::tma_load_4d(tile + i * rows * 128, &map, d0, head, 0, page[i], &bar);
  }
  dev::mbar_wait(&bar, 0);
  for (int i = threadIdx.x; i < kBytes / 16; i += blockDim.x)
    reinterpret_cast<uint4*>(out)[i] = reinterpret_cast<const uint4*>(tile)[i];
}

// Warp 1 (producer) waits on EMPTY (id 2) before overwriting the buffer, writes it late, arrives on FULL (id 1);
// warp 0 (consumer) syncs on FULL, sums the buffer, arrives on EMPTY. 64 threads per barrier.
__global__ void named_bar_kernel(int rounds, int* sums) {
  __shared__ volatile int buf[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) buf[lane] = 0;
  __syncthreads();
  if (warp == 1) {
    for (int r = 0; r < rounds; ++r) {
      if (r > 0) dev::named_bar_sync(2, 64);
      __nanosleep(20000);  // a consumer that does not wait reads the previous round
      buf[lane] = (r + 1) * (lane + 1);
      dev::named_bar_arrive(1, 64);
    }
  } else {
    for (int r = 0; r < rounds; ++r) {
      dev::named_bar_sync(1, 64);
      int v = buf[lane];
#pragma unroll
      for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) sums[r] = v;
      if (r + 1 < rounds) dev::named_bar_arrive(2, 64);
    }
  }
}

// Register budgets as the wide kernel sets them: 168 at entry (65536 / 384), producer 40, consumers 232
// (128 x 40 + 256 x 232 <= 64K). The producer warpgroup loads A [128][64] and B [256][64] by cp.async and arrives
// (128 arrivals); consumer warpgroup w computes rows 64w..64w+63 of A B^T with a 128-register accumulator.
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
__global__ void __launch_bounds__(384, 1) setmaxnreg_kernel(const uint16_t* a, const uint16_t* b, float* c) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full;
  unsigned char* sa = aligned_smem(smem_raw);
  unsigned char* sb = sa + 128 * 64 * 2;
  if (threadIdx.x == 0) dev::mbar_init(&full, 128);
  __syncthreads();
  if (threadIdx.x < 128) {
    dev::setmaxnreg_dec<kProducerRegs>();
    fill_tile<true>(sa, a, 128, 64, threadIdx.x, 128);
    fill_tile<true>(sb, b, 256, 64, threadIdx.x, 128);
    dev::cp_async_commit();
    dev::cp_async_wait<0>();
    dev::fence_proxy_async_smem();
    dev::mbar_arrive(&full);
    return;
  }
  dev::setmaxnreg_inc<kConsumerRegs>();
  const int wg = threadIdx.x / 128 - 1, tid = threadIdx.x % 128;
  dev::mbar_wait(&full, 0);
  const uint32_t a0 = dev::smem_u32(sa) + wg * (64 * 128), b0 = dev::smem_u32(sb);  // rows 64 wg.. of the A slab
  float d[32][4];
  fill_acc<256>(d, kStaleAcc);
  dev::fence_regs(d);
  dev::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    dev::wgmma_ss<DType::bf16, 256>(d, dev::smem_desc_sw128(a0 + kk * 32, 16, 1024),
                                    dev::smem_desc_sw128(b0 + kk * 32, 16, 1024), kk > 0);
  dev::wgmma_commit();
  dev::wgmma_wait<0>();
  dev::fence_regs(d);
  store_acc<256>(d, c, 64 * wg, tid);
}

// ---- host side

DeviceBuffer upload(const void* src, std::size_t bytes) {
  DeviceBuffer b(bytes);
  b.upload(src, bytes);
  return b;
}

template <typename T>
std::vector<T> download(const DeviceBuffer& b) {
  std::vector<T> v(b.bytes() / sizeof(T));
  b.download(v.data(), b.bytes());
  return v;
}

// NaN-poisoned (0xFF bytes) output of `n` elements of T.
template <typename T>
DeviceBuffer poisoned(std::size_t n) {
  DeviceBuffer b(n * sizeof(T));
  b.fill_byte(0xFF);
  return b;
}

template <typename Kernel>
void allow_smem(Kernel* k, int bytes) {
  ATTNBENCH_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

void finish() {
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
  ATTNBENCH_CUDA_CHECK(cudaDeviceSynchronize());
}

void check_size(const std::vector<uint16_t>& v, std::size_t n, const char* what) {
  if (v.size() != n)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(v.size()) + " elements, expected " +
                                std::to_string(n));
}

// The one run-time -> compile-time dispatch of the wgmma launchers: f(DT, N) as integral constants.
template <typename F>
void with_dt_n(DType dt, int n, F&& f) {
  auto by_n = [&](auto dtc) {
    if (n == 64) f(dtc, std::integral_constant<int, 64>{});
    else if (n == 128) f(dtc, std::integral_constant<int, 128>{});
    else if (n == 256) f(dtc, std::integral_constant<int, 256>{});
    else throw std::invalid_argument("wgmma N: 64, 128 or 256, not " + std::to_string(n));
  };
  if (dt == DType::bf16) by_n(std::integral_constant<DType, DType::bf16>{});
  else by_n(std::integral_constant<DType, DType::f16>{});
}

}  // namespace

std::vector<float> run_wgmma_ss(DType dt, int n, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                                bool cp_async_fill) {
  check_size(a, 64 * kWgmmaK, "wgmma_ss A");
  check_size(b, static_cast<std::size_t>(n) * kWgmmaK, "wgmma_ss B");
  DeviceBuffer da = upload(a.data(), a.size() * 2), db = upload(b.data(), b.size() * 2);
  DeviceBuffer dc = poisoned<float>(64 * n);
  with_dt_n(dt, n, [&](auto dtc, auto nc) {
    constexpr DType DT = decltype(dtc)::value;
    constexpr int N = decltype(nc)::value;
    auto* k = cp_async_fill ? &wgmma_ss_kernel<DT, N, true> : &wgmma_ss_kernel<DT, N, false>;
    const int smem = (64 + N) * kWgmmaK * 2 + 1024;
    allow_smem(k, smem);
    k<<<1, 128, smem>>>(static_cast<const uint16_t*>(da.data()), static_cast<const uint16_t*>(db.data()),
                        static_cast<float*>(dc.data()));
  });
  finish();
  return download<float>(dc);
}

std::vector<float> run_wgmma_wait_groups(DType dt, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  check_size(a, 64 * kWgmmaK, "wgmma wait groups A");
  check_size(b, 64 * kWgmmaK, "wgmma wait groups B");
  DeviceBuffer da = upload(a.data(), a.size() * 2), db = upload(b.data(), b.size() * 2);
  DeviceBuffer dc = poisoned<float>(2 * 64 * 64);
  auto* k = dt == DType::bf16 ? &wgmma_wait_groups_kernel<DType::bf16> : &wgmma_wait_groups_kernel<DType::f16>;
  const int smem = 2 * 64 * kWgmmaK * 2 + 1024;
  allow_smem(k, smem);
  k<<<1, 128, smem>>>(static_cast<const uint16_t*>(da.data()), static_cast<const uint16_t*>(db.data()),
                      static_cast<float*>(dc.data()));
  finish();
  return download<float>(dc);
}

std::vector<float> run_wgmma_rs(DType dt, int n, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  check_size(a, 64 * kWgmmaK, "wgmma_rs A");
  check_size(b, static_cast<std::size_t>(n) * kWgmmaK, "wgmma_rs B");
  DeviceBuffer da = upload(a.data(), a.size() * 2), db = upload(b.data(), b.size() * 2);
  DeviceBuffer dc = poisoned<float>(64 * n);
  with_dt_n(dt, n, [&](auto dtc, auto nc) {
    constexpr DType DT = decltype(dtc)::value;
    constexpr int N = decltype(nc)::value;
    auto* k = &wgmma_rs_kernel<DT, N>;
    const int smem = N * kWgmmaK * 2 + 1024;
    allow_smem(k, smem);
    k<<<1, 128, smem>>>(static_cast<const uint16_t*>(da.data()), static_cast<const uint16_t*>(db.data()),
                        static_cast<float*>(dc.data()));
  });
  finish();
  return download<float>(dc);
}

uint64_t run_smem_desc_sw128(uint32_t addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  DeviceBuffer out = poisoned<uint64_t>(1);
  smem_desc_kernel<<<1, 1>>>(addr, lbo_bytes, sbo_bytes, static_cast<uint64_t*>(out.data()));
  finish();
  return download<uint64_t>(out)[0];
}

uint64_t run_sw128_desc_at(uint32_t base, uint32_t lbo_bytes, uint32_t off_bytes) {
  DeviceBuffer out = poisoned<uint64_t>(1);
  sw128_desc_at_kernel<<<1, 1>>>(base, lbo_bytes, off_bytes, static_cast<uint64_t*>(out.data()));
  finish();
  return download<uint64_t>(out)[0];
}

MbarPhaseResult run_mbar_phases() {
  DeviceBuffer out = poisoned<int>(4);
  mbar_phase_kernel<<<1, 64>>>(static_cast<int*>(out.data()));
  finish();
  const std::vector<int> v = download<int>(out);
  return {v[0], v[1], v[2], v[3]};
}

std::vector<uint16_t> run_tma_load_box(DType dt, const std::vector<uint16_t>& cache, int blocks, int block_size,
                                       int kv_heads, int head_size, int d0, int head, const std::vector<int>& pages) {
  check_size(cache, static_cast<std::size_t>(blocks) * block_size * kv_heads * head_size, "tma cache");
  if (block_size * static_cast<int>(pages.size()) != 64 || pages.size() > 4)
    throw std::invalid_argument("run_tma_load_box: 64 tokens in pages of 16, 32 or 64");
  DeviceBuffer dcache = upload(cache.data(), cache.size() * 2);
  DeviceBuffer out = poisoned<uint16_t>(64 * 64);
  // The wide kernel's map (cuda/tensor_map.hpp) over a dense [blocks][block_size][kv_heads][head_size] cache.
  const CUtensorMap map = cuda::encode_paged_kv_map(dcache.data(), dt, head_size, kv_heads, block_size, head_size,
                                              static_cast<int64_t>(kv_heads) * head_size,
                                              static_cast<int64_t>(block_size) * kv_heads * head_size, false, blocks);
  const int smem = 64 * 64 * 2 + 1024;
  int p[4] = {0, 0, 0, 0};
  for (std::size_t i = 0; i < pages.size(); ++i) p[i] = pages[i];
  tma_box_kernel<<<1, 128, smem>>>(map, d0, head, block_size, make_int4(p[0], p[1], p[2], p[3]),
                                   static_cast<uint16_t*>(out.data()));
  finish();
  return download<uint16_t>(out);
}

std::vector<int> run_named_barrier_handoff(int rounds) {
  DeviceBuffer out = poisoned<int>(rounds);
  named_bar_kernel<<<1, 64>>>(rounds, static_cast<int*>(out.data()));
  finish();
  return download<int>(out);
}

std::vector<float> run_setmaxnreg_roles(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  check_size(a, 128 * 64, "setmaxnreg A");
  check_size(b, 256 * 64, "setmaxnreg B");
  DeviceBuffer da = upload(a.data(), a.size() * 2), db = upload(b.data(), b.size() * 2);
  DeviceBuffer dc = poisoned<float>(128 * 256);
  const int smem = (128 + 256) * 64 * 2 + 1024;
  allow_smem(&setmaxnreg_kernel, smem);
  setmaxnreg_kernel<<<1, 384, smem>>>(static_cast<const uint16_t*>(da.data()), static_cast<const uint16_t*>(db.data()),
                                      static_cast<float*>(dc.data()));
  finish();
  return download<float>(dc);
}

}  // namespace attnbench::gputest
