#include "cuda/decode_kernel.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_DECODE(DType::f16, 128)
}  // namespace attnbench::cuda
