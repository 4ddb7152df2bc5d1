#include "cuda/prefill_kernel.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_PREFILL(DType::bf16, 128, 8)
}  // namespace attnbench::cuda
