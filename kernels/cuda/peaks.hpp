// Device ceilings measured on the spot (host code over cudart and cuBLASLt).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace attnbench::cuda {

// Device-to-device copy of `bytes`, counted as bytes read + written per second, in GB/s (median of 20).
double measure_copy_gbps(std::size_t bytes);
// A streaming read of `bytes` (read_peak.cu), bytes read per second, in GB/s (median of 20).
double measure_read_gbps(std::size_t bytes);
void launch_read_stream(const void* src, std::size_t bytes, unsigned* sink, int sm_count, cudaStream_t s);
// bf16 GEMM m x n x k through cuBLASLt, fp32 accumulate, random data: TFLOP/s (median of 20).
double measure_gemm_tflops(int m, int n, int k);

}  // namespace attnbench::cuda
