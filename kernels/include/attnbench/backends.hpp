// The kernels each backend provides. The harness's registry lists them explicitly (no static registration).
#pragma once
#include <memory>
#include <vector>

#include "attnbench/kernel.hpp"

namespace attnbench {

// cpu.unified: streaming online-softmax over KV tiles; prefill and split-KV decode paths.
std::unique_ptr<AttentionKernel> make_cpu_unified();

// cudnn.sdpa: cuDNN's fused SDPA (cuDNN frontend graph API) on the paged inputs. Defined only in builds with
// cudnn.sdpa (ATTNBENCH_WITH_CUDNN: the CUDA backend, libcudnn and the frontend headers).
std::unique_ptr<AttentionKernel> make_cudnn_sdpa();

#ifdef ATTNBENCH_WITH_CUDA
// cuda.unified: 2D prefill (mma.sync) and 3D split-KV decode + combine, dispatched per problem.
std::unique_ptr<AttentionKernel> make_cuda_unified();
#endif

#ifdef ATTNBENCH_WITH_HIP
// hip.unified: gfx942/gfx90a 2D prefill (narrow mfma 16x16x16, flash transposed-x8 mfma 32x32x8) and 3D split-KV
// decode + combine, dispatched per problem.
std::unique_ptr<AttentionKernel> make_hip_unified();
#endif

}  // namespace attnbench
