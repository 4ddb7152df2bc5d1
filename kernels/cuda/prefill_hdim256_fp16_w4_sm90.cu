#include "cuda/prefill_kernel.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_PREFILL(DType::f16, 256, 4)
}  // namespace attnbench::cuda
