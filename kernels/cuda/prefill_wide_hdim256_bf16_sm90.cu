#include "cuda/prefill_wide.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_PREFILL_WIDE_WG(DType::bf16, 256, 1)
ATTNBENCH_INSTANTIATE_PREFILL_WIDE_WG(DType::bf16, 256, 2)
}  // namespace attnbench::cuda
