#include "cuda/prefill_wide.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_PREFILL_WIDE_WG(DType::f16, 64, 1)
ATTNBENCH_INSTANTIATE_PREFILL_WIDE_WG(DType::f16, 64, 2)
ATTNBENCH_INSTANTIATE_PREFILL_WIDE_WG(DType::f16, 64, 3)
}  // namespace attnbench::cuda
