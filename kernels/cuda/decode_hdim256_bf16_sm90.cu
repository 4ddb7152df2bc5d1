#include "cuda/decode_kernel.cuh"

namespace attnbench::cuda {
ATTNBENCH_INSTANTIATE_DECODE(DType::bf16, 256)
}  // namespace attnbench::cuda
