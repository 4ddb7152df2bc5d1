#include "cuda/prefill_kernel.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_PREFILL_RW(DType::f16, 128, 4, 32)
}  // namespace attnbench::cuda
