#include "cuda/prefill_kernel.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_PREFILL(DType::bf16, 64, 8)
}  // namespace attnbench::cuda
