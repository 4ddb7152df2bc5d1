#include "cuda/decode_kernel.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_DECODE(DType::f16, 64)
}  // namespace attnbench::cuda
