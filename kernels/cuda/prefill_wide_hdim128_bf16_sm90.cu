#include "cuda/prefill_wide.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_PREFILL_WIDE(DType::bf16, 128)
}  // namespace attnbench::cuda
