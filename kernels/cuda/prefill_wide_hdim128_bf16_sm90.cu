#include "cuda/prefill_wide.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_PREFILL_WIDE_WG(DType::bf16, 128, 1)
ATTNBENCH_INSTANTIATE_PREFILL_WIDE_WG(DType::bf16, 128, 2)
}  // namespace attnbench::cuda
