#include "cuda/prefill_wide.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_PREFILL_WIDE(DType::f16, 128)
}  // namespace attnbench::cuda
