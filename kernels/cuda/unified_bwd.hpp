// cuda.unified_bwd's launchers (unified_bwd.cu): one per (dtype, head size), each enqueueing the preprocess (D and a
// zeroed fp32 dQ), the dK/dV kernel (dQ added by fp32 atomics) and the postprocess (dQ to the dtype) on `stream`.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "attnbench/attention_bwd.hpp"

namespace attnbench::cuda {

// Workspace of a call: the fp32 dQ accumulator [total_q, heads, head_size] and D [total_q, heads], 256-byte aligned.
std::size_t bwd_workspace_bytes(const AttentionBwdParams& p);

template <DType DT, int D>
void launch_attention_bwd(const AttentionBwdParams& p, cudaStream_t stream);

}  // namespace attnbench::cuda
