#include "device/peaks.hpp"

#ifdef ATTNBENCH_WITH_CUDA
#include "cuda/peaks.hpp"
#endif

namespace attnbench {

Peaks measure_peaks(Device& dev) {
  Peaks p;
#ifdef ATTNBENCH_WITH_CUDA
  if (dev.backend() == Backend::cuda) {  // the CUDA measurements; other GPUs bring their own
    p.read_gbps = cuda::measure_read_gbps(std::size_t(4) << 30);
    p.copy_gbps = cuda::measure_copy_gbps(std::size_t(4) << 30);
    p.gemm_tflops = cuda::measure_gemm_tflops(8192, 8192, 8192);
    p.gemm_what = "cuBLASLt 8192^3, bf16 in, fp32 accumulate, random data, median of 20";
  }
#else
  (void)dev;
#endif
  return p;
}

}  // namespace attnbench
