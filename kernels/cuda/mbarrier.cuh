// Producer/consumer synchronisation of the wide regime (sm_90): shared-memory mbarriers through CCCL cuda::ptx,
// plus the few instructions cuda::ptx lacks in CUDA 13.0 (named barriers, setmaxnreg) as inline PTX.
#pragma once
#include <cuda/ptx>

#include <cstdint>

namespace attnbench::cuda::dev {

// mbarrier.init.shared::cta.b64 [bar], count
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) { ::cuda::ptx::mbarrier_init(bar, count); }
// fence.mbarrier_init.release.cluster: makes this thread's mbarrier.init visible to the async proxy (TMA
// complete_tx) and to other threads before the CTA barrier that follows the initialisation.
__device__ __forceinline__ void mbar_fence_init() {
  ::cuda::ptx::fence_mbarrier_init(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster);
}
// mbarrier.arrive.shared::cta.b64 (release, cta scope): one arrival on the current phase.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) { (void)::cuda::ptx::mbarrier_arrive(bar); }
// mbarrier.try_wait.parity.shared::cta.b64 (acquire, cta scope) in a loop: until the phase with this parity completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  while (!::cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}
// mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 [bar], bytes: one arrival plus `bytes` expected from TMA.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  (void)::cuda::ptx::mbarrier_arrive_expect_tx(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta,
                                               ::cuda::ptx::space_shared, bar, bytes);
}
// cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [dst], [tmap, {c0..c3}], [bar]:
// one TMA box into shared memory (this CTA's), completing `bytes` on `bar`. tmap: address of a __grid_constant__
// CUtensorMap kernel parameter.
__device__ __forceinline__ void tma_load_4d(void* dst, const void* tmap, int c0, int c1, int c2, int c3,
                                            uint64_t* bar) {
  const int32_t coords[4] = {c0, c1, c2, c3};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, dst, tmap, coords, bar);
}
// The 3D form (the wide kernel's Q rows: {d, token, head}).
__device__ __forceinline__ void tma_load_3d(void* dst, const void* tmap, int c0, int c1, int c2, uint64_t* bar) {
  const int32_t coords[3] = {c0, c1, c2};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, dst, tmap, coords, bar);
}
// The 2D form (the backward's fp32 rows of LSE and D: {token, head}).
__device__ __forceinline__ void tma_load_2d(void* dst, const void* tmap, int c0, int c1, uint64_t* bar) {
  const int32_t coords[2] = {c0, c1};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, dst, tmap, coords, bar);
}
// cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [tmap, {c0, c1, c2}], [src]: one TMA box from shared
// memory to global (elements past the tensor's extent are not written), in this thread's current bulk group.
__device__ __forceinline__ void tma_store_3d(const void* tmap, int c0, int c1, int c2, const void* src) {
  const int32_t coords[3] = {c0, c1, c2};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_global, ::cuda::ptx::space_shared, tmap, coords, src);
}
// cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [tmap, {c0, c1}], [src]: one box of shared
// memory added element-wise into global (the map's element type; past the extent nothing), in this thread's
// current bulk group.
__device__ __forceinline__ void tma_reduce_add_2d(const void* tmap, int c0, int c1, const void* src) {
  const int32_t coords[2] = {c0, c1};
  ::cuda::ptx::cp_reduce_async_bulk_tensor(::cuda::ptx::space_global, ::cuda::ptx::space_shared, ::cuda::ptx::op_add,
                                           tmap, coords, src);
}
// cp.async.bulk.commit_group: closes this thread's bulk group of TMA stores.
__device__ __forceinline__ void bulk_commit() { ::cuda::ptx::cp_async_bulk_commit_group(); }
// cp.async.bulk.wait_group.read N: at most N of this thread's bulk groups still read their shared-memory source.
template <int N> __device__ __forceinline__ void bulk_wait_read() {
  ::cuda::ptx::cp_async_bulk_wait_group_read(::cuda::ptx::n32_t<N>{});
}
// cp.async.bulk.wait_group N: at most N of this thread's bulk groups still incomplete (their writes not performed).
template <int N> __device__ __forceinline__ void bulk_wait() {
  ::cuda::ptx::cp_async_bulk_wait_group(::cuda::ptx::n32_t<N>{});
}
// fence.proxy.async.shared::cta: this thread's generic-proxy shared-memory writes (cp.async included) become
// visible to the async proxy (wgmma operand reads, TMA stores) and ordered before its later writes (TMA loads).
__device__ __forceinline__ void fence_proxy_async_smem() { ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared); }

// bar.sync id, threads: named barrier among `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// bar.arrive id, threads: arrive on a named barrier without waiting (the producer side of a bar.sync).
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// setmaxnreg.{inc,dec}.sync.aligned.u32 N: this warpgroup's per-thread register budget (sm_90a; needs a register
// cap at entry, i.e. __launch_bounds__(threads, 1)).
template <int N> __device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

}  // namespace attnbench::cuda::dev
