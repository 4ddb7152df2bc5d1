// Device helpers for honest timing: a kernel that holds a stream until the host releases it (so events
// bracket only the queued kernels, not host launch latency), and an L2 flush. timing.cu also implements the
// shim's launch_hold_stream and launch_l2_flush (attnbench/gpu_runtime.hpp) with them.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace attnbench::cuda {

// Spins until *flag != 0 (flag: host-mapped memory the host writes), or until ~timeout_ms passed.
void launch_hold_stream(const volatile int* flag, int timeout_ms, cudaStream_t s);

// Keeps every SM busy with FMA work for ~ms milliseconds (device timer), to bring idle clocks up.
void launch_clock_spin(int ms, int sm_count, cudaStream_t s);

// Writes every byte of buf (sized >= 2x the L2), evicting whatever the timed kernels left in L2.
void launch_l2_flush(void* buf, std::size_t bytes, cudaStream_t s);

}  // namespace attnbench::cuda
