#include "cuda/decode_kernel.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_DECODE(DType::bf16, 128)
}  // namespace attnbench::cuda
