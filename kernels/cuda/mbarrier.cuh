// Producer/consumer synchronisation of the wide regime (sm_90): shared-memory mbarriers through CCCL cuda::ptx,
// plus the few instructions cuda::ptx lacks in CUDA 13.0 (named barriers, setmaxnreg) as inline PTX.
#pragma once
#include <cuda/ptx>

#include <cstdint>

namespace attnbench::cuda::dev {

// mbarrier.init.shared::cta.b64 [bar], count
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) { ::cuda::ptx::mbarrier_init(bar, count); }
// mbarrier.arrive.shared::cta.b64 (release, cta scope): one arrival on the current phase.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) { (void)::cuda::ptx::mbarrier_arrive(bar); }
// mbarrier.try_wait.parity.shared::cta.b64 (acquire, cta scope) in a loop: until the phase with this parity completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  while (!::cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}
// fence.proxy.async.shared::cta: this thread's generic-proxy shared-memory writes (cp.async included) become
// visible to the async proxy (wgmma operand reads).
__device__ __forceinline__ void fence_proxy_async_smem() { ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared); }

// bar.sync id, threads: named barrier among `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
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
